"""``filter``: keeps the records a predicate accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

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

    A numpy batch stays a numpy array of its dtype (the predicate is still called per record:
    an element, a row of a 2-d batch or a structured record), so it crosses processes as its
    bytes.
    """

    def kept(batch: Any) -> Any:
        if isinstance(batch, np.ndarray):
            verdicts = [predicate(x) for x in batch]
            return batch[np.fromiter(map(bool, verdicts), bool, len(batch))]
        return [x for x in batch if predicate(x)]

    return map_batch(stream, kept, name)
