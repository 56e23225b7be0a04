"""Iteration against from-scratch fixed points: reachability, connected components by
min-label propagation, nested loops, mutual recursion with two variables, and prioritized
iteration, over edge sets that change from epoch to epoch."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from naiad.differential import Collection, Variable
from tests.differential import reference as ref
from tests.differential.reference import layouts

FAST = settings(max_examples=20, deadline=None)
NODES = st.integers(0, 5)
EDGES = st.tuples(NODES, NODES)


@st.composite
def graph_history(draw: Any, roots: bool = False) -> Any:
    """Edge sets (and root sets) changing over 1-4 epochs."""
    n = draw(st.integers(1, 4))
    edges = draw(ref.set_histories(EDGES, count=n, size=(0, 6)))
    if not roots:
        return edges
    return draw(ref.set_histories(NODES, count=n, size=(0, 2))), edges


def second(record: Any) -> Any:
    return record[1]


def reachable(roots: Collection, edges: Collection) -> Collection:
    def body(reach: Collection) -> Collection:
        e, r = edges.enter(reach.scope), roots.enter(reach.scope)
        return reach.join(e).map(second).concat(r).distinct()

    return roots.iterate(body)


def symmetric(edges: Collection) -> Collection:
    return edges.concat(edges.map(lambda e: (e[1], e[0])))


def initial_labels(edges: Collection) -> Collection:
    return symmetric(edges).map(lambda e: e[0]).distinct().map(lambda n: (n, n))


def propagate(labels: Collection, edges: Collection) -> Collection:
    """``(dst, label)`` for every ``(src, label)`` and edge ``(src, dst)``."""
    return labels.join(edges).map(lambda r: (r[2], r[1]))


def components(edges: Collection, priority: Any = None) -> Collection:
    labels = initial_labels(edges)

    def body(current: Collection) -> Collection:
        sym, start = symmetric(edges).enter(current.scope), labels.enter(current.scope)
        return propagate(current, sym).concat(start).min()

    return labels.iterate(body, priority=priority)


@FAST
@given(graph_history(roots=True), layouts)
def test_reachability(graph: Any, layout: Any) -> None:
    roots, edges = graph

    def build(scope: Any) -> Any:
        r, e = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)
        return reachable(r, e).changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_binary(roots, edges, ref.reach))


@FAST
@given(graph_history(), layouts)
# wrong on 2 workers (9 runs in 10) while reduce skipped history times >= t (46cd032)
@example(
    edges=[[((0, 3), 1), ((1, 4), 1), ((1, 3), 1)], [((1, 2), 1)], [((0, 4), 1), ((2, 3), 1)]],
    layout=(2, 1),
)
def test_connected_components_by_label_propagation(edges: Any, layout: Any) -> None:
    results = ref.run(lambda s: components(Collection.from_epochs(s, edges)).changes(), layout)
    ref.check(results, ref.expect_unary(edges, ref.components))


# vectorized over the record's columns (node, label)
PRIORITIES = {
    "label": lambda *columns: columns[-1],
    "node": lambda *columns: columns[0],
    "mod3": lambda *columns: (columns[0] * 7) % 3,
    "zero": lambda *columns: columns[0] * 0,
}
priority_kinds = st.sampled_from(sorted(PRIORITIES))


def prioritized_and_plain(edges: Any, layout: Any, kind: str) -> None:
    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, edges)
        return components(e, priority=PRIORITIES[kind]).changes(), components(e).changes()

    results = ref.run(build, layout)
    ref.check([r[1] for r in results], ref.expect_unary(edges, ref.components))
    ref.check([r[0] for r in results], ref.expect_unary(edges, ref.components))


@FAST
@given(graph_history(), layouts, priority_kinds)
# deadlocked: arrange kept a capability for a message whose updates all lay later
@example(edges=[[((2, 3), 1), ((3, 1), 1)], [((0, 2), 1)]], layout=(2, 1), kind="zero")
def test_prioritized_components_equal_unprioritized(edges: Any, layout: Any, kind: str) -> None:
    prioritized_and_plain(edges, layout, kind)


@FAST
@given(st.lists(EDGES, max_size=8), layouts, priority_kinds)
def test_prioritized_components_equal_unprioritized_in_one_epoch(
    edges: Any, layout: Any, kind: str
) -> None:
    prioritized_and_plain([[(e, 1) for e in set(edges)]], layout, kind)


@pytest.mark.parametrize("layout", [(1, 1), (2, 1)])
def test_prioritized_components_after_an_edge_deletion(layout: Any) -> None:
    """Each epoch's loop starts from scratch: no stale labels after a deletion (the priority
    once ordered lexicographically with the epoch, so a loop started from the last fixed
    point)."""
    prioritized_and_plain([[((0, 1), 1), ((1, 2), 1)], [((0, 1), -1)]], layout, "zero")


@FAST
@given(graph_history(), layouts)
def test_nested_iteration(edges: Any, layout: Any) -> None:
    """An outer loop whose body runs an inner loop to its fixed point: the inner loop
    propagates labels along edges forwards, the outer step along edges backwards; together
    they reach the connected components."""

    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, edges)
        labels = initial_labels(e)

        def outer(current: Collection) -> Collection:
            forward = e.enter(current.scope)
            backward = forward.map(lambda x: (x[1], x[0]))

            def inner(x: Collection) -> Collection:
                return propagate(x, forward.enter(x.scope)).concat(x).min()

            spread = current.iterate(inner)
            return propagate(spread, backward).concat(spread).min()

        return labels.iterate(outer).changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(edges, ref.components))


@FAST
@given(graph_history(), layouts)
def test_nested_iteration_reachability_per_source(edges: Any, layout: Any) -> None:
    """Transitive closure as an outer loop over the sources found so far, each step an inner
    reachability loop: ``(src, dst)`` for every path."""

    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, edges)

        def outer(pairs: Collection) -> Collection:
            inner_edges = e.enter(pairs.scope)

            # pairs (src, dst) keyed by dst: extend by one edge inside an inner loop
            def inner(x: Collection) -> Collection:
                step = x.map(lambda p: (p[1], p[0])).join(inner_edges.enter(x.scope))
                return step.map(lambda r: (r[1], r[2])).concat(x).distinct()

            return pairs.iterate(inner).concat(inner_edges).distinct()

        return e.iterate(outer).changes()

    def closure(es: Counter) -> Counter:
        out: Counter = Counter()
        for src in {s for s, _ in ref.edge_set(es)}:
            start = Counter({d: 1 for s, d in ref.edge_set(es) if s == src})
            for d in ref.reach(start, es):
                out[(src, d)] = 1
        return out

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(edges, closure))


@FAST
@given(graph_history(roots=True), layouts)
def test_mutual_recursion_even_and_odd_walks(graph: Any, layout: Any) -> None:
    roots, edges = graph

    def build(scope: Any) -> Any:
        r0, e0 = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)
        loop = scope.iterative()
        r, e = r0.enter(loop), e0.enter(loop)
        even = Variable(loop, r)
        odd = Variable(loop)
        next_odd = even.collection.join(e).map(second).distinct()
        next_even = odd.collection.join(e).map(second).concat(r).distinct()
        even.set(next_even)
        odd.set(next_odd)
        return next_even.leave().changes(), next_odd.leave().changes()

    results = ref.run(build, layout)
    parity = [
        ref.parity_reach(ref.accumulated(roots, t), ref.accumulated(edges, t))
        for t in range(len(edges))
    ]
    ref.check([r[0] for r in results], [p[0] for p in parity])
    ref.check([r[1] for r in results], [p[1] for p in parity])
