"""``scope.region(name)``: a child scope with its parent's times (timely's ``region``).
Streams and collections enter and leave it unchanged: a dataflow with regions (nested, around
a loop, inside a loop) gives what a from-scratch computation gives, declares the same logical
graph as without them (so progress is tracked as without them), and moves its frontiers
forward only, on 1 and 2 workers and 2 simulated processes (over TCP: in
tests/cluster/test_timely_operators_tcp.py); misuse is refused naming the region."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import BuildError
from naiad.differential import Collection
from naiad.progress import Lex
from tests.differential import reference as ref

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_ints = st.lists(st.lists(st.integers(0, 20), max_size=6), min_size=1, max_size=4)


class Grouping:
    """Where a build opens regions: ``on`` False builds the same dataflow without any."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def into(self, scope: naiad.Scope, name: str) -> naiad.Scope:
        return scope.region(name) if self.on else scope

    def enter(self, stream: Any, region: naiad.Scope) -> Any:
        return stream.enter(region) if self.on else stream

    def leave(self, stream: Any) -> Any:
        return stream.leave() if self.on else stream


def timely_build(epochs: list[list[int]], g: Grouping) -> Any:
    """Records exchanged and doubled in region ``prepare``; counted down to 0 by a loop inside
    region ``loops`` (whose body maps inside a region of the loop), then summed per epoch."""

    def build(scope: naiad.Scope) -> Any:
        nums = scope.from_epochs(epochs)
        prepare = g.into(scope, "prepare")
        doubled = g.enter(nums, prepare).exchange(lambda x: x).map(lambda x: x * 2)
        inner = g.into(prepare, "inner")  # nested: a region of a region
        small = g.leave(g.enter(doubled, inner).map(lambda x: x % 7))
        loops = g.into(scope, "loops")
        start = g.enter(g.leave(small), loops)
        with loops.iterative("countdown") as loop:
            handle, cycle = loop.feedback()
            body = start.enter(loop).concat(cycle)
            step = g.into(loop, "step")  # a region inside the loop: loop times
            g.leave(g.enter(body, step).map(lambda x: x - 1).filter(lambda x: x >= 0)).connect_loop(
                handle
            )
        out = g.leave(body.leave())
        totals = out.map(lambda v: (0, v)).aggregate(
            lambda k, v, acc: acc + v, lambda k, acc: acc, key=lambda k: k, init=lambda: 0
        )
        return out.capture(), totals.collect()

    return build


def expected_timely(epochs: list[list[int]]) -> tuple[Counter[Any], dict[int, int]]:
    out: Counter[Any] = Counter()
    for t, xs in enumerate(epochs):
        for x in xs:
            for v in range(x * 2 % 7, -1, -1):
                out[(t, v)] += 1
    totals = {t: 0 for t, xs in enumerate(epochs) if xs}  # emitted once a time has records
    for (t, v), n in out.items():
        totals[t] += v * n
    return out, totals


def graph_of(build: Any) -> list[Any]:
    """The logical graph a build declares: operators (name, ports, loop depth) and edges."""
    graphs: list[Any] = []

    def record(scope: naiad.Scope) -> None:
        build(scope)
        graphs.append(scope.build.fingerprint())

    naiad.run(record)
    return graphs[0]


