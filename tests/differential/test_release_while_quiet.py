"""A reader that lets go of an arrangement's history while its input is quiet (no update, no
epoch advancing) must see the spine shrink: the release asks the arrangement's vertex for
idle activations (``Spine.released``, ``Vertex.activate_when_idle``), which compact what
the reader held (``Spine.compact_released``).

On the old code merging ran only when a batch or a frontier step reached the arrangement:
closing the handle (or advancing it) with the input quiet left the history in memory until
the next epoch, perhaps for ever (the counts are in the tests). A count test shows that the
per-round cost of an iterative computation does not grow: its merges are those of a run
whose releases ask for nothing, and the idle activations do not grow with the rounds.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.actors import worker as worker_module
from naiad.differential import Collection
from naiad.differential import trace as tr
from tests.differential.test_idle_merge_effort import contents, move_every_key, source

KEYS, EPOCHS = 40, 30
HELD = KEYS * (2 * EPOCHS - 1)  # every insert and removal, kept at exact times
POLLS = 400  # of 0.05 s: far beyond the idle delay, so a spine that stays full fails


async def churn(df: Any) -> None:
    """``EPOCHS`` epochs, each moving every key from value ``e - 1`` to value ``e``; returns
    once every arrangement sealed the last one."""
    first = df.results[0][0]
    for e in range(EPOCHS):
        move_every_key(first, e, KEYS)
        for session, _, _ in df.results:
            session.advance_to(e + 1)
        for _, arranged, _ in df.results:
            await asyncio.wait_for(arranged.trace.wait(e), 30)


def held(df: Any) -> int:
    return sum(arranged.spine.total() for _, arranged, _ in df.results)


async def shrunk(df: Any, at_most: int) -> int:
    """The rows the spines hold once they hold at most ``at_most``, or after ``POLLS`` polls
    with the input quiet (nothing is sent, no epoch advances)."""
    for _ in range(POLLS):
        rows = held(df)
        if rows <= at_most:
            return rows
        await asyncio.sleep(0.05)
    return held(df)


LIVE = Counter({(k, EPOCHS - 1): 1 for k in range(KEYS)})


@pytest.mark.parametrize("how", ["close", "advance"])
@pytest.mark.parametrize("workers", [1, 2])
async def test_a_release_with_the_input_quiet_shrinks_the_spine(workers: int, how: str) -> None:
    """On the old code the spines kept all 2360 rows (40 live records) after the release,
    however long the input stayed quiet."""
    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(source)
        await churn(df)
        assert held(df) == HELD
        for _, arranged, _ in df.results:
            if how == "close":
                arranged.trace.close()
            else:
                arranged.trace.set_logical_compaction([EPOCHS - 1])
        assert await shrunk(df, KEYS) == KEYS  # the live records, nothing else
        assert contents(df) == LIVE  # (a new handle where one was closed)
        for _, arranged, _ in df.results:
            arranged.trace.close()
        df.close_inputs()
        await asyncio.wait_for(df.finished(), 30)


def reduced(scope: naiad.Scope) -> Any:
    """A reduction's output arrangement (each key's sum of values), its handle taken when
    building: the reduce vertex maintains that spine."""
    session, collection = Collection.new_input(scope)
    sums = collection.arrange_by_key().reduce(lambda k, vs: [(sum(v * c for v, c in vs), 1)])
    sums.trace  # noqa: B018
    return session, sums, sums.stream.probe()


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_reduction_output_released_with_the_input_quiet_shrinks(workers: int) -> None:
    """On the old code the output spines kept all 2360 rows after the close."""
    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(reduced)
        await churn(df)
        assert held(df) == HELD  # each key's sum moves as its value does
        for _, arranged, _ in df.results:
            arranged.trace.close()
        assert await shrunk(df, KEYS) == KEYS
        assert contents(df) == LIVE
        df.close_inputs()
        await asyncio.wait_for(df.finished(), 30)


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_physical_release_with_the_input_quiet_merges_the_batches_kept_apart(
    workers: int,
) -> None:
    """A reader that keeps every batch apart (``set_physical_compaction(-1)``) while its
    logical frontier is advanced, then lets them go: the batches merge and compact. A guard:
    ``set_physical_compaction`` merged what it let go at once on the old code too."""
    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(source)
        for _, arranged, _ in df.results:
            arranged.trace.set_physical_compaction(-1)
        await churn(df)
        for _, arranged, _ in df.results:
            arranged.trace.set_logical_compaction([EPOCHS - 1])
        before = held(df)
        for _, arranged, _ in df.results:
            arranged.trace.set_physical_compaction(None)
        after = await shrunk(df, KEYS)
        assert [len(a.spine.batches) for _, a, _ in df.results] == [1] * workers
        assert before == HELD  # every batch apart: nothing merged
        assert after == KEYS
        assert contents(df) == LIVE
        df.close_inputs()
        await asyncio.wait_for(df.finished(), 30)


# --- the cost of a running computation --------------------------------------------------


def reachability(nodes: int) -> Any:
    """Nodes reachable from 0 along a chain of ``nodes``, in two epochs (the second cuts the
    chain in half): about ``nodes`` rounds of a loop whose join reads an arrangement."""

    def build(scope: naiad.Scope) -> Any:
        chain = [((i, i + 1), 1) for i in range(nodes - 1)]
        cut = [((nodes // 2, nodes // 2 + 1), -1)]
        edges = Collection.from_epochs(scope, [chain, cut]).arrange_by_key()
        roots = Collection.from_epochs(scope, [[(0, 1)]])

        def step(reach: Any) -> Any:
            hops = reach.map(lambda n: (n, ())).join(edges.enter(reach.scope))
            return reach.concat(hops.map(lambda r: r[-1])).distinct()

        return roots.iterate(step).changes()

    return build


class Merges:
    """Counts the merges of every spine (calls and rows), those run by idle activations
    apart, and the idle activations themselves."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = self.rows = self.idle_calls = self.idle_rows = self.steps = 0
        self._idle = False
        merge, compact = tr.merge, tr.Spine.compact_released

        def counted_merge(batches: Any, since: Any, lex: Any) -> tr.Batch:
            rows = sum(len(b) for b in batches)
            if self._idle:
                self.idle_calls, self.idle_rows = self.idle_calls + 1, self.idle_rows + rows
            else:
                self.calls, self.rows = self.calls + 1, self.rows + rows
            return merge(batches, since, lex)

        def counted_compact(spine: tr.Spine) -> None:
            self.steps += 1
            self._idle = True
            try:
                compact(spine)
            finally:
                self._idle = False

        monkeypatch.setattr(tr, "merge", counted_merge)
        monkeypatch.setattr(tr.Spine, "compact_released", counted_compact)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_running_loop_merges_no_more_for_its_releases(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """The operators' handles release at every round; with no idle delay at all, the idle
    activations they ask for still wait for the loop to end (its worker is never idle), so
    the loop merges exactly what it merges when releases ask for nothing, and the idle
    work does not grow with the rounds."""
    monkeypatch.setattr(worker_module, "IDLE_DELAY_S", 0.0)
    # scheduling slices by the clock otherwise: on 2 workers the interleaving, and with it the
    # batches and their merges, varied from run to run ((45, 814) or (46, 835) merges and rows
    # at 40 nodes, 1 to 2 runs in 12), which failed the comparison below now and then
    monkeypatch.setattr(worker_module, "YIELD_INTERVAL_S", 60.0)
    counts = {}
    for nodes in (10, 40):
        for asks in (True, False):
            with monkeypatch.context() as m:
                if not asks:
                    m.setattr(tr.Spine, "released", lambda self: None)
                merges = Merges(m)
                out = naiad.run(reachability(nodes), workers)
            reached: Counter[int] = Counter()
            for epoch in out:
                for node, _, diff in epoch:
                    reached[node] += diff
            assert +reached == Counter(range(nodes // 2 + 1))  # up to the cut edge's source
            counts[nodes, asks] = merges
    for nodes in (10, 40):
        asked, silent = counts[nodes, True], counts[nodes, False]
        assert (asked.calls, asked.rows) == (silent.calls, silent.rows)
        assert silent.steps == 0
    # one step per spine of the loop, once the dataflow completed (its readers close then),
    # not one per round; at most a merge per worker, collapsing what the distinct's handle
    # held when its arrangement completed
    for nodes in (10, 40):
        assert counts[nodes, True].steps == 2 * workers
        assert counts[nodes, True].idle_calls <= workers
