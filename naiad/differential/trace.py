"""Arrangements' state (K-Pg §3): immutable sorted batches, the spine that merges them, trace
handles that drive compaction, and cursors.

A :class:`Batch` holds updates sorted by (key, values, time), one row each (but for a merge's
sum beyond int64, held as several rows: see :func:`merge`), all columns numeric (``object``
columns are dictionary-encoded by the process-wide :data:`INTERNER`), and is described by the
frontiers ``lower`` and ``upper`` (its updates' times are at or after ``lower`` and not at or
after ``upper``) and ``since`` (its times were advanced to that frontier). Batches also carry
sequence numbers ``seq_lo..seq_hi``: the spine numbers every batch it receives, and a merged
batch covers the range of the batches it replaced.

The :class:`Spine` keeps batches from oldest to newest and merges geometrically (a batch is
merged into its elder neighbour while that neighbour is at most twice its size), so each
update is merged O(log n) times; a few small batches (``TAIL_ROWS``, ``TAIL_BATCHES``) wait
and are merged together, so the small batches of an iterative round do not each pay for a
merge. Large batches keep an index of their distinct keys once they are read often
(:meth:`Batch.key_ranges`). Merges apply *logical* compaction: times advance to
``since``, the meet of the logical-compaction frontiers of every open :class:`TraceHandle`,
and updates that become equal cancel. A handle also states how far it has read (its
*physical* compaction point, a sequence number): batches on either side of a reader's point
are never merged, so a join can read exactly the batches it has acknowledged. When input
stops, :meth:`Spine.idle_merge` finishes the merging, so memory does not stay high.

A spine holds every update of a time once the time is *complete* there: not at or after any
time of its ``upper`` frontier. A reader outside the dataflow learns it from its handle
(:attr:`TraceHandle.upper`, :meth:`TraceHandle.wait`, woken through a probe of the upper
frontier, :meth:`Spine.completion`), and ``cursor(at=t)`` refuses to read a ``t`` that is not.

Merging driven only by inserted rows leaves memory high while a long-lived arrangement goes
on with few or no changes: the history a reader held back stays in big batches that no
geometric merge reaches, after the reader let go. So every batch a spine receives (a
frontier step seals one, empty when nothing completed) credits it a fixed merge effort
(``IDLE_MERGE_ROWS``), banked as *fuel*; :meth:`Spine.exert` spends it on merging the
settled batches (the waiting tail apart) into one, compacted to the current ``since``,
once the fuel covers that merge's rows plus its fixed cost (``MERGE_OVERHEAD_ROWS``) and
the merge may reduce the spine. The work is amortized: at most ``IDLE_MERGE_ROWS`` rows of
merging per batch received, never a pass over the state per step.

A reader that lets go while the input is quiet (no batch, no frontier step: a handle closed,
or its logical or physical compaction moved on) would otherwise leave what it held in
memory until the next frontier step, perhaps for ever. So each release asks the vertex
that maintains the spine (its ``activator``) for an idle activation
(:meth:`Spine.released`; the worker runs it once it has had nothing else to do for
``IDLE_DELAY_S``, see :mod:`naiad.actors.worker`), in which :meth:`Spine.compact_released`
compacts, one batch per activation, the batches whose history the readers let go, and then
merges as the geometric shape allows. A running computation pays one test of a flag per
release (its operators' handles release at every frontier step): its worker is never idle.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from naiad.actors.supervision import DataflowDropped, DataflowStopped
from naiad.differential import lattice
from naiad.differential.diff_arithmetic import DiffOverflowError, describe_row
from naiad.differential.updates import (
    INTERNER,
    Updates,
    consolidated,
    field_tuples,
    group_starts,
    handed,
    keyed_columns,
    object_column,
    rounds_as_float,
    take_rows,
    unpacked_records,
)
from naiad.operators.probe import ProbeHandle
from naiad.progress.antichain import Antichain
from naiad.progress.timestamp import as_time_like

Columns = tuple[np.ndarray, ...]
SMALL_KEYS = 16
INDEXED_ROWS = 4096  # batches from this size on look keys up among their distinct keys
TAIL_ROWS, TAIL_BATCHES = 64, 4  # small batches a spine lets wait before merging them
# Idle merge effort (see Spine.exert), in rows of merging. Measured here, a merge costs about
# 0.1 us per row plus about 50 us per call (sorting, consolidating: a few dozen numpy calls),
# that is the cost of MERGE_OVERHEAD_ROWS rows, and the smallest dataflow's frontier step
# (input, arrange, probe) about 40 us. IDLE_MERGE_ROWS rows (~13 us) per batch received adds
# at most about a third to an idle step, only while there is something to merge, and
# compacts a spine of n rows within (n + MERGE_OVERHEAD_ROWS) / IDLE_MERGE_ROWS steps.
IDLE_MERGE_ROWS, MERGE_OVERHEAD_ROWS = 128, 512
# what a numeric key column can be searched for (complex numbers have no order)
REAL_NUMBERS = (int, float, np.integer, np.floating, np.bool_)


def expand_ranges(lo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(lo[i], lo[i] + counts[i])`` for every ``i``.

    >>> expand_ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    return np.repeat(lo - starts, counts) + np.arange(total)


class Batch:
    """Immutable updates sorted by (key, values, time), with their description."""

    __slots__ = (
        "__weakref__",
        "_distinct",
        "_held",
        "_lookups",
        "_spread",
        "diffs",
        "encoded",
        "keys",
        "lower",
        "packed",
        "seq_hi",
        "seq_lo",
        "since",
        "times",
        "upper",
        "vals",
    )

    def __init__(
        self,
        keys: np.ndarray,
        vals: Columns,
        times: np.ndarray,
        diffs: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        since: np.ndarray,
        seq: tuple[int, int] = (-1, -1),
    ) -> None:
        self.keys, self.vals, self.times, self.diffs = keys, vals, times, diffs
        self.lower, self.upper, self.since = lower, upper, since
        self.seq_lo, self.seq_hi = seq
        # which columns hold interned codes, as when this batch was made: a spine may switch
        # a column to codes later, and a batch already on its way to a reader must still
        # be read as it was written
        self.encoded: tuple[bool, ...] = ()
        # whether the first value column holds each record's value fields as one tuple
        # (interned): as when this batch was made (see Spine.pack)
        self.packed = False
        self._distinct: tuple[np.ndarray, np.ndarray] | None = None  # see key_ranges
        self._lookups = 0
        self._held: list[np.ndarray] | None = None  # see interned_columns
        self._spread: tuple[bool, Any] | None = None  # see may_compact
        INTERNER.hold(self)

    def interned_columns(self) -> list[np.ndarray]:
        """The columns of codes this batch holds, for the interner's collection; every
        integer column while its encoding is not set yet (a batch on its way into a spine)."""
        cols = (self.keys, *self.vals)
        if not self.encoded:
            return [c for c in cols if c.dtype.kind == "i"]
        if self._held is None:
            # the distinct codes of each column, found once (the batch never changes) where
            # they are few: a collection is amortized over the values interned since, and
            # a large batch of a few distinct values (a country column) read row by row at
            # every collection made each new value pay for a pass over the batch
            self._held = [
                _distinct_codes(c, sorted_=i == 0) for i, c in enumerate(cols) if self.is_encoded(i)
            ]
        return self._held

    def is_encoded(self, i: int) -> bool:
        """Whether column ``i`` (0 the key) holds interned codes in this batch."""
        return i < len(self.encoded) and self.encoded[i]

    def decode(self, i: int, col: np.ndarray) -> np.ndarray:
        """Column ``i`` (0 the key) of this batch's rows ``col`` as values."""
        return INTERNER.decode(col) if self.is_encoded(i) else col

    def decoded(self, index: np.ndarray | slice = slice(None)) -> list[np.ndarray]:
        """The columns of the rows ``index`` as values (key first)."""
        return [self.decode(i, c[index]) for i, c in enumerate((self.keys, *self.vals))]

    def value_fields(self, index: np.ndarray | slice) -> list[tuple[Any, ...]]:
        """The fields after the key of the rows ``index``, one tuple per row, whether this
        batch is packed or not.

        >>> b = Batch(np.array([1, 2]), (np.array([5, 6]),), np.zeros((2, 1), np.int64),
        ...           np.ones(2, np.int64), *[np.zeros((1, 1), np.int64)] * 3)
        >>> b.value_fields(slice(None))
        [(5,), (6,)]
        """
        cols = [c.tolist() for c in self.decoded(index)[1:]]
        if self.packed:
            return [(*v, *rest) for v, *rest in zip(*cols, strict=True)]
        return field_tuples(cols, len(self.keys[index]))

    @classmethod
    def sealed(
        cls,
        keys: np.ndarray,
        vals: Columns,
        times: np.ndarray,
        diffs: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        since: np.ndarray,
        lex: Sequence[bool] = (),
        runs: bool = False,
        decode: Callable[[int, np.ndarray], np.ndarray] = lambda i, col: col,
        split: bool = False,
    ) -> Batch:
        """Sorts and consolidates the updates (times first advanced to ``since``); ``runs``:
        they are a concatenation of sorted batches. A sum of diffs beyond int64 raises
        ``DiffOverflowError`` naming the record (its columns read with ``decode(column,
        stored)``) and time; with ``split`` (a merge: its sums are changes between counts,
        not results) it is held as several rows of its sign instead."""
        times = lattice.advance_by(times, since, lex)
        try:
            cols, times, sums = consolidated([keys, *vals], times, diffs, runs, split)
        except DiffOverflowError as e:  # the record, decoded, and its (advanced) time
            row = e.row or 0
            columns = [decode(i, c[row : row + 1]) for i, c in enumerate([keys, *vals])]
            raise e.located(*describe_row(columns, times[row : row + 1], 0)) from None
        return cls(cols[0], tuple(cols[1:]), times, sums, lower, upper, since)

    def __len__(self) -> int:
        return len(self.diffs)

    def may_compact(self, since: np.ndarray) -> bool:
        """Whether advancing this batch's times to ``since`` might bring rows of one record
        together (so a merge of this batch alone might shrink it): never when ``since`` is
        its own, when its rows are all at one time, or, for integer times, when its second
        least time is after ``since`` (only times at or before ``since`` move, to it).
        Looked at once per batch (an immutable one), in one pass over its times.

        >>> b = Batch(np.array([1, 1, 2]), (), np.array([[3], [5], [5]]), np.ones(3, np.int64),
        ...           np.array([[0]]), np.array([[9]]), np.array([[0]]))
        >>> b.may_compact(np.array([[4]])), b.may_compact(np.array([[5]]))
        (False, True)
        """
        if np.array_equal(self.since, since):
            return False
        if self._spread is None:
            times = self.times
            if times.shape[1] == 1 and len(times):
                col = times[:, 0]
                later = col[col > col.min()]
                self._spread = (bool(len(later)), int(later.min()) if len(later) else None)
            else:
                self._spread = (bool(len(times)) and not (times == times[0]).all(), None)
        several, second = self._spread
        if not several:
            return False
        if second is not None and len(since) == 1 and since.shape[1] == 1:
            return second <= int(since[0, 0])
        return True

    def take(self, index: np.ndarray | slice) -> tuple[np.ndarray, Columns, np.ndarray, np.ndarray]:
        return (
            self.keys[index],
            tuple(v[index] for v in self.vals),
            take_rows(self.times, index),
            self.diffs[index],
        )

    def take_times(self, index: np.ndarray | slice) -> np.ndarray:
        """The time rows ``index`` (a reader that needs some rows' times asks for those only:
        an entered batch makes its times on demand)."""
        return take_rows(self.times, index)

    def rows_for(self, keys: np.ndarray) -> np.ndarray | slice | None:
        """The updates whose key is in ``keys`` (sorted, distinct): an index array, a slice
        when they are contiguous, ``None`` when there are none.

        Few keys (the lookups of an iterative round) are resolved in Python: the ranges of
        a handful of keys cost less as lists than as the five numpy calls of the general
        case, and most batches hold none of them.

        >>> b = Batch(np.array([1, 1, 3, 5]), (), np.zeros((4, 1), np.int64),
        ...           np.ones(4, np.int64), *[np.zeros((1, 1), np.int64)] * 3)
        >>> b.rows_for(np.array([1])), b.rows_for(np.array([2])), b.rows_for(np.array([1, 5]))
        (slice(0, 2, None), None, array([0, 1, 3]))
        """
        lo, hi = self.lookup(keys)
        if len(keys) <= SMALL_KEYS:
            ranges = [(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True) if b > a]
            if not ranges:
                return None
            if len(ranges) == 1:
                return slice(*ranges[0])
            if sum(b - a for a, b in ranges) <= 4 * SMALL_KEYS:
                return np.array([i for a, b in ranges for i in range(a, b)], dtype=np.int64)
        rows = expand_ranges(lo, hi - lo)
        return rows if len(rows) else None

    def record_ranges(self, keys: np.ndarray, values: Columns) -> tuple[np.ndarray, np.ndarray]:
        """For each record ``(keys[i], *values[:][i])`` (records sorted, distinct; ``values``
        the first value columns, in this batch's representation), the range ``lo:hi`` of the
        rows that begin with it. The key's range narrowed by a binary search per value
        column: a few steps per record, however many records share its key. Each record is
        searched on its own, so the answer for records in another order is the same,
        permuted (``count_total`` relies on it for records it recoded).

        >>> b = Batch(np.array([1, 1, 1, 3]), (np.array([4, 5, 5, 5]),),
        ...           np.zeros((4, 1), np.int64), np.ones(4, np.int64),
        ...           *[np.zeros((1, 1), np.int64)] * 3)
        >>> [r.tolist() for r in b.record_ranges(np.array([1, 1, 3]), (np.array([5, 6, 5]),))]
        [[1, 3, 3], [3, 3, 4]]
        """
        lo, hi = self.lookup(keys)
        for col, want in zip(self.vals, values, strict=False):
            if len(keys) <= SMALL_KEYS:  # a few records: bisect the column in Python
                ranges = [
                    (bisect_left(col, w, a, b), bisect_right(col, w, a, b)) if b > a else (a, a)
                    for w, a, b in zip(want.tolist(), lo.tolist(), hi.tolist(), strict=True)
                ]
                lo = np.array([a for a, _ in ranges], dtype=np.int64)
                hi = np.array([b for _, b in ranges], dtype=np.int64)
            else:
                lo, hi = _bisect(col, want, lo, hi, "left"), _bisect(col, want, lo, hi, "right")
        return lo, hi

    def record_rows(self, keys: np.ndarray, values: Columns) -> np.ndarray | None:
        """The updates of the records ``(keys[i], *values[:][i])`` (see
        :meth:`record_ranges`): an index array, ``None`` when there are none."""
        lo, hi = self.record_ranges(keys, values)
        rows = expand_ranges(lo, hi - lo)
        return rows if len(rows) else None

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``keys`` (sorted), the range ``lo:hi`` of its rows: two searches, or
        for many keys in a large batch the distinct-key index (:meth:`key_ranges`)."""
        if len(keys) > SMALL_KEYS and len(self.keys) >= INDEXED_ROWS and self._worth_indexing():
            return self.key_ranges(keys)
        return self.keys.searchsorted(keys, "left"), self.keys.searchsorted(keys, "right")

    def _worth_indexing(self) -> bool:
        """Whether to look keys up through the distinct-key index: once it exists, or from
        the third large lookup on (a batch merged away soon would not repay building it)."""
        if self._distinct is None:
            self._lookups += 1
            return self._lookups >= 3
        return True

    def key_ranges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``keys`` (sorted), the range ``lo:hi`` of its rows (empty if absent).

        A large batch answers from its distinct keys and their first rows (built on first
        use, kept: the batch never changes): a search among a fifth of the keys, say, whose
        array stays in cache, instead of two searches through every row.

        >>> b = Batch(np.array([1, 1, 3, 5]), (), np.zeros((4, 1), np.int64),
        ...           np.ones(4, np.int64), *[np.zeros((1, 1), np.int64)] * 3)
        >>> [r.tolist() for r in b.key_ranges(np.array([0, 1, 4, 5, 9]))]
        [[0, 0, 3, 3, 4], [0, 2, 3, 4, 4]]
        """
        if len(self.keys) == 0:
            zero = np.zeros(len(keys), dtype=np.int64)
            return zero, zero
        if self._distinct is None:
            starts = group_starts(self.keys)
            self._distinct = (self.keys[starts], np.r_[starts, len(self.keys)])
        distinct, bounds = self._distinct
        i = distinct.searchsorted(keys)
        lo = bounds[i]
        last = len(distinct) - 1
        found = distinct[np.minimum(i, last)] == keys
        return lo, np.where(found, bounds[np.minimum(i, last) + 1], lo)

    def __repr__(self) -> str:
        return (
            f"Batch({len(self)} updates, seq {self.seq_lo}..{self.seq_hi}, "
            f"lower {self.lower.tolist()}, upper {self.upper.tolist()}, "
            f"since {self.since.tolist()})"
        )


