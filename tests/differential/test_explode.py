"""``Collection.explode`` against a from-scratch reference: every output's multiplicity is the
sum over input records of (input count x multiplier), at every epoch, on 1 and 2 workers and
2 simulated processes, at the root and inside ``iterate``; and its misuse."""

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
LAYOUTS = [(1, 1), (2, 1), (2, 2)]
layouts = st.sampled_from(LAYOUTS)
MULTIPLIERS = st.lists(
    st.tuples(st.sampled_from(["x", "y", "z"]), st.integers(-3, 3)), min_size=0, max_size=3
)


def exploded(a: Counter, f: Any) -> Counter:
    out: Counter = Counter()
    for r, c in a.items():
        for y, m in f(r):
            out[y] += c * m
    return ref.clean(out)


@FAST
@given(
    ref.histories(st.tuples(st.integers(0, 3), st.integers(0, 3))),
    st.dictionaries(st.integers(0, 3), MULTIPLIERS),
    layouts,
)
def test_explode_multiplies_each_output_by_its_multiplier(
    epochs: Any, table: dict[int, Any], layout: Any
) -> None:
    """Outputs per value drawn with multipliers in [-3, 3] (0 drops, a negative one flips the
    sign), the same output more than once from one record, and one output from several."""

    def f(r: tuple[int, int]) -> list[tuple[Any, int]]:
        k, v = r
        return [((k % 2, tag), m) for tag, m in table.get(v, [])]

    results = ref.run(lambda s: Collection.from_epochs(s, epochs).explode(f).changes(), layout)
    ref.check(results, ref.expect_unary(epochs, lambda a: exploded(a, f)))


def test_explode_takes_generators_numpy_integers_and_drops_zeros() -> None:
    import numpy as np

    def f(r: int) -> Any:
        yield r, np.int64(2)
        yield -r, 0  # dropped: never sent, so never seen downstream

    seen: list[Any] = []

    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, [[(1, 1), (2, 3)], [(1, -1)]])
        return c.explode(f).inspect(seen.append).changes()

    assert naiad.run(build) == [[(1, 0, 2), (2, 0, 6), (1, 1, -2)]]
    assert all(r > 0 for r, _, _ in seen)


NODES = 7


def step(n: int) -> list[tuple[int, int]]:
    """Doubling and a step forward (mod NODES), with multipliers that ``distinct`` absorbs,
    and an output with multiplier 0 that must never appear."""
    return [((2 * n) % NODES, 3), ((n + 1) % NODES, 1 if n % 3 else 0), (NODES + n, 0)]


def closure(start: Counter) -> Counter:
    return ref.fixpoint(lambda c: ref.distinct(start + exploded(c, step)), start)


@FAST
@given(ref.set_histories(st.integers(0, NODES - 1), count=3, size=(0, 3)), layouts)
def test_explode_inside_iterate(epochs: Any, layout: Any) -> None:
    def build(scope: Any) -> Any:
        start = Collection.from_epochs(scope, epochs)

        def body(v: Collection) -> Collection:
            return start.enter(v.scope).concat(v.explode(step)).distinct()

        return start.iterate(body).changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(epochs, closure))


@FAST
@given(ref.histories(st.integers(0, 4), count=3), layouts)
def test_explode_counts_inside_iterate(epochs: Any, layout: Any) -> None:
    """Multipliers inside a loop that no ``distinct`` absorbs: each iteration splits a count
    n > 0 into n - 1 (multiplier 2, so doubled) and stops at 0; the loop accumulates."""

    def halve(n: int) -> list[tuple[int, int]]:
        return [(n - 1, 2)] if n > 0 else [(n, 1)]

    def build(scope: Any) -> Any:
        def body(v: Collection) -> Collection:
            return v.explode(halve).consolidate()

        return Collection.from_epochs(scope, epochs).iterate(body).changes()

    def fixed(a: Counter) -> Counter:
        return ref.clean(Counter({0: sum(c * 2**n for n, c in a.items())}))

    ref.check(ref.run(build, layout), ref.expect_unary(epochs, fixed))


@pytest.mark.parametrize(
    ("f", "error", "message"),
    [
        ("not a function", TypeError, r"explode: f must be a function, not 'not a function'"),
        (lambda a, b: [], TypeError, r"explode: f\(record\) is called with 1 argument, but"),
        (lambda r: 5, TypeError, r"explode: f\(1\) must return an iterable, not 5"),
        (lambda r: [r], TypeError, r"explode: f\(1\) must yield \(record, multiplier\) pairs"),
        (lambda r: [(r, 0.5)], TypeError, r"with integer multipliers, not \(1, 0\.5\)"),
        (lambda r: [(r, True)], TypeError, r"with integer multipliers, not \(1, True\)"),
        (lambda r: [(r, 2**63)], OverflowError, r"explode: multiplier 9223372036854775808"),
        (
            lambda r: [(r, 1 // 0)],
            ZeroDivisionError,
            r"by zero\nnaiad: raised in operator .explode.",
        ),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_explode_misuse_is_named(f: Any, error: type, message: str, workers: int) -> None:
    with pytest.raises(error, match=message):
        naiad.run(
            lambda s: Collection.from_epochs(s, [[(1, 1), (2, 1)]]).explode(f).changes(),
            workers=workers,
        )
