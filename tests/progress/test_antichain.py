"""Antichain, MutableAntichain and ChangeBatch against brute force."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.progress.antichain import Antichain, MutableAntichain
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.timestamp import Product, less_equal

SETTINGS = settings(max_examples=80, deadline=None, database=None)

small = st.integers(0, 5)
prod1 = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
prod2 = st.builds(Product, prod1, st.integers(0, 2))
families = st.sampled_from([small, prod1, prod2])


def minimal(elements):
    """Brute force: the elements no other element is strictly below (deduplicated)."""
    elements = set(elements)
    return {t for t in elements if not any(e != t and less_equal(e, t) for e in elements)}


def key(elements):
    return sorted(map(repr, elements))


# --------------------------------------------------------------------------- Antichain


@SETTINGS
@given(data=st.data())
def test_antichain_holds_the_minimal_elements(data):
    family = data.draw(families)
    inserted = data.draw(st.lists(family, max_size=25))
    probes = data.draw(st.lists(family, min_size=1, max_size=10))
    a = Antichain()
    seen = []
    for t in inserted:
        added = a.insert(t)
        # added exactly when no element already there (equivalently: seen so far) precedes it
        assert added == (not any(less_equal(e, t) for e in seen))
        seen.append(t)
        elements = a.elements
        assert len(elements) == len(set(elements))
        for x in elements:
            for y in elements:
                if x != y:
                    assert not less_equal(x, y), (x, y)
        assert set(elements) == minimal(seen)
    assert a == Antichain(inserted)
    assert len(a) == len(minimal(inserted))
    assert a.is_empty() == (not inserted)
    for t in probes + inserted:
        assert a.less_equal(t) == any(less_equal(e, t) for e in inserted)
        assert a.less_than(t) == any(e != t and less_equal(e, t) for e in inserted)


@SETTINGS
@given(data=st.data())
def test_antichain_dominates(data):
    family = data.draw(families)
    xs = data.draw(st.lists(family, max_size=8))
    ys = data.draw(st.lists(family, max_size=8))
    a, b = Antichain(xs), Antichain(ys)
    assert a.dominates(b) == all(any(less_equal(x, y) for x in xs) for y in ys)
    assert a.dominates(a)


def test_antichain_insert_order_does_not_matter():
    items = [Product(2, 0), Product(0, 2), Product(1, 1), Product(0, 3), Product(3, 3)]
    forward, backward = Antichain(items), Antichain(reversed(items))
    assert forward == backward
    assert set(forward) == {Product(2, 0), Product(0, 2), Product(1, 1)}
    assert hash(forward) == hash(backward)


# --------------------------------------------------------------------------- MutableAntichain


def apply_changes(frontier, changes):
    """Applies a frontier change list to the previous frontier, as a multiset."""
    bag = Counter(frontier)
    for t, d in changes:
        assert d in (1, -1), changes
        bag[t] += d
        assert bag[t] in (0, 1), (t, changes)
    return {t for t, c in bag.items() if c > 0}


@st.composite
def batches(draw, family):
    pool = draw(st.lists(family, min_size=1, max_size=6, unique=True))
    deltas = st.sampled_from([1, 1, -1, -1, 2, -2, 0])
    return draw(
        st.lists(
            st.lists(st.tuples(st.sampled_from(pool), deltas), max_size=6),
            min_size=1,
            max_size=10,
        )
    )


@SETTINGS
@given(data=st.data())
def test_mutable_antichain_tracks_positive_minimal_elements(data):
    family = data.draw(families)
    all_batches = data.draw(batches(family))
    probes = data.draw(st.lists(family, min_size=1, max_size=5))
    m = MutableAntichain()
    counts: Counter = Counter()
    previous: set = set()
    for batch in all_batches:
        changes = m.update_iter(batch)
        for t, d in batch:
            counts[t] += d
        positive = [t for t, c in counts.items() if c > 0]
        expected = minimal(positive)
        frontier = m.frontier
        assert len(frontier) == len(set(frontier))
        assert set(frontier) == expected, (batch, counts)
        # the reported changes turn the old frontier into the new one, and nothing else
        assert apply_changes(previous, changes) == expected
        assert len(changes) == len({t for t, _ in changes})
        if set(previous) == expected:
            assert changes == []
        previous = expected
        for t in counts:
            assert m.count_for(t) == counts[t]
        assert m.is_empty() == (not expected)
        for t in probes + list(counts):
            assert m.less_equal(t) == any(less_equal(e, t) for e in expected)
            assert m.less_than(t) == any(e != t and less_equal(e, t) for e in expected)


@SETTINGS
@given(data=st.data())
def test_mutable_antichain_single_updates_match_batched(data):
    """Feeding a batch one update at a time reaches the same frontier."""
    family = data.draw(families)
    all_batches = data.draw(batches(family))
    batched, single = MutableAntichain(), MutableAntichain()
    frontier_single: set = set()
    for batch in all_batches:
        batched.update_iter(batch)
        for update in batch:
            frontier_single = apply_changes(frontier_single, single.update_iter([update]))
        assert set(batched.frontier) == set(single.frontier) == frontier_single


def test_mutable_antichain_negative_then_positive():
    m = MutableAntichain()
    assert m.update_iter([(Product(1, 1), -1)]) == []
    assert m.frontier == []
    # the +1 cancels the earlier -1: still absent
    assert m.update_iter([(Product(1, 1), 1)]) == []
    assert m.frontier == []
    assert m.update_iter([(Product(1, 1), 1), (Product(0, 2), 1)]) == [
        (Product(0, 2), 1),
        (Product(1, 1), 1),
    ] or sorted(m.frontier) == [Product(0, 2), Product(1, 1)]
    assert sorted(m.frontier) == [Product(0, 2), Product(1, 1)]
    # removing and re-adding in one batch leaves the frontier as it was
    assert m.update_iter([(Product(0, 2), -1), (Product(0, 2), 1)]) == []
    assert sorted(m.frontier) == [Product(0, 2), Product(1, 1)]
    # a dominated element arriving and the dominating one leaving, in that order
    changes = m.update_iter([(Product(1, 3), 1), (Product(0, 2), -1)])
    assert sorted(changes) == [(Product(0, 2), -1)]
    assert m.frontier == [Product(1, 1)]


def test_mutable_antichain_zero_delta_is_a_no_op():
    m = MutableAntichain()
    assert m.update_iter([(Product(0, 0), 0)]) == []
    assert m.update_iter([(Product(1, 0), 1), (Product(0, 0), 0)]) == [(Product(1, 0), 1)]
    assert m.update_iter([(Product(1, 0), 0)]) == []
    assert m.frontier == [Product(1, 0)]
    assert m.count_for(Product(0, 0)) == 0


# --------------------------------------------------------------------------- ChangeBatch


@SETTINGS
@given(
    updates=st.lists(
        st.tuples(st.tuples(st.integers(0, 3), st.integers(0, 3)), st.integers(-3, 3)),
        max_size=30,
    )
)
def test_change_batch_drain(updates):
    batch = ChangeBatch()
    for k, d in updates:
        batch.update(k, d)
    sums: Counter = Counter()
    for k, d in updates:
        sums[k] += d
    expected = {k: d for k, d in sums.items() if d}
    assert dict(batch) == expected
    assert len(batch) == len(expected)
    assert batch.is_empty() == (not expected)
    assert dict(ChangeBatch(updates)) == expected
    other = ChangeBatch()
    other.extend(updates)
    assert dict(other) == expected

    drained = batch.drain()
    assert dict(drained) == expected
    assert len(drained) == len(expected)
    signs = [d > 0 for _, d in drained]
    assert signs == sorted(signs, reverse=True), drained  # positives first
    assert all(d != 0 for _, d in drained)
    assert batch.is_empty()
    assert len(batch) == 0
    assert batch.drain() == []
    assert list(batch) == []


def test_change_batch_cancelling_pair_is_empty():
    b = ChangeBatch()
    b.update(("op", 3), 1)
    b.update(("op", 3), -1)
    assert b.is_empty()
    assert len(b) == 0
    assert b.drain() == []
