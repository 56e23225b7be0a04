"""``filter``: keeps the records a predicate accepts."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.operators.aggregate import checked_functions
from naiad.operators.map import map_batch

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def verdicts(predicate: Callable[..., Any], records: Iterable[Any], n: int) -> np.ndarray:
    """``bool(predicate(record))`` for each of the ``n`` records, as a boolean mask: the
    calls in a comprehension, the conversions in C (the shared per-record step of ``filter``
    and ``branch`` on numpy batches and of ``Collection.filter``).

    >>> verdicts(lambda x: x % 2, [1, 2, 3], 3).tolist()
    [True, False, True]
    """
    return np.fromiter(map(bool, [predicate(x) for x in records]), bool, n)


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
    checked_functions("filter", name, predicate=predicate)

    def kept(batch: Any) -> Any:
        if isinstance(batch, np.ndarray):
            return batch[verdicts(predicate, batch, len(batch))]
        return [x for x in batch if predicate(x)]

    return map_batch(stream, kept, name)