@settings(max_examples=15, deadline=None)
@given(epochs_of_ints, configs)
def test_a_dataflow_with_regions_is_the_dataflow_without_them(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    out, totals = expected_timely(epochs)
    for on in (True, False):
        results = naiad.run(timely_build(epochs, Grouping(on)), **config)
        got = Counter(pair for log, _ in results for pair in log.records())
        assert got == out
        emitted = [pair for _, collected in results for pair in collected]
        assert sorted(emitted) == sorted(totals.items())  # once per time, when it completes
        for log, _ in results:  # forward only, to the end (which times it stops at varies)
            frontiers = log.frontiers()
            steps = [f[0] for f in frontiers[:-1]]
            assert steps == sorted(set(steps)) and frontiers[-1] == []


def test_regions_declare_the_same_logical_graph() -> None:
    with_regions = graph_of(timely_build([[1, 2]], Grouping(True)))
    without = graph_of(timely_build([[1, 2]], Grouping(False)))
    assert with_regions == without


def test_operators_built_in_a_region_belong_to_it() -> None:
    seen: list[Any] = []

    def build(scope: naiad.Scope) -> Any:
        with scope.region("outer") as r, r.region("inner") as q:
            out = scope.from_epochs([[1]]).enter(r).enter(q).map(lambda x: x + 1, name="inc")
        seen.append([(op.name, op.scope.path(), op.scope.depth) for op in scope.build.operators])
        assert q.minimum() == 0 and q.is_region and not scope.is_region
        return out.leave().leave().collect()

    assert naiad.run(build) == [[(0, 2)]]
    assert ("inc", "dataflow/outer/inner", 0) in seen[0]


# --- differential ------------------------------------------------------------------------------
@st.composite
def graph_history(draw: Any) -> Any:
    n = draw(st.integers(1, 4))
    edges = draw(ref.set_histories(st.tuples(st.integers(0, 5), st.integers(0, 5)), count=n))
    return draw(ref.set_histories(st.integers(0, 5), count=n, size=(0, 2))), edges


@settings(max_examples=12, deadline=None)
@given(graph_history(), st.sampled_from([(1, 1), (2, 1), (2, 2)]))
def test_collections_and_arrangements_in_regions(graph: Any, layout: Any) -> None:
    """Reachability in a region, over an edge index of the root scope (entered into the
    region as itself, and into the loop inside it), counted in a nested region."""
    roots, edges = graph
    spines: list[Any] = []

    def build(scope: naiad.Scope) -> Any:
        r = Collection.from_epochs(scope, roots)
        index = Collection.from_epochs(scope, edges).arrange_by_key()
        with scope.region("reach") as region:
            inside = index.enter(region)
            spines.append((inside.spine, index.spine))

            def step(x: Collection) -> Collection:
                return x.join(index).map(lambda rec: rec[1]).concat(r.enter(x.scope)).distinct()

            reach = r.enter(region).iterate(step)
            hops = inside.semijoin(reach)  # both in the region
            with region.region("count") as counting:
                counted = reach.enter(counting).map(lambda n: 0).count()
        # a join in a Lex loop, in a region of it and not: a region adds no loop counter, so
        # its arrangements and join compare times as the loop's (the same changes, at the
        # same Lex times)
        with scope.iterative("lex", time_class=Lex) as loop:
            at = r.enter_at(loop, lambda n: n)  # node n enters at counter n
            lex = [at.join(index).changes()]
            with loop.region("body") as body:
                lex.append(at.enter(body).join(index).changes())
        return (
            reach.leave().changes(),
            hops.leave().changes(),
            counted.leave().leave().changes(),
            lex,
        )

    results = ref.run(build, layout)
    assert all(inner is outer for inner, outer in spines)  # the one index
    ref.check([x[0] for x in results], ref.expect_binary(roots, edges, ref.reach))
    for _, _, _, (plain, in_region) in results:
        assert in_region == plain
    semi = ref.expect_binary(roots, edges, lambda a, b: ref.semijoin(b, ref.reach(a, b)))
    ref.check([x[1] for x in results], semi)

    def count(a: Counter, b: Counter) -> Counter:
        n = sum(ref.reach(a, b).values())
        return Counter({(0, n): 1}) if n else Counter()

    ref.check([x[2] for x in results], ref.expect_binary(roots, edges, count))


# --- misuse ------------------------------------------------------------------------------------
def refused(build: Any) -> str:
    with pytest.raises((BuildError, ValueError)) as info:
        naiad.run(build)
    return str(info.value)


def test_a_stream_enters_only_a_region_of_its_own_scope() -> None:
    def build(s: naiad.Scope) -> None:
        a, b = s.region("a"), s.region("b")
        s.from_epochs([[1]]).enter(a).enter(b)

    message = refused(build)
    assert "cannot enter region 'dataflow/b' from scope 'dataflow/a'" in message


def test_a_region_stream_used_outside_without_leave_is_refused() -> None:
    def build(s: naiad.Scope) -> None:
        inside = s.from_epochs([[1]]).enter(s.region("a"))
        s.from_epochs([[2]]).concat(inside)

    message = refused(build)
    assert "scope 'dataflow'" in message and "'dataflow/a'" in message and ".leave()" in message


def test_leaving_the_root_scope_is_refused() -> None:
    message = refused(lambda s: s.from_epochs([[1]]).leave())
    assert "not inside a loop context or region" in message


@pytest.mark.parametrize("what", ["collection", "arrangement"])
def test_entering_a_region_at_a_loop_counter_is_refused(what: str) -> None:
    def build(s: naiad.Scope) -> None:
        c = Collection.from_epochs(s, [[((1, 2), 1)]])
        target = c if what == "collection" else c.arrange_by_key()
        target.enter_at(s.region("r"), lambda k, v: k, name="E")

    message = refused(build)
    assert message.startswith("E: 'dataflow/r' is a region, not a loop")


def test_joining_collections_of_sibling_regions_is_refused() -> None:
    def build(s: naiad.Scope) -> None:
        c = Collection.from_epochs(s, [[((1, 2), 1)]])
        c.enter(s.region("a")).join(c.enter(s.region("b")), name="J")

    message = refused(build)
    assert message.startswith("J: the left side is in scope 'dataflow/a', the right side in")


@pytest.mark.parametrize("config", CONFIGS)
def test_a_feedback_in_a_region_advances_its_parents_times(config: dict[str, int]) -> None:
    """A cycle inside a region of the root scope steps through root epochs, as one in the
    root scope does; inside a region of a loop, through the loop's counter. A source in a
    region of a loop starts at the loop's least time."""

    def build(s: naiad.Scope) -> Any:
        with s.region("r") as r:
            handle, cycle = r.feedback(step=2)
            body = s.from_epochs([[3]]).enter(r).concat(cycle)
            body.map(lambda x: x - 1).filter(lambda x: x >= 0).connect_loop(handle)
        with s.iterative() as loop, loop.region("q") as q:
            handle, cycle = q.feedback()
            inner = s.from_epochs([[2]]).enter(loop).enter(q).concat(cycle)
            inner.map(lambda x: x - 1).filter(lambda x: x >= 0).connect_loop(handle)
        with s.iterative() as loop, loop.region("replaying") as q:  # a source in a region
            replayed = q.replay(logs).leave().leave()
        return body.leave().collect(), inner.leave().capture(), replayed.collect()

    logs = naiad.run(lambda s: s.from_epochs([[1], [2]]).enter(s.iterative()).capture())
    results = naiad.run(build, **config)
    assert sorted(p for *_, out in results for p in out) == [(0, 1), (1, 2)]
    assert sorted(p for root, _, _ in results for p in root) == [(0, 3), (2, 2), (4, 1), (6, 0)]
    records = sorted((t.inner, x) for _, log, _ in results for t, x in log.records())
    assert records == [(0, 2), (1, 1), (2, 0)]
