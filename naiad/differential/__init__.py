"""Differential dataflow on columnar numpy batches (in progress: update batches so far)."""

from naiad.differential.updates import Updates

__all__ = ["Updates"]
