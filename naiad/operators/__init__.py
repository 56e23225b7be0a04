"""Timely operators on streams: one operator per module, surfaced as ``Stream`` methods."""
