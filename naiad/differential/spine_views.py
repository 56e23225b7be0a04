"""Read-only views of a spine whose times are presented otherwise: the machinery shared by an
arrangement entered into a loop (:mod:`~naiad.differential.entered`) and an arrangement
imported as of a frontier (:class:`AdvancedSpine`, ``import_trace(..., frontier=...)``).

A :class:`BatchView` shares its batch's key, value and diff columns, its distinct-key index
and its sequence numbers, and makes the times of the rows a reader takes on demand. A
:class:`SpineView` wraps the batches of the spine it shows (once per batch while it lives)
and has nothing of its own: its readers' :class:`ViewHandle` hold the shown spine back,
their frontiers translated by the view (:meth:`SpineView.outer_rows`).

:class:`AdvancedSpine`'s contract (differential dataflow's ``import_frontier``): every update
at ``t`` is presented at ``t`` advanced to the frontier ``F`` (:func:`lattice.advance_by`),
so a reader sees no time before ``F``, and accumulations at every time in advance of ``F``
are those of the spine itself. Its readers let the shown spine compact up to their frontiers
advanced to ``F``: they can never tell the times before ``F`` apart.
"""

from __future__ import annotations

import numpy as np

from naiad.differential import lattice
from naiad.differential.trace import Batch, Columns, Spine, TraceHandle
from naiad.differential.updates import take_rows
from naiad.operators.probe import ProbeHandle


class BatchView(Batch):
    """A batch of another spine, its times presented by :meth:`_times` (a subclass's)."""

    __slots__ = ("base",)

    def __init__(self, base: Batch) -> None:
        # no call to Batch.__init__: a view
        self.base = base
        self.keys, self.vals, self.diffs = base.keys, base.vals, base.diffs
        self.lower, self.upper, self.since = base.lower, base.upper, base.since
        self.seq_lo, self.seq_hi = base.seq_lo, base.seq_hi
        self.encoded, self.packed = base.encoded, base.packed

    @property
    def times(self) -> np.ndarray:
        """Every row's time, as presented (a new matrix per call: readers that take some
        rows call :meth:`take_times` instead)."""
        return self._times(slice(None))

    @times.setter
    def times(self, value: np.ndarray) -> None:
        raise AttributeError("a view of a batch is read-only")

    def _times(self, index: np.ndarray | slice) -> np.ndarray:
        raise NotImplementedError

    def take_times(self, index: np.ndarray | slice) -> np.ndarray:
        return self._times(index)

    def take(self, index: np.ndarray | slice) -> tuple[np.ndarray, Columns, np.ndarray, np.ndarray]:
        keys, vals, _, diffs = self.base.take(index)
        return keys, vals, self._times(index), diffs

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.base.lookup(keys)  # the base batch's distinct-key index, shared

    def key_ranges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.base.key_ranges(keys)


class SpineView(Spine):
    """A read-only view of the spine ``outer``: its batches wrapped by :meth:`view` as they
    are read, its frontiers translated by :meth:`inner_rows` and :meth:`outer_rows`."""

    def __init__(self, outer: Spine, depth: int, lex: tuple[bool, ...], name: str) -> None:
        self.outer = outer  # before Spine.__init__, which reads the upper frontier
        self._wrapped: dict[int, Batch] = {}  # id of an outer batch -> its view
        self._upper: tuple[np.ndarray, np.ndarray] | None = None  # outer upper, translated
        super().__init__(depth, lex, name, outer.worker)
        # the outer lists themselves: a column switched to codes there is switched here
        self.encoded, self.kinds = outer.encoded, outer.kinds
        self.whole, self.by_record = outer.whole, outer.by_record

    def view(self, batch: Batch) -> Batch:
        """``batch`` (of the outer spine) as this view presents it."""
        raise NotImplementedError

    @property
    def packed(self) -> bool:
        """The outer spine's (it may pack later: see ``Spine.pack``)."""
        return self.outer.packed

    @packed.setter
    def packed(self, value: bool) -> None:
        raise AttributeError("a view of a spine is read-only: its outer spine packs")

    @property
    def trailing(self) -> int:
        return self.outer.trailing

    @trailing.setter
    def trailing(self, value: int) -> None:
        raise AttributeError("a view of a spine is read-only: its outer spine packs")

    def inner_rows(self, rows: np.ndarray) -> np.ndarray:
        """A frontier of the outer spine as a frontier of this view."""
        return rows

    def outer_rows(self, rows: np.ndarray | None) -> np.ndarray | None:
        """A reader's frontier in this view as the frontier the outer spine may compact to."""
        return rows

    @property
    def upper(self) -> np.ndarray:
        upper, cached = self.outer.upper, self._upper
        if cached is None or cached[0] is not upper:  # the outer spine replaces, never mutates
            cached = self._upper = (upper, self.inner_rows(upper))
        return cached[1]

    @upper.setter
    def upper(self, value: np.ndarray) -> None:
        pass  # Spine.__init__ sets it; the view's upper is always the outer one's

    @property
    def stopped(self) -> BaseException | None:
        """What stopped the outer spine's dataflow before it completed (``None``: nothing)."""
        return self.outer.stopped

    @stopped.setter
    def stopped(self, value: BaseException | None) -> None:
        pass  # Spine.__init__ sets it; the view stops with its outer spine

    def watch(self, probe: ProbeHandle) -> None:
        self.outer.watch(probe)  # the view's upper moves (and stops) with the outer one's

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
        wrapped = self._wrapped
        out: list[Batch] = []
        for b in self.outer.batches_through(seq):
            view = wrapped.get(id(b))
            if view is None or getattr(view, "base", view) is not b:
                view = wrapped[id(b)] = self.view(b)
            out.append(view)
        if len(wrapped) > len(out):  # some view is of a batch not read now: perhaps merged away
            self.forget_merged()
        return out

    def forget_merged(self) -> None:
        """Drops the views of outer batches that a merge (or a recoding) replaced. A view holds
        its batch: kept, it would keep the outer spine's memory from falling as it merges and
        compacts, for as long as nobody reads again (for ever, once a loop is quiet: a
        collection retracted entirely stayed in memory)."""
        wrapped = self._wrapped
        if wrapped:
            live = {id(b) for b in self.outer.batches}  # a view's batch lives: ids are unique
            if not live.issuperset(wrapped):
                self._wrapped = {k: v for k, v in wrapped.items() if k in live}

    def since(self) -> np.ndarray:
        return self.inner_rows(self.outer.since())

    def reader(self, logical: np.ndarray | None = None) -> TraceHandle:
        return ViewHandle(self, self.outer.reader(self.outer_rows(logical)))

    def total(self) -> int:
        return self.outer.total()

    def nbytes(self) -> int:
        return 0  # nothing of its own

    def insert(self, batch: Batch, last: bool = True) -> Batch:
        raise TypeError(f"{self.name!r} is a view of {self.outer.name!r}: it is read-only")

    def _maintain(self, idle: bool = False) -> None:
        self.outer._maintain(idle)

    def idle_merge(self) -> None:
        self.outer.idle_merge()

    def exert(self, effort: int | None = None) -> None:
        self.outer.exert(effort)

    def released(self) -> None:
        self.outer.released()


