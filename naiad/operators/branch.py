"""``branch``: splits a stream in two by a predicate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import StatelessVertex
from naiad.dataflow.channels import Pipeline
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class Branch(StatelessVertex):
    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = predicate

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        yes: list[Any] = []
        no: list[Any] = []
        predicate = self.predicate
        for record in batch:
            (yes if predicate(record) else no).append(record)
        outputs = self.shard.outputs
        outputs[0].send(cap, yes)
        outputs[1].send(cap, no)


def branch(
    stream: Stream, predicate: Callable[[Any], bool], name: str = "branch"
) -> tuple[Stream, Stream]:
    """``(records where predicate holds, the others)``.

    >>> import naiad
    >>> def build(s):
    ...     evens, odds = s.from_epochs([[1, 2, 3]]).branch(lambda x: x % 2 == 0)
    ...     return evens.collect(), odds.collect()
    >>> naiad.run(build)
    [([(0, 2)], [(0, 1), (0, 3)])]
    """
    node = stream.scope.add_operator(name, Branch(predicate), [(stream, Pipeline())], outputs=2)
    return stream.derive(node, 0), stream.derive(node, 1)
