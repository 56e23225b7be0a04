"""Reduce over an arrangement (seed 002 §4, K-Pg §4.3): for every key whose input changed,
the output at each affected time is recomputed from the accumulated input, and the
difference to the accumulated output so far is emitted.

With partially ordered times, the output of a key can change at any least upper bound of its
input times, not only at the times of the changes themselves. The operator keeps a set of
pending ``(key, time)`` pairs: the times of arriving input, and, whenever a key is evaluated
at ``t``, the joins of ``t`` with every time in that key's input and output history. A
pending time is evaluated once the input frontier has passed it, in lexicographic order (a
linear extension of the partial order, so every time is evaluated after the times before
it). All keys pending at one time are evaluated together: one gather from each trace, one
sort-based consolidation and one call of the vectorized logic per time, whatever the number
of keys. When the gathered history is small (the few keys of an iterative round), the
accumulations, interesting times and output difference are computed in Python instead
(``SMALL_ROWS``): numpy's per-call cost would dominate there.

Logics (``count``, ``distinct``, ``threshold``, ``sum``, ``min``, ``max``) are vectorized over
the accumulated ``(key, values, count)`` rows sorted by key and value; ``reduce(f)`` calls
the user's ``f(key, [(value, count), ...])`` once per key (the documented per-key price).
The operator holds capabilities only for the minimal pending times, so when nothing is
pending its output frontier is the input's (a reduce that defers no work holds none).

``count``, ``distinct`` and ``threshold`` are *per-record* logics (``Logic.per_record``): a
record's output depends on its own count alone. For them the unit pending and evaluated is
the whole record, not its key: the traces (sorted by key, then values) are searched for the
records themselves (:meth:`~naiad.differential.trace.Batch.record_ranges`), so a change
costs its own records' history, however many records share its key, as in differential
dataflow, where these operators are keyed by the whole record. ``sum``, ``min``, ``max`` and
``reduce(f)`` stay per key: their output depends on every value of the key.
"""

from __future__ import annotations

import heapq
import itertools
import numbers
import operator
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.differential import lattice
from naiad.differential.arrange import Arranged, HeldTimes, check_keyed
from naiad.differential.diff_arithmetic import (
    DIFF_MAX,
    DiffOverflowError,
    as_diffs,
    beyond,
    describe_row,
    split_negation,
)
from naiad.differential.trace import Batch, Spine, TraceHandle
from naiad.differential.updates import (
    EXACT_INTS,
    INTERNER,
    _column,
    check_not_iterator,
    columns_of,
    consolidated,
    field_tuples,
    group_starts,
    handed,
    object_column,
    records_of,
    reject_nan_values,
    sorted_groups,
    take_rows,
    time_groups,
    unique_sorted,
)
from naiad.progress.antichain import TimeQueue
from naiad.progress.capability import Capability

Columns = tuple[np.ndarray, ...]
SMALL_ROWS = 192
"""Up to this many gathered rows, a key set's evaluation runs in Python (``_small_changes``)."""
Decoder = Callable[[np.ndarray], np.ndarray]
Rows = tuple[np.ndarray, Columns, np.ndarray]
"""(keys, value columns, counts): accumulated rows, sorted by key then value, no zeros."""


class Logic:
    """What a reduce computes: accumulated input rows of some keys -> their output rows.

    Keys are in the input spine's representation (interned codes, or numbers); value columns
    are given decoded, and returned as raw columns (numbers or Python objects).

    ``per_record``: the output rows of a record ``(key, *values)`` depend on that record's own
    count alone, and begin with the record. The operator then evaluates records, not keys:
    a change costs the history of the records it touches, however many share their key.
    """

    per_record = False
    packs = False
    """Over a packed input (records of several widths: ``Spine.pack``), whether the logic
    takes the values packed (one column of tuples of value fields) and returns them, still
    packed, as its first output value column, followed by ``trailing`` columns of its own
    (its output is then packed too). Otherwise it takes them as columns when every record
    it gets has one width, else as ``reduce`` hands them over (one column)."""
    trailing = 0

    def __call__(
        self,
        keys: np.ndarray,
        vals: tuple[np.ndarray, ...],
        counts: np.ndarray,
        decode_key: Callable[[np.ndarray], np.ndarray],
    ) -> Rows:
        raise NotImplementedError

    def check_width(self, fields: int) -> None:
        """Raises the logic's error if it cannot take records with ``fields`` value fields
        (those after the key)."""


class CountLogic(Logic):
    """``(record, count)`` for every record with a non-zero count."""

    per_record = packs = True
    trailing = 1

    def __call__(
        self, keys: np.ndarray, vals: Columns, counts: np.ndarray, decode_key: Decoder
    ) -> Rows:
        return keys, (*vals, counts.copy()), np.ones(len(keys), dtype=np.int64)


class ThresholdLogic(Logic):
    """Each record with multiplicity ``f(count)`` (``f`` gets and returns a numpy array of
    counts); ``f=None`` is ``distinct``: multiplicity 1 for every positive count."""

    per_record = packs = True

    def __init__(self, f: Callable[[np.ndarray], Any] | None) -> None:
        self.f = f

    def __call__(
        self, keys: np.ndarray, vals: Columns, counts: np.ndarray, decode_key: Decoder
    ) -> Rows:
        out = thresholded(self.f, counts, "threshold")
        keep = out != 0
        return keys[keep], tuple(v[keep] for v in vals), out[keep]


