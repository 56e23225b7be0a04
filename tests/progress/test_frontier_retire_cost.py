"""A frontier that retires one of many present elements at a time (a prioritized loop: n
priorities in flight, each round retires the least) costs a heap step per round. The
frontier was rebuilt from every positive count whenever one of its elements went away, so n
priorities cost n**2: 16,500 rebuilds and 3 s of a 16 s prioritized connected components of
a 400-node path."""

from __future__ import annotations

import heapq
from typing import Any

import pytest

from naiad.progress import antichain
from naiad.progress.antichain import MutableAntichain
from naiad.progress.timestamp import Lex, Product
from tests.counting import Work


@pytest.mark.parametrize(
    "time",
    [lambda p, i: 10 * p + i, lambda p, i: Product(0, 10 * p + i), lambda p, i: Lex(p, i)],
    ids=["int", "Product", "Lex"],
)
def test_retiring_one_of_many_present_elements_costs_a_heap_step(
    time: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prioritized loop: n priorities present at once, the least retired each round (and
    the next one of its iterations made present). Rebuilding the frontier from every count
    made that n**2 work."""
    counted = Work(monkeypatch)  # elements a rebuild passes over, and heap entries popped
    counted.count(antichain, "_minimal", weight=len)
    counted.count(heapq, "heappop")
    n = 1_000
    m = MutableAntichain()
    m.update_iter([(time(p, 0), 1) for p in range(n)])
    for p in range(n):
        for i in range(3):  # three rounds of priority p, then it is done
            step = [(time(p, i + 1), 1), (time(p, i), -1)] if i < 2 else [(time(p, i), -1)]
            assert (time(p, i), -1) in m.update_iter(step)
        assert m.frontier == ([time(p + 1, 0)] if p < n - 1 else [])
    assert 0 < counted.total <= 20 * n, counted.counts  # the old rebuild: 1,501,500
