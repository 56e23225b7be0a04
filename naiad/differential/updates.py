"""Columnar batches of differential updates: ``(data, time, diff)`` as numpy columns.

Contract. An :class:`Updates` holds ``n`` updates: ``data`` is a tuple of equally long 1-D
columns (one per field of the record; numeric dtypes, or ``object`` for arbitrary Python
values), ``times`` is an ``(n, depth + 1)`` int64 matrix (column 0 the epoch, then one loop
counter per enclosing loop, compared as ``Product`` times), and ``diffs`` an int64 column. The
batch means the multiset sum of its updates; order carries no meaning.

:meth:`Updates.consolidate` is the sort-merge of K-Pg §3 on columns: one sort by (data,
time) (:func:`sorted_groups`: the columns packed into one int64 where they fit), boundaries
where any column changes, ``np.add.reduceat`` of the diffs, and the zeros dropped. Cost:
O(n log n) in numpy for numeric columns; a few dozen rows are summed in Python instead, where
numpy's per-call cost would dominate. ``object`` columns are first dictionary-encoded to int64
codes (one Python dict lookup per value: the documented price of arbitrary Python values),
after which the sort is numeric too.
"""

from __future__ import annotations

import datetime
import numbers
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import chain, compress, repeat
from operator import itemgetter
from typing import Any, Protocol

import numpy as np

from naiad.actors.worker import at_safe_point, exclusive_safe_point, on_safe_points
from naiad.differential.diff_arithmetic import (
    DiffOverflowError,
    as_diffs,
    describe_row,
    group_sums,
    pieces,
    products,
    scaled_sizes,
    split_negation,
    split_sums,
)
from naiad.differential.lattice import advance_by, frontier_rows, time_of
from naiad.transport.codec import object_column, register_columnar


def _column(values: Sequence[Any]) -> np.ndarray:
    """A numeric column where numpy can make one, else an ``object`` column."""
    if values and values[0].__class__ in _NEVER_NUMERIC:
        # numpy would make a str, bytes or 2-d array of them (a pass over every value, and a
        # copy of every string), only for it to be refused below
        return object_column(values)
    try:
        array = np.asarray(values)
    except ValueError:  # ragged values (tuples of different shapes, mixed types)
        array = np.empty(0)
    if (
        array.ndim != 1
        or array.dtype.kind not in "biuf"
        or len(array) != len(values)
        or (array.dtype.kind == "f" and _inexact_ints(values))
    ):
        array = object_column(values)
    return no_uint64(array)


_NEVER_NUMERIC = frozenset({str, bytes, tuple})
"""Types of a first value with which a column cannot be numeric: with a str or bytes value
numpy makes a string array, with a tuple a 2-d one (or none)."""

EXACT_INTS = 2**53
"""float64 holds every integer up to this magnitude exactly, and rounds some beyond it."""


def rounds_as_float(ints: np.ndarray) -> bool:
    """Whether an integer column holds a value that float64 would round.

    >>> rounds_as_float(np.array([3, -(2**53)])), rounds_as_float(np.array([2**60 + 1]))
    (False, True)
    """
    return bool(len(ints)) and bool(ints.min() < -EXACT_INTS or ints.max() > EXACT_INTS)


