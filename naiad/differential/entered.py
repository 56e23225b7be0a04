"""An arrangement of an outer scope read inside a loop (K-Pg §4: iterative computations reuse
the outer index instead of building their own; differential dataflow's ``arranged.enter``).

Nothing is copied or re-sorted. The loop's readers (join, reduce) see the outer spine through
an :class:`EnteredSpine`, and its batches through :class:`EnteredBatch` wrappers that share the
outer batch's key, value and diff columns and its distinct-key index. The contract: an outer
update at time ``t`` is, inside the loop, the same update at ``t`` extended with loop counter
0 for every loop entered (as :meth:`Collection.enter` re-times records), and so are the
``lower``, ``upper`` and ``since`` frontiers of every batch. The extended times are made only
for the rows a reader takes (:meth:`EnteredBatch.take`, :meth:`EnteredBatch.take_times`), so
a small delta joined against a large entered index costs its matches, not the index's rows.

Compaction: an :class:`EnteredHandle` holds a real handle on the outer spine. A reader inside
the loop that promises to read only at times in advance of an inner frontier ``F`` allows the
outer trace to compact up to the outer parts of ``F``: an entered update at ``(t, 0)`` is at or
before an inner time ``s`` exactly when ``t`` is at or before ``s``'s outer part, so
accumulations at every inner time in advance of ``F`` are unchanged (updates entered at
counters above 0 in a ``Lex`` loop allow less: see :meth:`EnteredSpine._outer_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from naiad.differential import lattice
from naiad.differential.trace import Batch, Columns, Spine, TraceHandle
from naiad.differential.updates import Updates, take_rows
from naiad.operators.scope import Scope

Counters = Callable[[Updates], np.ndarray]
"""The loop counter of each update of a batch (see :func:`iterate.entry_counters`)."""
Levels = tuple[Counters | None, ...]
"""Per loop entered, outermost first: how its counter is given (``None``: 0)."""


def widened(times: np.ndarray, depth: int) -> np.ndarray:
    """Time rows (or a frontier) extended with zero loop counters to ``depth + 1`` columns.

    >>> widened(np.array([[3], [5]]), 2).tolist()
    [[3, 0, 0], [5, 0, 0]]
    """
    extra = depth + 1 - times.shape[1]
    if extra == 0:
        return times
    return np.hstack([times, np.zeros((len(times), extra), dtype=times.dtype)])


class EnteredBatch(Batch):
    """An outer batch as seen inside a loop: its columns, its key index and its sequence
    numbers, with every time (and frontier) extended with loop counters: zero, or for the
    loops in ``levels`` that have a function, that function of the updates (``enter_at``;
    frontiers keep zero there: an update at ``(t, c)`` is at or after ``(lower, 0)`` and not
    at or after ``(upper, 0)`` exactly when ``t`` is so with ``lower`` and ``upper``)."""

    __slots__ = ("base", "depth", "levels")

    def __init__(self, base: Batch, depth: int, levels: Levels = ()) -> None:
        # no call to Batch.__init__: a view
        self.base, self.depth, self.levels = base, depth, levels
        self.keys, self.vals, self.diffs = base.keys, base.vals, base.diffs
        self.lower, self.upper = widened(base.lower, depth), widened(base.upper, depth)
        self.since = widened(base.since, depth)
        self.seq_lo, self.seq_hi = base.seq_lo, base.seq_hi
        self.encoded = base.encoded

    @property
    def times(self) -> np.ndarray:
        """Every row's time, extended (a new matrix per call: readers that take some rows
        call :meth:`take_times` instead)."""
        return self._times(slice(None))

    @times.setter
    def times(self, value: np.ndarray) -> None:
        raise AttributeError("an entered batch is read-only")

    def take_times(self, index: np.ndarray | slice) -> np.ndarray:
        return self._times(index)

    def take(self, index: np.ndarray | slice) -> tuple[np.ndarray, Columns, np.ndarray, np.ndarray]:
        keys, vals, _, diffs = self.base.take(index)
        return keys, vals, self._times(index), diffs

    def _times(self, index: np.ndarray | slice) -> np.ndarray:
        """The rows ``index``'s times, extended; counters given by functions are computed
        from those rows' decoded records, at every read (nothing is stored)."""
        base = self.base
        times = widened(take_rows(base.times, index), self.depth)
        if any(self.levels):
            data = (
                base.decode(0, base.keys[index]),
                *(base.decode(i + 1, v[index]) for i, v in enumerate(base.vals)),
            )
            updates = Updates(data, times, base.diffs[index])
            first = base.times.shape[1]
            for j, counters in enumerate(self.levels):
                if counters is not None:
                    times[:, first + j] = counters(updates)
        return times

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.base.lookup(keys)  # the outer batch's distinct-key index, shared

    def key_ranges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.base.key_ranges(keys)

    def __repr__(self) -> str:
        return f"Entered({self.base!r}, depth {self.depth})"


