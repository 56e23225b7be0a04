"""Materialized views: a collection's accumulated contents, read at completed times.

A :class:`View` holds the updates its input sent as a few consolidated *runs*, oldest first
(a merge's sum beyond int64, a change between counts, held as several rows, as a spine's),
merged geometrically as a :class:`~naiad.differential.trace.Spine` merges batches: a new
message is a run (a few small ones wait and are merged together), and the youngest run is
merged into its elder neighbour while that neighbour is at most twice its size. Runs then
halve in size from oldest to youngest, so there are O(log n) of them, and each update is
merged O(log n) times: no message re-sorts what the view already holds. Until a compaction
frontier is set, nothing can be compacted, so a view that keeps every time appends messages
as they come (as cheap as before) and merges them at the next read or when a frontier is
first set.

A view answers only at times in advance of its *compaction frontier* (differential
dataflow's logical compaction; a time is in advance of a frontier when it is at or after one
of its times). Every merge advances the times of the updates it merges to that frontier
(:func:`~naiad.differential.lattice.advance_by`), which leaves the accumulation at every time
in advance of the frontier as it was, so the changes of a record before the frontier cancel
or sum into one update: memory follows the records alive and the times still readable, not
the history.

Invariant: at every time in advance of the compaction frontier, the accumulation of the
updates held equals the accumulation of every update received.

The frontier is the one the user set (:meth:`View.set_logical_compaction`; the least time
until then: every completed time stays readable) and, for a view made with
``history=False``, one that follows the view's input: each time of the input frontier with
its epoch one less and its loop counters 0 (for integer times, the latest complete epoch).
Where both apply the view answers at times in advance of both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from naiad.actors.supervision import DataflowDropped
from naiad.actors.vertex import Vertex
from naiad.differential import lattice
from naiad.differential.trace import TAIL_BATCHES, TAIL_ROWS
from naiad.differential.updates import Updates, merge_updates, records_of
from naiad.operators.gather import refusal
from naiad.operators.probe import ProbeHandle, input_frontier
from naiad.progress.antichain import MutableAntichain
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time_like


class View:
    """The accumulated contents of a collection, readable at completed times in advance of
    its compaction frontier (see the module's documentation; make one with
    :meth:`Collection.view <naiad.differential.Collection.view>`).

    >>> import asyncio, naiad
    >>> from naiad.differential import Collection
    >>> async def main():
    ...     async with naiad.Runtime() as rt:
    ...         def build(scope):
    ...             session, collection = Collection.new_input(scope)
    ...             return session, collection.view()
    ...         session, view = rt.dataflow(build).results[0]
    ...         for epoch in range(3):
    ...             session.insert(epoch)
    ...             session.advance_to(epoch + 1)
    ...         await view.wait(2)
    ...         before = view.at(0)
    ...         view.set_logical_compaction([2])      # times before 2 are not read again
    ...         return before, view.at(2), view.since
    >>> asyncio.run(main())
    ({0: 1}, {0: 1, 1: 1, 2: 1}, [2])
    """

    def __init__(
        self,
        lex: tuple[bool, ...],
        name: str = "view",
        history: bool = True,
        gathered: bool = False,
    ) -> None:
        self.lex = lex
        self.name = name
        self.history = history
        self.gathered = gathered  # every worker's updates go to worker 0's view
        self.runs: list[Updates] = []  # oldest first, each at most half its elder's size
        least = self._least = np.zeros((1, len(lex) + 1), dtype=np.int64)
        self._requested = least  # set_logical_compaction's frontier (rows)
        self._following = least  # history=False: the frontier that follows the input
        self._since = least  # the compaction frontier: in advance of both
        self._merged_to: np.ndarray | None = None  # the frontier of the last full merge
        self.vertex: ViewVertex | None = None
        self._shape = lattice.time_of(least[0], lex)  # the least time: the times' classes

    # --- reading ---------------------------------------------------------------------------
    def complete(self, time: Any) -> bool:
        """Whether no more changes at or before ``time`` can arrive."""
        assert self.vertex is not None
        return not self.vertex.handle.frontier.less_equal(self._time(time))

    async def wait(self, time: Any = None) -> None:
        """Returns once ``time`` is complete here (every time, if ``time`` is None), so that
        :meth:`at` can read it. A probe on the collection is not enough: it may pass a time
        while changes are still on their way to the view (from another worker, say)."""
        assert self.vertex is not None
        await self.vertex.handle.wait(None if time is None else self._time(time))

    def at(self, time: Any) -> dict[Any, int]:
        """``{record: multiplicity}`` at ``time``, which must be complete and in advance of the
        compaction frontier (:attr:`since`). A gathered view is read at worker 0, which
        holds every worker's records: another worker's holds none, so it refuses to answer."""
        time = self._time(time)
        if not self.complete(time):  # (first: read from the build, it has no worker yet)
            raise ValueError(
                f"view {self.name!r}: time {time!r} is not complete yet; its contents may change"
            )
        self._check_gathered()
        row = self._rows([time], f"time {time!r}")
        if not lattice.beyond(row, self._least, self.lex)[0]:
            # not a compaction's doing: no collection has times there (reading one would
            # otherwise be blamed on set_logical_compaction, which the user never called)
            raise ValueError(
                f"view {self.name!r}: time {time!r} is before the least time {self._shape!r}: "
                "times are never negative"
            )
        if not lattice.beyond(row, self._since, self.lex)[0]:
            raise ValueError(
                f"view {self.name!r}: time {time!r} is not in advance of the view's compaction "
                f"frontier {self.since}: {self._compacted_why()}"
            )
        self._merge_all()  # the read is linear in what is held anyway; the next one is cheaper
        if not self.runs:
            return {}
        u = self.runs[0]
        u = u.take(lattice.less_equal(u.times, row, self.lex))
        # at the time read, so that a multiplicity beyond int64 is reported there
        u = u.retimed(np.repeat(row, len(u), axis=0)).consolidate()
        return dict(zip(records_of(u.data), u.diffs.tolist(), strict=True))

    @property
    def since(self) -> list[Any]:
        """The compaction frontier: :meth:`at` answers at times in advance of it (at or after
        one of its times); empty once the view released its contents."""
        return [lattice.time_of(r, self.lex) for r in self._since]

    def total(self) -> int:
        """How many updates the view holds (what its memory is proportional to)."""
        return sum(len(u) for u in self.runs)

    def _check_gathered(self) -> None:
        # without this, a script reading df.results[0]'s view answers correctly on one
        # process and reads {} in process 1 of a cluster, whose results[0] is worker W's
        if self.vertex is not None:
            self.vertex.handle._check_runs()  # (a vertex whose build raised has no worker)
        if self.gathered and self.vertex is not None and self.vertex.index != 0:
            raise ValueError(refusal(f"view {self.name!r}", self.vertex.index, "Collection.view()"))

    # --- compaction ------------------------------------------------------------------------
    def set_logical_compaction(self, frontier: Iterable[Any]) -> None:
        """Promises that :meth:`at` will only be asked for times in advance of ``frontier``
        (times, as ints / ``Product`` / ``Lex``), as a differential dataflow trace handle's
        ``set_logical_compaction``: the view may then advance earlier updates to it, and
        refuses reads at other times. An empty frontier releases the view's contents: it is
        never read again. The frontier only moves forward (each of its times at or after one
        of the frontier set before): the view may be compacted that far already.

        >>> view = View(())
        >>> view.set_logical_compaction([3])
        >>> view.set_logical_compaction([2])
        Traceback (most recent call last):
        ...
        ValueError: view 'view': cannot move the compaction frontier back from [3] to [2]: ...
        """
        try:
            times = [self._time(t) for t in frontier]
        except TypeError as e:
            if isinstance(frontier, Iterable):
                raise
            raise TypeError(
                f"view {self.name!r}: set_logical_compaction takes a frontier, a list of "
                f"times, not {frontier!r}"
            ) from e
        rows = lattice.minimal_rows(self._rows(times, f"compaction frontier {times!r}"), self.lex)
        was = self._requested
        if not lattice.beyond(rows, was, self.lex).all():
            old = [lattice.time_of(r, self.lex) for r in was]
            now = [lattice.time_of(r, self.lex) for r in rows]
            raise ValueError(
                f"view {self.name!r}: cannot move the compaction frontier back from {old} to "
                f"{now}: the view may be compacted up to {old} already; each time of a new "
                f"frontier must be at or after one of {old}"
            )
        self._requested = rows
        self._update_since()

    def _follow(self, frontier: MutableAntichain) -> None:
        """``history=False``: the input frontier moved; the compaction frontier follows it
        (each of its times with the epoch one less and loop counters 0). Once the input is
        complete, every update is merged, so memory falls to what the last reads need."""
        if len(frontier.frontier):
            rows = lattice.frontier_rows(frontier.frontier, len(self.lex))
            rows[:, 0] = np.maximum(rows[:, 0] - 1, 0)
            rows[:, 1:] = 0
            self._following = lattice.minimal_rows(rows, self.lex)
            self._update_since()
        else:
            self._merge_all()

    def _update_since(self) -> None:
        requested, following = self._requested, self._following
        if self.history or not len(requested):
            since = requested
        else:  # in advance of both
            since = lattice.join_frontiers(requested, following, self.lex)
        was, self._since = self._since, since
        if not len(since):
            self.runs = []  # never read again
        elif was is self._least and since is not self._least:
            self._merge_all()  # the runs appended while nothing could be compacted

    def _compacted_why(self) -> str:
        if not len(self._since):
            return "the view released its contents (an empty set_logical_compaction frontier)"
        if self.history:
            return "set_logical_compaction allowed the view to forget earlier times"
        return (
            "a view made with history=False keeps only the latest complete epoch and later "
            "times (history=True keeps every time until set_logical_compaction)"
        )

    # --- maintenance -----------------------------------------------------------------------
    def _insert(self, batch: Updates) -> None:
        """Adds a message's updates as the youngest run, then merges as :class:`Spine` does
        (its constants, for the same reason): a few small runs wait and are merged in one
        go, since a merge costs a consolidation however small; then the youngest run is
        merged into its elder while that one is at most twice its size."""
        if not len(batch) or not len(self._since):
            return
        runs = self.runs
        runs.append(batch)
        if self._since is self._least:
            # nothing can be compacted yet (every time readable): a merge would only sort, so
            # messages are appended as they come and merged by the next read, or once when a
            # compaction frontier is first set
            return
        small = 0
        while small < len(runs) and len(runs[-1 - small]) <= TAIL_ROWS:
            small += 1
        if small > TAIL_BATCHES:
            self._merge_last(small)
        elif small:
            return
        while len(runs) >= 2 and len(runs[-2]) <= 2 * len(runs[-1]):
            self._merge_last(2)

    def _merge_last(self, count: int) -> None:
        # only reached with a compaction frontier set (_insert appends until then)
        merged = merge_updates(self.runs[-count:], self._since, self.lex, split=True)
        self.runs[-count:] = [merged] if len(merged) else []

    def _merge_all(self) -> None:
        """Merges every run into one, compacted to the current frontier (nothing to do if
        that one run is compacted to it already)."""
        if len(self.runs) > 1 or (self.runs and self._merged_to is not self._since):
            merged = merge_updates(self.runs, self._since, self.lex, split=True)
            self.runs = [merged] if len(merged) else []
            self._merged_to = self._since

    def _time(self, time: Any) -> Any:
        """``time`` checked as one of the view's scope: ``Product`` and ``Lex`` loop times
        are equal as tuples but ordered differently, so the one the scope does not use is
        refused rather than read by the other's order."""
        return as_time_like(time, self._shape, "a view's time")

    def _rows(self, times: list[Any], what: str) -> np.ndarray:
        try:
            return lattice.frontier_rows(times, len(self.lex))
        except OverflowError:
            raise ValueError(
                f"view {self.name!r}: {what} is beyond the int64 range of a collection's times"
            ) from None


class ViewVertex(Vertex):
    def __init__(self, view: View) -> None:
        self.view = view
        view.vertex = self
        # what View.wait awaits (a failure of the runtime reaches it as a probe's does)
        self.handle = ProbeHandle(input_frontier(self, view._shape), len(view.lex))
        self.handle._what = f"view {view.name!r}"

    def on_recv(self, port: int, cap: Capability, batch: Updates) -> None:
        self.view._insert(batch)

    def build_failed(self) -> None:
        self.handle._never_runs(f"view {self.view.name!r}")

    def dropped(self, error: DataflowDropped) -> None:
        self.handle._drop(DataflowDropped(f"view {self.view.name!r}: {error}"))

    def on_frontier(self) -> None:
        if not self.view.history:
            self.view._follow(self.frontier(0))
        elif not len(self.frontier(0).frontier):
            self.view._merge_all()  # input complete: idle merge effort, so memory falls
        self.handle._check_waiters()