def _distinct_codes(col: np.ndarray, sorted_: bool) -> np.ndarray:
    """The distinct values of a column of codes (``sorted_``: it is sorted), or the column
    itself when they are not much fewer (no copy kept for a column of mostly distinct codes).

    >>> _distinct_codes(np.array([4, 4, 4, 1]), False).tolist()
    [1, 4]
    >>> _distinct_codes(np.array([1, 2, 3]), True).tolist()
    [1, 2, 3]
    """
    distinct = col[group_starts(col)] if sorted_ else np.unique(col)
    return distinct if 2 * len(distinct) <= len(col) else col


def _bisect(
    col: np.ndarray, want: np.ndarray, lo: np.ndarray, hi: np.ndarray, side: str
) -> np.ndarray:
    """Per ``i``, the ``side`` insertion point of ``want[i]`` in ``col[lo[i]:hi[i]]`` (a sorted
    slice): every binary search at once, one vectorized step per halving of the widest."""
    lo, hi = lo.copy(), hi.copy()
    last = len(col) - 1
    for _ in range(int((hi - lo).max(initial=0)).bit_length()):
        open_ = lo < hi
        mid = (lo + hi) >> 1
        seen = col[np.minimum(mid, last)]
        below = (seen < want) if side == "left" else (seen <= want)
        up = open_ & below
        lo = np.where(up, mid + 1, lo)
        hi = np.where(open_ & ~below, mid, hi)
    return lo


