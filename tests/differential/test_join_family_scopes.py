"""The scopes of the join-like methods (join, join_map, join_core, semijoin, antijoin) inside
a loop, one rule for all of them: an arrangement of an enclosing scope enters the loop by
itself on either side; a collection of an enclosing scope never does, on either side (it is
``.enter(loop)``-ed, as in differential dataflow, or arranged outside). Accepted forms are
compared with a from-scratch fixed point at every epoch, in ``Product`` and ``Lex`` loops, on
1 and 2 workers and 2 simulated processes; every refused form names both scopes and the way
in when the dataflow is built (``semijoin`` and ``antijoin`` used to accept an outer
collection of keys on the right, which ``join`` refused)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

NODES = st.integers(0, 5)
layouts = st.sampled_from([(1, 1), (2, 1), (2, 2)])
METHODS = ["join", "join_map", "join_core", "semijoin", "antijoin"]


def call(method: str, left: Any, right: Any) -> Collection:
    """``left.method(right)``, with a pair function for join_map and join_core."""
    if method == "join_map":
        return left.join_map(right, lambda k, v, w: (k, v, w), name="J")
    if method == "join_core":
        return left.join_core(right, lambda k, v, w: [(k, v, w), (w, v, k)], name="J")
    return getattr(left, method)(right, name="J")


def expected(method: str, a: Counter, b: Counter) -> Counter:
    """What ``call(method, a, b)`` holds, from scratch."""
    if method in ("join", "semijoin", "antijoin"):
        return getattr(ref, method)(a, b)
    pairs: Counter = Counter()
    for ra, ca in a.items():
        for rb, cb in b.items():
            if ref.key_of(ra) == ref.key_of(rb):
                k, v, w = ref.key_of(ra), ref.value_of(ra), ref.value_of(rb)
                pairs[(k, v, w)] += ca * cb
                if method == "join_core":
                    pairs[(w, v, k)] += ca * cb
    return ref.clean(pairs)


@st.composite
def histories(draw: Any) -> Any:
    """Roots, edges and marked nodes: sets that change over a few epochs."""
    n = draw(st.integers(1, 3))
    roots = draw(ref.set_histories(NODES, count=n, size=(0, 2)))
    edges = draw(ref.set_histories(st.tuples(NODES, NODES), count=n, size=(0, 5)))
    return roots, edges, draw(ref.set_histories(NODES, count=n, size=(0, 3)))


# the outputs of build(): (label, which outer input, side of the loop collection)
OUTPUTS = [
    *((m, "edges", "right") for m in ("join", "join_map", "join_core")),
    *((m, "marks", "right") for m in ("semijoin", "antijoin")),
    *((m, "edges", "left") for m in METHODS),
]


def build_all(roots: Any, edges: Any, marks: Any, lex: bool) -> Callable[[Any], Any]:
    """Reachability in a loop (``Lex`` with ``lex``: odd nodes enter after even ones); in its
    body every method reads an index of an enclosing scope, the loop collection on its left
    (``reach.method(index)``) and on its right (``index.method(reach)``). Last, the outer
    collections entered by hand, which the refusals point to."""

    def build(scope: Any) -> Any:
        r = Collection.from_epochs(scope, roots)
        e = Collection.from_epochs(scope, edges)
        m = Collection.from_epochs(scope, marks)
        outer = {"edges": e.arrange_by_key(), "marks": m.arrange_by_self()}
        inside: list[Collection] = []

        def body(reach: Collection) -> Collection:
            for method, which, side in OUTPUTS:
                index = outer[which]
                pair = (reach, index) if side == "right" else (index, reach)
                inside.append(call(method, *pair))
            inside.append(reach.semijoin(m.enter(reach.scope)))
            inside.append(e.enter(reach.scope).join(reach))
            step = reach.join(outer["edges"]).map(lambda t: t[1])
            return step.concat(r.enter(reach.scope)).distinct()

        kwargs: dict[str, Any] = {"priority": lambda n: n % 2} if lex else {}
        reach = r.iterate(body, **kwargs)
        return [c.consolidate().changes() for c in [reach, *(c.leave() for c in inside)]]

    return build


def from_scratch(roots: Counter, edges: Counter, marks: Counter) -> list[Counter]:
    reach = ref.reach(roots, edges)
    edges = ref.clean(Counter(dict.fromkeys(ref.edge_set(edges), 1)))
    outer = {"edges": edges, "marks": marks}
    out = [reach]
    for method, which, side in OUTPUTS:
        pair = (reach, outer[which]) if side == "right" else (outer[which], reach)
        out.append(expected(method, *pair))
    return [*out, ref.semijoin(reach, marks), ref.join(edges, reach)]


@settings(max_examples=10, deadline=None)
@given(histories(), layouts, st.booleans())
def test_an_outer_index_on_either_side_of_every_join_like_method(
    inputs: Any, layout: Any, lex: bool
) -> None:
    roots, edges, marks = inputs
    results = ref.run(build_all(roots, edges, marks, lex), layout)
    epochs = range(len(roots))
    want = [from_scratch(*(ref.accumulated(h, e) for h in (roots, edges, marks))) for e in epochs]
    for i in range(len(OUTPUTS) + 3):
        ref.check([x[i] for x in results], [w[i] for w in want])


# --- an outer collection, on either side, is refused --------------------------------------------
@pytest.mark.parametrize("lex", [False, True], ids=["Product", "Lex"])
@pytest.mark.parametrize("loop_side", ["collection", "arrangement"])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("method", METHODS)
def test_an_outer_collection_on_either_side_is_refused(
    method: str, side: str, loop_side: str, lex: bool
) -> None:
    """``loop.method(outer)`` and ``outer.method(loop)``, the loop side a collection or an
    arrangement of the loop: refused at build time, naming both scopes and ``.enter(loop)``."""

    def build(scope: Any) -> Any:
        outer = Collection.from_epochs(scope, [[(1, 1)]])
        roots = Collection.from_epochs(scope, [[(1, 1)]])

        def body(reach: Collection) -> Collection:
            mine = reach if loop_side == "collection" else reach.arrange_by_key()
            call(method, *((mine, outer) if side == "right" else (outer, mine)))
            return reach

        roots.iterate(body, **({"priority": lambda n: n % 2} if lex else {}))

    with pytest.raises(ValueError) as info:
        naiad.run(build)
    message = str(info.value)
    loop, there = "'dataflow/iterate", "'dataflow',"
    first, second = (loop, there) if side == "right" else (there, loop)
    assert message.startswith(f"J: the left side is in scope {first}"), message
    assert f"the right side in {second.rstrip(',')}" in message, message
    assert "only with .enter(loop)" in message and "arrange_by_self()" in message
