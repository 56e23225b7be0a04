"""``flat_map``: each record becomes zero or more records."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from naiad.operators.map import map_batch

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def flat_map(stream: Stream, f: Callable[[Any], Iterable[Any]], name: str = "flat_map") -> Stream:
    """Replaces every record by the records of ``f(record)``.

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([["a b", "c"]]).flat_map(str.split).collect())
    [[(0, 'a'), (0, 'b'), (0, 'c')]]
    """
    return map_batch(stream, lambda batch: [y for x in batch for y in f(x)], name)
