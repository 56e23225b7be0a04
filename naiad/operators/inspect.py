"""``inspect`` and ``inspect_batch``: look at records as they pass, unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import StatelessVertex
from naiad.dataflow.channels import Pipeline
from naiad.operators.aggregate import checked_functions
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class InspectBatch(StatelessVertex):
    def __init__(self, fn: Callable[[Any, Any], None]) -> None:
        self.fn = fn

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        self.fn(cap.time, batch)
        self.shard.outputs[0].send(cap, batch)


def inspect_batch(
    stream: Stream, f: Callable[[Any, Any], None], name: str = "inspect_batch"
) -> Stream:
    """Calls ``f(time, batch)`` for every batch and passes the batch on.

    >>> import naiad
    >>> seen = []
    >>> _ = naiad.run(lambda s: s.from_epochs([[1], [2, 3]]).inspect_batch(
    ...     lambda t, b: seen.append((t, list(b)))).probe())
    >>> seen
    [(0, [1]), (1, [2, 3])]
    """
    checked_functions("inspect_batch", name, f=f)
    node = stream.scope.add_operator(name, InspectBatch(f), [(stream, Pipeline())])
    return stream.derive(node)


def inspect(stream: Stream, f: Callable[[Any], None], name: str = "inspect") -> Stream:
    """Calls ``f(record)`` for every record and passes the records on."""
    checked_functions("inspect", name, f=f)

    def each(_time: Any, batch: Any) -> None:
        for record in batch:
            f(record)

    return inspect_batch(stream, each, name)
