"""naiad: timely dataflow (Naiad) as a Python asyncio actor framework.

>>> import naiad
>>> naiad.run(lambda scope: scope.from_epochs([[1, 2], [3]]).map(lambda x: x + 1).collect())
[[(0, 2), (0, 3), (1, 4)]]
"""

from naiad.actors.supervision import DataflowDropped, DataflowStopped
from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Broadcast, Exchange, Pipeline
from naiad.dataflow.scope import BuildError
from naiad.operators.capture import CaptureLog
from naiad.operators.input import InputError, InputHandle
from naiad.operators.loops import FeedbackHandle
from naiad.operators.probe import ProbeHandle
from naiad.operators.scope import Scope
from naiad.operators.stream import Stream
from naiad.operators.unordered_input import InputCapability, UnorderedInputHandle
from naiad.progress import (
    Antichain,
    Capability,
    CapabilityError,
    CycleError,
    Lex,
    MutableAntichain,
    PathSummary,
    Product,
)
from naiad.runtime.runtime import Dataflow, Runtime, run

__all__ = [
    "Antichain",
    "Broadcast",
    "BuildError",
    "Capability",
    "CapabilityError",
    "CaptureLog",
    "CycleError",
    "Dataflow",
    "DataflowDropped",
    "DataflowStopped",
    "Exchange",
    "FeedbackHandle",
    "InputCapability",
    "InputError",
    "InputHandle",
    "Lex",
    "MutableAntichain",
    "PathSummary",
    "Pipeline",
    "ProbeHandle",
    "Product",
    "Runtime",
    "Scope",
    "Stream",
    "UnorderedInputHandle",
    "Vertex",
    "run",
]