class EnteredSpine(Spine):
    """An outer spine read inside a loop ``depth - outer.depth`` levels below it: a read-only
    view (its batches are the outer spine's, wrapped as they are read); readers' handles hold
    the outer spine back."""

    def __init__(
        self, outer: Spine, depth: int, lex: tuple[bool, ...], name: str, levels: Levels = ()
    ) -> None:
        self.outer = outer  # before Spine.__init__, which reads the upper frontier
        self.levels = levels
        self._wrapped: dict[int, EnteredBatch] = {}  # id of an outer batch -> its view
        self._upper: tuple[np.ndarray, np.ndarray] | None = None  # outer upper, widened
        super().__init__(depth, lex, name, outer.worker)
        # the outer lists themselves: a column switched to codes there is switched here
        self.encoded, self.kinds = outer.encoded, outer.kinds
        self.whole, self.by_record = outer.whole, outer.by_record
        # whether some update may enter a Lex loop at a counter above 0 (see _outer_rows)
        self.lex_counters = any(
            c is not None and self.lex[outer.depth + j] for j, c in enumerate(levels)
        )

    @property
    def upper(self) -> np.ndarray:
        upper, cached = self.outer.upper, self._upper
        if cached is None or cached[0] is not upper:  # the outer spine replaces, never mutates
            cached = self._upper = (upper, widened(upper, self.depth))
        return cached[1]

    @upper.setter
    def upper(self, value: np.ndarray) -> None:
        pass  # Spine.__init__ sets it; the view's upper is always the outer one's

    @property
    def batches(self) -> list[Batch]:
        return self.batches_through(None)

    @batches.setter
    def batches(self, value: list[Batch]) -> None:
        pass  # Spine.__init__ sets it; the view's batches are always the outer ones

    def batches_through(self, seq: int | None) -> list[Batch]:
        # Each outer batch is wrapped once and the wrapper reused while the batch lives
        # (batches are immutable once inserted; a merge or a recoding makes new ones): a loop
        # reads the index every round, and re-wrapping cost ~4% of an incremental WCC's CPU.
        wrapped, depth, levels = self._wrapped, self.depth, self.levels
        out: list[Batch] = []
        for b in self.outer.batches_through(seq):
            view = wrapped.get(id(b))
            if view is None or view.base is not b:
                view = wrapped[id(b)] = EnteredBatch(b, depth, levels)
            out.append(view)
        if len(wrapped) > len(out):  # some view is of a batch not read now: perhaps merged away
            self.forget_merged()
        return out

    def forget_merged(self) -> None:
        """Drops the views of outer batches that a merge (or a recoding) replaced. A view holds
        its batch: kept, it would keep the outer spine's memory from falling as it merges and
        compacts, for as long as the loop does not read again (for ever, once the loop is
        quiet: a collection retracted entirely stayed in memory)."""
        wrapped = self._wrapped
        if wrapped:
            live = {id(b) for b in self.outer.batches}  # a view's batch lives: ids are unique
            if not live.issuperset(wrapped):
                self._wrapped = {k: v for k, v in wrapped.items() if k in live}

    def since(self) -> np.ndarray:
        return widened(self.outer.since(), self.depth)

    def reader(self, logical: np.ndarray | None = None) -> TraceHandle:
        return EnteredHandle(self, self.outer.reader(self._outer_rows(logical)))

    def _outer_rows(self, rows: np.ndarray | None) -> np.ndarray | None:
        """An inner frontier's outer parts (minimal), the frontier the outer trace may take.

        Not in a Lex loop that updates enter at counters above 0: there ``(t, c)`` is before
        ``(s, i)`` when ``t < s`` whatever ``c``, but only if ``c <= i`` when ``t == s``, so an
        outer time advanced up to ``s`` would move its update after ``(s, 0)``. Such a reader
        lets outer times advance only to ``g = (e - 1, 0, ..., 0)``, ``e`` the least epoch of
        its frontier: every outer time ``s`` read later has an epoch of at least ``e``, so
        ``g < s``, and ``join(t, g)`` is either ``t`` itself (``t``'s epoch at least ``e - 1``)
        or has epoch ``e - 1`` (is no ``s``); both ``t <= s`` and ``t == s`` are kept, in any
        nesting of Product and Lex loops. (Not compacting such an arrangement of a loop at all
        kept every epoch's updates for ever.)"""
        if rows is None:
            return None
        outer = lattice.minimal_rows(rows[:, : self.outer.depth + 1].copy(), self.outer.lex)
        if self.lex_counters and len(outer):
            before = np.zeros((1, self.outer.depth + 1), dtype=np.int64)
            before[0, 0] = max(int(outer[:, 0].min()) - 1, 0)
            return before
        return outer

    def total(self) -> int:
        return self.outer.total()

    def nbytes(self) -> int:
        return 0  # nothing of its own

    def insert(self, batch: Batch) -> Batch:
        raise TypeError(f"{self.name!r} is an entered arrangement: it is read-only")

    def _maintain(self) -> None:
        self.outer._maintain()

    def idle_merge(self) -> None:
        self.outer.idle_merge()


