"""``filter``: keeps the records a predicate accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.operators.map import map_batch

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def filter_records(
    stream: Stream, predicate: Callable[[Any], bool], name: str = "filter"
) -> Stream:
    """Keeps the records for which ``predicate`` is true.

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([[1, 2, 3, 4]]).filter(lambda x: x % 2).collect())
    [[(0, 1), (0, 3)]]
    """
    return map_batch(stream, lambda batch: [x for x in batch if predicate(x)], name)
