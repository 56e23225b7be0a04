"""Differential dataflow on columnar numpy batches (in progress: update batches, collections,
input sessions, stateless operators and consolidate so far)."""

from naiad.differential.collection import Collection, InputSession, stable_hash
from naiad.differential.updates import Updates

__all__ = ["Collection", "InputSession", "Updates", "stable_hash"]