def merge(batches: Sequence[Batch], since: np.ndarray, lex: Sequence[bool]) -> Batch:
    """One batch holding the updates of adjacent ``batches``, compacted to ``since``.

    A record's rows at the times that become one sum to a change between two of its counts
    (the accumulations before the first batch and at the time), which may leave int64 while
    every count fits: such a sum is held as several rows of its sign at that time, never
    refused (a reader summing a count from them gets it exactly).

    >>> one = Batch(np.array([7]), (), np.array([[1]]), np.array([-(2**63) + 1]),
    ...             np.array([[1]]), np.array([[2]]), np.array([[1]]))
    >>> two = Batch(np.array([7]), (), np.array([[2]]), np.array([-(2**63) + 1]),
    ...             np.array([[2]]), np.array([[3]]), np.array([[2]]))
    >>> merge([one, two], np.array([[3]]), ()).diffs.tolist()
    [-9223372036854775807, -9223372036854775807]
    """
    keys = np.concatenate([b.keys for b in batches])
    vals = tuple(np.concatenate(cols) for cols in zip(*(b.vals for b in batches), strict=True))
    times = np.concatenate([b.times for b in batches])
    diffs = np.concatenate([b.diffs for b in batches])
    out = Batch.sealed(
        keys,
        vals,
        times,
        diffs,
        batches[0].lower,
        batches[-1].upper,
        since,
        lex,
        runs=True,
        decode=batches[-1].decode,
        split=True,
    )
    out.seq_lo, out.seq_hi = batches[0].seq_lo, batches[-1].seq_hi
    out.encoded, out.packed = batches[-1].encoded, batches[-1].packed
    return out


