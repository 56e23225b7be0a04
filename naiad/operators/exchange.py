"""``exchange``: repartitions records among workers by a key (Naiad §3.1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import StatelessVertex
from naiad.dataflow.channels import Exchange
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class Forward(StatelessVertex):
    """Passes every batch on unchanged."""

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        self.shard.outputs[0].send(cap, batch)


def exchange(
    stream: Stream,
    key: Callable[[Any], int] | None = None,
    *,
    keys: Callable[[Any], Any] | None = None,
    name: str = "exchange",
) -> Stream:
    """Sends each record to worker ``key(record) % peers``; or, with ``keys``, routes a whole
    batch with one call returning an array of integers (the fast path for numpy batches).

    >>> import naiad
    >>> build = lambda s: s.from_epochs([list(range(6))]).exchange(lambda x: x).collect()
    >>> [sorted(r for _, r in part) for part in naiad.run(build, workers=2)]
    [[0, 2, 4], [1, 3, 5]]
    """
    node = stream.scope.add_operator(name, Forward(), [(stream, Exchange(key=key, keys=keys))])
    return stream.derive(node)
