"""TimeQueue (the index of waiting times behind frontiers, notifications, arrange and reduce)
and MutableAntichain with many elements present, against brute force."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.progress import antichain
from naiad.progress.antichain import MutableAntichain, TimeQueue
from naiad.progress.timestamp import Lex, Product, less_equal

SETTINGS = settings(max_examples=60, deadline=None, database=None)

small = st.integers(0, 40)
prod1 = st.builds(Product, st.integers(0, 3), st.integers(0, 12))
lex1 = st.builds(Lex, st.integers(0, 3), st.integers(0, 12))
prod2 = st.builds(Product, prod1, st.integers(0, 2))
lex_of_prod = st.builds(Lex, prod1, st.integers(0, 2))
families = st.sampled_from([small, prod1, lex1, prod2, lex_of_prod])


def minimal(elements: Any) -> set[Any]:
    elements = set(elements)
    return {t for t in elements if not any(e != t and less_equal(e, t) for e in elements)}


@SETTINGS
@given(data=st.data())
def test_time_queue_matches_a_set(data: Any) -> None:
    family = data.draw(families)
    pool = data.draw(st.lists(family, min_size=1, max_size=30, unique=True))
    ops = data.draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("add"), st.sampled_from(pool)),
                st.tuples(st.just("discard"), st.sampled_from(pool)),
                st.tuples(st.just("ready"), st.lists(st.lists(family, max_size=3), max_size=2)),
            ),
            max_size=80,
        )
    )
    q, model = TimeQueue(), set()
    for op, arg in ops:
        if op == "add":
            q.add(arg)
            model.add(arg)
        elif op == "discard":
            q.discard(arg)
            model.discard(arg)
        else:
            elements = [f for frontier in arg for f in frontier]
            expected = sorted(t for t in model if not any(less_equal(f, t) for f in elements))
            assert q.pop_ready(arg) == expected
            model -= set(expected)
        assert set(q) == model and len(q) == len(model) and bool(q) == bool(model)
        got = q.minimal()
        assert got == sorted(got) and set(got) == minimal(model)


def test_time_queue_mixed_shapes_fall_back_to_a_scan() -> None:
    """A numpy epoch is not indexed as an int is; a queue holding both is scanned."""
    q = TimeQueue([Product(0, 5), Product(np.int64(1), 0), Product(2, 7)])
    assert q.minimal() == [Product(0, 5), Product(1, 0)]
    q.discard(Product(np.int64(1), 0))
    assert q.pop_ready([[Product(0, 6)]]) == [Product(0, 5)]
    assert list(q) == [Product(2, 7)]


def test_time_queue_drops_stale_entries() -> None:
    """Times added and discarded while others stay below them do not pile up in the heap."""
    q = TimeQueue([0])
    for t in range(1, 10_000):
        q.add(t)
        q.discard(t)
    assert list(q) == [0] and len(q._heap) < 200


@st.composite
def many_batches(draw: Any, family: Any) -> Any:
    pool = draw(st.lists(family, min_size=1, max_size=40, unique=True))
    deltas = st.sampled_from([1, 1, 1, -1, -1, 2, -2, 0])
    return draw(
        st.lists(
            st.lists(st.tuples(st.sampled_from(pool), deltas), max_size=30),
            min_size=1,
            max_size=12,
        )
    )


@SETTINGS
@given(data=st.data(), index_above=st.sampled_from([0, 3, 16]))
def test_mutable_antichain_with_many_elements(data: Any, index_above: int) -> None:
    family = data.draw(families)
    all_batches = data.draw(many_batches(family))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(antichain, "INDEX_ABOVE", index_above)
        m = MutableAntichain()
        counts: Counter = Counter()
        previous: set[Any] = set()
        for batch in all_batches:
            changes = m.update_iter(batch)
            for t, d in batch:
                counts[t] += d
            expected = minimal(t for t, c in counts.items() if c > 0)
            assert set(m.frontier) == expected and len(m.frontier) == len(expected)
            bag = Counter(previous)
            for t, d in changes:
                bag[t] += d
            assert {t for t, c in bag.items() if c > 0} == expected
            assert all(c in (0, 1) for c in bag.values())
            previous = expected


class CountedInt(int):
    """A loop counter that counts the comparisons made with it."""

    compared = 0

    def __lt__(self, other: int) -> bool:  # type: ignore[override]
        CountedInt.compared += 1
        return int(self) < other

    def __gt__(self, other: int) -> bool:  # type: ignore[override]
        CountedInt.compared += 1
        return int(self) > other


def test_pop_ready_behind_a_staircase_costs_epochs_plus_elements() -> None:
    """Regression: ``pop_ready`` of ``Product`` times tested, for every pending epoch, every
    frontier element, and a loop with n epochs in flight has a staircase frontier of about
    one element per epoch: about n**2 comparisons per activation that releases nothing
    (250,000 for 500 epochs here, 1,000,000 for 1,000)."""
    work = {}
    for n in (500, 1000):
        # epoch e waits at counter n - e + 1, held back by the frontier's (e, n - e)
        q = TimeQueue(Product(e, n - e + 1) for e in range(n))
        frontier = [Product(e, CountedInt(n - e)) for e in range(n)]
        CountedInt.compared = 0
        assert q.pop_ready([frontier]) == []
        work[n] = CountedInt.compared
        # one step on: every epoch is released, least first
        moved = [Product(e, n - e + 2) for e in range(n)]
        assert q.pop_ready([moved]) == [Product(e, n - e + 1) for e in range(n)]
        assert not q
    assert work[500] <= 4 * 500 and work[1000] <= 2.5 * work[500], work
    assert work[500] > 0, work  # the counting saw the comparisons