class Spine:
    """The batches of one arrangement on one worker, merged geometrically.

    ``whole``: its records are keys in full (``arrange_by_self``), not keyed by first field.
    ``by_record``: its records were routed to their workers by whole record, not by key
    (``count``, ``distinct`` and ``threshold`` of a collection): a key's records may lie on
    several workers, so only per-record readers may read it, never a join, an import or a
    per-key reduce (they refuse it by name).

    ``encoded[i]`` says whether column ``i`` (0 the key, then the values) holds interned codes;
    ``worker`` is the index of the worker that maintains it (``None`` outside a dataflow).

    ``packed``: its records differ in width, so its first value column holds each record's
    value fields as one tuple (interned), ``()`` for a record that is a key only, and the
    ``trailing`` columns after it (a count's) stay as they are (:meth:`pack`). An
    arrangement by key packs on meeting a second record width (:meth:`insert_records`): no
    worker can know the widths the others met, so every layout must accept them all.

    >>> s = Spine(depth=0)
    >>> counts = []
    >>> for epoch in range(5):     # no reader holds history back: merges compact it
    ...     _ = s.insert_updates(np.array([epoch % 2]), (), np.array([[epoch]]), np.array([1]),
    ...                          upper=np.array([[epoch + 1]]))
    ...     counts.append(len(s.batches))
    >>> counts  # a few small batches wait, then merge in one go
    [1, 2, 3, 4, 1]
    >>> s.total(), s.batches[0].times.tolist(), s.batches[0].diffs.tolist()
    (2, [[5], [5]], [3, 2])
    """

    whole = False
    by_record = False
    packed = False
    trailing = 0

    def __init__(
        self, depth: int, lex: Sequence[bool] = (), name: str = "", worker: int | None = None
    ) -> None:
        self.depth, self.lex, self.name, self.worker = depth, tuple(lex), name, worker
        self.batches: list[Batch] = []
        self.encoded: list[bool | None] = [None]  # grows to the records' width
        self.kinds: list[str] = [""]  # per numeric column: "i", "f", or "if" (both, exactly)
        self.upper = np.zeros((1, depth + 1), dtype=np.int64)  # the minimum time
        self.next_seq = 0
        self.handles: weakref.WeakSet[TraceHandle] = weakref.WeakSet()
        self.listeners: list[Any] = []
        # what stopped the dataflow maintaining this spine before it completed (no batch will
        # come), and who wants to hear of it: the imports following it (other dataflows';
        # the one maintaining it cannot be dropped while they follow)
        self.stopped: BaseException | None = None
        self.importers: list[Any] = []  # each with source_stopped(failure)
        # probes of the upper frontier (this spine's, its views'), woken as it moves: what
        # TraceHandle.wait awaits. Weak: a view's probe goes with the view
        self.watchers: weakref.WeakSet[ProbeHandle] = weakref.WeakSet()
        self._completion: ProbeHandle | None = None
        # the thread of the event loop that maintains it (the build's, which made it), where
        # its handles' waits must run: completion() may first be called from another
        self._thread = threading.get_ident()
        self._upper_times: tuple[np.ndarray, Antichain] | None = None
        self._since_cache: tuple[list[Any], np.ndarray] = ([], self.upper)
        # with integer times (depth 0), the greatest time a merge may have advanced some
        # update to (None: none advanced); an update later than this holds its own time
        self.advanced_to: int | None = None
        self.record_width: int | None = None  # of the records inserted unpacked so far
        self.fuel = 0  # rows of merge effort banked (see exert)
        # asks the vertex maintaining this spine for an idle activation (see released)
        self.activator: Callable[[], None] | None = None
        self.compaction_requested = False  # an idle activation asked for, not done yet

    # --- encoding --------------------------------------------------------------------------
    def encode(self, columns: Sequence[np.ndarray], start: int = 0) -> Columns:
        """Columns ``start``, ``start + 1``, ... as stored: ``object`` columns interned. A column
        that was numeric so far and now brings Python objects switches the whole spine to codes
        for that column; so does one whose integers and floats would merge into floats that
        round some integer (beyond 2**53)."""
        if start == 0 and self.batches and len(columns) != self.width:
            raise ValueError(
                f"arrangement {self.name!r}: records must all have the same number of fields "
                f"(had {self.width}, now {len(columns)})"
            )
        return self._encode(columns, start)

    def stored_keys(self, keys: np.ndarray) -> np.ndarray:
        """A column of keys as the key column is stored, to look them up in the batches:
        as :meth:`encode` stores it (switching the spine's key column to codes if these keys
        bring what the numeric column cannot hold, as their insertion would).

        >>> s = Spine(depth=0)
        >>> s.stored_keys(np.array([3, 1])).tolist(), s.encoded
        ([3, 1], [False])
        """
        return self._encode([keys], 0)[0]

    def _encode(self, columns: Sequence[np.ndarray], start: int) -> Columns:
        out = []
        while len(self.encoded) < start + len(columns):
            self.encoded.append(None)
            self.kinds.append("")
        for i, col in enumerate(columns, start):
            if col.dtype == object:
                if self.encoded[i] is False:
                    self._recode(i)
                self.encoded[i] = True
                out.append(INTERNER.encode(col))
            else:
                if self.encoded[i] is None:
                    self.encoded[i] = False
                if self.encoded[i] is False and self._would_round(i, col):
                    self._recode(i)
                    self.encoded[i] = True
                out.append(INTERNER.encode(col.astype(object)) if self.encoded[i] else col)
        return tuple(out)

    def _would_round(self, i: int, col: np.ndarray) -> bool:
        """Whether numeric ``col`` beside the batches' column ``i`` would round an integer:
        integer and float batches merge into floats, exact only up to 2**53. Checked when the
        two kinds first meet, and then for every integer batch."""
        kind, seen = ("f" if col.dtype.kind in "fc" else "i"), self.kinds[i]
        if not seen:
            self.kinds[i] = kind
        if seen in ("", kind) or (seen == "if" and kind == "f"):
            return False
        ints = [col] if kind == "i" else []
        if seen != "if":  # the two kinds meet: the integers stored so far count too
            stored = (b.keys if i == 0 else b.vals[i - 1] for b in self.batches)
            ints += [c for c in stored if c.dtype.kind in "iub"]
        self.kinds[i] = "if"
        return any(rounds_as_float(c) for c in ints)

    def _recode(self, i: int) -> None:
        def code(col: np.ndarray) -> np.ndarray:
            return INTERNER.encode(col.astype(object))

        # new batch objects (re-sorted by the codes): the old ones may still be in flight to
        # readers, and must stay as they were
        recoded = []
        flags = tuple(j == i or bool(e) for j, e in enumerate(self.encoded))
        for b in self.batches:
            keys = code(b.keys) if i == 0 else b.keys
            vals = tuple(code(v) if j == i - 1 else v for j, v in enumerate(b.vals))
            copy = Batch(keys, vals, b.times, b.diffs, b.lower, b.upper, b.since)
            copy.seq_lo, copy.seq_hi = b.seq_lo, b.seq_hi
            copy.encoded, copy.packed = flags, b.packed
            recoded.append(self._merge([copy], b.since))
        self.batches = recoded

    def pack(self, trailing: int = 0) -> None:
        """Switches this spine to packed values (see the class docstring): its first value
        column will hold each record's value fields, every value column but the ``trailing``
        last ones, as one interned tuple. Its batches are replaced by packed copies,
        re-sorted (as :meth:`_recode` does: batches in flight to readers keep their form, and
        readers bring them to this one with :meth:`conform`). A spine stays packed. The cost:
        one tuple and one dictionary lookup per record, from then on.

        >>> s = Spine(depth=0)
        >>> _ = s.insert_updates(np.array([1]), (np.array(["a"], dtype=object),),
        ...                      np.zeros((1, 1), np.int64), np.ones(1, np.int64), np.array([[1]]))
        >>> s.pack()
        >>> TraceHandle(s).cursor().values()
        [('a', [(0, 1)])]
        >>> s.batches[0].value_fields(slice(None)), s.width
        ([('a',)], 2)
        """
        if self.packed:
            return
        n = max(self.width - 1 - trailing, 0)
        self.batches = [self._merge([packed_copy(b, n)], b.since) for b in self.batches]
        self.encoded[:] = [self.encoded[0], True, *self.encoded[1 + n :]]
        self.kinds[:] = [self.kinds[0], "", *self.kinds[1 + n :]]
        self.packed, self.trailing = True, trailing

    def conform(self, batch: Batch) -> Batch:
        """``batch`` (of this spine, perhaps written before it packed) in this spine's form
        now: packed if the spine is (rows in the same order: their keys stay sorted)."""
        if not self.packed or batch.packed:
            return batch
        return packed_copy(batch, len(batch.vals) - self.trailing)

    def insert_records(
        self, part: Updates, upper: np.ndarray, lower: np.ndarray, last: bool = True
    ) -> Batch:
        """:meth:`insert_updates` of an ``Updates`` of records keyed by their first field (an
        arrangement by key): one column per field while every record has one width, packed
        from the first batch that brings another width, or mixes widths, on.

        >>> s = Spine(depth=0)
        >>> one = Updates.from_records([((1, "a"), 0, 1)], fields=2)
        >>> two = Updates.from_records([((2, "b", "c"), 1, 1)], fields=3)
        >>> _ = s.insert_records(one, np.array([[1]]), np.array([[0]]))
        >>> _ = s.insert_records(two, np.array([[2]]), np.array([[1]]))
        >>> s.packed, sorted(INTERNER.decode(v).tolist()[0] for b in s.batches for v in b.vals)
        (True, [('a',), ('b', 'c')])
        """
        width = len(part.data)
        if not self.packed and (part.mixed or width != (self.record_width or width)):
            self.pack()
        if self.packed:
            keys, values = keyed_columns(part)
            return self.insert_updates(
                keys, (values,), part.times, part.diffs, upper, lower, last=last
            )
        self.record_width = width
        return self.insert_updates(
            part.data[0], part.data[1:], part.times, part.diffs, upper, lower, last=last
        )

    @property
    def width(self) -> int:
        """Columns per record: the key and the values (known once data arrived)."""
        return len(self.encoded)

    def decode(self, i: int, col: np.ndarray) -> np.ndarray:
        return INTERNER.decode(col) if self.encoded[i] else col

    # --- batches ---------------------------------------------------------------------------
    def since(self) -> np.ndarray:
        """The meet of the open handles' logical compaction frontiers (``upper`` if none).

        A handle at the empty frontier reads at no time again, so it holds nothing back, as
        a closed one: as the meet's only frontier it would leave every time uncompacted
        (advancing to the empty frontier changes no time), holding all the history.

        >>> s = Spine(depth=0)
        >>> s.upper = np.array([[7]])
        >>> h = s.reader()
        >>> h.set_logical_compaction([])
        >>> s.since().tolist()
        [[7]]
        """
        frontiers = [f for f in (h.logical for h in self.handles) if f is None or len(f)]
        if not frontiers:
            return self.upper
        if any(f is None for f in frontiers):
            return np.zeros((1, self.depth + 1), dtype=np.int64)
        if len(frontiers) == 1:
            return frontiers[0]  # type: ignore[return-value]
        # handles replace their frontier arrays, never mutate them: the meet of the same
        # arrays (held here, so their ids stay theirs) is the one computed last time
        cached, meet = self._since_cache
        same = len(cached) == len(frontiers)
        if same and all(a is b for a, b in zip(cached, frontiers, strict=True)):
            return meet
        rows = np.concatenate([f for f in frontiers if f is not None])
        meet = lattice.minimal_rows(rows, self.lex) if len(rows) else rows
        self._since_cache = (frontiers, meet)
        return meet

    def reader(self, logical: np.ndarray | None = None) -> TraceHandle:
        """A new reader's handle on this spine (see :class:`TraceHandle`)."""
        return TraceHandle(self, logical)

    def insert(self, batch: Batch, last: bool = True) -> Batch:
        """Adds a sealed batch (numbering it), then merges while sizes allow. ``last``: no
        other batch of its frontier step is still to come. An arrangement seals one batch
        per held capability, each up to the step's frontier, and the upper frontier moves
        only with the last: a reader in between (a callback on the stack of the operator
        sealing them, or a listener) would otherwise see times complete whose updates are
        in a batch not inserted yet."""
        batch.seq_lo = batch.seq_hi = self.next_seq
        self.next_seq += 1
        if not batch.encoded:
            batch.encoded = tuple(bool(e) for e in self.encoded)
        batch.packed = self.packed  # its maker wrote it in the spine's form
        if last:
            self.move_upper(batch.upper)
        if len(batch):
            self.batches.append(batch)
            self._maintain()
        self.exert()
        for listener in list(self.listeners):
            listener(batch)
        return batch

    def stop(self, failure: BaseException) -> None:
        """The dataflow maintaining this spine stopped before completing (it failed, or its
        runtime was cancelled): the upper frontier will not move again. Tells the stop
        listeners, once; a completed spine (empty upper) has nothing left to promise."""
        if self.stopped is not None or not len(self.upper):
            return
        self.stopped = failure
        for importer in list(self.importers):
            importer.source_stopped(failure)
        for probe in list(self.watchers):
            probe._fail(failure)

    def move_upper(self, upper: np.ndarray) -> None:
        """Sets the upper frontier (the times not yet complete here), waking the waits on it
        (:meth:`TraceHandle.wait`). A new array each time: readers cache by identity."""
        self.upper = upper
        if self.watchers:
            for probe in list(self.watchers):
                probe._check_waiters()

    def completion(self) -> ProbeHandle:
        """A probe of :attr:`upper` (made on first use): ``wait(t)`` returns once ``t`` is
        complete here, and raises what stopped the dataflow maintaining the spine if it
        stopped first."""
        if self._completion is None:
            self._completion = ProbeHandle(self._upper_frontier, self.depth)
            self._completion._thread = self._thread
            self._completion._what = f"trace handle of {self.name!r}"
            self.watch(self._completion)
        return self._completion

    def watch(self, probe: ProbeHandle) -> None:
        """Wakes ``probe`` whenever the upper frontier moves, and fails it if the spine stops
        (at once if it has stopped already)."""
        self.watchers.add(probe)
        if self.stopped is not None:
            probe._fail(self.stopped)

    def _upper_frontier(self) -> Antichain:
        """:attr:`upper` as an antichain of times (made once per upper: it is replaced, never
        mutated)."""
        upper, cached = self.upper, self._upper_times
        if cached is None or cached[0] is not upper:
            times = Antichain(lattice.time_of(r, self.lex) for r in upper)
            cached = self._upper_times = (upper, times)
        return cached[1]

    def advance_upper(self, upper: np.ndarray, last: bool = True) -> Batch:
        """Moves the upper frontier without updates (an empty batch, so that listeners such as
        imports into other dataflows hear of it; ``last`` as for :meth:`insert`)."""
        empty = np.zeros(0, dtype=np.int64)
        times = np.zeros((0, self.depth + 1), np.int64)
        batch = Batch(empty, (), times, empty, self.upper, upper, self.since())
        return self.insert(batch, last)

    def insert_updates(
        self,
        keys: np.ndarray,
        vals: Sequence[np.ndarray],
        times: np.ndarray,
        diffs: np.ndarray,
        upper: np.ndarray,
        lower: np.ndarray | None = None,
        last: bool = True,
    ) -> Batch:
        """Encodes, seals and inserts updates whose times lie in ``[lower, upper)``
        (``lower`` by default the spine's upper: an arrangement that seals several batches at
        one frontier step gives each the upper it had before the first; ``last`` as for
        :meth:`insert`)."""
        keys, *rest = self.encode([keys, *vals])
        lower = self.upper if lower is None else lower
        # a new batch is also a message of changes: its times stay exact (since = lower);
        # logical compaction applies when batches merge, once every reader has read them
        batch = Batch.sealed(
            keys, tuple(rest), times, diffs, lower, upper, lower[:0], self.lex, decode=self.decode
        )
        batch.since = lower
        return self.insert(batch, last)

    def _settled(self) -> int:
        """How many of the oldest batches every tracking reader has acknowledged: only those
        may be merged, so a reader's acknowledged batches never straddle a merged one."""
        acks = [h.acknowledged for h in self.handles if h.acknowledged is not None]
        if not acks:
            return len(self.batches)
        limit = min(acks)
        n = 0
        while n < len(self.batches) and self.batches[n].seq_hi <= limit:
            n += 1
        return n

    def _maintain(self, idle: bool = False) -> None:
        bs = self.batches
        m = self._settled()
        # A few small batches may wait and then be merged in one go: merging each tiny batch
        # as it arrives costs a consolidation per insert, while a reader pays only a lookup
        # per waiting batch (an iterative round inserts a small batch into each spine). An
        # idle worker (compact_released) has no round to spare that merge: they merge.
        small = self._small_tail(m)
        if small > TAIL_BATCHES or (idle and small > 1):
            m = self._merge_before(m, small)
        elif not idle:
            m -= small
        # Geometric shape over the whole settled run, not only at its end: a reader that
        # acknowledges many batches at once settles a run that was never merged, and an end
        # that breaks the rule stopped the merging there, leaving hundreds of batches for
        # every insert to walk and every reader to search (until exert merged them all). A
        # run that has its shape costs one comparison per batch: O(log rows) of them.
        i = 1
        while i < m:
            if len(bs[i - 1]) <= 2 * len(bs[i]):
                m -= i + 1 - self._merge_before(i + 1, 2)  # 1 batch fewer (2 if all cancelled)
                i = max(i - 1, 1)  # the merged batch against its elder, in turn
            else:
                i += 1

    def _small_tail(self, m: int) -> int:
        """How many of the first ``m`` batches' last ones hold at most ``TAIL_ROWS`` rows."""
        bs, small = self.batches, 0
        while small < m and len(bs[m - 1 - small]) <= TAIL_ROWS:
            small += 1
        return small

    def _waiting(self, m: int) -> int:
        """How many of the first ``m`` batches' last ones are small batches waiting to be
        merged together (see :meth:`_maintain`), or 0 if there are too many to wait."""
        small = self._small_tail(m)
        return small if small <= TAIL_BATCHES else 0

    def exert(self, effort: int | None = None) -> None:
        """Banks ``effort`` rows of merge work (``IDLE_MERGE_ROWS`` by default: a spine
        calls it for every batch it receives, empty ones too) and spends the fuel on merging
        the settled batches (those every reader has acknowledged, but for the small ones
        waiting at their end) into one compacted to ``since``, when it covers the merge's
        rows and ``MERGE_OVERHEAD_ROWS`` and the merge may shrink the spine: several
        batches, or one that :meth:`Batch.may_compact`. Fuel beyond the next merge's cost
        is not kept, so the work stays amortized at ``effort`` rows per call.

        >>> s = Spine(depth=0)
        >>> h = s.reader()             # a reader holds the history from time 0
        >>> keys = np.arange(20)
        >>> for e in range(50):        # each epoch moves 20 keys' values on: (k, e - 1) -> (k, e)
        ...     _ = s.insert_updates(np.r_[keys, keys], (np.repeat([e, e - 1], 20),),
        ...                          np.full((40, 1), e), np.repeat([1, -1 if e else 0], 20),
        ...                          upper=np.array([[e + 1]]))
        >>> h.close()                  # and lets go: idle steps compact what it held
        >>> held, batches = s.total(), len(s.batches)
        >>> for e in range(50, 80):
        ...     _ = s.advance_upper(np.array([[e + 1]]))
        >>> held, batches, s.total(), len(s.batches)
        (1980, 2, 20, 1)
        """
        bs = self.batches
        if not bs:
            self.fuel = 0
            return
        self.fuel += IDLE_MERGE_ROWS if effort is None else effort
        if self.fuel < MERGE_OVERHEAD_ROWS + len(bs[0]):  # the eldest is in any merge here
            return
        m = self._settled()
        m -= self._waiting(m)
        if m == 0:
            # nothing may merge yet (a waiting tail, or batches a reader has not read): the
            # next merge covers at most these batches, and later ones bring their own effort
            self.fuel = min(self.fuel, MERGE_OVERHEAD_ROWS + self.total())
            return
        cost = MERGE_OVERHEAD_ROWS + sum(len(b) for b in bs[:m])
        if self.fuel < cost:
            return
        since = self.since()
        if not len(since) or (m == 1 and not bs[0].may_compact(since)):
            self.fuel = cost  # nothing to do now (or all done, idle_merge's work)
            return
        self.fuel -= cost
        self._merge_before(m, m)

    def released(self) -> None:
        """A reader let go of history or of batches (:class:`TraceHandle`): asks the vertex
        maintaining this spine, through ``activator``, for idle activations that run
        :meth:`compact_released`; once until they are done, so a release costs the test of
        a flag while one is pending (none outside a dataflow: no ``activator``)."""
        if not self.compaction_requested and self.activator is not None:
            self.compaction_requested = True
            self.activator()

    def compact_released(self) -> None:
        """One step of the compaction the readers' releases allow, run while the worker is
        idle (see :meth:`released`): compacts the youngest settled batch whose times,
        advanced to ``since``, may bring rows together (:meth:`Batch.may_compact`: only
        batches holding history a reader let go; one batch's merge per step) and asks for
        the next step; once none is left, merges the small batches waiting at the end
        together and then as the geometric shape allows (:meth:`_maintain`: what compacted
        batches hold against each other cancels).

        >>> s = Spine(depth=0)
        >>> h = s.reader()             # holds every time
        >>> for e in range(40):        # key e % 4 moves from value e - 4 to value e
        ...     _ = s.insert_updates(np.array([e % 4, e % 4]), (np.array([e, e - 4]),),
        ...                          np.array([[e], [e]]), np.array([1, -1 if e > 3 else 0]),
        ...                          upper=np.array([[e + 1]]))
        >>> steps = []
        >>> s.activator = lambda: steps.append(s.total())
        >>> h.close()                  # the input is quiet: only idle steps compact
        >>> while s.compaction_requested:
        ...     s.compact_released()
        >>> steps, s.total()   # rows held as each step was asked for, and at the end
        ([76, 10], 4)
        """
        bs = self.batches
        m = self._settled()
        since = self.since()
        if not len(since):  # nothing is read at any time any more (the dataflow completed)
            self.idle_merge()
        else:
            for i in range(m - 1, -1, -1):
                if bs[i].may_compact(since):
                    self._merge_before(i + 1, 1)
                    assert self.activator is not None
                    self.activator()  # the next step, at the worker's next idle pass
                    return
            self._maintain(idle=True)
        self.compaction_requested = False

    def _merge_before(self, m: int, count: int) -> int:
        """Merges the ``count`` batches before position ``m`` into one (none if everything
        cancelled); the position just after the result."""
        bs = self.batches
        merged = self._merge(bs[m - count : m], self.since())
        bs[m - count : m] = [merged] if len(merged) else []
        return m - count + (1 if len(merged) else 0)

    def idle_merge(self) -> None:
        """Merges everything the readers allow, compacting to the current ``since``: the effort
        an idle arrangement spends so its memory falls once input stops."""
        m = self._settled()
        if m == 0:
            return
        since = self.since()
        if not len(since):  # nothing can be read at any time any more: collapse all times
            times = np.concatenate([b.times for b in self.batches[:m]])
            since = lattice.greatest(times, self.lex)
        if m == 1 and not self.batches[0].may_compact(since):
            return  # (merged so already: a reader that let go after the dataflow completed)
        merged = self._merge(self.batches[:m], since)
        self.batches[:m] = [merged] if len(merged) else []

    def _merge(self, batches: Sequence[Batch], since: np.ndarray) -> Batch:
        """:func:`merge`, noting how far it may advance times (see ``advanced_to``)."""
        if self.depth == 0 and len(since):
            top = int(since[:, 0].max())
            if self.advanced_to is None or top > self.advanced_to:
                self.advanced_to = top
        return merge(batches, since, self.lex)

    def total(self) -> int:
        return sum(len(b) for b in self.batches)

    def nbytes(self) -> int:
        return sum(
            b.keys.nbytes + b.times.nbytes + b.diffs.nbytes + sum(v.nbytes for v in b.vals)
            for b in self.batches
        )

    def batches_through(self, seq: int | None) -> list[Batch]:
        """The batches numbered up to ``seq`` (every batch when ``seq`` is ``None``)."""
        if seq is None:
            return list(self.batches)
        return [b for b in self.batches if b.seq_hi <= seq]

    def gather(
        self, keys: np.ndarray, seq: int | None = None, values: Columns = ()
    ) -> tuple[np.ndarray, Columns, np.ndarray, np.ndarray]:
        """Every stored update whose key is in ``keys`` (sorted, distinct), unconsolidated.
        With ``values`` (the first value columns, stored representation), the updates of
        whole records instead: those beginning with some ``(keys[i], *values[:][i])``
        (records sorted, distinct), found without reading the other records of their keys.

        >>> s = Spine(depth=0)
        >>> _ = s.insert_updates(np.array([0, 0, 0, 1]), (np.array([1, 2, 3, 2]),),
        ...                      np.zeros((4, 1), np.int64), np.ones(4, np.int64),
        ...                      np.array([[1]]))
        >>> k, (v,), _, _ = s.gather(np.array([0, 1]), values=(np.array([2, 2]),))
        >>> list(zip(k.tolist(), v.tolist()))
        [(0, 2), (1, 2)]
        """
        parts = []
        for b in self.batches_through(seq):
            rows = b.record_rows(keys, values) if values else b.rows_for(keys)
            if rows is not None:
                parts.append(b.take(rows))
        return concat_parts(parts, self.width, self.depth)