class ViewHandle(TraceHandle):
    """A reader's handle on a :class:`SpineView`: its frontiers are the view's; what it allows
    and acknowledges goes to ``base``, its handle on the outer spine."""

    def __init__(self, spine: SpineView, base: TraceHandle) -> None:
        self.spine: SpineView = spine
        self.base = base

    @property
    def logical(self) -> np.ndarray | None:
        rows = self.base.logical
        return None if rows is None else self.spine.inner_rows(rows)

    @logical.setter
    def logical(self, value: np.ndarray | None) -> None:
        self.base.logical = self.spine.outer_rows(value)

    @property
    def acknowledged(self) -> int | None:
        return self.base.acknowledged

    @acknowledged.setter
    def acknowledged(self, value: int | None) -> None:
        self.base.acknowledged = value

    def _advance(self, rows: np.ndarray) -> None:
        outer = self.spine.outer_rows(rows)
        assert outer is not None
        self.base._advance(outer)

    def set_physical_compaction(self, seq: int | None) -> None:
        self.base.set_physical_compaction(seq)  # the outer spine may merge now
        self.spine.forget_merged()

    @property
    def closed(self) -> bool:  # type: ignore[override]  # the outer handle says
        return self.base.closed

    def close(self) -> None:
        self.base.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base!r}, {self.spine.name!r})"


class AdvancedBatch(BatchView):
    """A batch with every time advanced to ``frontier`` (its ``since`` the frontier, or its
    own where that is later)."""

    __slots__ = ("frontier", "lex_flags")

    def __init__(self, base: Batch, frontier: np.ndarray, lex: tuple[bool, ...]) -> None:
        super().__init__(base)
        self.frontier, self.lex_flags = frontier, lex
        self.since = lattice.minimal_rows(lattice.advance_by(base.since, frontier, lex), lex)

    def _times(self, index: np.ndarray | slice) -> np.ndarray:
        return lattice.advance_by(take_rows(self.base.times, index), self.frontier, self.lex_flags)

    def __repr__(self) -> str:
        return f"Advanced({self.base!r}, to {self.frontier.tolist()})"


class AdvancedSpine(SpineView):
    """The spine ``outer`` with every time advanced to ``frontier`` (see the module
    docstring): batches whose times all lie at or after it are shown as they are."""

    def __init__(self, outer: Spine, frontier: np.ndarray, name: str) -> None:
        self.frontier = frontier
        super().__init__(outer, outer.depth, outer.lex, name)

    def view(self, batch: Batch) -> Batch:
        if len(batch.lower) and lattice.beyond(batch.lower, self.frontier, self.lex).all():
            return batch  # every time at or after the lower frontier: none to advance
        return AdvancedBatch(batch, self.frontier, self.lex)

    def outer_rows(self, rows: np.ndarray | None) -> np.ndarray | None:
        if rows is None:
            return None
        return lattice.minimal_rows(lattice.advance_by(rows, self.frontier, self.lex), self.lex)