def concat_column(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The parts of a column one after the other; integers and floats together become an
    ``object`` column when floats would round an integer (beyond 2**53), as :func:`_column`
    decides for Python values.

    >>> concat_column([np.array([2**60 + 1]), np.array([0.5])]).tolist()
    [1152921504606846977, 0.5]
    >>> concat_column([np.array([3]), np.array([0.5])]).dtype.name
    'float64'
    """
    floats = any(p.dtype.kind == "f" for p in parts)
    if floats and any(rounds_as_float(p) for p in parts if p.dtype.kind in "iu"):
        return object_column([x for p in parts for x in p.tolist()])
    return np.concatenate(parts)


def no_uint64(column: np.ndarray) -> np.ndarray:
    """A uint64 column as int64 if every value fits, else as Python ints (an ``object``
    column): numpy turns uint64 and int64 together into float64, which rounds both.

    >>> no_uint64(np.array([3], np.uint64)).dtype.name, no_uint64(np.array([2**63], np.uint64))
    ('int64', array([9223372036854775808], dtype=object))
    """
    if column.dtype.kind != "u" or column.dtype.itemsize != 8:
        return column
    if len(column) and int(column.max()) >= 2**63:
        return object_column(column.tolist())
    return column.astype(np.int64)


def record_column(column: np.ndarray) -> np.ndarray:
    """A column of record fields as a batch holds it: numeric and ``object`` columns as they
    are; dates and durations as an ``object`` column of ``np.datetime64`` / ``np.timedelta64``
    scalars of the column's unit, the values the user gave and the form in which such
    records inserted one by one are held (``astype(object)`` makes Python ints of
    nanoseconds and months, ``datetime`` of microseconds, ``date`` of days: other values,
    some unequal to the scalars, none able to cross processes); other columns (strings,
    bytes) as an ``object`` column of Python values.

    >>> record_column(np.array(["2020-01-02"], "datetime64[ns]")).tolist()
    [np.datetime64('2020-01-02T00:00:00.000000000')]
    >>> record_column(np.array([3], "timedelta64[M]")).tolist(), record_column(np.array(["a"]))
    ([np.timedelta64(3,'M')], array(['a'], dtype=object))
    """
    kind = column.dtype.kind
    if kind in "biufO":
        return column
    if kind in "mM":
        return object_column(list(column))  # iterating makes numpy scalars, in the column's unit
    return column.astype(object)


def _inexact_ints(values: Sequence[Any]) -> bool:
    """Whether a float column made of ``values`` would round some integer (beyond 2**53):
    a Python int or a numpy one (numpy makes float64 of a uint64 and an int, say).

    >>> _inexact_ints([np.uint64(2**64 - 1), 1]), _inexact_ints([np.int64(3), 0.5])
    (True, False)
    """
    return any(
        v.__class__ is not float
        and isinstance(v, int | np.integer)
        and not -EXACT_INTS <= int(v) <= EXACT_INTS
        for v in values
    )


def columns_of(values: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """Records as columns: tuples of one common length become one column per field, anything
    else one column.

    >>> [c.tolist() for c in columns_of([(1, "a"), (2, "b")])]
    [[1, 2], ['a', 'b']]
    >>> [c.tolist() for c in columns_of([3, 4])]
    [[3, 4]]
    >>> [c.dtype.kind for c in columns_of([(2**60 + 1, 0.5), (0.5, 2)])]  # no int rounded
    ['O', 'f']
    """
    if values and isinstance(values[0], tuple):
        width = len(values[0])
        # the checks and the split in C loops (map), not a Python step per record
        if (
            width > 1
            and all(map(isinstance, values, repeat(tuple)))
            and list(map(len, values)).count(width) == len(values)
        ):
            return tuple(_column(list(map(itemgetter(i), values))) for i in range(width))
    return (_column(values),)


def fields_of(record: Any) -> int:
    """How many fields a record has: a tuple's length when it is 2 or more (as
    :func:`columns_of` splits it), else 1 (a single value, a 1-tuple or ``()``).

    >>> fields_of((1, "a")), fields_of(5), fields_of((5,))
    (2, 1, 1)
    """
    return len(record) if isinstance(record, tuple) and len(record) > 1 else 1


def shaped_columns(values: Sequence[Any]) -> tuple[tuple[np.ndarray, ...], bool]:
    """:func:`columns_of`, and whether the records mix shapes (:func:`fields_of`): then they
    are one column of whole records, each tuple in it standing for its fields
    (``Updates.mixed``). Costs nothing more for tuples of one length or a numeric column;
    a pass in C over an ``object`` column of single values: a join when they are short
    strings (~7 ns a value), else their types (~30 ns a value).

    >>> columns, mixed = shaped_columns([(1, "a"), 5])
    >>> [c.tolist() for c in columns], mixed
    ([[(1, 'a'), 5]], True)
    >>> shaped_columns(["a", (1,)])[1], len(shaped_columns([(1, "a"), (2, "b")])[0])
    (False, 2)
    """
    columns = columns_of(values)
    if len(columns) > 1 or columns[0].dtype != object:
        return columns, False
    first = values[0]
    if isinstance(first, tuple) and len(first) > 1:
        return columns, True  # columns_of split no tuples of first's length: another shape
    if first.__class__ is str and len(first) <= 64:
        # short strings, the most common such column: joining them is one C loop that
        # refuses anything but a string (so any tuple), 3-4 times faster than their types;
        # for long strings the copy would cost more than the types
        try:
            "".join(values)
        except TypeError:
            pass
        else:
            return columns, False
    # the types in one C loop (~2.5 times faster than isinstance per value), then the few
    # distinct ones: tuple subclasses (named tuples) are split as tuples are
    if not any(issubclass(t, tuple) for t in set(map(type, values))):
        return columns, False
    return columns, any(isinstance(v, tuple) and len(v) > 1 for v in values)


def two_shapes(column: np.ndarray) -> tuple[Any, Any]:
    """Two records of different shapes in a column of records that mixes shapes (the
    first one, and the first with another number of fields), for error messages.

    >>> two_shapes(object_column([(1, "a"), (2, "b"), 5]))
    ((1, 'a'), 5)
    """
    values = column.tolist()
    width = fields_of(values[0])
    return values[0], next(v for v in values if fields_of(v) != width)


def records_of(columns: Sequence[np.ndarray]) -> list[Any]:
    """The inverse of :func:`columns_of`: one Python value per row."""
    fields = [c.tolist() for c in columns]
    if len(fields) == 1:
        return fields[0]
    return list(zip(*fields, strict=True))


def record_of(fields: tuple[Any, ...]) -> Any:
    """The record made of ``fields``: the value itself for one field, else the tuple (the
    inverse of splitting a record into its fields, :func:`fields_of`).

    >>> record_of((5,)), record_of((1, "a"))
    (5, (1, 'a'))
    """
    return fields[0] if len(fields) == 1 else fields


def handed(values: tuple[Any, ...]) -> Any:
    """A record's value fields (those after its key) as ``reduce`` hands them over: the
    one field, a tuple of several, ``()`` for none.

    >>> handed(()), handed(("a",)), handed(("a", "b"))
    ((), 'a', ('a', 'b'))
    """
    return values[0] if len(values) == 1 else values


def first_fields(records: Iterable[Any]) -> list[Any]:
    """Each record's key, its first field (a record of one field is its own key).

    >>> first_fields([(1, "a"), 5, (2, "b", "c"), (7,)])
    [1, 5, 2, (7,)]
    """
    return [r[0] if isinstance(r, tuple) and len(r) > 1 else r for r in records]


def field_tuples(fields: Sequence[list[Any]], rows: int) -> list[tuple[Any, ...]]:
    """One tuple per row of the ``fields`` (lists of values, one per field), ``()`` for
    each of ``rows`` rows when there are none: records' value fields as a packed column
    holds them (:func:`keyed_columns`).

    >>> field_tuples([[1, 2], ["a", "b"]], 2), field_tuples([], 2)
    ([(1, 'a'), (2, 'b')], [(), ()])
    """
    return list(zip(*fields, strict=True)) if fields else [()] * rows


def keyed_columns(u: Updates) -> tuple[np.ndarray, np.ndarray]:
    """The records of ``u`` (of any shapes, ``mixed`` or not) as a key column and a *packed*
    value column: an ``object`` column holding each record's fields after its key as one
    tuple (``()`` for a record that is a key only). How a keyed arrangement holds records
    whose widths differ.

    >>> m = Updates.of_values([(1, "a"), 5, (2, "b", "c")], np.zeros((3, 1), np.int64),
    ...                       np.ones(3, np.int64))
    >>> [c.tolist() for c in keyed_columns(m)]
    [[1, 5, 2], [('a',), (), ('b', 'c')]]
    """
    if u.mixed:
        records = u.data[0].tolist()
        values = [r[1:] if isinstance(r, tuple) and len(r) > 1 else () for r in records]
        return _column(first_fields(records)), object_column(values)
    return u.data[0], object_column(field_tuples([c.tolist() for c in u.data[1:]], len(u)))


def unpacked_records(columns: Sequence[np.ndarray]) -> list[Any]:
    """The records of decoded columns whose second is packed (see :func:`keyed_columns`):
    ``(key, *packed fields, *other columns)`` per row, one field alone as itself.

    >>> keys, packed = np.array([1, 5]), object_column([("a", "b"), ()])
    >>> unpacked_records([keys, packed]), unpacked_records([keys, packed, np.array([3, 4])])
    ([(1, 'a', 'b'), 5], [(1, 'a', 'b', 3), (5, 4)])
    """
    keys, packed, *rest = (c.tolist() for c in columns)
    return [record_of((k, *v, *r)) for k, v, *r in zip(keys, packed, *rest, strict=True)]


_PLAIN = frozenset((int, float))
_FORM = {bool: -1, int: 0, float: 1}  # decoded forms of equal numbers, preferred first


class CodeHolder(Protocol):
    """An object that keeps interned codes for later: an arrangement's batch, a cursor, a
    reduce's pending groups. It registers with :meth:`Interner.hold` and lists its code
    columns when the interner collects."""

    def interned_columns(self) -> Iterable[np.ndarray]:
        """The int64 columns of codes this object holds now."""
        ...


_FREED = object()  # the value of a code nobody holds, until a new value takes it

_DATE_TYPES = frozenset(
    {np.datetime64, np.timedelta64, datetime.date, datetime.datetime, datetime.timedelta}
)


class _DateKey:
    """How the interner's table keys a date or duration: equal to the keys of equal dates
    alone. ``np.timedelta64`` is an ``np.integer``: in months it equals the int of its count
    and hashes as it (so 5 months and 5 would share a code and decode as one), and an int
    beyond int64 whose hash it shares (``2**63 + 1`` beside 5 months) makes the comparison
    raise ``OverflowError``; years against days raise ``TypeError``."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _DateKey):
            return False
        try:
            return bool(self.value == other.value)
        except (TypeError, OverflowError):  # units with no common divisor (years, days)
            return False


_NESTING = (tuple, frozenset)  # containers whose equality is their items' (dates inside)


def _table_key(value: Any) -> Any:
    """``value`` as the interner's table keys it: :class:`_DateKey` for a date, a tuple or
    frozenset of the keys of its items for one (``(5 months, "a") == (5, "a")``, and they
    hash alike, since a tuple's hash is its items').

    >>> _table_key((np.timedelta64(5, "M"), "a")) == _table_key((5, "a"))
    False
    """
    if value.__class__ in _DATE_TYPES:
        return _DateKey(value)
    if isinstance(value, tuple):
        return tuple(map(_table_key, value))
    if isinstance(value, frozenset):
        return frozenset(map(_table_key, value))
    return value


def _holds_dates(values: list[Any], types: set[type]) -> bool:
    """Whether ``values`` (whose types are ``types``) hold a date or duration, at the top or
    inside tuples and frozensets at any depth. C loops only (the types of the items of the
    containers, a level at a time): nothing more for a column without containers.

    >>> _holds_dates([1, ("a", (2, np.datetime64("NaT")))], {int, tuple})
    True
    """
    while _DATE_TYPES.isdisjoint(types):
        nesting = {t for t in types if issubclass(t, _NESTING)}
        if not nesting:
            return False
        if nesting != types:  # containers beside other values: the containers alone
            values = list(compress(values, map(isinstance, values, repeat(_NESTING))))
        types = set(map(type, chain.from_iterable(values)))
        if not _DATE_TYPES.isdisjoint(types):
            return True
        if any(issubclass(t, _NESTING) for t in types):  # the items, to look a level down
            values = list(chain.from_iterable(values))
        else:
            return False
    return True