def column_updates(
    columns: Sequence[np.ndarray], times: np.ndarray, diffs: np.ndarray, packed: bool
) -> Updates:
    """Decoded columns of arranged records as an ``Updates``; ``packed``: the second column
    holds each record's value fields as one tuple (``Spine.pack``), unpacked here."""
    if packed:
        return Updates.of_values(unpacked_records(columns), times, diffs)
    return Updates(tuple(columns), times, diffs)


def packed_copy(batch: Batch, n: int) -> Batch:
    """``batch`` with its first ``n`` value columns packed into one column of interned
    tuples (see :meth:`Spine.pack`), rows in the same order."""
    values = field_tuples([c.tolist() for c in batch.decoded()[1 : 1 + n]], len(batch))
    copy = Batch(
        batch.keys,
        (INTERNER.encode(object_column(values)), *batch.vals[n:]),
        batch.times,
        batch.diffs,
        batch.lower,
        batch.upper,
        batch.since,
        (batch.seq_lo, batch.seq_hi),
    )
    flags = [batch.is_encoded(i) for i in range(len(batch.vals) + 1)]
    copy.encoded, copy.packed = (flags[0], True, *flags[1 + n :]), True
    return copy


def concat_parts(
    parts: Sequence[tuple[np.ndarray, Columns, np.ndarray, np.ndarray]], width: int, depth: int
) -> tuple[np.ndarray, Columns, np.ndarray, np.ndarray]:
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return (
            empty,
            tuple(empty for _ in range(width - 1)),
            np.zeros((0, depth + 1), np.int64),
            empty,
        )
    if len(parts) == 1:
        return parts[0]
    return (
        np.concatenate([p[0] for p in parts]),
        tuple(np.concatenate(c) for c in zip(*(p[1] for p in parts), strict=True)),
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]),
    )


