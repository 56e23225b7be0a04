"""``accumulate`` and ``count``: one value per time and worker, folded from the batches of that
time and sent once it completes (timely's ``Accumulate``).

Per time the vertex keeps one accumulator, a copy of ``default`` made when the time's first
batch arrives, replaced by ``f(accumulator, batch)`` for each batch (one call per batch, so a
numpy batch can be summed whole); once no batch at that time can arrive (a notification) it
sends ``[accumulator]`` and forgets it. Nothing is exchanged: each worker accumulates what
reaches it, and sends only for the times it saw batches of.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.operators.aggregate import checked_functions
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class AccumulateVertex(Vertex):
    def __init__(self, default: Any, f: Callable[[Any, Any], Any]) -> None:
        self.default, self.f = default, f
        self.pending: dict[Any, Any] = {}  # time -> accumulator

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        pending = self.pending
        time = cap.time
        if time in pending:
            pending[time] = self.f(pending[time], batch)
        else:
            # a copy per time: an f that mutates its accumulator (appends to a list) must not
            # share one between times
            pending[time] = self.f(copy.deepcopy(self.default), batch)
            self.notify_at(cap)

    def on_notify(self, cap: Capability) -> None:
        self.send(cap, [self.pending.pop(cap.time)])


def accumulate(
    stream: Stream, default: Any, f: Callable[[Any, Any], Any], name: str = "accumulate"
) -> Stream:
    """Per time and worker, once the time completes: one record, ``default`` (a deep copy of
    it) folded with ``f(accumulator, batch)`` over the batches at that time on that worker.
    Times a worker saw no batch of give it no record.

    >>> import naiad
    >>> sums = lambda s: s.from_epochs([[1, 2, 3], [], [10]]).accumulate(0, lambda a, b: a + sum(b))
    >>> naiad.run(lambda s: sums(s).collect())
    [[(0, 6), (2, 10)]]
    """
    checked_functions("accumulate", name, f=f)
    node = stream.scope.add_operator(name, AccumulateVertex(default, f), [(stream, Pipeline())])
    return stream.derive(node)


def count(stream: Stream, name: str = "count") -> Stream:
    """Per time and worker, once the time completes: the number of records at that time on
    that worker (times without records give none).

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([["a", "b"], ["c"]]).count().collect(), workers=2)
    [[(0, 1), (1, 1)], [(0, 1)]]
    """
    return accumulate(stream, 0, _add_length, name)


def _add_length(total: int, batch: Any) -> int:
    return total + len(batch)