class Interner:
    """Dictionary encoding of Python values as int64 codes, shared by a whole process.

    Arrangements store ``object`` columns as codes, so that sorting, merging and joining are
    numeric; equal values get equal codes everywhere in the process, and decode to the form
    first seen, except that an int replaces an equal float (2 for 2.0), and a float an equal
    number of another type (0.5 for Fraction(1, 2)); dates and durations (numpy's and
    Python's) meet equal dates only, never numbers (``np.timedelta64(5, 'M') == 5``), inside
    tuples and frozensets too. The price: one dict
    lookup per value on the way in, one list index per value on the way out. Runtimes in
    several threads may encode at once: lookups take no lock, new values are interned under
    the interner's lock (so that a value two threads miss at once gets one code).

    Reclamation. A code means its value only while some *holder* keeps it: every object
    that stores codes beyond one operator callback registers with :meth:`hold` (the batches
    of arrangements, wherever they are: in a spine, in a mailbox, in an import's queue;
    cursors; a reduce's pending groups) and lists them on demand. :meth:`collect` marks the
    codes the live holders list and frees the others, whose values the table forgets and
    whose codes new values take again. Codes carry no order and no meaning of their own, so a
    freed code given to another value changes nothing for the holders, which never had it.
    Temporaries of a callback are no holders: a collection runs only at a safe point, between
    the activations of the workers (:func:`~naiad.actors.worker.on_safe_points`), once the
    table has grown to twice the values alive at the last collection (and by at least
    ``min_growth``), so its cost (a pass over the codes held) is amortized over the values
    interned since. The table then holds the values alive and at most as many more: under a
    churn of new strings (session ids, URLs) with a bounded live collection, it stays bounded.
    Limits: a holder keeps its codes until it is freed (one in a reference cycle, until
    Python's cyclic collector runs); a column of codes kept apart from its holder (taken out
    of a batch) is not protected; while a runtime runs in another thread nothing is collected
    (no moment is known safe there; one that starts there waits for a collection under way);
    code of another thread that encodes outside a runtime is not protected; and a freed value
    seen again decodes to the form it is seen in then.

    >>> codes = INTERNER.encode(np.array(["x", "y", "x"], dtype=object))
    >>> bool(codes[0] == codes[2]), INTERNER.decode(codes).tolist()
    (True, ['x', 'y', 'x'])
    """

    def __init__(self, min_growth: int = 1024) -> None:
        self.codes: dict[Any, int] = {}
        self.values: list[Any] = []
        self.min_growth = min_growth
        """Values interned since the last collection before the next one is due."""
        self.collections = 0
        """Collections so far (each :meth:`collect`)."""
        self._free: list[int] = []
        self._holders: list[weakref.ref[CodeHolder]] = []
        self._prune_at = 1024  # registrations before dead ones are dropped from the list
        self._collect_at = min_growth
        # runtimes in several threads encode at once: new values, the free list and the
        # holders change under it (a value two threads missed at once got two codes)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The number of values the table holds (each with its code)."""
        return len(self.codes)

    def hold(self, holder: CodeHolder) -> None:
        """Registers ``holder`` (weakly): while it lives, :meth:`collect` keeps the codes of
        its :meth:`~CodeHolder.interned_columns`. A weak reference per holder; dead ones are
        dropped once they outnumber the live ones."""
        with self._lock:  # a registration while another thread prunes would be lost
            holders = self._holders
            holders.append(weakref.ref(holder))
            if len(holders) >= self._prune_at:
                holders[:] = [r for r in holders if r() is not None]
                self._prune_at = max(2 * len(holders), 1024)

    def encode(self, column: np.ndarray) -> np.ndarray:
        """The codes of ``column``'s values (interned if new). Safe from several threads at
        once: the values already interned are looked up without a lock (one dict lookup each,
        atomic), the others interned under the interner's lock."""
        values = column.tolist()
        types = set(map(type, values))
        keys = list(map(_table_key, values)) if _holds_dates(values, types) else values
        try:
            found: list[Any] = list(map(self.codes.get, keys))
        except TypeError:
            raise unhashable(values) from None
        numbers = not _PLAIN.isdisjoint(types)
        if numbers or None in found:
            with self._lock:
                self._intern(values, keys, found, numbers)
        return np.array(found, dtype=np.int64)

    def code_of(self, value: Any) -> int | None:
        """The code of ``value`` if it is interned, else None (``TypeError`` if it is not
        hashable).

        >>> interner = Interner()
        >>> codes = interner.encode(np.array([np.timedelta64(5, "M")], dtype=object))
        >>> interner.code_of(np.timedelta64(5, "M")) == int(codes[0]), interner.code_of(5)
        (True, None)
        """
        return self.codes.get(_table_key(value))

    def _intern(self, values: list[Any], keys: list[Any], found: list[Any], numbers: bool) -> None:
        """Fills the codes ``found`` misses (None) by interning their values (under their
        ``keys``), and gives ``numbers`` their preferred form; under the lock, so that a
        value missed by two threads at once gets one code."""
        codes, table, free = self.codes, self.values, self._free
        setdefault = codes.setdefault
        for i, c in enumerate(found):
            if c is None:
                # the table first: a thread that finds the code (without the lock) may decode
                # it at once
                v = values[i]
                reused = bool(free)
                if reused:
                    c = free.pop()
                    table[c] = v
                else:
                    c = len(table)
                    table.append(v)
                known = setdefault(keys[i], c)
                if known != c:  # interned meanwhile (another thread, or earlier in the batch)
                    if reused:
                        table[c] = _FREED
                        free.append(c)
                    else:
                        table.pop()
                    c = known
                found[i] = c
        if numbers:
            for v, c in zip(values, found, strict=True):
                if v.__class__ in _PLAIN and _FORM[v.__class__] < _FORM.get(table[c].__class__, 2):
                    # equal values share a code and decode to one form: an int before a
                    # float (5.0 standing for 5 would round a sum with an int beyond 2**53),
                    # a float before another number (Fraction(1, 2) seen in one dataflow is
                    # not the 0.5 of another); a bool stays itself
                    table[c] = v

    def decode(self, codes: np.ndarray) -> np.ndarray:
        values = self.values
        return object_column([values[c] for c in codes.tolist()])

    def collect_soon(self) -> None:
        """Makes a collection due at the next safe point, whatever the table's growth (from
        anywhere, an operator's callback included): how tests collect at chosen moments."""
        self._collect_at = 0

    def collect(self) -> int:
        """Frees the codes no registered holder keeps; returns how many. Only at a safe
        point: never from inside an operator's callback, whose local arrays may hold codes
        (it raises ``RuntimeError`` there, or while a runtime runs in another thread); from
        a coroutine of the runtime's event loop, or with no runtime running, it is safe.

        >>> class Holder:
        ...     def interned_columns(self):
        ...         return [self.codes]
        >>> interner = Interner()
        >>> kept = Holder()
        >>> kept.codes = interner.encode(np.array(["kept", "dropped"], dtype=object))[:1]
        >>> interner.hold(kept)
        >>> interner.collect(), len(interner), interner.decode(kept.codes).tolist()
        (1, 1, ['kept'])
        """
        # no runtime may start in another thread while it runs: its new batches and codes
        # would escape the marking
        with exclusive_safe_point() as safe:
            if not safe:
                raise RuntimeError(
                    "Interner.collect: not at a safe point (an operator callback is under "
                    "way, or a runtime runs in another thread): arrays of codes it holds are "
                    "not registered holders, so their values could be freed"
                )
            with self._lock:
                return self._collect()

    def _collect(self) -> int:
        values, n = self.values, len(self.values)
        live = np.zeros(n, dtype=bool)
        holders = []
        for ref in self._holders:
            holder = ref()
            if holder is not None:
                holders.append(ref)
                for col in holder.interned_columns():
                    if len(col):
                        # a holder may list a column that might hold codes (unknown yet):
                        # whatever lies outside the table is no code
                        col = col[(col >= 0) & (col < n)]
                        live[col] = True
        self._holders = holders
        self._prune_at = max(2 * len(holders), 1024)
        # only codes in use (the table's) can be freed now: a pass over every code, those
        # freed earlier included, cost the table's peak size in Python at every collection
        # (after a peak of a million values, 240 ms per 1,000 new values interned)
        codes = self.codes
        keys = list(codes)
        in_use = np.fromiter(codes.values(), np.int64, len(keys))
        dead = np.flatnonzero(~live[in_use])
        free = in_use[dead].tolist()
        for i in dead.tolist():
            del codes[keys[i]]
        if 4 * len(codes) < len(keys):
            # a dict keeps the slots of deleted entries, and iterating it visits them: a copy
            # of the survivors, so that the next collection costs them, not this one's size
            self.codes = codes = dict(codes)
        for c in free:
            values[c] = _FREED
        self._free += free
        self.collections += 1
        self._collect_at = max(2 * len(codes), len(codes) + self.min_growth)
        return len(free)

    def collect_if_due(self) -> None:
        """:meth:`collect` when it is due and this is a safe point (the workers' hook)."""
        if len(self.codes) >= self._collect_at and at_safe_point():
            self.collect()