def thresholded(f: Callable[[np.ndarray], Any] | None, counts: np.ndarray, name: str) -> np.ndarray:
    """The multiplicities ``f(counts)`` as int64, checked (one per count, integers or booleans;
    an error naming ``name`` otherwise); ``f=None`` is ``distinct``'s: 1 for a positive count.

    >>> thresholded(lambda c: c // 2, np.array([1, 4]), "threshold").tolist()
    [0, 2]
    >>> thresholded(lambda c: c / 2, np.array([1, 4]), "threshold")
    Traceback (most recent call last):
    ...
    TypeError: threshold: f must return integer counts, not float64
    """
    if f is None:
        return (counts > 0).astype(np.int64)
    raw = np.asarray(f(counts))
    if raw.shape != counts.shape:
        raise ValueError(f"{name}: f must map an array of {len(counts)} counts to as many counts")
    if len(raw) and raw.dtype.kind not in "iub":
        raise TypeError(f"{name}: f must return integer counts, not {raw.dtype}")
    if raw.dtype.kind == "u" and raw.dtype.itemsize == 8 and len(raw) and raw.max() > DIFF_MAX:
        raise beyond(f"{name}: f returned multiplicity", int(raw.max()), int(np.argmax(raw)))
    return raw.astype(np.int64)


class SumLogic(Logic):
    """``(key, sum of value x count)`` per key."""

    def check_width(self, fields: int) -> None:
        if fields != 1:
            raise ValueError(f"sum: records must be (key, number) pairs, not {fields + 1} fields")

    def __call__(
        self, keys: np.ndarray, vals: Columns, counts: np.ndarray, decode_key: Decoder
    ) -> Rows:
        self.check_width(len(vals))
        starts = group_starts(keys)
        (v,) = vals
        ones = np.ones(len(starts), dtype=np.int64)
        if v.dtype == object or _may_overflow(v, counts):
            # ints beyond 64 bits, ints and floats that numpy would round, or int64 sums that
            # could wrap: Python's exact arithmetic
            values = v.tolist()
            if not all(isinstance(x, numbers.Number) for x in values):
                raise TypeError("sum: values must be numbers")
            bounds, weights = [*starts.tolist(), len(values)], counts.tolist()
            sums = object_column(
                [_key_sum(values[a:b], weights[a:b]) for a, b in itertools.pairwise(bounds)]
            )
            return keys[starts], (sums,), ones
        with np.errstate(over="ignore", invalid="ignore"):  # inf is a sum; NaN is refused
            sums = np.add.reduceat(v * counts, starts) if len(starts) else v[:0]
        return keys[starts], (sums,), ones


def _key_sum(values: list[Any], weights: list[int]) -> Any:
    """The sum of ``value x count`` over one key's rows of an ``object`` column (Python values
    in the order their codes were first seen, which differs between histories and processes).

    Ints (and Fractions, Decimals) add exactly. Floats with ints that float64 holds exactly
    are added as the numeric path adds a float64 column, in value order with the same
    ``add.reduceat`` (float addition is not associative): one multiset, one sum, whether
    its column holds numbers or Python objects.

    >>> _key_sum([0.3, 0.2, 0.1], [1, 1, 1]) == _key_sum([0.1, 0.2, 0.3], [1, 1, 1])
    True
    """
    if any(isinstance(x, float | np.floating) for x in values) and all(
        isinstance(x, float | np.floating)
        or (isinstance(x, int | np.integer) and -EXACT_INTS <= x <= EXACT_INTS)
        for x in values
    ):
        order = sorted(range(len(values)), key=values.__getitem__)
        v = np.array([values[i] for i in order], dtype=np.float64)
        c = np.array([weights[i] for i in order], dtype=np.int64)
        return float(np.add.reduceat(v * c, [0])[0])
    return sum(x * c for x, c in zip(values, weights, strict=True))


def _may_overflow(values: np.ndarray, counts: np.ndarray) -> bool:
    """Whether some sum of ``value x count`` over the rows could leave int64 (a bound: the
    largest magnitudes times the number of rows), for integer columns.

    >>> _may_overflow(np.array([2**62, 1]), np.array([1, 1]))
    True
    >>> _may_overflow(np.arange(9), np.ones(9, np.int64))
    False
    """
    if values.dtype.kind not in "iu" or not len(values):
        return False
    top = max(abs(int(values.max())), abs(int(values.min())))
    return top * max(abs(int(counts.max())), abs(int(counts.min()))) * len(values) >= 2**63


SMALL_EXTREMES = 16
"""Up to how many rows ``min``/``max`` pick in Python (:meth:`ExtremeLogic._few`): a loop's
round hands the logic a row or two per key, where the numpy passes cost microseconds each."""


