"""Progress tracking: timestamps, summaries, antichains, could-result-in and frontiers."""

from naiad.progress.antichain import Antichain, MutableAntichain
from naiad.progress.capability import Capability, CapabilityError
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.progress_actor import ProgressActor
from naiad.progress.reachability import CycleError, GraphBuilder, Reachability, Tracker
from naiad.progress.summary import PathSummary
from naiad.progress.timestamp import Lex, Product, join, less_equal, less_than, meet

__all__ = [
    "Antichain",
    "Capability",
    "CapabilityError",
    "ChangeBatch",
    "CycleError",
    "GraphBuilder",
    "Lex",
    "MutableAntichain",
    "PathSummary",
    "Product",
    "ProgressActor",
    "Reachability",
    "Tracker",
    "join",
    "less_equal",
    "less_than",
    "meet",
]
