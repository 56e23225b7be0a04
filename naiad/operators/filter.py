"""``filter``: keeps the records a predicate accepts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.operators.aggregate import checked_functions
from naiad.operators.map import map_batch

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def verdicts(
    predicate: Callable[..., Any], records: Sequence[Any] | np.ndarray, n: int, what: str
) -> np.ndarray:
    """``bool(predicate(record))`` for each of the ``n`` records, as a boolean mask: the
    calls in a comprehension, the conversions in C (the shared per-record step of ``filter``
    and ``branch`` on numpy batches and of ``Collection.filter``). A result with no truth
    value raises :func:`no_truth_value`'s error; ``what`` names the operator and function.

    >>> verdicts(lambda x: x % 2, [1, 2, 3], 3, "filter 'odd': predicate(record)").tolist()
    [True, False, True]
    """
    return truth_mask([predicate(x) for x in records], records, what)


def truth_mask(found: list[Any], records: Sequence[Any] | np.ndarray, what: str) -> np.ndarray:
    """``found`` (what a predicate returned for each of ``records``) as a boolean mask.

    >>> truth_mask([np.array([1, 2])], [7], "filter 'f': predicate(record)")
    Traceback (most recent call last):
    ...
    TypeError: filter 'f': predicate(record) must return a truth value (a bool), not \
array([1, 2]) (ndarray, for record 7): The truth value of an array with more than one \
element is ambiguous. Use a.any() or a.all()
    """
    try:
        return np.fromiter(map(bool, found), bool, len(found))
    except Exception:  # a result bool() refuses: named below
        raise no_truth_value(found, records, what) from None


def no_truth_value(
    found: Iterable[Any], records: Iterable[Any], what: str, of: str = "record"
) -> Exception:
    """The error for the first of ``found`` (what a predicate returned for each of
    ``records``) that has no truth value: a numpy array of several elements, ``pandas.NA``
    (bool() of which raises), named with its record (or time: ``of``) and ``what`` (the
    operator and function), instead of numpy's own error that names neither."""
    for verdict, record in zip(found, records, strict=False):
        try:
            bool(verdict)
        except Exception as exc:
            return TypeError(
                f"{what} must return a truth value (a bool), not {verdict!r:.80} "
                f"({type(verdict).__name__}, for {of} {record!r:.80}): {exc}"
            )
    return AssertionError("no_truth_value: every result has a truth value")  # pragma: no cover


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

    what = f"filter {name!r}: predicate(record)"

    def kept(batch: Any) -> Any:
        if isinstance(batch, np.ndarray):
            return batch[verdicts(predicate, batch, len(batch), what)]
        found = [predicate(x) for x in batch]
        try:
            return list(compress(batch, found))
        except Exception:  # a result bool() refuses (the predicate's own errors came above)
            raise no_truth_value(found, batch, what) from None

    return map_batch(stream, kept, name)
