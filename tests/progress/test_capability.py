"""Capabilities: the counts they record and the misuse they reject."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.progress.capability import Capability, CapabilityError
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.timestamp import Product, less_equal

SETTINGS = settings(max_examples=60, deadline=None, database=None)


class Op:
    name = "demo-op"


LOCS = (3, 8)


def acquire(time, buffer=None, locations=LOCS):
    buffer = ChangeBatch() if buffer is None else buffer
    return Capability.acquire(time, Op(), locations, buffer), buffer


def test_acquire_records_plus_one_per_location():
    cap, buffer = acquire(Product(1, 2))
    assert cap.valid and cap.time == Product(1, 2)
    assert cap.owner.name == "demo-op"
    assert sorted(buffer) == [((3, Product(1, 2)), 1), ((8, Product(1, 2)), 1)]


def test_acquire_with_no_locations_records_nothing():
    cap, buffer = acquire(4, locations=())
    assert cap.valid
    assert buffer.is_empty()


def test_delayed_and_drop():
    cap, buffer = acquire(Product(1, 2))
    later = cap.delayed(Product(1, 5))
    assert later is not cap and later.valid and later.time == Product(1, 5)
    assert cap.time == Product(1, 2)
    cap.drop()
    assert not cap.valid
    assert sorted(buffer) == [((3, Product(1, 5)), 1), ((8, Product(1, 5)), 1)]
    later.drop()
    assert buffer.is_empty()
    assert buffer.drain() == []


def test_downgrade_moves_the_count():
    cap, buffer = acquire(2)
    buffer.drain()
    cap.downgrade(5)
    assert cap.time == 5
    drained = buffer.drain()
    assert sorted(drained) == [((3, 2), -1), ((3, 5), 1), ((8, 2), -1), ((8, 5), 1)]
    # positive changes come first in a drained batch
    assert [d for _, d in drained] == [1, 1, -1, -1]
    # downgrading to the same time is allowed and records nothing net
    cap.downgrade(5)
    assert buffer.is_empty()


def test_delayed_to_the_same_time_and_retain():
    cap, buffer = acquire(Product(0, 0))
    same = cap.delayed(Product(0, 0))
    kept = cap.retain()
    assert same.time == kept.time == Product(0, 0)
    assert dict(buffer) == {(3, Product(0, 0)): 3, (8, Product(0, 0)): 3}


@pytest.mark.parametrize(
    ("held", "wanted"),
    [
        (5, 4),  # earlier
        (Product(1, 2), Product(0, 9)),  # incomparable
        (Product(1, 2), Product(2, 1)),  # incomparable
        (Product(1, 2), Product(1, 1)),  # earlier
    ],
)
def test_sending_backwards_is_rejected(held, wanted):
    cap, buffer = acquire(held)
    before = sorted(buffer)
    with pytest.raises(CapabilityError, match="backwards") as info:
        cap.delayed(wanted)
    assert "demo-op" in str(info.value)
    with pytest.raises(CapabilityError, match="backwards"):
        cap.downgrade(wanted)
    assert cap.try_delayed(wanted) is None
    assert cap.try_downgrade(wanted) is False
    assert sorted(buffer) == before
    assert cap.time == held and cap.valid


@SETTINGS
@given(
    held=st.builds(Product, st.integers(0, 4), st.integers(0, 4)),
    wanted=st.builds(Product, st.integers(0, 4), st.integers(0, 4)),
)
def test_try_forms_agree_with_checked_forms(held, wanted):
    cap, buffer = acquire(held)
    allowed = less_equal(held, wanted)
    delayed = cap.try_delayed(wanted)
    if allowed:
        assert delayed is not None and delayed.time == wanted
        delayed.drop()
    else:
        assert delayed is None
        with pytest.raises(CapabilityError):
            cap.delayed(wanted)
    assert sorted(buffer) == sorted({(loc, held): 1 for loc in LOCS}.items())

    assert cap.try_downgrade(wanted) is allowed
    assert cap.time == (wanted if allowed else held)
    expected = {(loc, cap.time): 1 for loc in LOCS}
    assert dict(buffer) == expected


@SETTINGS
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["delayed", "downgrade", "drop"]), st.integers(0, 5)),
        max_size=12,
    )
)
def test_buffer_counts_equal_live_capabilities(ops):
    """Whatever the sequence of operations, the buffer holds one count per live capability."""
    root, buffer = acquire(0)
    live = [root]
    for i, (op, time) in enumerate(ops):
        if not live:
            break
        cap = live[i % len(live)]
        if op == "delayed":
            new = cap.try_delayed(time)
            assert cap.valid
            assert (new is not None) == (cap.time <= time)
            if new is not None:
                live.append(new)
        elif op == "downgrade":
            old = cap.time
            assert cap.try_downgrade(time) == (old <= time)
            assert cap.time == (time if old <= time else old)
        else:
            cap.drop()
            live.remove(cap)
            with pytest.raises(CapabilityError):
                cap.drop()
        expected: dict = {}
        for c in live:
            for loc in LOCS:
                expected[(loc, c.time)] = expected.get((loc, c.time), 0) + 1
        assert dict(buffer) == expected


def test_dropping_twice_raises_and_a_dropped_capability_is_dead():
    cap, buffer = acquire(1)
    cap.drop()
    with pytest.raises(CapabilityError, match="no longer valid"):
        cap.drop()
    with pytest.raises(CapabilityError):
        cap.delayed(2)
    with pytest.raises(CapabilityError):
        cap.downgrade(2)
    with pytest.raises(CapabilityError):
        cap.retain()
    assert cap.try_delayed(2) is None
    assert cap.try_downgrade(2) is False
    assert buffer.is_empty()
    assert "released" in repr(cap)


def test_borrowed_capability():
    buffer = ChangeBatch()
    borrowed = Capability(Product(2, 0), Op(), LOCS, buffer, borrowed=True)
    assert borrowed.valid
    assert buffer.is_empty()  # borrowing records nothing: the message/notification holds it
    assert "borrowed" in repr(borrowed)

    with pytest.raises(CapabilityError, match="cannot be dropped"):
        borrowed.drop()
    with pytest.raises(CapabilityError, match="cannot be downgraded"):
        borrowed.downgrade(Product(2, 1))
    assert borrowed.try_downgrade(Product(2, 1)) is False
    assert borrowed.time == Product(2, 0)
    assert buffer.is_empty()

    owned = borrowed.retain()
    assert owned.time == Product(2, 0)
    assert sorted(buffer) == [((3, Product(2, 0)), 1), ((8, Product(2, 0)), 1)]
    # a borrowed capability may still mint delayed ones
    later = borrowed.delayed(Product(3, 0))
    assert dict(buffer)[(3, Product(3, 0))] == 1
    # the owned copy behaves like any owned capability
    owned.downgrade(Product(2, 4))
    later.drop()
    assert sorted(buffer) == [((3, Product(2, 4)), 1), ((8, Product(2, 4)), 1)]

    # once released (the callback returned), the borrowed one is unusable
    borrowed._release_borrowed()
    with pytest.raises(CapabilityError, match=r"retain\(\) it"):
        borrowed.retain()
    assert borrowed.try_delayed(Product(9, 9)) is None
    assert owned.valid


def test_times_of_another_shape_are_refused_and_numpy_integers_become_ints():
    """Regression: an int inside a loop failed deep in the partial order with
    "'int' object has no attribute 'inner'", and a numpy integer became a numpy time."""
    import numpy as np

    from naiad.progress.timestamp import Lex

    cap, buffer = acquire(Product(1, 2))
    for bad in (5, Product(1, 2.5), Lex(1, 3), Product(Product(1, 0), 3)):
        for method in (cap.delayed, cap.try_delayed, cap.downgrade, cap.try_downgrade):
            with pytest.raises(TypeError, match=r"'demo-op': a time.* must"):
                method(bad)
    root, _ = acquire(2, buffer)
    with pytest.raises(TypeError, match=r"'demo-op': a time must be an integer, not Product"):
        root.delayed(Product(3, 0))
    later = root.try_delayed(np.int64(4))
    assert later is not None and type(later.time) is int
    cap.downgrade(Product(np.int64(1), np.int32(3)))
    assert cap.time == Product(1, 3) and type(cap.time.inner) is int
    assert dict(buffer) == {(loc, t): 1 for loc in LOCS for t in (2, 4, Product(1, 3))}