class ExtremeLogic(Logic):
    """``(key, least value)`` (``max=True``: greatest) among the values with positive counts."""

    packs = True  # packed values compare as tuples of fields, as columns sort

    def __init__(self, largest: bool) -> None:
        self.largest = largest

    def check_width(self, fields: int) -> None:
        if not fields:
            raise ValueError("min/max: records must be (key, value) pairs")

    def __call__(
        self, keys: np.ndarray, vals: Columns, counts: np.ndarray, decode_key: Decoder
    ) -> Rows:
        self.check_width(len(vals))
        if len(keys) <= SMALL_EXTREMES and all(v.dtype != object for v in vals):
            # the few rows of an iterative round: their picks as lists (no numpy passes)
            rows = np.array(self._few(keys.tolist(), counts.tolist()), dtype=np.int64)
            return keys[rows], tuple(v[rows] for v in vals), np.ones(len(rows), dtype=np.int64)
        pos = counts > 0
        keys, vals = keys[pos], tuple(v[pos] for v in vals)
        if any(v.dtype == object for v in vals):  # Python values: compare them in Python
            return GenericLogic(self._python, split=len(vals) > 1)(
                keys, vals, np.ones(len(keys), np.int64), decode_key
            )
        starts = group_starts(keys)
        if not len(starts):
            return keys, vals, np.zeros(0, dtype=np.int64)
        # rows are sorted by (key, value): the first row of a key holds its least value
        pick = np.r_[starts[1:], len(keys)] - 1 if self.largest else starts
        return keys[pick], tuple(v[pick] for v in vals), np.ones(len(pick), dtype=np.int64)

    def _few(self, keys: list[Any], counts: list[int]) -> list[int]:
        """The rows :meth:`__call__` picks, for a few rows: per key, the first (``max``: the
        last) row of a positive count, rows being sorted by ``(key, value)``.

        >>> ExtremeLogic(False)._few([1, 1, 2, 3, 3], [0, 2, -1, 1, 1])
        [1, 3]
        >>> ExtremeLogic(True)._few([1, 1, 2, 3, 3], [1, 0, 1, 1, 1])
        [0, 2, 4]
        """
        pick: list[int] = []
        last = None
        for row, (key, count) in enumerate(zip(keys, counts, strict=True)):
            if count > 0:
                if not pick or key != last:
                    pick.append(row)
                    last = key
                elif self.largest:
                    pick[-1] = row
        return pick

    def _python(self, key: Any, values: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        pick = max if self.largest else min
        try:
            return [(pick(v for v, _ in values), 1)]
        except TypeError as e:
            raise self._unordered(key, [v for v, _ in values], e) from None

    def _unordered(self, key: Any, values: list[Any], error: TypeError) -> TypeError:
        """The error for a key whose values Python cannot order (``None`` beside ints, ints
        beside strings), naming the operator, the key and two such values (found again
        only now, on the failure path).

        >>> ExtremeLogic(largest=True)._unordered("k", [1, 2, None], TypeError("..."))
        TypeError("max: the values of key 'k' cannot be ordered: 2 and None (...); a key's values must be comparable with each other (not None beside numbers, nor numbers beside strings)")
        """  # noqa: E501
        op = "max" if self.largest else "min"
        best = values[0]
        for value in values[1:]:
            try:
                if (value > best) if self.largest else (value < best):
                    best = value
            except TypeError:
                pair = f"{best!r} and {value!r} ({error})"
                break
        else:  # the comparison that failed is not found again: name none
            pair = str(error)
        return TypeError(
            f"{op}: the values of key {key!r} cannot be ordered: {pair}; a key's values must "
            "be comparable with each other (not None beside numbers, nor numbers beside strings)"
        )


class GenericLogic(Logic):
    """The user's ``f(key, [(value, count), ...]) -> [(value, count), ...]``, once per key.
    With ``split``, tuple values become one column per field."""

    def __init__(self, f: Callable[[Any, list[tuple[Any, int]]], Any], split: bool = False) -> None:
        self.f = f
        self.split = split

    def __call__(
        self, keys: np.ndarray, vals: Columns, counts: np.ndarray, decode_key: Decoder
    ) -> Rows:
        if not len(keys):
            return keys, tuple(v[:0] for v in vals) if self.split else (keys[:0],), keys[:0]
        starts = group_starts(keys)
        ends = np.r_[starts[1:], len(keys)]
        values = records_of(vals) if vals else [()] * len(keys)
        raw_keys = decode_key(keys[starts]).tolist() if len(starts) else []
        counts_l = counts.tolist()
        out_keys: list[int] = []
        out_vals: list[Any] = []
        out_counts: list[int] = []
        key_codes = keys[starts].tolist()
        for code, key, lo, hi in zip(
            key_codes, raw_keys, starts.tolist(), ends.tolist(), strict=True
        ):
            result = self.f(key, list(zip(values[lo:hi], counts_l[lo:hi], strict=True)))
            for value, count in _pairs(key, result):
                if count:
                    out_keys.append(code)
                    out_vals.append(value)
                    out_counts.append(count)
        cols = columns_of(out_vals) if self.split and out_vals else (_column(out_vals),)
        return np.array(out_keys, dtype=keys.dtype), cols, np.array(out_counts, dtype=np.int64)


def _pairs(key: Any, result: Any) -> list[tuple[Any, int]]:
    """A reduce function's result as ``(value, count)`` pairs with integer counts (any
    iterable of pairs; ``None`` is no output), or a ``TypeError`` that shows it (an
    ``OverflowError`` for a count beyond int64, the type of every multiplicity).

    >>> _pairs("k", [("a", 2**63)])
    Traceback (most recent call last):
    ...
    OverflowError: reduce: f returned count 9223372036854775808 for key 'k': counts are int64
    >>> _pairs("k", [(["a"], 1)])
    Traceback (most recent call last):
    ...
    TypeError: reduce: f returned the value ['a'] for key 'k': values must be hashable
    >>> _pairs("k", [(iter("a"), 1)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: reduce: f returned, for key 'k', a str_ascii_iterator, not a value: an iterator equals ...
    """  # noqa: E501
    try:
        pairs = [(value, operator.index(count)) for value, count in result or ()]
    except (TypeError, ValueError):
        raise TypeError(
            f"reduce: f must return (value, count) pairs with integer counts; for key {key!r} "
            f"it returned {result!r}"
        ) from None
    for value, count in pairs:
        if not -(2**63) <= count < 2**63:
            raise OverflowError(
                f"reduce: f returned count {count} for key {key!r}: counts are int64"
            )
        # here, where the key and f can be named (the column built later names neither)
        try:
            hash(value)
        except TypeError:
            raise TypeError(
                f"reduce: f returned the value {value!r} for key {key!r}: values must be hashable"
            ) from None
        fields = value if value.__class__ is tuple else (value,)
        if any(f != f for f in fields):
            raise ValueError(
                f"reduce: f returned the value {value!r} for key {key!r}: a NaN is not equal "
                "to itself, so its changes could never cancel: use None or a sentinel value"
            )
    if pairs:  # one test per call of f, as map's per batch (see check_not_iterator)
        # a new iterator never equals the key's previous output, so every evaluation of
        # the key would retract that output and add another, for the same result
        what = partial("reduce: f returned, for key {!r},".format, key)
        check_not_iterator(pairs[0][0], what, noun="value")
    return pairs


def _accumulate(
    spine: Spine, t: np.ndarray, gathered: tuple[Any, ...]
) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
    """The accumulated (key, values, count) rows of the ``gathered`` history at time ``t``."""
    k, vals, times, diffs = gathered
    mask = lattice.less_equal(times, t[None, :], spine.lex)
    k, vals, diffs = k[mask], tuple(v[mask] for v in vals), diffs[mask]
    no_times = np.zeros((len(k), 0), dtype=np.int64)
    try:
        cols, _, sums = consolidated([k, *vals], no_times, diffs, runs=True)  # sorted per batch
    except DiffOverflowError as e:
        raise _count_beyond(spine, e, k[e.row or 0], t) from None
    return cols[0], tuple(cols[1:]), sums


def _count_beyond(spine: Spine, error: DiffOverflowError, key: Any, t: Any) -> DiffOverflowError:
    """The error for an accumulated count of ``key`` (as ``spine`` stores it) beyond int64
    at time ``t`` (a time row)."""
    decoded = spine.decode(0, np.array([key])).tolist()[0]
    time = describe_row([], np.asarray(t).reshape(1, -1), 0)[1]
    return DiffOverflowError("the accumulated count is", error.value, error.row).located(
        decoded, time, noun="key"
    )


def _interesting(
    groups: Columns,
    t: np.ndarray,
    gathered_in: tuple[Any, ...],
    out_groups: Columns,
    out_times: np.ndarray,
    lex: tuple[bool, ...],
    advanced_to: int,
) -> tuple[Columns, np.ndarray]:
    """The joins of ``t`` with every time in the groups' input and output history (those not
    equal to ``t``): where the outputs of ``groups`` may change next. ``out_groups`` are the
    output history's group columns as the input stores them. With integer times, only
    history times up to ``advanced_to`` (see :func:`_advanced_to`)."""
    in_groups = (gathered_in[0], *gathered_in[1][: len(groups) - 1])
    cols = tuple(
        np.concatenate([a, b]).astype(g.dtype, copy=False)
        for g, a, b in zip(groups, in_groups, out_groups, strict=True)
    )
    times = np.concatenate([gathered_in[2], out_times])
    if not len(times):
        return cols, times
    # join(time, t) differs from t exactly when time is not <= t (a column-wise test: far
    # cheaper than comparing the joined rows with t, a reduction along the short axis)
    new = ~lattice.less_equal(times, t[None, :], lex)
    if times.shape[1] == 1:
        new &= times[:, 0] <= advanced_to
    return tuple(c[new] for c in cols), lattice.join(take_rows(times, new), t[None, :], lex)


def _distinct_groups(parts: list[Columns]) -> Columns:
    """The distinct groups (keys, or whole records) among ``parts``, sorted as a batch sorts
    its rows.

    >>> [c.tolist() for c in _distinct_groups([(np.array([2, 1]), np.array([5, 7])),
    ...                                        (np.array([2]), np.array([5]))])]
    [[1, 2], [7, 5]]
    """
    cols = parts[0]
    if len(parts) > 1:
        cols = tuple(np.concatenate(c) for c in zip(*parts, strict=True))
    if len(cols) == 1:
        return (unique_sorted(cols[0]),)
    order, starts = sorted_groups(cols)
    picked = order[starts]
    return tuple(c[picked] for c in cols)


def recoded(col: np.ndarray, was: bool | None, now: bool | None) -> np.ndarray:
    """A column of stored values (codes when ``was``) in the representation ``now`` stands
    for: the same values, interned or not (``None``: no representation yet, kept as is)."""
    if was is None or now is None or was == now or not len(col):
        return col
    if now:
        return INTERNER.encode(col.astype(object))
    return np.array(INTERNER.decode(col).tolist())


def _fresh_columns(
    fresh: set[tuple[Any, ...]], dtypes: list[np.dtype[Any]], depth: int
) -> tuple[Columns, np.ndarray]:
    """``(*group, *time row)`` tuples as group columns (of ``dtypes``) and a time matrix."""
    rows = list(fresh)
    width = len(dtypes)
    cols = tuple(np.array([r[i] for r in rows], dtype=d) for i, d in enumerate(dtypes))
    times = np.array([r[width:] for r in rows], dtype=np.int64).reshape(len(rows), depth)
    return cols, times


def _advanced_to(*spines: Spine) -> int:
    """With integer times, how far merges of these spines may have advanced an update's time.

    A later time of a key's history is pending already when it is the update's own time: an
    input update's ``(key, time)`` became pending when its batch arrived (or will, when a
    batch still in flight arrives), and with totally ordered times no output lies after the
    time evaluated (times are evaluated in order). Only a time that a merge advanced the
    update to may be new; making every later time pending again made ``n`` times in flight
    cost ``n**2`` (each evaluation re-added every later time of the key).
    """
    marks = [s.advanced_to for s in spines if s.advanced_to is not None]
    return max(marks) if marks else np.iinfo(np.int64).min


class ReduceVertex(Vertex):
    """Evaluates groups at times: keys, or for a ``per_record`` logic whole records (the key
    and every value column), so that a change costs the history of its own records."""

    def __init__(
        self, source: Spine, handle: TraceHandle, output: Spine, own: TraceHandle, logic: Logic
    ) -> None:
        self.source, self.handle, self.output, self.own, self.logic = (
            source,
            handle,
            output,
            own,
            logic,
        )
        # pending (group, time) pairs, per time: a frontier move takes the completed times and
        # leaves the others untouched (a prioritized loop has many later ones waiting)
        self.pending: dict[Any, list[Columns]] = {}
        # the pending times indexed: the ready ones and the least ones cost the times taken,
        # not a pass over every pending time (n priorities in flight made that n**2)
        self.times = TimeQueue()
        self.held = HeldTimes(source.lex, source.depth)
        # per group column, whether the pending groups hold interned codes (None: unknown)
        self.group_encoded: list[bool | None] = [None]
        self.group_packed = False  # the pending groups' values packed, as the source's
        # the pending groups' codes outlive the callbacks. Held as the interner's contract
        # asks, though no answer depends on it today: a pending code no other holder lists
        # is in no batch, so its group has no history in either spine (output columns
        # follow the input's encoding, see _sync_encoding, so it is never decoded) and its
        # evaluation emits nothing; were it freed and taken by another value, evaluating
        # that value at a complete time would emit only the change it needs there
        INTERNER.hold(self)
        # a reader of the output that lets go while the input is quiet: see Spine.released
        output.activator = self.activate_when_idle

    def on_idle(self) -> None:
        self.output.compact_released()

    def interned_columns(self) -> list[np.ndarray]:
        """The pending groups' columns that may hold codes (see :meth:`Interner.hold`):
        those interned, and integer ones whose representation is not known yet."""
        encoded = self.group_encoded
        return [
            col
            for parts in self.pending.values()
            for groups in parts
            for col, e in zip(groups, encoded, strict=False)
            if e or (e is None and col.dtype.kind == "i")
        ]

    def dataflow_stopped(self, failure: BaseException) -> None:
        self.output.stop(failure)  # imports of this reduction must not wait for more

    def followers(self) -> list[Vertex]:
        """The imports of this reduction's output still following it."""
        return list(self.output.importers)

    def _add_pending(self, groups: Columns, times: np.ndarray) -> list[Any]:
        """Makes the ``(group, time)`` pairs pending; the times that were not pending before."""
        added = []
        for t, rows in time_groups(times, self.source.lex):
            parts = self.pending.get(t)
            if parts is None:
                parts = self.pending[t] = []
                self.times.add(t)
                added.append(t)
            parts.append(groups if rows is None else tuple(c[rows] for c in groups))
        return added

    def _sync_encoding(self) -> None:
        """Follows the input spine when a group column switched from numbers to interned codes
        (a column that brought Python objects later): pending groups recoded, and the output's
        column with them (so that a group's output rows are found by its stored values)."""
        source, output = self.source, self.output
        if source.packed and not self.group_packed:
            self._pack()
        for i, was in enumerate(self.group_encoded):
            now = source.encoded[i]
            if was is False and now is True:
                self.pending = {
                    t: [(*g[:i], recoded(g[i], False, True), *g[i + 1 :]) for g in gs]
                    for t, gs in self.pending.items()
                }
            if now is True and i < len(output.encoded) and output.encoded[i] is False:
                output._recode(i)
                output.encoded[i] = True
            self.group_encoded[i] = now
        if source.encoded[0] is not None:
            output.encoded[0] = source.encoded[0]

    def _pack(self) -> None:
        """Follows the input spine when it packed (``Spine.pack``): per-record pending groups
        packed as its records are, and the output packed if the logic carries the values."""
        trailing = self.source.trailing
        self.group_packed = True
        if self.logic.per_record:
            encoded = self.group_encoded

            def packed(groups: Columns) -> Columns:
                n = len(groups) - 1 - trailing
                fields = [
                    (INTERNER.decode(c) if encoded[i] else c).tolist()
                    for i, c in enumerate(groups[1 : 1 + n], 1)
                ]
                codes = INTERNER.encode(object_column(field_tuples(fields, len(groups[0]))))
                return (groups[0], codes, *groups[1 + n :])

            self.pending = {t: [packed(g) for g in gs] for t, gs in self.pending.items()}
            n = max(len(encoded) - 1 - trailing, 0)
            encoded[:] = [encoded[0], True, *encoded[1 + n :]]
        if self.logic.packs:
            self.output.pack(trailing + self.logic.trailing)

    def _logic_values(self, vals: Columns) -> Columns:
        """Decoded value columns of the input as the logic takes them: a packed input's
        checked against the logic (:meth:`Logic.check_width`), then kept packed for a logic
        that :attr:`~Logic.packs`, else one column per field when they have one width, else
        one column of values as ``reduce`` hands them over (a tuple of several fields)."""
        if not self.source.packed or not len(vals[0]):
            return vals
        tuples = vals[0].tolist()
        widths = sorted(set(map(len, tuples)))
        for w in widths:
            self.logic.check_width(w)
        if self.logic.packs:
            return vals
        if len(widths) == 1:
            fields = tuple(_column([t[f] for t in tuples]) for f in range(widths[0]))
            return (*fields, *vals[1:])
        return (object_column([handed(t) for t in tuples]), *vals[1:])

    def on_recv(self, port: int, cap: Capability, batch: Batch) -> None:
        batch = self.source.conform(batch)  # written before the input packed, perhaps
        if len(batch) and self.logic.per_record and len(self.group_encoded) < 1 + len(batch.vals):
            self.group_encoded += [None] * (1 + len(batch.vals) - len(self.group_encoded))
        self._sync_encoding()
        if len(batch):
            groups = tuple(
                recoded(c, batch.is_encoded(i), now)
                for i, (c, now) in enumerate(
                    zip((batch.keys, *batch.vals), self.group_encoded, strict=False)
                )
            )
            self._add_pending(groups, batch.times)
            self.held.add(cap)

    def on_frontier(self) -> None:
        source, output = self.source, self.output
        frontier = lattice.frontier_rows(self.frontier(0).frontier, source.depth)
        self._sync_encoding()
        emitted = False
        pending, depth, times = self.pending, source.depth, self.times
        if pending:
            incomplete = self.frontier(0)
            # the ready times, least first in lexicographic order: every time is evaluated
            # after the times before it. A heap, not a scan of every pending time per
            # evaluation: that made n times in flight cost n**2.
            taken = times.pop_ready([incomplete.frontier])
            ready = [(lattice.time_row(t, depth), t) for t in taken]
            heapq.heapify(ready)
            while ready:
                t = heapq.heappop(ready)[1]
                parts = pending.pop(t)
                times.discard(t)  # one made pending below (those taken are gone already)
                sent, fresh, fresh_t = self._evaluate(_distinct_groups(parts), t)
                emitted |= sent
                if len(fresh_t):
                    # later than t (joins with t), so never one evaluated already
                    for u in self._add_pending(fresh, fresh_t):
                        if not incomplete.less_equal(u):
                            heapq.heappush(ready, (lattice.time_row(u, depth), u))
            self.held.reset_times(times.minimal())
        # Compaction: accumulations are needed only at times in advance of the frontier, and
        # for such a time t, join(t, advanced s) = join(t, s) (advanced s <= join(t, s) because
        # s is), so compacting the traces to the frontier changes no interesting time either.
        if len(frontier):
            self.handle.follow_rows(frontier)
            self.own.follow_rows(frontier)
        if not np.array_equal(frontier, output.upper):
            if emitted and not output.listeners:
                # the batches sent stand for the move; nobody else to tell
                output.move_upper(frontier)
            else:  # an import of this output hears of the move (it holds a capability at upper)
                output.advance_upper(frontier)
        if not len(frontier):
            self.handle.close()
            self.own.close()
            output.idle_merge()

    def _in_output(self, values: Columns) -> Columns:
        """Group value columns (as the input stores them) as the output stores them."""
        src, out = self.source.encoded, self.output.encoded
        return tuple(
            recoded(v, src[i], out[i] if i < len(out) else None) for i, v in enumerate(values, 1)
        )

    def _out_groups(self, gathered_out: tuple[Any, ...], like: Columns) -> Columns:
        """The group columns of output history rows as the input stores them."""
        if not len(gathered_out[0]):  # (the columns of an empty output spine are unknown)
            return tuple(c[:0] for c in like)
        src, out = self.source.encoded, self.output.encoded
        values = tuple(
            recoded(v, out[i], src[i]) for i, v in enumerate(gathered_out[1][: len(like) - 1], 1)
        )
        return (gathered_out[0], *values)

    def _gather_out(self, groups: Columns) -> tuple[Any, ...]:
        """The output history of ``groups``."""
        return self.output.gather(groups[0], values=self._in_output(groups[1:]))

    def _evaluate(self, groups: Columns, time: Any) -> tuple[bool, Columns, np.ndarray]:
        """Emits the output changes of ``groups`` at timestamp ``time``; whether it sent any,
        and the ``(group, time)`` pairs at which these groups' outputs may change next."""
        source, output = self.source, self.output
        t = np.array(lattice.time_row(time, source.depth), dtype=np.int64)
        gathered_in = source.gather(groups[0], values=groups[1:])
        gathered_out = self._gather_out(groups)
        small = len(gathered_in[3]) + len(gathered_out[3]) <= SMALL_ROWS and not any(source.lex)
        changes = self._small_changes if small else self._vector_changes
        batch, fresh, fresh_t = changes(groups, t, gathered_in, gathered_out)
        if not len(batch):
            return False, fresh, fresh_t
        output.insert(batch)
        cap = self.held.at(time)
        self.send(cap, batch)
        cap.drop()
        return True, fresh, fresh_t

    def _vector_changes(
        self,
        groups: Columns,
        t: np.ndarray,
        gathered_in: tuple[Any, ...],
        gathered_out: tuple[Any, ...],
    ) -> tuple[Batch, Columns, np.ndarray]:
        """The output changes of ``groups`` at ``t`` as a sealed batch, and the next
        interesting ``(group, time)`` pairs: a few numpy passes, whatever their number."""
        source, output = self.source, self.output
        fresh, fresh_t = _interesting(
            groups,
            t,
            gathered_in,
            self._out_groups(gathered_out, groups),
            gathered_out[2],
            source.lex,
            _advanced_to(source, output),
        )
        k, vals, counts = _accumulate(source, t, gathered_in)
        vals = self._logic_values(tuple(source.decode(i + 1, v) for i, v in enumerate(vals)))
        ok, ovals, ocounts = self.logic(k, vals, counts, lambda c: source.decode(0, c))
        ovals, gathered_out = self._stored(ovals, groups, gathered_out)
        hk, hvals, hcounts = _accumulate(output, t, gathered_out)
        if len(hk):
            # the new output minus the old; an old count of -2**63 is subtracted as two rows
            minus, extra = split_negation(hcounts)
            if len(extra):
                hk, hvals = (
                    np.concatenate([hk, hk[extra]]),
                    tuple(np.concatenate([v, v[extra]]) for v in hvals),
                )
                minus = np.concatenate([minus, np.ones(len(extra), dtype=np.int64)])
            # in the type both promote to, as the values: the history may be ints (or bools)
            # beside new float (or int) keys of other groups, which a cast to the history's
            # type truncated (2.5 to 2, 2 to True)
            dk = np.concatenate([ok, hk])
            dvals = tuple(np.concatenate([a, b]) for a, b in zip(ovals, hvals, strict=True))
            dd = np.concatenate([ocounts, minus])
        else:
            dk, dvals, dd = ok, ovals, ocounts
        times = np.repeat(t[None, :], len(dd), axis=0)
        no_since = np.zeros((0, output.depth + 1), np.int64)
        batch = Batch.sealed(dk, dvals, times, dd, output.upper, output.upper, no_since, output.lex)
        return batch, fresh, fresh_t

    def _stored(
        self, ovals: Columns, groups: Columns, gathered_out: tuple[Any, ...]
    ) -> tuple[Columns, tuple[Any, ...]]:
        """The logic's output value columns as the output spine stores them, and the groups'
        output history: gathered again if storing the new values switched a column to codes
        (the history gathered before holds the numbers the codes replaced)."""
        output = self.output
        # a NaN output could never be retracted (NaN != NaN), and on the Python path nothing
        # else would refuse it before it left the operator
        reject_nan_values(ovals, first=1)
        before = [bool(e) for e in output.encoded]
        ovals = output.encode(ovals, start=1)
        if [bool(e) for e in output.encoded[: len(before)]] != before:
            gathered_out = self._gather_out(groups)
        return ovals, gathered_out

    def _small_changes(
        self,
        groups: Columns,
        t: np.ndarray,
        gathered_in: tuple[Any, ...],
        gathered_out: tuple[Any, ...],
    ) -> tuple[Batch, Columns, np.ndarray]:
        """What the vectorized path computes (the output changes at ``t`` as a sealed batch,
        and the next interesting ``(group, time)`` pairs), for a few gathered rows, in Python:
        each numpy call costs microseconds whatever its size, and this path would make
        dozens of them for the handful of rows of an iterative round. Product-ordered
        times only (``time <= t`` exactly when ``join(time, t) == t``)."""
        source, output = self.source, self.output
        tt = tuple(t.tolist())
        width = len(groups)
        # with integer times, only times a merge may have advanced to (see _advanced_to)
        limit = _advanced_to(source, output) if len(tt) == 1 else None

        def accumulate(
            gathered: tuple[Any, ...], fresh: set[tuple[Any, ...]]
        ) -> dict[tuple[Any, ...], int]:
            k, vals, times, diffs = gathered
            acc: dict[tuple[Any, ...], int] = {}
            rows = zip(k.tolist(), *[v.tolist() for v in vals], strict=True)
            for row, time, d in zip(rows, times.tolist(), diffs.tolist(), strict=True):
                lub = tuple(map(max, time, tt))
                if lub == tt:  # at or before t: part of the accumulation at t
                    acc[row] = acc.get(row, 0) + d
                elif limit is None or time[0] <= limit:  # a later time where it may change
                    fresh.add((*row[:width], *lub))
            return acc

        fresh_in: set[tuple[Any, ...]] = set()
        acc_in = accumulate(gathered_in, fresh_in)
        rows = sorted(r for r, c in acc_in.items() if c)
        in_vals = gathered_in[1]
        k = np.array([r[0] for r in rows], dtype=groups[0].dtype)
        vals = self._logic_values(
            tuple(
                source.decode(i + 1, np.array([r[i + 1] for r in rows], dtype=v.dtype))
                for i, v in enumerate(in_vals)
            )
        )
        try:
            counts = as_diffs([acc_in[r] for r in rows])
        except DiffOverflowError as e:
            raise _count_beyond(source, e, rows[e.row or 0][0], t) from None
        ok, ovals, ocounts = self.logic(k, vals, counts, lambda c: source.decode(0, c))
        ovals, gathered_out = self._stored(ovals, groups, gathered_out)
        fresh_out: set[tuple[Any, ...]] = set()
        acc_out = accumulate(gathered_out, fresh_out)
        changes = dict.fromkeys(acc_out, 0)
        for row, c in zip(
            zip(ok.tolist(), *[v.tolist() for v in ovals], strict=True),
            ocounts.tolist(),
            strict=True,
        ):
            changes[row] = changes.get(row, 0) + c
        for row, c in acc_out.items():
            changes[row] -= c
        out = sorted(r for r, c in changes.items() if c)
        # the keys' output history (none yet while the output spine is empty); without any,
        # its columns are int64 placeholders, which would make bools ints (False as 0)
        stored = gathered_out[1] if len(gathered_out[3]) else ()
        dtypes = [
            np.result_type(a.dtype, stored[i].dtype) if i < len(stored) else a.dtype
            for i, a in enumerate(ovals)
        ]
        batch = Batch(
            np.array([r[0] for r in out], dtype=groups[0].dtype),  # codes, or the keys' numbers
            tuple(np.array([r[i + 1] for r in out], dtype=d) for i, d in enumerate(dtypes)),
            np.repeat(t[None, :], len(out), axis=0),
            as_diffs([changes[r] for r in out], "the change of an output count is"),
            output.upper,
            output.upper,
            np.zeros((0, output.depth + 1), np.int64),
        )
        fresh, fresh_t = _fresh_columns(fresh_in, [g.dtype for g in groups], len(tt))
        if fresh_out:
            k_out, v_out = gathered_out[0], gathered_out[1][: width - 1]
            dtypes = [k_out.dtype, *(v.dtype for v in v_out)]
            out_fresh, out_t = _fresh_columns(fresh_out, dtypes, len(tt))
            out_fresh = self._out_groups((out_fresh[0], out_fresh[1:]), groups)
            fresh = tuple(
                np.concatenate([a, b]).astype(g.dtype, copy=False)
                for g, a, b in zip(groups, fresh, out_fresh, strict=True)
            )
            fresh_t = np.concatenate([fresh_t, out_t])
        return batch, fresh, fresh_t

    def checkpoint(self) -> Any:
        return self.pending

    def build_failed(self) -> None:
        self.handle.close()  # the source may be another dataflow's (imported) trace
        self.own.close()


def reduce_arranged(arranged: Arranged, logic: Logic | Callable[..., Any], name: str) -> Arranged:
    """``arranged`` reduced per key by ``logic``; the result is an arrangement (by key)."""
    if not isinstance(logic, Logic):
        from naiad.differential.collection import check_function

        check_function(logic, 2, name, "f(key, values)")
        logic = GenericLogic(logic)
    if not logic.per_record:
        check_keyed(arranged.spine, name, "a reduce per key")
    vertex = reduce_vertex(arranged.spine, arranged.handle(), logic, name)
    node = arranged.scope.add_operator(name, vertex, [(arranged.stream, Pipeline())])
    return Arranged(arranged.stream.derive(node), vertex.output, reduced=True)


def reduce_vertex(source: Spine, handle: TraceHandle, logic: Logic, name: str) -> ReduceVertex:
    """The vertex reducing ``source`` (read through ``handle``) by ``logic``, with a new
    output spine named ``name``."""
    output = Spine(source.depth, source.lex, name, source.worker)
    output.by_record = source.by_record  # found on the workers of their input records
    return ReduceVertex(source, handle, output, TraceHandle(output), logic)
