"""Differential dataflow on columnar numpy batches (collections, arrangements, iteration)."""

from naiad.differential.arrange import Arranged, import_trace
from naiad.differential.collection import Collection, InputSession, View, stable_hash
from naiad.differential.iterate import Variable
from naiad.differential.trace import Batch, Cursor, Spine, TraceHandle
from naiad.differential.updates import Updates

__all__ = [
    "Arranged",
    "Batch",
    "Collection",
    "Cursor",
    "InputSession",
    "Spine",
    "TraceHandle",
    "Updates",
    "Variable",
    "View",
    "import_trace",
    "stable_hash",
]
