"""``Reachability`` without the all-pairs ``Ψ``: the strategy choice, ``reaching`` and ``within``
against oracles that never use the new code paths.

Building a graph computed ``Ψ`` from every location once (``O(M**2)`` on a chain of ``M``
operators); now it computes ``Ψ`` only inside cycles, counts :func:`acyclic_fanout` by a pass
over the components, and computes ``Ψ`` from or to one location on demand. The choice between
``PsiTracker`` and ``FrontierTracker`` must be the one the whole ``Ψ`` gave: checked against a
count by plain graph search on random graphs (``test_reachability``'s generator) and against
the former formula on the whole ``Ψ`` on the graphs the runtime builds (chains, the coordination
loop, WCC). Unwatched targets (the inputs of stateless built-ins, which ``Ψ`` skips) count
in neither.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from benchmarks.coordination import ticker_loop
from naiad.actors.vertex import StatelessVertex
from naiad.differential.collection import Collection
from naiad.libraries import graph
from naiad.progress.reachability import (
    FRONTIER_TRACKING_ABOVE,
    FrontierTracker,
    PsiTracker,
    Reachability,
    Tracker,
    acyclic_fanout,
)
from tests.progress.test_reachability import Model, graphs, nested_graphs
from tests.test_dataflow_build_cost import probed_chain

SETTINGS = settings(max_examples=80, deadline=None, database=None)


def reached(model: Model, start: int) -> set[int]:
    """The locations reachable from ``start`` by one step or more (plain search, no times)."""
    seen: set[int] = set()
    work = [nxt for nxt, _ in model.steps[start]]
    while work:
        loc = work.pop()
        if loc not in seen:
            seen.add(loc)
            work.extend(nxt for nxt, _ in model.steps[loc])
    return seen


def searched_fanout(model: Model, unwatched: frozenset[int] = frozenset()) -> float:
    """acyclic_fanout's definition, by graph search: watched targets off every cycle reached."""
    locs = model.locations()
    reach = {loc: reached(model, loc) for loc in locs}
    off_cycles = {t for t in model.targets if t not in reach[t] and t not in unwatched}
    return sum(len((reach[loc] - {loc}) & off_cycles) for loc in locs) / len(locs)


def fanout_by_psi(r: Reachability, unwatched: frozenset[int] = frozenset()) -> float:
    """The former acyclic_fanout, from the whole ``Ψ`` (unwatched targets left out)."""
    off_cycles = [len(r.components[c]) == 1 for c in r.component]
    locs = range(len(r.locations))
    count = sum(
        1
        for loc in locs
        for t in r.target_locations
        if t != loc and off_cycles[t] and t not in unwatched and r.summaries(loc, t)
    )
    return count / len(r.locations)


@SETTINGS
@given(spec=st.one_of(graphs(), nested_graphs()), above=st.floats(0, 6), data=st.data())
def test_fanout_and_strategy_match_graph_search(spec: Any, above: float, data: Any) -> None:
    model = Model(spec)
    r = model.reach
    unwatched = frozenset(data.draw(st.sets(st.sampled_from(model.targets)), label="unwatched"))
    expected = searched_fanout(model, unwatched)
    assert acyclic_fanout(r, unwatched=unwatched) == expected
    assert fanout_by_psi(r, unwatched) == expected
    # stopping early never changes a decision, at any threshold
    for limit in (above, expected, FRONTIER_TRACKING_ABOVE):
        assert (acyclic_fanout(r, limit, unwatched) > limit) == (expected > limit), limit
        assert acyclic_fanout(r, limit, unwatched) <= expected
    big = expected > FRONTIER_TRACKING_ABOVE
    assert type(Tracker(r, unwatched=unwatched)) is (FrontierTracker if big else PsiTracker)


@SETTINGS
@given(spec=st.one_of(graphs(), nested_graphs()))
def test_reaching_and_within_are_psi_seen_from_one_location(spec: Any) -> None:
    r = Model(spec).reach
    locs = range(len(r.locations))
    for loc in locs:
        expected = [(o, set(r.summaries(o, loc))) for o in locs if r.summaries(o, loc)]
        assert [(o, set(s)) for o, s in r.reaching(loc)] == expected, loc
        component = r.components[r.component[loc]]
        expected_within = {o: r.summaries(loc, o) for o in component} if len(component) > 1 else {}
        assert r.within(loc) == expected_within, loc


def built(
    build: Callable[[Any], Any], feed: Callable[[Any], None]
) -> tuple[Reachability, frozenset[int], type]:
    """The reachability of ``build``'s dataflow, the targets no vertex watches (the inputs of
    stateless built-ins) and the class of its tracker."""

    async def main() -> tuple[Reachability, frozenset[int], type]:
        async with naiad.Runtime(1) as rt:
            df = rt.dataflow(build)
            kind = type(df.instances[0].process.progress.tracker(df.id))
            feed(df.results[0])
            await df.finished()
            shards = df.instances[0].shards[0]
            unwatched = frozenset(
                t
                for shard in shards
                if isinstance(shard.logic, StatelessVertex) and not shard.wants_frontier
                for t in shard.targets
            )
            return df.instances[0].reachability, unwatched, kind

    return asyncio.run(main())


def chain(maps: int) -> Callable[[Any], Any]:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("in")
        for _ in range(maps):
            stream = stream.map(lambda x: x + 1)
        stream.probe()
        return handle

    return build


def wcc(maps: int) -> Callable[[Any], Any]:
    def build(scope: Any) -> Any:
        session, edges = Collection.new_input(scope, "edges")
        for _ in range(maps):
            edges = edges.map(lambda e: e)
        graph.wcc(edges).probe()
        return session

    return build


def close(handle: Any) -> None:
    handle.close()


@pytest.mark.parametrize(
    "build, feed",
    [
        *((chain(m), close) for m in (0, 1, 2, 8, 15, 16, 17, 64)),
        *((probed_chain(m), lambda results: close(results[0])) for m in (2, 8, 16, 32)),
        (lambda s: ticker_loop(s, 3), lambda ticker: None),
        *((wcc(m), close) for m in (0, 2, 4, 5, 6, 20)),
    ],
)
def test_runtime_graphs_keep_their_strategy(build: Any, feed: Any) -> None:
    r, unwatched, kind = built(build, feed)
    big = fanout_by_psi(r, unwatched) > FRONTIER_TRACKING_ABOVE
    assert kind is (FrontierTracker if big else PsiTracker)
