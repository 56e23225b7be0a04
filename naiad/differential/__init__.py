"""Differential dataflow on columnar numpy batches (collections, arrangements, iteration)."""

from naiad.differential.arrange import Arranged, import_trace
from naiad.differential.collection import Collection, InputSession
from naiad.differential.diff_arithmetic import DiffOverflowError
from naiad.differential.iterate import Variable
from naiad.differential.trace import Batch, Cursor, Spine, TraceHandle
from naiad.differential.updates import Updates, stable_hash
from naiad.differential.upsert import arrange_from_upsert
from naiad.differential.view import View

__all__ = [
    "Arranged",
    "Batch",
    "Collection",
    "Cursor",
    "DiffOverflowError",
    "InputSession",
    "Spine",
    "TraceHandle",
    "Updates",
    "Variable",
    "View",
    "arrange_from_upsert",
    "import_trace",
    "stable_hash",
]
