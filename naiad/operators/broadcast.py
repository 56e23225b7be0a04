"""``broadcast``: every record to every worker (timely's ``broadcast``).

A channel pact (:class:`~naiad.dataflow.channels.Broadcast`), not a per-record loop: each batch
travels whole to every worker (encoded once per batch for the workers of other processes), so
the stream downstream holds ``peers`` copies of every record, one on each worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from naiad.dataflow.channels import Broadcast
from naiad.operators.exchange import Forward

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def broadcast(stream: Stream, name: str = "broadcast") -> Stream:
    """Every record of ``stream`` on every worker, at its own time.

    >>> import naiad
    >>> build = lambda s: s.from_epochs([[1, 2]]).broadcast().collect()
    >>> naiad.run(build, workers=2)
    [[(0, 1), (0, 2)], [(0, 1), (0, 2)]]
    """
    node = stream.scope.add_operator(name, Forward(), [(stream, Broadcast())])
    return stream.derive(node)