class TraceHandle:
    """A reader's hold on a spine: how far it may be compacted, and what it has read.

    ``set_logical_compaction(frontier)`` promises the reader will only ask for accumulations
    at times in advance of ``frontier``; ``set_physical_compaction(seq)`` says it has read
    the batches numbered up to ``seq``. The spine compacts no further than every open handle
    allows; ``close()`` (or dropping the handle) releases the hold, and the handle with it: the
    spine may then compact past its frontier, so a closed handle reads nothing and is imported
    nowhere (:meth:`check_open`).

    ``upper`` is the frontier of the times not yet complete in the spine; ``wait(t)`` returns
    once ``t`` is complete, and ``cursor(at=t)`` reads it, refusing until it is.
    """

    def __init__(self, spine: Spine, logical: np.ndarray | None = None) -> None:
        self.spine = spine
        self.closed = False
        # by default the spine's compaction frontier of the moment (the minimum time while
        # nobody has read it): a handle taken late cannot promise the history the spine may
        # have compacted already, so reads and set_logical_compaction before it are wrong
        self.logical: np.ndarray | None = spine.since() if logical is None else logical
        # where a handle taken late starts (None: at the least time, or at no time): the
        # spine may be compacted that far already, so an operator's handle that follows its
        # input frontier (an import's reader, whose dataflow starts at time 0) must not fall
        # back before it, or the spine would claim that earlier times read exactly again
        floor = self.logical
        self._floor = floor if floor is not None and floor.any() else None
        self.acknowledged: int | None = None
        spine.handles.add(self)

    def set_logical_compaction(self, frontier: Iterable[Any]) -> None:
        """Compaction allowed up to ``frontier`` (times, as ints / ``Product`` / ``Lex``).

        The frontier only moves forward (each of its times at or after one of the current
        frontier's): the trace may already be compacted up to the current one, so it could not
        answer at earlier times.

        >>> h = TraceHandle(Spine(depth=0))
        >>> h.set_logical_compaction([3])
        >>> h.set_logical_compaction([2])
        Traceback (most recent call last):
        ...
        ValueError: trace '': cannot move the logical compaction frontier back from [3] to [2]: ...
        """
        self.check_open("set_logical_compaction")
        rows = lattice.frontier_rows(frontier, self.spine.depth)
        lex, was = self.spine.lex, self.logical
        if was is not None and not lattice.beyond(rows, was, lex).all():
            old, now = ([lattice.time_of(r, lex) for r in f] for f in (was, rows))
            raise ValueError(
                f"trace {self.spine.name!r}: cannot move the logical compaction frontier "
                f"back from {old} to {now}: the trace may be compacted up to {old} already; "
                f"each time of a new frontier must be at or after one of {old}"
            )
        self._advance(rows)

    def follow_frontier(self, frontier: Iterable[Any]) -> None:
        """:meth:`set_logical_compaction` for an operator's own handle, which follows its
        input frontier: that only advances, so the check is skipped (on tiny frontiers it
        cost more than the rest of the call, once per frontier change of every reader)."""
        self.follow_rows(lattice.frontier_rows(frontier, self.spine.depth))

    def follow_rows(self, rows: np.ndarray) -> None:
        """:meth:`follow_frontier` of a frontier already made rows (``lattice.frontier_rows``)."""
        self._advance(rows)

    def _advance(self, rows: np.ndarray) -> None:
        floor = self._floor
        if floor is not None:  # (see __init__) a frontier only advances: checked until past it
            lex = self.spine.lex
            if lattice.beyond(rows, floor, lex).all():
                self._floor = None
            else:
                rows = lattice.join_frontiers(rows, floor, lex)
        if self.logical is None or not np.array_equal(rows, self.logical):
            self.logical = rows  # a new array only for a new frontier: Spine.since caches
            self.spine.released()

    def set_physical_compaction(self, seq: int | None) -> None:
        """The reader has read the batches numbered up to ``seq`` (``None``: it holds no
        batches apart). It only moves forward: batches up to the current number may have
        been merged already."""
        if seq is not None and self.acknowledged is not None and seq < self.acknowledged:
            raise ValueError(
                f"trace {self.spine.name!r}: cannot move the physical compaction point back "
                f"from batch {self.acknowledged} to batch {seq}: batches up to "
                f"{self.acknowledged} may be merged already"
            )
        self.acknowledged = seq
        self.spine._maintain()
        self.spine.released()

    def close(self) -> None:
        self.closed = True
        self.spine.handles.discard(self)
        self.spine.released()  # what it held may be compacted now, input or not
        completion = self.spine._completion
        if completion is not None:
            # its waits raise now, not at the next move of the upper frontier, which may
            # never come (an idle input); the waits of the spine's other handles wake too,
            # find their handle open and wait again
            completion._end_waits()

    def check_open(self, what: str) -> None:
        """Raises ``ValueError`` naming ``what`` if the handle is closed: it no longer holds
        the trace's history, which may be compacted past its frontier since (read or imported
        through it, times before that would read wrong accumulations)."""
        if self.closed:
            raise ValueError(
                f"{what}: the trace handle of {self.spine.name!r} is closed, so the trace may "
                f"be compacted past its frontier; keep a handle open (advancing it with "
                f"set_logical_compaction) for as long as it is read or imported"
            )

    # --- completeness ------------------------------------------------------------------------
    @property
    def upper(self) -> list[Any]:
        """The frontier of the times not yet complete in the spine (differential dataflow's
        ``read_upper``): a time ``t`` is complete, its updates and every earlier time's all
        in the spine, once no time of ``upper`` is at or before it; ``[]`` once the dataflow
        completed. It is this handle's worker's spine: its share of the keys (a handle per
        worker, each with its own upper)."""
        return [lattice.time_of(r, self.spine.lex) for r in self.spine.upper]

    def complete(self, time: Any) -> bool:
        """Whether ``time`` is complete in the spine (see :attr:`upper`)."""
        return self._complete(self._time(time, "complete"))

    async def wait(self, time: Any = None) -> None:
        """Returns once ``time`` is complete in the spine (every time, if ``None``: once the
        dataflow completed), at once if it is already; :meth:`cursor` then reads it whole
        (``cursor(at=time)``). Waiting on a probe of the collection that was arranged is not
        enough: it may pass ``time`` while updates are still on their way to the spine (from
        another process, say). Woken by the spine as its upper frontier moves.

        Raises ``ValueError`` if the handle is closed (before or while waiting),
        ``TypeError`` for a time that is not of the trace's scope, and ``DataflowStopped``
        if the dataflow maintaining the trace stopped (failed, or its runtime was
        cancelled) before ``time`` completed: it never will.

        >>> import asyncio, naiad
        >>> from naiad.differential import Collection
        >>> async def main():
        ...     async with naiad.Runtime() as rt:
        ...         def build(scope):
        ...             session, collection = Collection.new_input(scope)
        ...             return session, collection.arrange_by_key().trace
        ...         session, trace = rt.dataflow(build).results[0]
        ...         session.insert(("a", 1))
        ...         session.advance_to(1)
        ...         await trace.wait(0)
        ...         cursor = trace.cursor(at=0)
        ...         return trace.upper, [(cursor.key(), cursor.values()) for _ in cursor]
        >>> asyncio.run(main())
        ([1], [('a', [(1, [(0, 1)])])])
        """
        self.check_open("wait")
        t = None if time is None else self._time(time, "wait")
        # (complete stays complete, whatever stopped the dataflow later)
        while not self._complete(t):
            try:
                await self.spine.completion().wait(t)
            except BaseException as e:
                if e is not self.spine.stopped:
                    raise
                raise self._never_complete(t, e) from e
            self.check_open("wait")  # woken by a close (see close), this one's or another's

    def _complete(self, time: Any) -> bool:
        if time is None:
            return not len(self.spine.upper)
        return not self.spine._upper_frontier().less_equal(time)

    def _time(self, time: Any, what: str) -> Any:
        """``time`` checked as a time of the trace's scope (``Product`` and ``Lex`` loop times
        are equal as tuples but ordered differently: the other one is refused)."""
        least = lattice.time_of(np.zeros(self.spine.depth + 1, np.int64), self.spine.lex)
        return as_time_like(time, least, f"{what}: a time of trace {self.spine.name!r}")

    def _never_complete(self, time: Any, failure: BaseException) -> DataflowStopped:
        what = "every time" if time is None else f"time {time!r}"
        # a dropped dataflow's trace says so as its other handles do
        kind = DataflowDropped if isinstance(failure, DataflowDropped) else DataflowStopped
        return kind(
            f"trace {self.spine.name!r}: {what} will never be complete: the dataflow "
            f"maintaining the trace stopped before completing ({type(failure).__name__}: "
            f"{failure}), its upper frontier at {self.upper}"
        )

    def cursor(self, seq: int | None = None, *, at: Any = None) -> Cursor:
        """A cursor over the updates of the batches numbered up to ``seq`` (all by default):
        what the spine holds now, which may lack updates of times that are not complete yet
        (see :attr:`upper`).

        With ``at``, a cursor over the updates at times at or before ``at``, so the diffs of
        each value sum to its multiplicity at ``at``; refused (``ValueError``, naming the
        trace, the time and the upper frontier) unless ``at`` is complete in the spine
        (:meth:`wait` for it) and in advance of this handle's logical compaction frontier
        (earlier times may be compacted away). ``at`` reads every batch: it does not combine
        with ``seq``.

        >>> s = Spine(depth=0, name="t")
        >>> h = TraceHandle(s)         # taken first: it holds every time
        >>> _ = s.insert_updates(np.array([1, 1]), (np.array([7, 8]),), np.array([[0], [2]]),
        ...                      np.ones(2, np.int64), np.array([[3]]))
        >>> c = h.cursor(at=1)
        >>> [(c.key(), c.values()) for _ in c]
        [(np.int64(1), [(7, [(0, 1)])])]
        >>> h.cursor(at=3)
        Traceback (most recent call last):
        ...
        ValueError: cursor: time 3 is not complete in trace 't' yet (its upper frontier is [3]): ...
        """
        self.check_open("cursor")
        if at is None:
            if seq is not None:
                self._check_apart(seq)
            return Cursor(self.spine, self.spine.batches_through(seq))
        if seq is not None:
            raise TypeError(
                f"cursor of trace {self.spine.name!r}: at= reads every batch, so it does not "
                f"combine with seq= (given {seq!r})"
            )
        t = self._time(at, "cursor")
        name = self.spine.name
        if not self._complete(t):
            never = ", and never will be: its dataflow stopped" if self.spine.stopped else ""
            raise ValueError(
                f"cursor: time {t!r} is not complete in trace {name!r} yet (its upper "
                f"frontier is {self.upper}){never}: updates at or before it may still arrive; "
                f"await the handle's wait({t!r}) first"
            )
        try:
            row = lattice.frontier_rows([t], self.spine.depth)
        except OverflowError:
            raise ValueError(
                f"cursor: time {t!r} is beyond the int64 range of trace {name!r}'s times"
            ) from None
        logical = self.logical
        if logical is not None and not lattice.beyond(row, logical, self.spine.lex)[0]:
            since = [lattice.time_of(r, self.spine.lex) for r in logical]
            raise ValueError(
                f"cursor: time {t!r} is not in advance of the logical compaction frontier "
                f"{since} of this handle on trace {name!r}: the trace may be compacted past "
                f"it, so accumulations there would not be exact"
            )
        return Cursor(self.spine, self.spine.batches_through(None), at=row[0])

    def _check_apart(self, seq: int) -> None:
        """Raises ``ValueError`` if the batches numbered up to ``seq`` were merged with later
        ones: a cursor over them would silently lack their updates (batches are kept apart
        only at a reader's physical compaction point)."""
        for b in self.spine.batches:
            if b.seq_lo <= seq < b.seq_hi:
                raise ValueError(
                    f"cursor of trace {self.spine.name!r}: the batches up to {seq} were merged "
                    f"with later ones (into batch {b.seq_lo}..{b.seq_hi}), so they cannot be "
                    f"read apart; set_physical_compaction({seq}) keeps them apart from then on"
                )

    def __repr__(self) -> str:
        return f"TraceHandle({self.spine.name!r}, {self.spine.total()} updates)"


