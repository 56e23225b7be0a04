"""``join_map`` and ``join_core`` against a from-scratch join: ``f(key, left value, right
value)`` for every matched pair (values as ``reduce`` hands them over: the one field after the
key, a tuple of several, ``()`` for a key alone), at every epoch, on 1 and 2 workers and 2
simulated processes; with collections and arrangements on either side; inside ``iterate``;
and their misuse."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

FAST = settings(max_examples=20, deadline=None)
layouts = st.sampled_from([(1, 1), (2, 1), (2, 2)])
KEYS = st.integers(0, 3)
SHAPES = {
    "pair": st.tuples(KEYS, st.sampled_from(["x", "y", "zz"])),
    "triple": st.tuples(KEYS, st.integers(0, 2), st.sampled_from([0.5, 2.0])),
    "key": KEYS,
}


def pairs(a: Counter, b: Counter) -> list[tuple[Any, Any, Any, int]]:
    """``(key, left value, right value, count)`` for every matched pair of records."""
    out = []
    for ra, ca in a.items():
        for rb, cb in b.items():
            if ref.key_of(ra) == ref.key_of(rb):
                out.append((ref.key_of(ra), ref.value_of(ra), ref.value_of(rb), ca * cb))
    return out


def mapped(a: Counter, b: Counter) -> Counter:
    out: Counter = Counter()
    for k, x, y, c in pairs(a, b):
        out[one(k, x, y)] += c
    return ref.clean(out)


def cored(a: Counter, b: Counter) -> Counter:
    out: Counter = Counter()
    for k, x, y, c in pairs(a, b):
        for r in many(k, x, y):
            out[r] += c
    return ref.clean(out)


def one(k: Any, x: Any, y: Any) -> Any:
    return (k, repr(x), repr(y))


def many(k: Any, x: Any, y: Any) -> list[Any]:
    """None, one or several records per pair (repeated records too), by the pair's values."""
    n = len(repr(x) + repr(y)) % 4
    return [(k, i % 2) for i in range(n)]


@st.composite
def two_histories(draw: Any) -> Any:
    n = draw(st.integers(1, 3))
    a = draw(ref.histories(SHAPES[draw(st.sampled_from(sorted(SHAPES)))], count=n))
    b = draw(ref.histories(SHAPES[draw(st.sampled_from(sorted(SHAPES)))], count=n))
    return a, b


@FAST
@given(two_histories(), st.sampled_from(["collections", "arranged", "mixed"]), layouts)
def test_join_map_and_join_core_match_the_reference(ab: Any, sides: str, layout: Any) -> None:
    a, b = ab

    def build(scope: Any) -> Any:
        ca, cb = Collection.from_epochs(scope, a), Collection.from_epochs(scope, b)
        if sides == "collections":
            return ca.join_map(cb, one).changes(), ca.join_core(cb, many).changes()
        arranged_a, arranged_b = ca.arrange_by_key(), cb.arrange_by_key()
        if sides == "arranged":
            return (
                arranged_a.join_map(arranged_b, one).changes(),
                arranged_a.join_core(arranged_b, many).changes(),
            )
        # a collection on one side, an arrangement on the other, and the other way round
        return ca.join_map(arranged_b, one).changes(), arranged_a.join_core(cb, many).changes()

    results = ref.run(build, layout)
    ref.check([r[0] for r in results], ref.expect_binary(a, b, mapped))
    ref.check([r[1] for r in results], ref.expect_binary(a, b, cored))


def test_join_core_takes_any_iterable_and_join_map_any_record() -> None:
    def build(scope: Any) -> Any:
        a = Collection.from_epochs(scope, [[((1, "a"), 1), ((2, "b"), 2)], [((1, "a"), -1)]])
        b = Collection.from_epochs(scope, [[((1, 10), 1), ((2, 20), 3)]])
        gen = a.join_core(b, lambda k, x, y: (x * i for i in range(1, k + 1)))
        tup = a.join_core(b, lambda k, x, y: (y,))
        single = a.join_map(b, lambda k, x, y: y + k)
        return gen.changes(), tup.changes(), single.changes()

    [(gen, tup, single)] = naiad.run(build)
    assert gen == [("a", 0, 1), ("b", 0, 6), ("bb", 0, 6), ("a", 1, -1)]
    assert tup == [(10, 0, 1), (20, 0, 6), (10, 1, -1)]
    assert single == [(11, 0, 1), (22, 0, 6), (11, 1, -1)]


NODES = st.integers(0, 5)


@FAST
@given(
    st.integers(1, 3).flatmap(
        lambda n: st.tuples(
            ref.set_histories(NODES, count=n, size=(0, 2)),
            ref.set_histories(st.tuples(NODES, NODES), count=n, size=(0, 6)),
        )
    ),
    layouts,
)
def test_join_map_and_join_core_inside_iterate(graph: Any, layout: Any) -> None:
    """Reachability, with the step along edges taken by ``join_map`` (a node is a key
    alone: its value is ``()``) in one loop, by ``join_core`` in another, and by ``join_map``
    against the edges arranged outside the loop in a third."""
    roots, edges = graph

    def build(scope: Any) -> Any:
        r, e = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)

        def body_map(reach: Collection) -> Collection:
            inner = e.enter(reach.scope)
            step = reach.join_map(inner, lambda k, unit, dst: dst if unit == () else None)
            return step.concat(r.enter(reach.scope)).distinct()

        def body_core(reach: Collection) -> Collection:
            inner = e.enter(reach.scope).arrange_by_key()
            step = reach.arrange_by_key().join_core(inner, lambda k, unit, dst: [dst, dst])
            return step.concat(r.enter(reach.scope)).distinct()

        outer = e.arrange_by_key()

        def body_outer(reach: Collection) -> Collection:
            # an arrangement of the enclosing scope enters the loop by itself, as for join
            step = reach.join_map(outer, lambda k, unit, dst: dst)
            return step.concat(r.enter(reach.scope)).distinct()

        return (
            r.iterate(body_map).changes(),
            r.iterate(body_core).changes(),
            r.iterate(body_outer).changes(),
        )

    results = ref.run(build, layout)
    want = ref.expect_binary(roots, edges, ref.reach)
    for i in range(3):
        ref.check([x[i] for x in results], want)


def other_side(s: Any) -> Collection:
    return Collection.from_epochs(s, [[((1, 2), 1)]])


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (
            lambda s, c: c.join_map(other_side(s), "f"),
            TypeError,
            r"join_map: f must be a function, not 'f'",
        ),
        (
            lambda s, c: c.join_map(other_side(s), lambda k, v: v),
            TypeError,
            r"join_map: f\(key, value, other value\) is called with 3 arguments, but <lambda> "
            r"takes \(k, v\)",
        ),
        (
            lambda s, c: c.arrange_by_key().join_core(other_side(s), lambda r: [r]),
            TypeError,
            r"join_core: f\(key, value, other value\) is called with 3 arguments",
        ),
        (
            lambda s, c: c.join_core(other_side(s), lambda k, v, w: 7),
            TypeError,
            r"join_core: f\(1, 'a', 2\) must return an iterable, not 7",
        ),
        (
            lambda s, c: c.join_map(other_side(s), lambda k, v, w: w / 0),
            ZeroDivisionError,
            r"by zero\nnaiad: raised in operator 'join_map'",
        ),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_join_map_and_join_core_misuse_is_named(
    build: Any, error: type, message: str, workers: int
) -> None:
    with pytest.raises(error, match=message):
        naiad.run(
            lambda s: build(s, Collection.from_epochs(s, [[((1, "a"), 1)]])).changes(),
            workers=workers,
        )
