"""``concat``: merges streams of the same scope into one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from naiad.dataflow.channels import Pipeline
from naiad.operators.exchange import Forward

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def concat(stream: Stream, *others: Stream, name: str = "concat") -> Stream:
    """The records of all the streams.

    >>> import naiad
    >>> def build(s):
    ...     a = s.from_epochs([[1]]); b = s.from_epochs([[2]])
    ...     return a.concat(b).collect()
    >>> sorted(naiad.run(build)[0])
    [(0, 1), (0, 2)]
    """
    streams = [stream, *others]
    node = stream.scope.add_operator(name, Forward(), [(s, Pipeline()) for s in streams])
    return stream.derive(node)
