"""An arrangement of an enclosing scope on the LEFT of a join-like method whose other side
is a loop collection (``index.join(loop_collection)``): the index enters the loop, as it does
on the right, and the output keeps its fields first. Every method (join, semijoin, antijoin,
join_map, join_core) is compared with a from-scratch fixed point at every epoch, on 1 and 2
workers and 2 simulated processes; an outer *collection* on the left is still refused."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

NODES = st.integers(0, 5)
EDGES = st.tuples(NODES, NODES)
layouts = st.sampled_from([(1, 1), (2, 1), (2, 2)])


@st.composite
def graph_history(draw: Any) -> Any:
    """Root and edge sets that change (insertions and retractions) over a few epochs."""
    n = draw(st.integers(1, 4))
    edges = draw(ref.set_histories(EDGES, count=n, size=(0, 6)))
    return draw(ref.set_histories(NODES, count=n, size=(0, 2))), edges


def reached_by(roots: Counter, edges: Counter) -> dict[str, Counter]:
    """From scratch: what each method gives against the reachable set (a loop's collection
    leaves with its value at the fixed point)."""
    reach = ref.reach(roots, edges)
    semi = ref.semijoin(edges, reach)
    return {
        "reach": reach,
        "semijoin": semi,
        "antijoin": ref.antijoin(edges, reach),
        "join_map": Counter({(s, d, ()): c for (s, d), c in semi.items()}),
        "join_core": ref.clean(Counter({(d, s): c for (s, d), c in semi.items()})),
    }


METHODS = ["reach", "semijoin", "antijoin", "join_map", "join_core"]


def build_all(roots: Any, edges: Any, lex: bool, nested: bool) -> Any:
    """Reachability whose step is ``index.join(reach)`` (the root-scope edge index on the left),
    and, inside the same loop, the other methods with the index on the left, left at the
    fixed point. ``nested``: the loop is inside another loop (the index enters two levels);
    ``lex``: a prioritized (``Lex``) loop."""

    def build(scope: Any) -> Any:
        r = Collection.from_epochs(scope, roots)
        index = Collection.from_epochs(scope, edges).arrange_by_key()
        inside: list[Collection] = []

        def body(reach: Collection) -> Collection:
            inside.append(index.semijoin(reach))
            inside.append(index.antijoin(reach))
            inside.append(index.join_map(reach, lambda k, v, w: (k, v, w)))
            inside.append(index.join_core(reach, lambda k, v, w: [(v, k)]))
            step = index.join(reach).map(lambda rec: rec[1])  # (src, dst): src first
            return step.concat(r.enter(reach.scope)).distinct()

        # a Lex loop: records enter by priority (odd nodes after even ones)
        kwargs: dict[str, Any] = {"priority": lambda n: n % 2} if lex else {}
        if nested:
            reach = r.enter(scope.iterative("outer")).iterate(body, **kwargs).leave()
        else:
            reach = r.iterate(body, **kwargs)
        outs = [reach, *(c.leave() for c in inside)]
        if nested:  # out of the outer loop too
            outs = [outs[0], *(c.leave() for c in outs[1:])]
        return [c.consolidate().changes() for c in outs]

    return build


@settings(max_examples=12, deadline=None)
@given(graph_history(), layouts, st.booleans(), st.booleans())
def test_an_outer_index_on_the_left_of_every_join_like_method(
    graph: Any, layout: Any, lex: bool, nested: bool
) -> None:
    roots, edges = graph
    results = ref.run(build_all(roots, edges, lex, nested), layout)
    for i, method in enumerate(METHODS):
        want = ref.expect_binary(roots, edges, lambda a, b, m=method: reached_by(a, b)[m])
        ref.check([x[i] for x in results], want)


def test_the_left_index_is_entered_not_arranged_again() -> None:
    """The left index is read through an entered view: no arrangement of the edges in the
    loop, and the join's left spine is a view of the outer one."""
    from naiad.differential.arrange import ArrangeVertex
    from naiad.differential.entered import EnteredSpine
    from naiad.differential.join import JoinVertex
    from naiad.differential.lanes import ArrangeLanes

    seen: list[Any] = []

    def build(scope: Any) -> Any:
        index = Collection.from_epochs(scope, [[((1, 2), 1)]]).arrange_by_key()
        r = Collection.from_epochs(scope, [[(1, 1)]])
        before = len(scope.build.operators)
        out = r.iterate(lambda x: index.join(x).map(lambda rec: rec[1]).concat(x).distinct())
        arranged = [
            op
            for op in scope.build.operators
            if isinstance(op.logic, ArrangeVertex | ArrangeLanes)  # (distinct's: lanes)
        ]
        seen.append((index.spine, [op.logic for op in scope.build.operators[before:]], arranged))
        return out.changes()

    assert naiad.run(build) == [[(1, 0, 1), (2, 0, 1)]]
    outer, logics, arranged = seen[0]
    (join,) = [v for v in logics if isinstance(v, JoinVertex)]
    assert isinstance(join.spines[0], EnteredSpine) and join.spines[0].outer is outer
    # in the loop: the right side's arrangement and distinct's, none for the edges
    assert [op.name for op in arranged if op.scope.depth == 1] == [
        "join.arrange_right",
        "distinct.arrange",
    ]


# --- misuse ------------------------------------------------------------------------------------
def build_error(build: Any) -> str:
    with pytest.raises((ValueError, TypeError, naiad.BuildError)) as info:
        naiad.run(build)
    return str(info.value)


@pytest.mark.parametrize("method", ["join", "semijoin", "antijoin", "join_map", "join_core"])
def test_an_outer_collection_on_the_left_is_still_refused(method: str) -> None:
    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, [[((1, 2), 1)]])
        r = Collection.from_epochs(scope, [[(1, 1)]])

        def body(x: Collection) -> Collection:
            f = lambda k, v, w: [(k, v)]  # noqa: E731
            args = (x, f) if method in ("join_map", "join_core") else (x,)
            getattr(e, method)(*args, name="J")
            return x

        r.iterate(body)

    message = build_error(build)
    assert message.startswith("J: the left side is in scope 'dataflow', the right side in ")
    assert "'dataflow/iterate'" in message and ".enter(loop)" in message


@pytest.mark.parametrize("method", ["join", "semijoin", "antijoin", "join_map", "join_core"])
def test_an_index_of_a_sibling_loop_on_the_left_is_refused(method: str) -> None:
    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, [[((1, 2), 1)]])
        first, other = scope.iterative("first"), scope.iterative("other")
        index = e.enter(first).arrange_by_key()
        f = lambda k, v, w: [(k, v)]  # noqa: E731
        x = e.enter(other)
        args = (x, f) if method in ("join_map", "join_core") else (x,)
        getattr(index, method)(*args, name="J")

    message = build_error(build)
    assert message.startswith("J: the left side is in scope 'dataflow/first', the right")
    assert "'dataflow/other'" in message
