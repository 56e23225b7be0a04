"""Checked int64 arithmetic on diffs (multiplicities): sums, products, differences and
negations that leave int64 raise :class:`DiffOverflowError`, never wrap.

Every diff of the differential layer is an int64, and numpy's int64 arithmetic wraps
silently: 200 updates of ``2**62`` summed by ``np.add.reduceat`` give ``-2**63``, and
``-(-2**63)`` is ``-2**63`` again. Every place that combines diffs (consolidation, the
products of ``join`` and ``explode``, the accumulations of ``reduce`` and ``count_total``,
negation) goes through this module.

The common case stays cheap. Each function first checks a *bound* that holds for the usual
diffs of ``+-1`` (one ``min`` and one ``max`` pass over the diffs, against a sort or a
gather that costs far more): ``rows x max |diff| < 2**63`` means no sum of those rows can
leave int64, ``max |a| x max |b| < 2**63`` no product. Only when the bound fails does the
exact (slower, still vectorized) check run:

- sums: two's complement addition is exact modulo ``2**64``, so a wrapped sum is right
  whenever the true sum fits; whether it does is decided exactly by splitting each diff into
  its high 32 bits (signed) and low 32 bits (non-negative) and summing the halves apart
  (neither half-sum can wrap for fewer than ``2**31`` rows);
- products: a float64 product flags the rows whose exact product may be beyond ``2**62``,
  and those alone are multiplied as Python ints;
- running sums, differences: Python ints (``object`` arrays), only past the bound.

Not every sum is a result. A *result* (the consolidated multiplicity of a record at a time,
an output change, a count) must fit in int64, and one that does not is refused. A merge of
a spine's batches or of a view's runs sums a record's rows over a run of times compacted to
one: a change between two counts, which may leave int64 while every count fits. Such merges
ask for *split* sums (:func:`split_sums`, :func:`pieces`): a sum beyond int64 is held as
several rows of its sign at that record and time, each within int64, so a merged batch may
hold a (record, time) in more than one row, and a reader that sums a result from them sums
them exactly as any other rows. Nothing is refused until a result is. Negation likewise:
``-(-2**63)`` is held as two rows, ``2**63 - 1`` and ``1`` (:func:`split_negation`).

The error message says what overflowed and, where the caller knows it, for which record at
which time; the operator's name and time are added by the runtime's note (as for any error
an operator raises), and the dataflow fails like any other operator error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

DIFF_MIN, DIFF_MAX = -(2**63), 2**63 - 1
"""The range of a diff: int64."""

_LIMIT = 2**63
_LOW = 0xFFFFFFFF
_HALF = 2**31
_SUSPECT = 2.0**62  # float64 is within a factor 1 + 2**-52 of an exact product's magnitude


class DiffOverflowError(OverflowError):
    """A sum, product, difference or negation of diffs beyond int64: ``what`` overflowed
    (a phrase: "the diffs sum to"), ``value`` its exact result, ``row`` the row of the input
    where it happened (the first row of a group for a sum), and ``where`` the record and
    time when the caller knows them (:meth:`located`)."""

    def __init__(self, what: str, value: int, row: int | None = None, where: str = "") -> None:
        at = f" ({where})" if where else ""
        super().__init__(f"{what} {value}{at}, beyond int64 (the type of every multiplicity)")
        self.what, self.value, self.row, self.where = what, value, row, where

    def located(self, record: Any, time: Any, noun: str = "record") -> DiffOverflowError:
        """This error with the record (or key: ``noun``) and time it happened at.

        >>> print(beyond("the diffs sum to", 2**63).located("a", 0))  # doctest: +ELLIPSIS
        the diffs sum to 9223372036854775808 (record 'a' at time 0), beyond int64 (...)
        """
        return DiffOverflowError(
            self.what, self.value, self.row, f"{noun} {record!r} at time {time}"
        )


def beyond(what: str, value: int, row: int | None = None) -> DiffOverflowError:
    """The error for ``what`` (a phrase: "the diffs sum to") being ``value``.

    >>> str(beyond("the diffs sum to", 2**63))
    'the diffs sum to 9223372036854775808, beyond int64 (the type of every multiplicity)'
    """
    return DiffOverflowError(what, value, row)


def magnitude(diffs: np.ndarray) -> int:
    """The largest ``|diff|`` (a Python int: ``2**63`` for ``-2**63``), 0 for no diffs.

    >>> magnitude(np.array([3, -(2**63)])), magnitude(np.zeros(0, np.int64))
    (9223372036854775808, 0)
    """
    if not len(diffs):
        return 0
    return max(-int(diffs.min()), int(diffs.max()))


def may_sum_beyond(diffs: np.ndarray) -> bool:
    """Whether some sum of rows of ``diffs`` could leave int64 (the bound: rows x the
    largest magnitude).

    >>> may_sum_beyond(np.ones(10**6, np.int64)), may_sum_beyond(np.array([2**62, 2**62]))
    (False, True)
    """
    return len(diffs) * magnitude(diffs) >= _LIMIT


def group_sums(diffs: np.ndarray, starts: np.ndarray, what: str = "the diffs") -> np.ndarray:
    """``np.add.reduceat(diffs, starts)`` (``starts`` increasing, the first 0), or a
    :class:`DiffOverflowError` (``row``: the group's start in ``diffs``) if a group's sum
    leaves int64.

    >>> group_sums(np.array([2**62, 2**62, -(2**62), 5]), np.array([0, 3])).tolist()
    [4611686018427387904, 5]
    >>> group_sums(np.array([2**62, 2**62, 1]), np.array([0, 2]))
    Traceback (most recent call last):
    ...
    naiad...DiffOverflowError: the diffs sum to 9223372036854775808, ...
    """
    with np.errstate(over="ignore"):
        sums = np.add.reduceat(diffs, starts)
    if len(diffs) and may_sum_beyond(diffs):
        bad = _wrapped(diffs, starts)
        if bad is not None:
            group, value = bad
            raise beyond(f"{what} sum to", value, int(starts[group]))
    return sums


def _wrapped(diffs: np.ndarray, starts: np.ndarray) -> tuple[int, int] | None:
    """The first group whose true sum leaves int64 and that sum, or None: each diff split
    into a signed high half and a non-negative low half, whose sums cannot wrap."""
    if len(diffs) >= _HALF:  # (a half-sum could wrap: exact Python ints instead)
        exact = np.add.reduceat(diffs.astype(object), starts)
        out = np.flatnonzero([not DIFF_MIN <= s <= DIFF_MAX for s in exact.tolist()])
        return None if not len(out) else (int(out[0]), int(exact[out[0]]))
    low = np.add.reduceat(diffs & _LOW, starts)
    high = np.add.reduceat(diffs >> 32, starts) + (low >> 32)
    out = np.flatnonzero((high < -_HALF) | (high >= _HALF))
    if not len(out):
        return None
    g = int(out[0])
    return g, int(high[g]) * 2**32 + (int(low[g]) & _LOW)


def pieces(total: int) -> list[int]:
    """``total`` (an exact sum of diffs) as the fewest diffs of its sign that sum to it:
    ``[total]`` when it fits in int64 (``[]`` for zero), else as many ``+-(2**63 - 1)`` as
    it takes and the rest. A sum of ``k`` diffs needs at most ``k`` pieces.

    >>> pieces(5), pieces(0), pieces(-(2**64))
    ([5], [], [-9223372036854775807, -9223372036854775807, -2])
    """
    if DIFF_MIN <= total <= DIFF_MAX:
        return [total] if total else []
    whole, rest = divmod(abs(total), DIFF_MAX)
    sign = 1 if total > 0 else -1
    return [sign * DIFF_MAX] * whole + ([sign * rest] if rest else [])


def split_sums(diffs: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The groups' exact sums as rows (groups as for :func:`group_sums`): the group of
    each row, in order, and its diff; a zero sum has no row, one beyond int64 its
    :func:`pieces`. For the merges whose sums are not results (see above); exact Python
    ints, so for groups :func:`group_sums` refused.

    >>> groups, sums = split_sums(np.array([2**62, 2**62, 2**62, 1, -1]), np.array([0, 3]))
    >>> groups.tolist(), sums.tolist()
    ([0, 0], [9223372036854775807, 4611686018427387905])
    """
    groups: list[int] = []
    out: list[int] = []
    for g, total in enumerate(np.add.reduceat(diffs.astype(object), starts).tolist()):
        parts = pieces(total)
        groups += [g] * len(parts)
        out += parts
    return np.array(groups, dtype=np.int64), np.array(out, dtype=np.int64)


def scaled_sizes(sizes: np.ndarray, diff: int, what: str = "the diffs") -> np.ndarray:
    """``sizes * diff``: the sums of groups of ``sizes`` equal diffs, or a
    :class:`DiffOverflowError` (``row``: the group's index) if one leaves int64.

    >>> scaled_sizes(np.array([1, 3]), -2).tolist()
    [-2, -6]
    """
    diff = int(diff)
    if len(sizes) and int(sizes.max()) * abs(diff) >= _LIMIT:
        exact = int(sizes.max()) * diff
        if not DIFF_MIN <= exact <= DIFF_MAX:
            group = int(np.argmax(sizes))
            raise beyond(f"{what} sum to", exact, group)
    return sizes * diff


def products(a: np.ndarray, b: np.ndarray, what: str = "the product of diffs") -> np.ndarray:
    """``a * b`` (int64 columns of one length), or a :class:`DiffOverflowError` (``row``:
    the first row whose product leaves int64).

    >>> products(np.array([2**31, 3]), np.array([2**31, -4])).tolist()
    [4611686018427387904, -12]
    >>> products(np.array([1, 2**32]), np.array([5, -(2**31) - 1]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    naiad...DiffOverflowError: the product of diffs ... -9223372041149743104, ...
    """
    with np.errstate(over="ignore"):
        out = a * b
    if len(a) and magnitude(a) * magnitude(b) >= _LIMIT:
        approx = a.astype(np.float64) * b.astype(np.float64)
        suspect = np.flatnonzero(np.abs(approx) >= _SUSPECT)
        if len(suspect):
            exact = a[suspect].astype(object) * b[suspect].astype(object)
            for row, value in zip(suspect.tolist(), exact.tolist(), strict=True):
                if not DIFF_MIN <= value <= DIFF_MAX:
                    x, y = int(a[row]), int(b[row])
                    raise beyond(f"{what} {x} x {y} is", value, row)
    return out


SMALL_SCAN = 32
"""Diffs up to this many are searched for ``-2**63`` in a Python list, more with numpy."""


def split_negation(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``-diffs`` for a sum that follows: each diff negated, except that ``-2**63`` (whose
    negation int64 cannot hold) becomes ``2**63 - 1``, to be completed by one more row of
    ``1``; returns the negated diffs and the rows that need that extra ``1``. The exact sum
    of the group then decides, not the one diff.

    >>> minus, extra = split_negation(np.array([5, -(2**63)]))
    >>> minus.tolist(), extra.tolist()
    ([-5, 9223372036854775807], [1])
    """
    n = len(diffs)
    # a few diffs (a small batch, an iterative round's) are searched as Python ints: the list
    # and its search cost less than numpy's reduction call (~0.8 against ~2 us for 30)
    if not n or not (DIFF_MIN in diffs.tolist() if n <= SMALL_SCAN else diffs.min() == DIFF_MIN):
        return -diffs, np.zeros(0, dtype=np.int64)
    extra = np.flatnonzero(diffs == DIFF_MIN)
    minus = -diffs
    minus[extra] = DIFF_MAX
    return minus, extra


def differences(a: np.ndarray, b: np.ndarray, what: str = "a difference of diffs is") -> np.ndarray:
    """``a - b`` (int64 columns of one length), or a :class:`DiffOverflowError` (``row``:
    the first row whose difference leaves int64).

    >>> differences(np.array([2**62]), np.array([-(2**62) + 1])).tolist()
    [9223372036854775807]
    """
    with np.errstate(over="ignore"):
        out = a - b
    if len(a) and magnitude(a) + magnitude(b) >= _LIMIT:
        _check_exact(a.astype(object) - b.astype(object), what)
    return out


def additions(a: np.ndarray, b: np.ndarray, what: str = "a sum of diffs is") -> np.ndarray:
    """``a + b`` (int64 columns of one length), or a :class:`DiffOverflowError` (``row``:
    the first row whose sum leaves int64).

    >>> additions(np.array([2**62, 1]), np.array([2**62, 1]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    naiad...DiffOverflowError: a sum of diffs is 9223372036854775808, ...
    """
    with np.errstate(over="ignore"):
        out = a + b
    if len(a) and magnitude(a) + magnitude(b) >= _LIMIT:
        _check_exact(a.astype(object) + b.astype(object), what)
    return out


def checked_exact(values: np.ndarray, what: str) -> np.ndarray:
    """An ``object`` column of exact Python ints as int64, or a :class:`DiffOverflowError`
    naming ``what`` (``row``: the first value beyond int64).

    >>> checked_exact(np.array([1, 2**63], dtype=object), "count")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    naiad...DiffOverflowError: count 9223372036854775808, beyond ...
    """
    _check_exact(values, what)
    return values.astype(np.int64)


def _check_exact(values: np.ndarray, what: str) -> None:
    for row, value in enumerate(values.tolist()):
        if not DIFF_MIN <= value <= DIFF_MAX:
            raise beyond(what, value, row)


def as_diffs(values: Sequence[int], what: str = "the diffs sum to") -> np.ndarray:
    """Python ints (exact sums of diffs) as an int64 column, or a :class:`DiffOverflowError`
    (``row``: the first value beyond int64) where numpy would raise a bare one. Free when
    every value fits.

    >>> as_diffs([3, -(2**63)]).tolist()
    [3, -9223372036854775808]
    >>> as_diffs([1, 2**63])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    naiad...DiffOverflowError: the diffs sum to 9223372036854775808, ...
    """
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        for row, value in enumerate(values):
            if not DIFF_MIN <= value <= DIFF_MAX:
                raise beyond(what, value, row) from None
        raise


def describe_row(columns: Sequence[np.ndarray], times: np.ndarray, row: int) -> tuple[Any, Any]:
    """``(record, time row)`` of row ``row`` of record columns and a time matrix, for a
    message (a tuple record when there are several columns).

    >>> describe_row([np.array([1, 2]), np.array(["a", "b"], dtype=object)],
    ...              np.array([[0], [3]]), 1)
    ((2, 'b'), 3)
    """
    fields = [c[row].item() if hasattr(c[row], "item") else c[row] for c in columns]
    record = fields[0] if len(fields) == 1 else tuple(fields)
    time = times[row].tolist()
    return record, time[0] if len(time) == 1 else tuple(time)