class Cursor:
    """Key-ordered navigation over the updates of a list of batches (decoded values).

    >>> s = Spine(depth=0)
    >>> _ = s.insert_updates(np.array(["b", "a", "a"], dtype=object), (np.array([1, 2, 2]),),
    ...                      np.array([[0], [0], [1]]), np.array([1, 1, 1]), np.array([[2]]))
    >>> c = TraceHandle(s).cursor()
    >>> sorted((c.key(), c.values()) for _ in c)   # interned keys come in code order
    [('a', [(2, [(0, 1), (1, 1)])]), ('b', [(1, [(0, 1)])])]
    """

    def __init__(
        self, spine: Spine, batches: Sequence[Batch], at: np.ndarray | None = None
    ) -> None:
        self.spine = spine
        # the encoding of the rows read here: the spine may switch a column to codes later
        # (replacing its batches), and this cursor's rows must still be read as they were
        self._encoded = tuple(spine.encoded)
        self._packed = spine.packed
        keys, vals, times, diffs = concat_parts(
            [b.take(slice(None)) for b in batches], spine.width, spine.depth
        )
        if at is not None:  # (TraceHandle.cursor(at=...)): the updates at or before a time
            keep = lattice.less_equal(times, at, spine.lex)
            keys, vals, times, diffs = (
                keys[keep],
                tuple(v[keep] for v in vals),
                times[keep],
                diffs[keep],
            )
        # split: a sum at a time that merges compacted is a change between counts, not a
        # result; :meth:`values` sums the pieces of one into an exact Python int
        cols, self._times, self._diffs = consolidated([keys, *vals], times, diffs, split=True)
        self._keys, self._vals = cols[0], tuple(cols[1:])
        self._decoded_keys = self._decode(0, self._keys)
        self._starts = group_starts(self._keys)
        self._pos = 0
        INTERNER.hold(self)  # a cursor may be read long after its batches merged away

    def interned_columns(self) -> list[np.ndarray]:
        """The columns of codes this cursor holds (see :meth:`Interner.hold`)."""
        cols = (self._keys, *self._vals)
        return [c for c, e in zip(cols, self._encoded, strict=False) if e]

    def __iter__(self) -> Iterator[None]:
        """Steps through the keys (the cursor is positioned on each in turn)."""
        for p in range(len(self._starts)):
            self._pos = p
            yield None

    def valid(self) -> bool:
        return self._pos < len(self._starts)

    def key(self) -> Any:
        return self._decoded_keys[self._starts[self._pos]]

    def seek_key(self, key: Any) -> bool:
        """Moves to the first key at or after ``key``; whether it equals ``key``.

        Numeric keys are sought by a search, so ``key`` must be a real number (numpy would
        compare anything else as strings, or fail); interned keys are found by equality.

        >>> s = Spine(depth=0)
        >>> _ = s.insert_updates(np.array([1, 5, 9]), (), np.zeros((3, 1), np.int64),
        ...                      np.ones(3, np.int64), np.array([[1]]))
        >>> c = TraceHandle(s).cursor()
        >>> c.seek_key(4), c.key()
        (False, np.int64(5))
        >>> c.seek_key("4")
        Traceback (most recent call last):
        ...
        TypeError: cursor on trace '': cannot seek the key '4' (a str): the keys are int64 numbers
        """
        if not len(self._starts):  # no keys (perhaps none of a known type yet): not found
            self._pos = 0
            return False
        if self._encoded[0]:
            try:
                code = INTERNER.code_of(key)
            except TypeError:  # unhashable
                raise self._bad_key(key, "hashable Python values (interned)") from None
            if code is None:
                self._pos = len(self._starts)
                return False
            hits = np.flatnonzero(self._keys[self._starts] == code)
            self._pos = int(hits[0]) if len(hits) else len(self._starts)
            return bool(len(hits))
        if not isinstance(key, REAL_NUMBERS):
            raise self._bad_key(key, f"{self._keys.dtype} numbers")
        self._pos = int(np.searchsorted(self._keys[self._starts], key))
        return self.valid() and bool(self._keys[self._starts[self._pos]] == key)

    def _decode(self, i: int, col: np.ndarray) -> np.ndarray:
        return INTERNER.decode(col) if self._encoded[i] else col

    def _bad_key(self, key: Any, kind: str) -> TypeError:
        return TypeError(
            f"cursor on trace {self.spine.name!r}: cannot seek the key {key!r} "
            f"(a {type(key).__name__}): the keys are {kind}"
        )

    def values(self) -> list[tuple[Any, list[tuple[Any, int]]]]:
        """The current key's values, each with its ``(time, diff)`` history."""
        lo = self._starts[self._pos]
        hi = self._starts[self._pos + 1] if self._pos + 1 < len(self._starts) else len(self._keys)
        out: list[tuple[Any, list[tuple[Any, int]]]] = []
        vals = [self._decode(i + 1, v[lo:hi]).tolist() for i, v in enumerate(self._vals)]
        if self._packed:
            rows = [handed((*v, *rest)) for v, *rest in zip(*vals, strict=True)]
        else:
            rows = (
                list(zip(*vals, strict=True))
                if len(vals) > 1
                else (vals[0] if vals else [()] * (hi - lo))
            )
        for j, val in enumerate(rows):
            entry = (lattice.time_of(self._times[lo + j], self.spine.lex), int(self._diffs[lo + j]))
            if out and out[-1][0] == val:
                history = out[-1][1]
                if history[-1][0] == entry[0]:  # pieces of one sum beyond int64
                    history[-1] = (entry[0], history[-1][1] + entry[1])
                else:
                    history.append(entry)
            else:
                out.append((val, [entry]))
        return out