INTERNER = Interner()
on_safe_points(INTERNER.collect_if_due)


def sorted_groups(
    columns: Sequence[np.ndarray], runs: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts rows by ``columns`` (lexicographically), and for each sorted row
    whether it starts a new group of equal rows.

    Integer columns are packed into one int64 by their value ranges, with the row index in
    the low bits when it fits: one ``np.sort`` of int64 (a vectorized sort, ~30x faster than
    ``np.lexsort`` over four columns here). Otherwise one ``argsort`` of the packed key, or
    ``lexsort`` when the ranges are too wide to pack. ``runs`` says the rows are a
    concatenation of a few sorted runs (batches being merged): a stable sort (timsort) then
    merges them in linear time.

    >>> order, starts = sorted_groups([np.array([2, 1, 2]), np.array([0, 5, 0])])
    >>> order.tolist(), starts.tolist()
    ([1, 0, 2], [True, True, False])
    """
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    packable = all(c.dtype.kind in "iub" for c in columns)
    if packable:
        cols = list(columns)
        spans = []
        for c in cols:
            lo, hi = int(c.min()), int(c.max())
            spans.append((lo, (hi - lo).bit_length()))
        bits = sum(w for _, w in spans)
        if bits > 62:
            # Too wide to pack (say times a priority apart, 2**32): replace the widest columns
            # by their dense ranks (same order, width log2 of the distinct values) while
            # that helps; one column sort each, still far cheaper than a lexsort.
            for i in sorted(range(len(cols)), key=lambda i: -spans[i][1]):
                distinct, ranks = np.unique(cols[i], return_inverse=True)
                width = (len(distinct) - 1).bit_length()
                if width >= spans[i][1]:
                    continue
                cols[i], spans[i] = ranks.reshape(-1), (0, width)
                bits = sum(w for _, w in spans)
                if bits <= 62:
                    break
        if bits <= 62:
            key = np.zeros(n, dtype=np.int64)
            for c, (lo, width) in zip(cols, spans, strict=True):
                if width:
                    key <<= width
                    key |= np.subtract(c, lo, dtype=np.int64)
            index_bits = max(1, (n - 1).bit_length())
            if bits + index_bits <= 62:
                key <<= index_bits
                key |= np.arange(n, dtype=np.int64)
                mixed = np.sort(key, kind="stable" if runs else None)
                order = mixed & ((1 << index_bits) - 1)
                sorted_key = mixed >> index_bits
            else:
                order = np.argsort(key, kind="stable")
                sorted_key = key[order]
            change = np.empty(n, dtype=bool)
            change[0] = True
            np.not_equal(sorted_key[1:], sorted_key[:-1], out=change[1:])
            return order, change
    order = np.lexsort(list(columns)[::-1])  # lexsort sorts by its last key first
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in columns:
        sc = c[order]
        change[1:] |= sc[1:] != sc[:-1]
    return order, change


NAN_MESSAGE = (
    "NaN is not equal to itself, nor is a date's NaT, so the changes of a record holding "
    "one could never cancel or meet: use None or a sentinel value"
)


def reject_nan(columns: Sequence[np.ndarray], first: int = 0) -> None:
    """Raises ``ValueError`` if a float column holds NaN (see :data:`NAN_MESSAGE`).

    >>> reject_nan([np.array([1.5, np.nan])])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: a record field is NaN (row 1 of column 0): NaN is not equal to itself, ...
    """
    for i, c in enumerate(columns, first):
        if c.dtype.kind in "fc":
            nan = np.isnan(c)
            if nan.any():
                row = int(np.argmax(nan))
                raise ValueError(f"a record field is NaN (row {row} of column {i}): {NAN_MESSAGE}")


_SELF_UNEQUAL = (float, np.floating, np.datetime64, np.timedelta64)
"""Types with a value not equal to itself: NaN, and the dates' and durations' NaT."""


def has_nan(record: Any) -> bool:
    """Whether a record is NaN (or a date's NaT) or a tuple with such a field: the values
    not equal to themselves.

    >>> has_nan((1, np.datetime64("NaT"))), has_nan(np.datetime64("2020-01-01"))
    (True, False)
    """
    if type(record) is tuple:
        return any(isinstance(f, _SELF_UNEQUAL) and f != f for f in record)
    return isinstance(record, _SELF_UNEQUAL) and bool(record != record)


# field types that are values, never iterators: a tuple of them needs no look (in C)
_PLAIN_FIELDS: frozenset[type] = frozenset({int, str, float, bool, bytes, type(None)})


def iterator_in(value: Any) -> tuple[Any, str] | None:
    """The first iterator that ``value`` is or that its tuple holds (at any depth: a tuple
    hashes and compares through its fields), with where it is (``""`` for ``value`` itself,
    ``"[1][0]"`` for field 0 of field 1), or ``None``. Types are read with ``type()``, so a
    tuple of plain fields costs one test in C.

    >>> iterator_in((1, "a")), iterator_in((1, ("b", iter([2]))))  # doctest: +ELLIPSIS
    (None, (<list_iterator object at ...>, '[1][1]'))
    """
    if issubclass(type(value), tuple):  # a tuple is not an iterator; its fields may be
        if _PLAIN_FIELDS.issuperset(map(type, value)):
            return None
        for i, field in enumerate(value):
            kind = type(field)
            if kind in _PLAIN_FIELDS or (
                kind is tuple and _PLAIN_FIELDS.issuperset(map(type, field))
            ):
                continue  # a tuple of plain fields without a call (tuples in records are common)
            found = iterator_in(field)
            if found is not None:
                return found[0], f"[{i}]{found[1]}"
        return None
    return (value, "") if isinstance(value, Iterator) else None


def check_not_iterator(
    value: Any, what: Callable[[], str], hint: str = "", noun: str = "record"
) -> None:
    """Refuses ``value``, a record (a ``noun``) made by a user's function (``what()`` says
    which call: ``"map 'm': f(5) returned"``; called only to refuse, as a record's repr may
    be costly) or given to an input, if it is an iterator (a generator, a ``map`` or ``zip``
    object) or a tuple holding one: it equals only itself, so the same record made again at
    its retraction is another one, which never cancels it (the collection would hold it,
    and its negation, for ever). Functions are checked on the first record of each batch:
    one test per batch, none per record (a function returns an iterator for every record,
    or for none, unless its result depends on the record's type).

    >>> check_not_iterator(iter([1]), lambda: "map 'map': f(5) returned")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: map 'map': f(5) returned a list_iterator, not a record: an iterator equals ...
    >>> check_not_iterator((5, iter([1])), lambda: "map 'map': f(5) returned")
    Traceback (most recent call last):
    ...
    TypeError: map 'map': f(5) returned a tuple whose field [1] is a list_iterator, not a value: an iterator equals only itself, so the record's retraction would never cancel it; make that field a tuple (tuple(...))
    """  # noqa: E501
    found = iterator_in(value)
    if found is None:
        return
    kind, at = type(found[0]).__name__, found[1]
    if not at:
        raise TypeError(
            f"{what()} a {kind}, not a {noun}: an iterator equals only itself, so its "
            f"retraction would never cancel it; a record of several fields is a tuple "
            f"(tuple(...)){hint}"
        )
    raise TypeError(
        f"{what()} a tuple whose field {at} is a {kind}, not a value: an iterator equals only "
        "itself, so the record's retraction would never cancel it; make that field a tuple "
        "(tuple(...))"
    )


def reject_nan_values(columns: Sequence[np.ndarray], first: int = 0) -> None:
    """:func:`reject_nan`, and the same for the values of ``object`` columns (one check per
    value): for columns computed inside a dataflow, such as a reduction's output (``first``:
    the number of the first column, in messages).

    >>> reject_nan_values([np.array([1, (2, float("nan"))], dtype=object)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: a record field is NaN (row 1 of column 0): NaN is not equal to itself, ...
    """
    reject_nan(columns, first)
    for i, c in enumerate(columns, first):
        if c.dtype == object:
            for row, value in enumerate(c.tolist()):
                if has_nan(value):
                    raise ValueError(
                        f"a record field is NaN (row {row} of column {i}): {NAN_MESSAGE}"
                    )


def consolidation(
    columns: Sequence[np.ndarray],
    times: np.ndarray,
    diffs: np.ndarray,
    runs: bool = False,
    split: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """For numeric columns: the index of one row per distinct non-cancelling (columns, time),
    in sorted order, and the summed diffs: one sort and one ``add.reduceat``. A sum beyond
    int64 raises ``DiffOverflowError``; with ``split``, for a merge whose sums are partial
    (see :mod:`~naiad.differential.diff_arithmetic`), it is several rows instead (its row's
    index repeated, with its :func:`~naiad.differential.diff_arithmetic.pieces`)."""
    n = len(diffs)
    if n == 0:
        return np.zeros(0, dtype=np.int64), diffs
    if n <= SMALL and all(c.dtype.kind in "iub" for c in columns):
        return _small_consolidation(columns, times, diffs, split)
    reject_nan(columns)
    order, change = sorted_groups([*columns, *times.T], runs)
    starts = np.flatnonzero(change)
    first = diffs[0]
    try:
        if first and (diffs == first).all():
            # one diff for every row (a load of insertions): the sums are the group sizes,
            # with no gather of the diffs in sorted order, and none cancels
            sizes = np.diff(starts, append=n)
            if first == 1:
                return order[starts], sizes
            try:
                return order[starts], scaled_sizes(sizes, first)
            except DiffOverflowError as e:  # (its row: the group's first, as group_sums's)
                raise DiffOverflowError(e.what, e.value, int(starts[e.row or 0])) from None
        sums = group_sums(diffs[order], starts)
    except DiffOverflowError as e:
        if not split:
            raise _sum_beyond(times, int(order[e.row or 0]), e) from None
        groups, sums = split_sums(diffs[order], starts)
        return order[starts[groups]], sums
    keep = sums != 0
    return order[starts[keep]], sums[keep]


def _sum_beyond(times: np.ndarray, row: int, error: DiffOverflowError) -> DiffOverflowError:
    """The error of a consolidation whose group of row ``row`` sums beyond int64 (the record
    is named by a caller that knows its values: :meth:`Updates.consolidate`)."""
    _, time = describe_row([], times, row)
    return DiffOverflowError(error.what, error.value, row, f"a record at time {time}")


def consolidated(
    columns: Sequence[np.ndarray],
    times: np.ndarray,
    diffs: np.ndarray,
    runs: bool = False,
    split: bool = False,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """:func:`consolidation`'s rows taken: the columns, times and summed diffs.

    >>> cols, times, diffs = consolidated([np.array([2, 1, 2])], np.zeros((3, 1), np.int64),
    ...                                   np.array([1, 1, 1]))
    >>> cols[0].tolist(), times.tolist(), diffs.tolist()
    ([1, 2], [[0], [0]], [1, 2])
    """
    picked, sums = consolidation(columns, times, diffs, runs, split)
    return [c[picked] for c in columns], take_rows(times, picked), sums


SMALL = 64
"""Up to this many rows, consolidation runs in Python: a numpy call costs microseconds
whatever its size, and a sort of a few dozen rows needs dozens of calls (the round trips of
an iterative computation are made of such small batches)."""


def _small_consolidation(
    columns: Sequence[np.ndarray], times: np.ndarray, diffs: np.ndarray, split: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`consolidation` of a few rows with a dictionary and a sort of tuples; the same
    result (the first row of each group, groups in sorted order)."""
    acc: dict[tuple[Any, ...], list[int]] = {}
    rows = zip(*[c.tolist() for c in columns], *times.T.tolist(), strict=True)
    for i, (row, d) in enumerate(zip(rows, diffs.tolist(), strict=True)):
        entry = acc.get(row)
        if entry is None:
            acc[row] = [i, d]
        else:
            entry[1] += d
    picked, sums = [], []
    for row in sorted(acc):
        i, d = acc[row]
        if d:
            picked.append(i)
            sums.append(d)
    try:
        return np.array(picked, dtype=np.int64), as_diffs(sums)
    except DiffOverflowError as e:
        if not split:
            raise _sum_beyond(times, picked[e.row or 0], e) from None
    parts = [pieces(d) for d in sums]
    split_rows = [i for i, p in zip(picked, parts, strict=True) for _ in p]
    return np.array(split_rows, np.int64), np.array([d for p in parts for d in p], np.int64)


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (a sort and a comparison: faster than ``np.unique``).

    >>> unique_sorted(np.array([3, 1, 3])).tolist()
    [1, 3]
    """
    if len(values) < 2:
        return values.copy()
    s = np.sort(values)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def take_rows(matrix: np.ndarray, index: np.ndarray | slice) -> np.ndarray:
    """The rows ``index`` (indices, a boolean mask, or a slice) of a 2-D array such as a time
    matrix: ``take`` / ``compress`` along axis 0, which copy whole rows, where fancy indexing
    of a 2-D array goes element by element (4-14x slower here with numpy 2.4: 10,000 rows of
    2 columns by indices 151 -> 11 us, by a mask 150 -> 14 us).

    >>> m = np.array([[0, 1], [2, 3], [4, 5]])
    >>> take_rows(m, np.array([2, 0])).tolist()
    [[4, 5], [0, 1]]
    >>> take_rows(m, np.array([True, False, True])).tolist()
    [[0, 1], [4, 5]]
    """
    if isinstance(index, slice):
        return matrix[index]
    index = np.asarray(index)
    if index.dtype == bool:
        return matrix.compress(index, axis=0)
    return matrix.take(index, axis=0)


def updates_from_rows(
    records: list[Any],
    rows: list[int] | np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    multipliers: list[int] | None = None,
) -> Updates:
    """``records[i]`` at the time and diff of row ``rows[i]`` of ``times`` and ``diffs`` (the
    diff times ``multipliers[i]`` if given): how ``flat_map``, ``explode`` and ``join_core``
    turn what a user function made per input row back into a batch.

    >>> u = updates_from_rows(["a", "b"], [1, 1], np.array([[0], [5]]), np.array([1, 3]), [1, -2])
    >>> u.to_records()
    [('a', 5, 3), ('b', 5, -6)]
    """
    if not records:
        return Updates((np.zeros(0, dtype=np.int64),), times[:0], diffs[:0])
    index = np.array(rows, dtype=np.int64)
    out_diffs = diffs[index]
    out_times = take_rows(times, index)
    if multipliers is not None:
        try:
            out_diffs = products(
                out_diffs, np.array(multipliers, dtype=np.int64), "the diff x multiplier"
            )
        except DiffOverflowError as e:
            row = e.row or 0
            raise e.located(records[row], describe_row([], out_times, row)[1]) from None
    return Updates.of_values(records, out_times, out_diffs)


def group_starts(keys: np.ndarray) -> np.ndarray:
    """Where each run of equal values of a sorted column starts.

    >>> group_starts(np.array([1, 1, 3, 5, 5])).tolist()
    [0, 2, 3]
    """
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def unhashable(values: list[Any]) -> TypeError:
    """The error for a column of record fields ``values`` of which one could not be hashed
    (found again only now, on the failure path), naming the value and its row: a record
    made unhashable by a function upstream (a map returning a list, say) is found only
    where records are hashed, downstream of it.

    >>> unhashable([1, [2]])
    TypeError("record field [2] (row 1 of its batch) is not hashable (unhashable type: 'list'): records must be hashable (a tuple, not a list; a frozenset, not a set)")
    """  # noqa: E501
    for row, value in enumerate(values):
        try:
            hash(value)
        except TypeError as e:
            return TypeError(
                f"record field {value!r} (row {row} of its batch) is not hashable ({e}): "
                "records must be hashable (a tuple, not a list; a frozenset, not a set)"
            )
    return TypeError("records in a collection must be hashable")


def _codes(column: np.ndarray) -> np.ndarray:
    """An int64 column ordered like ``column`` for sorting purposes (equal values, equal
    codes, numbered densely in order of first occurrence); numeric columns are used as they
    are.

    >>> _codes(np.array(["b", "a", "b", "c"], dtype=object)).tolist()
    [0, 1, 0, 2]
    """
    if column.dtype != object:
        return column
    # each value's row of first occurrence (in C: map over setdefault), then numbered densely
    # in that order: the codes' range is the number of distinct values, not of rows, so that
    # packing sort keys (sorted_groups) keeps fitting in an int64
    table: dict[Any, int] = {}
    n = len(column)
    values = column.tolist()
    try:
        first = np.fromiter(map(table.setdefault, values, range(n)), np.int64, n)
    except TypeError:
        raise unhashable(values) from None
    return (np.cumsum(first == np.arange(n)) - 1)[first]


def time_groups(times: np.ndarray, lex: Sequence[bool] = ()) -> list[tuple[Any, Any]]:
    """The rows of a time matrix grouped by time: ``(timestamp, row indices)`` per distinct
    time in lexicographic order, or ``[(timestamp, None)]`` when every row has one time.

    >>> [(t, None if rows is None else rows.tolist())
    ...  for t, rows in time_groups(np.array([[2], [1], [2]]))]
    [(1, [1]), (2, [0, 2])]
    """
    if not len(times):
        return []
    if len(times) <= SMALL:  # a dict of row tuples: ~8 us instead of ~50 for a few rows
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, row in enumerate(times.tolist()):
            groups.setdefault(tuple(row), []).append(i)
        if len(groups) == 1:
            return [(time_of(next(iter(groups)), lex), None)]
        return [
            (time_of(row, lex), np.array(rows, dtype=np.int64))
            for row, rows in sorted(groups.items())
        ]
    if (times == times[0]).all():
        return [(time_of(times[0], lex), None)]
    order, change = sorted_groups(list(times.T))
    starts = np.flatnonzero(change).tolist()
    ends = [*starts[1:], len(order)]
    return [(time_of(times[order[a]], lex), order[a:b]) for a, b in zip(starts, ends, strict=True)]


def times_of(times: np.ndarray, lex: Sequence[bool] = ()) -> list[Any]:
    """The timestamp of every row of a time matrix: ints at depth 0, and each distinct row
    made a timestamp once (a batch holds few distinct times).

    >>> times_of(np.array([[4], [2]])), times_of(np.array([[1, 2], [1, 2]]), lex=(True,))
    ([4, 2], [Lex(outer=1, inner=2), Lex(outer=1, inner=2)])
    """
    if times.shape[1] == 1:
        return times[:, 0].tolist()
    rows = list(map(tuple, times.tolist()))
    stamps = {row: time_of(row, lex) for row in set(rows)}
    return list(map(stamps.__getitem__, rows))


def time_matrix(times: Iterable[Any], depth: int) -> np.ndarray:
    """Times (ints, or ``Product`` nested ``depth`` deep) as an ``(n, depth + 1)`` matrix.

    >>> time_matrix([3, 4], 0).tolist()
    [[3], [4]]
    >>> from naiad.progress.timestamp import Product
    >>> time_matrix([Product(1, 2)], 1).tolist()
    [[1, 2]]
    """
    return frontier_rows(times, depth)


class Updates:
    """A columnar batch of ``(data, time, diff)`` updates.

    Records of mixed shapes. A batch whose records mix shapes (pairs beside single values,
    pairs beside triples: :func:`fields_of`) is one ``object`` column of whole records with
    ``mixed`` set: each tuple in it stands for its fields, as it would in a batch of tuples
    of its length alone. Without ``mixed``, one column of tuples means one field per record,
    the tuple (a :meth:`Collection.packed` collection: composite keys). So a record means
    the same whatever shared its batch: where a mixed batch loses its mixing (:meth:`take`,
    :meth:`consolidate`, :meth:`concat`), its records become columns again, one per field,
    and keyed operators refuse a batch that is still mixed (its records have no key column).

    >>> u = Updates.from_records([("a", 0, 1), ("b", 0, 1), ("a", 0, -1), ("a", 1, 2)])
    >>> u.consolidate().to_records()
    [('a', 1, 2), ('b', 0, 1)]
    >>> m = Updates.of_values([(1, "a"), 5], np.zeros((2, 1), np.int64), np.ones(2, np.int64))
    >>> m.mixed, [c.tolist() for c in m.take(np.array([0])).data]  # a pair: two fields again
    (True, [[1], ['a']])
    """

    __slots__ = ("data", "diffs", "mixed", "times")

    def __init__(
        self,
        data: tuple[np.ndarray, ...],
        times: np.ndarray,
        diffs: np.ndarray,
        mixed: bool = False,
    ) -> None:
        n = len(diffs)
        if times.ndim != 2 or len(times) != n or any(len(c) != n for c in data):
            raise ValueError(
                f"columns of an update batch must have equal lengths (diffs {n}, times "
                f"{times.shape}, data {[len(c) for c in data]})"
            )
        for c in data:
            if c.dtype.kind == "u" and c.dtype.itemsize == 8:
                data = tuple(map(no_uint64, data))
                break
        self.data = data
        self.times = times
        self.diffs = diffs
        self.mixed = mixed
        """The records mix shapes: ``data`` is one column of whole records (see above)."""

    @classmethod
    def of_values(cls, values: Sequence[Any], times: np.ndarray, diffs: np.ndarray) -> Updates:
        """Python records (one per row of ``times`` and ``diffs``) as columns: one per field
        when they share a shape, else one column of whole records, ``mixed``
        (:func:`shaped_columns`)."""
        columns, mixed = shaped_columns(values)
        return cls(columns, times, diffs, mixed)

    def retimed(self, times: np.ndarray) -> Updates:
        """The same records and diffs at the rows of ``times``."""
        return Updates(self.data, times, self.diffs, self.mixed)

    @classmethod
    def from_records(
        cls, records: Iterable[tuple[Any, Any, int]], fields: int = 1, depth: int = 0
    ) -> Updates:
        """From ``(data, time, diff)`` triples; ``data`` is a tuple when ``fields > 1``."""
        rows = list(records)
        if fields == 1:
            columns: tuple[np.ndarray, ...] = (_column([d for d, _, _ in rows]),)
        else:
            columns = tuple(_column([d[i] for d, _, _ in rows]) for i in range(fields))
        times = time_matrix((t for _, t, _ in rows), depth)
        diffs = np.array([r for _, _, r in rows], dtype=np.int64)
        return cls(columns, times, diffs)

    def __len__(self) -> int:
        return len(self.diffs)

    @property
    def depth(self) -> int:
        return int(self.times.shape[1]) - 1

    def take(self, index: np.ndarray) -> Updates:
        """The updates at ``index`` (an index array or a boolean mask)."""
        times = take_rows(self.times, index)
        if self.mixed:  # what is left may have one shape: as columns again
            return Updates.of_values(self.data[0][index].tolist(), times, self.diffs[index])
        return Updates(tuple(c[index] for c in self.data), times, self.diffs[index])

    def by_time(self, lex: Sequence[bool] = ()) -> list[tuple[Any, Updates]]:
        """The updates split by their time: ``(timestamp, updates)`` per distinct time, in
        lexicographic order of the time rows (one packed sort, not ``np.unique`` of rows).

        >>> u = Updates((np.array([1, 2, 3]),), np.array([[2], [1], [2]]), np.ones(3, np.int64))
        >>> [(t, p.data[0].tolist()) for t, p in u.by_time()]
        [(1, [2]), (2, [1, 3])]
        """
        return [
            (t, self if rows is None else self.take(rows))
            for t, rows in time_groups(self.times, lex)
        ]

    def by_width(self) -> list[tuple[int, Updates]]:
        """The updates split by their records' number of fields (:func:`fields_of`):
        ``(width, updates)`` per width, each part columns again (one per field). A batch
        that does not mix shapes is one part, itself, at the cost of a length.

        >>> m = Updates.of_values([(1, "a"), 5, (2, "b", 3)], np.zeros((3, 1), np.int64),
        ...                       np.ones(3, np.int64))
        >>> [(w, p.to_records()) for w, p in m.by_width()]
        [(1, [(5, 0, 1)]), (2, [((1, 'a'), 0, 1)]), (3, [((2, 'b', 3), 0, 1)])]
        """
        if not self.mixed:
            return [(len(self.data), self)]
        widths = np.fromiter(map(fields_of, self.data[0].tolist()), np.int64, len(self))
        return [(int(w), self.take(widths == w)) for w in unique_sorted(widths).tolist()]

    def __getitem__(self, index: np.ndarray) -> Updates:
        return self.take(index)  # so exchange can route a batch with an index array

    def __iter__(self) -> Any:
        raise TypeError("an Updates batch is columnar; use to_records() for its updates")

    def concat(self, *others: Updates) -> Updates:
        """The updates of this batch and ``others`` in one. Batches of different widths,
        or a ``mixed`` one, make one column of whole records: ``mixed`` if their shapes
        differ, else columns again (a batch of one column without ``mixed`` beside batches
        of pairs: its tuples are read as their fields, as the others' are)."""
        batches = [self, *others]
        times = np.concatenate([b.times for b in batches])
        diffs = np.concatenate([b.diffs for b in batches])
        if len({len(b.data) for b in batches}) > 1 or any(b.mixed for b in batches):
            return Updates.of_values([r for b in batches for r in records_of(b.data)], times, diffs)
        data = tuple(concat_column(cols) for cols in zip(*(b.data for b in batches), strict=True))
        return Updates(data, times, diffs)

    def as_one_column(self) -> Updates:
        """The records as one column of Python values, each one field (tuples stay whole,
        one value each: not ``mixed``)."""
        if len(self.data) == 1:
            return Updates(self.data, self.times, self.diffs) if self.mixed else self
        return Updates((object_column(records_of(self.data)),), self.times, self.diffs)

    def negate(self) -> Updates:
        """The updates with their diffs negated. A diff of ``-2**63`` (whose negation int64
        cannot hold) becomes two rows, ``2**63 - 1`` and ``1``: nothing is refused until a
        result is (a consolidation summing them beyond int64), so negating and
        concatenating to cancel works for every diff.

        >>> Updates.from_records([("a", 0, -(2**63)), ("b", 0, 5)]).negate().to_records()
        [('a', 0, 9223372036854775807), ('a', 0, 1), ('b', 0, -5)]
        """
        minus, extra = split_negation(self.diffs)
        if not len(extra):
            return Updates(self.data, self.times, minus, self.mixed)
        rows = np.sort(np.concatenate([np.arange(len(self)), extra]))  # each extra after its row
        out = self.take(rows)
        diffs = minus[rows]
        diffs[np.flatnonzero(rows[1:] == rows[:-1]) + 1] = 1
        return Updates(out.data, out.times, diffs, out.mixed)

    def consolidate(self, split: bool = False) -> Updates:
        """Sums the diffs of equal ``(data, time)`` and drops zeros; sorted by data, time.
        A sum beyond int64 raises ``DiffOverflowError`` (an ``OverflowError``) naming the
        record and time, never wraps; with ``split`` (a merge whose sums are partial, not
        results) it is held as several rows of its sign instead.

        >>> Updates.from_records([("a", 0, 2**62), ("a", 0, 2**62)]).consolidate()
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        naiad...DiffOverflowError: the diffs sum to ... (record 'a' at time 0), ...
        """
        n = len(self)
        if n == 0:
            return self
        try:
            picked, sums = consolidation(
                [_codes(c) for c in self.data], self.times, self.diffs, split=split
            )
        except DiffOverflowError as e:
            raise e.located(*describe_row(self.data, self.times, e.row or 0)) from None
        if self.mixed:  # the records left may have one shape
            return Updates.of_values(
                self.data[0][picked].tolist(), take_rows(self.times, picked), sums
            )
        return Updates(tuple(c[picked] for c in self.data), take_rows(self.times, picked), sums)

    def to_records(self, lex: Sequence[bool] = ()) -> list[tuple[Any, Any, int]]:
        """The updates as ``(data, time, diff)`` triples (Python values).

        >>> Updates((np.array([1, 2]),), np.array([[0, 1], [0, 1]]), np.array([1, -1])).to_records()
        [(1, Product(outer=0, inner=1), 1), (2, Product(outer=0, inner=1), -1)]
        """
        data, times = records_of(self.data), times_of(self.times, lex)
        return list(zip(data, times, self.diffs.tolist(), strict=True))

    def __repr__(self) -> str:
        return f"Updates({len(self)} updates, {len(self.data)} fields, depth {self.depth})"


def merge_updates(
    parts: Sequence[Updates],
    since: np.ndarray | None = None,
    lex: Sequence[bool] = (),
    split: bool = False,
) -> Updates:
    """The updates of ``parts`` (at least one) as one consolidated batch; with ``since`` (a
    frontier's time rows), their times first advanced to it (:func:`lattice.advance_by`), so
    that changes of a record that are alike at every time in advance of ``since`` cancel.
    ``split``: a sum beyond int64 is a partial one (a view's runs), held as several rows
    (see :meth:`Updates.consolidate`), not refused.

    >>> a = Updates.from_records([("x", 0, 1), ("y", 1, 1)])
    >>> b = Updates.from_records([("x", 2, -1)])
    >>> merge_updates([a, b]).to_records()
    [('x', 0, 1), ('x', 2, -1), ('y', 1, 1)]
    >>> merge_updates([a, b], since=np.array([[2]])).to_records()
    [('y', 2, 1)]
    """
    u = parts[0].concat(*parts[1:]) if len(parts) > 1 else parts[0]
    if since is not None and len(u):
        u = u.retimed(advance_by(u.times, since, lex))
    return u.consolidate(split)


def _to_columns(u: Updates) -> tuple[str, list[np.ndarray]]:
    return _MIXED_TAG if u.mixed else _TAG, [*u.data, u.times, u.diffs]


def _from_columns(columns: list[np.ndarray], mixed: bool = False) -> Updates:
    *data, times, diffs = columns
    if mixed and (len(data) != 1 or data[0].dtype != object):
        raise ValueError("a batch of mixed shapes is one column of whole records")
    return Updates(tuple(data), times, diffs, mixed)


_TAG, _MIXED_TAG = "naiad.Updates", "naiad.Updates.mixed"
register_columnar(Updates, _TAG, _to_columns, _from_columns)
register_columnar(Updates, _MIXED_TAG, _to_columns, partial(_from_columns, mixed=True))


_HASH_MASK = 0x7FFFFFFFFFFFFFFF
_INT64_RANGE = 2.0**63


def stable_hash(value: Any) -> int:
    """A hash equal in every process (for routing records by value); equal numbers hash
    alike whatever their type (``2 == 2.0 == np.int64(2)``), as :func:`route` does for numeric
    columns, so equal keys meet on one worker however they were written.

    Values of other types are hashed by their ``repr``, which equal values must share: an
    enum's does, a dataclass's only if its equal fields' reprs are equal and it compares
    every field it shows (``P(x=1)`` and ``P(x=1.0)`` are equal, their reprs are not: they
    go to different workers; a tuple of the fields has no such trap). A class that defines
    ``__eq__`` but keeps the default repr (which holds the object's id) is refused with a
    ``TypeError``: equal instances would go to different workers. Objects equal only to
    themselves (the default ``__eq__``) keep one repr, so they are routed by it.

    >>> stable_hash("word") == stable_hash("word"), stable_hash(7), stable_hash(7.0)
    (True, 7, 7)
    """
    if isinstance(value, np.datetime64 | np.timedelta64 | datetime.date | datetime.timedelta):
        return _time_hash(value)  # (np.timedelta64 is an np.integer that int() refuses)
    if isinstance(value, bool | int | np.integer | np.bool_):  # np.bool_ is no np.integer
        return int(value) & _HASH_MASK
    if isinstance(value, float | np.floating):
        value = float(value)
        if value.is_integer():  # as the equal int, however large
            return int(value) & _HASH_MASK
        return int(np.float64(value).view(np.int64)) & _HASH_MASK  # its bits
    if isinstance(value, str):
        return zlib.crc32(value.encode())
    if isinstance(value, bytes):
        return zlib.crc32(value)
    if isinstance(value, tuple):
        h = 0x345678
        for item in value:
            h = (h * 1000003) ^ stable_hash(item)
        return h & _HASH_MASK
    if isinstance(value, frozenset):  # equal sets, whatever the order of their elements
        return sum(stable_hash(item) for item in value) & _HASH_MASK
    if isinstance(value, numbers.Number):
        return _number_hash(value)
    cls = value.__class__
    if cls.__repr__ is object.__repr__ and cls.__eq__ is not object.__eq__:
        raise TypeError(
            f"cannot route the record field {value!r} to a worker by its value: its class "
            f"{cls.__module__}.{cls.__qualname__} defines equality but not __repr__, and the "
            "default repr holds the object's id, so equal values would go to different "
            "workers and their changes never meet; give it a __repr__ that equal values share "
            "(a dataclass has one), or use a tuple of its fields as the record"
        )
    return zlib.crc32(repr(value).encode())


_TIME_UNITS = ("D", "s", "us", "ns", "ps", "fs", "as")
"""Units fine enough for any date or duration of fixed length (``W`` in days, ``h`` and
``m`` in seconds, ``ms`` in microseconds)."""

_EPOCH = datetime.datetime(1970, 1, 1)


def _time_hash(value: Any) -> int:
    """Dates and durations as a count of the coarsest unit that holds them exactly, so that
    equal values hash alike whatever their unit or type, as numpy compares them
    (``np.datetime64('2020-01-01') == np.datetime64('2020-01-01T00:00') == date(2020, 1, 1)``,
    ``np.timedelta64(1, 'h') == np.timedelta64(60, 'm') == timedelta(hours=1)``); an aware
    ``datetime`` as its UTC instant (equal whatever its offset).

    >>> stable_hash(np.datetime64("2020-01-01")) == stable_hash(np.datetime64("2020-01-01T00:00"))
    True
    >>> stable_hash(np.timedelta64(1, "h")) == stable_hash(datetime.timedelta(minutes=60))
    True
    """
    offset = value.utcoffset() if isinstance(value, datetime.datetime) else None
    if offset is not None:
        since = value.replace(tzinfo=None) - _EPOCH - offset  # a timedelta: no overflow
        return stable_hash(("aware", since.days, since.seconds, since.microseconds))
    if isinstance(value, datetime.timedelta):
        value = np.timedelta64(value)
    elif isinstance(value, datetime.date):
        value = np.datetime64(value)
    if np.isnat(value):  # never equal to anything, as NaN
        return zlib.crc32(b"NaT")
    kind = "datetime64" if isinstance(value, np.datetime64) else "timedelta64"
    for unit in _TIME_UNITS:
        try:
            coarse = value.astype(f"{kind}[{unit}]")
            exact = bool(coarse == value)
        except TypeError:  # a duration in years or months: no fixed length
            break
        except OverflowError:  # attoseconds have no factor to days in int64
            continue
        if exact:
            return stable_hash((kind, unit, int(coarse.astype(np.int64))))
    return stable_hash((kind, "M", int(value.astype(f"{kind}[M]").astype(np.int64))))


def _number_hash(value: Any) -> int:
    """Other numbers (``Fraction``, ``Decimal``, ``complex``) as the equal int or float, if
    there is one; else by Python's numeric hash, which is the same in every process.

    >>> from fractions import Fraction
    >>> stable_hash(Fraction(6, 2)) == stable_hash(3)
    True
    >>> stable_hash(Fraction(1, 2)) == stable_hash(0.5)
    True
    """
    try:
        if isinstance(value, complex):
            if value.imag == 0:
                return stable_hash(value.real)
        elif value == int(value):
            return int(value) & _HASH_MASK
        elif value == float(value):
            return stable_hash(float(value))
    except (TypeError, ValueError, OverflowError, ArithmeticError):  # NaN, infinities
        pass
    return hash(value) & _HASH_MASK


def route(updates: Updates) -> np.ndarray:
    """Per update, a routing key of its first field, the key (vectorized for numeric data):
    :func:`stable_hash` of each value. A ``mixed`` batch's keys are its records' first
    fields, as they would be in a batch of their shape alone.

    >>> m = Updates.of_values([(1, "a"), 5, (1, "b", "c")], np.zeros((3, 1), np.int64),
    ...                       np.ones(3, np.int64))
    >>> route(m).tolist() == [stable_hash(1), stable_hash(5), stable_hash(1)]
    True
    """
    if updates.mixed:
        return column_hashes(object_column(first_fields(updates.data[0].tolist())))
    return column_hashes(updates.data[0])


def route_records(updates: Updates) -> np.ndarray:
    """Per update, :func:`stable_hash` of its whole record, whatever the batch's form: one
    column per field (combined as ``stable_hash`` combines a tuple's items, in wrapping
    uint64 arithmetic, whose low 63 bits are those of Python's exact integers) or one column
    of whole records. Equal records meet on one worker however they were batched.

    >>> u = Updates((np.array([1, 2]), np.array(["a", "b"], dtype=object)),
    ...             np.zeros((2, 1), np.int64), np.ones(2, np.int64))
    >>> route_records(u).tolist() == [stable_hash((1, "a")), stable_hash((2, "b"))]
    True
    """
    if len(updates.data) == 1:
        return column_hashes(updates.data[0])
    h = np.full(len(updates), 0x345678, dtype=np.uint64)
    for column in updates.data:
        h = (h * np.uint64(1000003)) ^ column_hashes(column).astype(np.uint64)
    return (h & np.uint64(_HASH_MASK)).astype(np.int64)


def route_by_record(updates: Updates) -> np.ndarray:
    """Per update, a routing key of its whole record that spreads records evenly over any
    number of workers: :func:`route_records`, mixed (a 64-bit finalizer: shifts and an odd
    multiplier) so that its low bits, which pick the worker, depend on every bit of every
    field. Unmixed, they depend on the fields' low bits alone: records ``(k, k)`` would all
    meet on one of two workers. Vectorized for numeric columns; equal records meet on one
    worker however they were batched. This is how ``count``, ``distinct`` and ``threshold``
    of a collection spread a hot first field over the workers.

    >>> u = Updates((np.zeros(1000, np.int64), np.arange(1000)),
    ...             np.zeros((1000, 1), np.int64), np.ones(1000, np.int64))
    >>> np.bincount(route_by_record(u) % 4).tolist()  # one key, four workers
    [251, 251, 249, 249]
    >>> same = Updates((np.arange(1000), np.arange(1000)),
    ...                np.zeros((1000, 1), np.int64), np.ones(1000, np.int64))
    >>> [np.bincount(f(same) % 2).tolist() for f in (route_records, route_by_record)]
    [[1000], [503, 497]]
    """
    h = route_records(updates).astype(np.uint64)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    return (h & np.uint64(_HASH_MASK)).astype(np.int64)


def column_hashes(column: np.ndarray) -> np.ndarray:
    """:func:`stable_hash` of every value of a column (vectorized for numbers; a column of
    strings alone is hashed in C loops, about 7 times faster than value by value).

    >>> words, mixed = np.array(["a", "bé"], dtype=object), np.array(["a", 2.0], dtype=object)
    >>> [column_hashes(c).tolist() == [stable_hash(v) for v in c] for c in (words, mixed)]
    [True, True]
    """
    if column.dtype.kind in "iub":
        return column.astype(np.int64) & _HASH_MASK
    if column.dtype.kind == "f":  # integral values as the equal integers, others by their bits
        floats = column.astype(np.float64)
        with np.errstate(invalid="ignore"):  # out of int64's range: not integral here
            ints = floats.astype(np.int64)
        in_range = (floats >= -_INT64_RANGE) & (floats < _INT64_RANGE)
        hashes = np.where((ints == floats) & in_range, ints, floats.view(np.int64)) & _HASH_MASK
        big = ~in_range & np.isfinite(floats)  # integral: hashed as the equal Python int
        if big.any():
            hashes[big] = [int(v) & _HASH_MASK for v in floats[big].tolist()]
        return hashes
    values = column.tolist()
    if set(map(type, values)) <= {str}:  # strings alone: stable_hash's crc32, in C loops
        return np.fromiter(map(zlib.crc32, map(str.encode, values)), np.int64, len(values))
    return np.fromiter((stable_hash(v) for v in values), np.int64, len(values))
