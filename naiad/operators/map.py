"""``map``, ``map_batch``: a function per record, or one call per batch.

``map_batch`` is the form the performance doctrine wants for numpy batches: the function
receives the whole batch (a list or a numpy array) and returns the new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import StatelessVertex
from naiad.dataflow.channels import Pipeline
from naiad.operators.aggregate import checked_functions
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class BatchFunction(StatelessVertex):
    """Sends ``fn(batch)`` at the time of every batch received (stateless)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        self.shard.outputs[0].send(cap, self.fn(batch))


def map_records(stream: Stream, f: Callable[[Any], Any], name: str = "map") -> Stream:
    """Applies ``f`` to every record.

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([[1, 2], [3]]).map(lambda x: x * 10).collect())
    [[(0, 10), (0, 20), (1, 30)]]
    """
    checked_functions("map", name, f=f)
    # a comprehension, not list(map(f, batch)): map would take a StopIteration raised by f
    # for the end of the batch and drop the rest of it
    return map_batch(stream, lambda batch: [f(x) for x in batch], name)


def map_batch(stream: Stream, f: Callable[[Any], Any], name: str = "map_batch") -> Stream:
    """Applies ``f`` to every batch as a whole (one call per batch).

    >>> import naiad, numpy as np
    >>> doubled = lambda s: s.from_epochs([np.arange(3)]).map_batch(lambda a: a * 2)
    >>> naiad.run(lambda s: doubled(s).map(int).collect())
    [[(0, 0), (0, 2), (0, 4)]]
    """
    checked_functions("map_batch", name, f=f)
    node = stream.scope.add_operator(name, BatchFunction(f), [(stream, Pipeline())])
    return stream.derive(node)