class EnteredHandle(TraceHandle):
    """A reader's handle inside a loop: its frontiers are the loop's times; what it allows and
    acknowledges goes to ``base``, its handle on the outer spine."""

    def __init__(self, spine: EnteredSpine, base: TraceHandle) -> None:
        self.spine: EnteredSpine = spine
        self.base = base

    @property
    def logical(self) -> np.ndarray | None:
        rows = self.base.logical
        return None if rows is None else widened(rows, self.spine.depth)

    @logical.setter
    def logical(self, value: np.ndarray | None) -> None:
        self.base.logical = self.spine._outer_rows(value)

    @property
    def acknowledged(self) -> int | None:
        return self.base.acknowledged

    @acknowledged.setter
    def acknowledged(self, value: int | None) -> None:
        self.base.acknowledged = value

    def _advance(self, rows: np.ndarray) -> None:
        outer = self.spine._outer_rows(rows)
        assert outer is not None
        self.base._advance(outer)

    def set_physical_compaction(self, seq: int | None) -> None:
        self.base.set_physical_compaction(seq)  # the outer spine may merge now
        self.spine.forget_merged()

    def close(self) -> None:
        self.base.close()

    def __repr__(self) -> str:
        return f"EnteredHandle({self.base!r}, depth {self.spine.depth})"


def enter_arranged(arranged: Any, loop: Any, name: str, counters: Counters | None = None) -> Any:
    """``arranged`` inside ``loop`` (nested one or more levels below its scope), each update
    at loop counter 0 or at ``counters(batch)`` in the innermost loop: the body of
    :meth:`Arranged.enter` and :meth:`Arranged.enter_at`."""
    from naiad.differential.arrange import Arranged
    from naiad.differential.iterate import check_counted
    from naiad.operators import loops

    if not isinstance(loop, Scope):
        raise TypeError(f"{name}: expected a loop scope to enter, not {type(loop).__name__}")
    check_counted(loop, counters, name)
    spine = arranged.spine
    outer, levels = (spine.outer, spine.levels) if isinstance(spine, EnteredSpine) else (spine, ())
    chain: list[Scope] = []
    scope: Any = loop
    while scope is not None and scope is not arranged.scope:
        chain.append(scope)
        scope = scope.parent
    if scope is None or not chain:
        where = "is" if scope is not None else "is not nested inside"
        raise ValueError(
            f"{name}: {loop.path()!r} {where} the arrangement's own scope "
            f"{arranged.scope.path()!r}; an arrangement enters a loop nested inside it"
        )
    stream = arranged.stream
    inward = chain[::-1]
    entered = [i for i, scope in enumerate(inward) if not scope.is_region]
    if not entered:  # regions only: the same times, so the same spine, read as it is
        for inner in inward:
            stream = loops.enter(stream, inner, name)
        return Arranged(stream, arranged.spine)
    depth = loop.depth
    # the levels of the loops entered before (an entered arrangement entered again), zero
    # counters, padded to this depth, then this loop's (counters only for the innermost)
    levels = (*levels, *[None] * (depth - outer.depth - len(levels) - 1), counters)
    if not any(levels):
        levels = ()
    view = EnteredSpine(outer, depth, lattice.scope_lex(loop), f"{outer.name}@{name}", levels)

    def present(batch: Batch) -> Batch:
        base = batch.base if isinstance(batch, EnteredBatch) else batch
        return EnteredBatch(base, depth, levels)

    for i, inner in enumerate(inward):  # the batches are wrapped entering the innermost loop
        stream = loops.enter(stream, inner, name, present if i == entered[-1] else None)
    return Arranged(stream, view)
