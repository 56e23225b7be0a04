"""What a loop variable feeds back: consolidated unless the result is a reduction's output.

A body that never consolidates (an identity, a map, a concat with a negation) would feed a
cancelling ``(+x, -x)`` pair back every round for ever, so ``Variable.set`` consolidates its
feedback. A reduction's output needs no second consolidation (its input arrangement
consolidates each round, and the pairs the source's negation makes cancel there a round
later), and skipping it saves a wait for the frontier per round. Both kinds of body are
checked against from-scratch fixed points here, on every layout, over several epochs with
retractions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, Variable
from tests.differential import reference as ref
from tests.differential.reference import layouts

FAST = settings(max_examples=15, deadline=None)
PAIRS = st.tuples(st.integers(0, 4), st.integers(0, 4))


def swap(r: Any) -> Any:
    return (r[1], r[0])


def identity(c: Collection) -> Collection:
    return c.map(lambda r: r)


def cancelling(c: Collection) -> Collection:
    """The same collection, through a pair of cancelling copies at every round."""
    return c.concat(c.map(swap)).concat(c.map(swap).negate())


def least_partner(c: Collection) -> Collection:
    """A reduction whose output at round 0 equals its input (``min`` of one value per key)."""
    return c.min()


def symmetric_min(c: Collection) -> Collection:
    return c.concat(c.map(swap)).min()


# (body, the fixed point of iterating it from a set of pairs, whether the result is a reduction's)
BODIES: dict[str, tuple[Callable[[Collection], Collection], Callable[[Counter], Counter], bool]] = {
    "identity": (identity, lambda s: s, False),
    "cancelling": (cancelling, lambda s: s, False),
    "min": (least_partner, lambda s: _least(s), True),
    "symmetric_min": (symmetric_min, lambda s: _symmetric_least(s), True),
    "distinct": (lambda c: c.distinct(), lambda s: Counter(r for r, n in s.items() if n > 0), True),
}


def _least(s: Counter) -> Counter:
    best: dict[Any, Any] = {}
    for (k, v), n in s.items():
        if n > 0 and (k not in best or v < best[k]):
            best[k] = v
    return Counter(best.items())


def _symmetric_least(s: Counter) -> Counter:
    """The fixed point of ``x -> min per key of (x + swapped x)``, from ``s``: per key, the
    least value of its round-0 set and of every key reachable through the pairs' swaps."""
    current = Counter(s)
    while True:
        both = Counter({r: n for r, n in current.items() if n > 0})
        both.update(Counter({swap(r): n for r, n in current.items() if n > 0}))
        nxt = _least(both)
        if nxt == current:
            return current
        current = nxt


@FAST
@given(ref.set_histories(PAIRS, count=3, size=(0, 5)), layouts, st.sampled_from(sorted(BODIES)))
def test_loops_reach_the_fixed_point_whatever_their_body(
    epochs: Any, layout: Any, body: str
) -> None:
    step, fixed_point, _ = BODIES[body]

    def build(scope: Any) -> Any:
        return Collection.from_epochs(scope, epochs).iterate(step).changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(epochs, fixed_point))


def _feedback_names(step: Callable[[Collection], Collection], with_source: bool) -> list[str]:
    names: list[str] = []

    def build(scope: Any) -> Any:
        start = Collection.from_epochs(scope, [])  # the structure only: a sum never converges
        loop = scope.iterative("loop")
        if with_source:
            var = Variable(loop, start.enter(loop), name="v")
            result = var.set(step(var.collection))
        else:  # starts empty: the start comes in beside it
            var = Variable(loop, name="v")
            result = var.set(step(var.collection.concat(start.enter(loop))))
        names.extend(op.name for op in scope.build.operators)
        return result.leave().changes()

    naiad.run(build)
    return names


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("with_source", [True, False])
def test_the_feedback_is_consolidated_unless_a_reduction_made_it(
    body: str, with_source: bool
) -> None:
    step, _, reduced = BODIES[body]
    consolidations = _feedback_names(step, with_source).count("v.consolidate")
    assert consolidations == (0 if reduced else 1)


def test_a_reductions_output_mapped_is_consolidated_again() -> None:
    """Only the reduction's own output is known to be consolidated: a map after it can make
    two records one (and a cancelling pair of them)."""
    names = _feedback_names(lambda c: c.min().map(lambda r: (r[0], 0)), True)
    assert names.count("v.consolidate") == 1
