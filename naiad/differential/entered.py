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

Compaction: a reader's :class:`~naiad.differential.spine_views.ViewHandle` holds a real handle on
the outer spine. A reader inside
the loop that promises to read only at times in advance of an inner frontier ``F`` allows the
outer trace to compact up to the outer parts of ``F``: an entered update at ``(t, 0)`` is at or
before an inner time ``s`` exactly when ``t`` is at or before ``s``'s outer part, so
accumulations at every inner time in advance of ``F`` are unchanged (updates entered at
counters above 0 in a ``Lex`` loop allow less: see :meth:`EnteredSpine.outer_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from naiad.differential import lattice
from naiad.differential.spine_views import BatchView, SpineView
from naiad.differential.trace import Batch, Spine, column_updates
from naiad.differential.updates import Updates
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


class EnteredBatch(BatchView):
    """An outer batch as seen inside a loop: its columns, its key index and its sequence
    numbers, with every time (and frontier) extended with loop counters: zero, or for the
    loops in ``levels`` that have a function, that function of the updates (``enter_at``;
    frontiers keep zero there: an update at ``(t, c)`` is at or after ``(lower, 0)`` and not
    at or after ``(upper, 0)`` exactly when ``t`` is so with ``lower`` and ``upper``)."""

    __slots__ = ("depth", "levels")

    def __init__(self, base: Batch, depth: int, levels: Levels = ()) -> None:
        super().__init__(base)
        self.depth, self.levels = depth, levels
        self.lower, self.upper = widened(base.lower, depth), widened(base.upper, depth)
        self.since = widened(base.since, depth)

    def _times(self, index: np.ndarray | slice) -> np.ndarray:
        """The rows ``index``'s times, extended; counters given by functions are computed
        from those rows' decoded records, at every read (nothing is stored)."""
        base = self.base
        times = widened(base.take_times(index), self.depth)
        if any(self.levels):
            updates = column_updates(base.decoded(index), times, base.diffs[index], base.packed)
            first = base.lower.shape[1]
            for j, counters in enumerate(self.levels):
                if counters is not None:
                    times[:, first + j] = counters(updates)
        return times

    def __repr__(self) -> str:
        return f"Entered({self.base!r}, depth {self.depth})"


class EnteredSpine(SpineView):
    """An outer spine read inside a loop ``depth - outer.depth`` levels below it: a read-only
    view (its batches are the outer spine's, wrapped as they are read); readers' handles hold
    the outer spine back."""

    def __init__(
        self, outer: Spine, depth: int, lex: tuple[bool, ...], name: str, levels: Levels = ()
    ) -> None:
        self.levels = levels
        super().__init__(outer, depth, lex, name)
        # whether some update may enter a Lex loop at a counter above 0 (see outer_rows)
        self.lex_counters = any(
            c is not None and self.lex[outer.depth + j] for j, c in enumerate(levels)
        )

    def view(self, batch: Batch) -> Batch:
        return EnteredBatch(batch, self.depth, self.levels)

    def inner_rows(self, rows: np.ndarray) -> np.ndarray:
        return widened(rows, self.depth)

    def outer_rows(self, rows: np.ndarray | None) -> np.ndarray | None:
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


def enter_arranged(arranged: Any, loop: Any, name: str, counters: Counters | None = None) -> Any:
    """``arranged`` inside ``loop`` (nested one or more levels below its scope), each update
    at loop counter 0 or at ``counters(batch)`` in the innermost loop: the body of
    :meth:`Arranged.enter` and :meth:`Arranged.enter_at`."""
    from naiad.differential.arrange import Arranged
    from naiad.differential.iterate import check_counted, check_loop_scope
    from naiad.operators import loops

    check_loop_scope(loop, name)
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
