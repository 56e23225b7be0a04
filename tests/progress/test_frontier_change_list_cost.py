"""A ``MutableAntichain`` whose frontier is a staircase of k incomparable times pays O(k) to
list a move's changes, not O(k**2): each removal compared every old element with every new
one in lists (k removals of a 100-wide staircase: 333,300 comparisons). The changes are the
same, in the same order, as the list code's (random sequences below)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from naiad import Product
from naiad.progress.antichain import MutableAntichain, _minimal


def staircase_cost(k: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Equality tests and hashes of times while k staircase steps go one at a time."""
    chain = MutableAntichain()
    chain.update_iter([(Product(i, k - i), 1) for i in range(k)])
    counted = [0]

    def eq(a: Any, b: Any) -> Any:
        counted[0] += 1
        return tuple.__eq__(a, b)

    def hashed(a: Any) -> int:
        counted[0] += 1
        return tuple.__hash__(a)

    with monkeypatch.context() as m:
        m.setattr(Product, "__eq__", eq)
        m.setattr(Product, "__hash__", hashed)
        start = counted[0]
        for i in range(k):
            changes = chain.update_iter([(Product(i, k - i), -1)])
            assert changes == [(Product(i, k - i), -1)]
        return counted[0] - start


def test_listing_a_wide_frontiers_move_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    cost = {k: staircase_cost(k, monkeypatch) for k in (100, 200)}
    # the lists: k**3 / 3 in all (333,300 at k = 100, 8 times that at 200)
    assert 0 < cost[100] <= 60_000 and cost[200] <= 4.5 * cost[100], cost


times = st.builds(Product, st.integers(0, 12), st.integers(0, 12))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(times, st.sampled_from([1, -1, 2])), max_size=60))
@example([(Product(i, 12 - i), 1) for i in range(12)] + [(Product(i, 12 - i), -1) for i in (3, 0)])
def test_changes_are_the_list_codes(updates: list[tuple[Product, int]]) -> None:
    """Applied one at a time, every reported change list is the old list code's, in order."""
    chain = MutableAntichain()
    counts: dict[Any, int] = {}
    frontier: list[Any] = []
    for t, d in updates:
        counts[t] = counts.get(t, 0) + d
        now = _minimal([u for u, c in counts.items() if c > 0])
        want = [(u, -1) for u in frontier if u not in now]
        want.extend((u, 1) for u in now if u not in frontier)
        got = chain.update_iter([(t, d)])
        assert got == (want if now != frontier else [])
        assert chain.frontier == now
        frontier = now
