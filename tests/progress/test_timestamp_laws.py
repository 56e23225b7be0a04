"""Order and lattice laws of the timestamps in ``naiad.progress.timestamp``."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.progress.timestamp import (
    Lex,
    Product,
    depth,
    join,
    less_equal,
    less_than,
    meet,
    minimum_like,
)

SETTINGS = settings(max_examples=60, deadline=None, database=None)

small = st.integers(0, 6)
prod1 = st.builds(Product, small, small)
prod2 = st.builds(Product, prod1, small)
lex_int = st.builds(Lex, small, small)
lex_prod = st.builds(Lex, prod1, small)
prod_lex = st.builds(Product, lex_int, small)

# Families of times of one shape, with a reference (independent) definition of the order.
ORDERS = {
    "int": st.integers(0, 6),
    "product1": prod1,
    "product2": prod2,
    "lex_int": lex_int,
    "lex_product": lex_prod,
    "product_lex": prod_lex,
}
# The families that are lattices: join and meet always exist.
LATTICES = ["int", "product1", "product2", "lex_int"]
# The product-only families: join / meet are componentwise max / min of the flattened tuple.
PRODUCTS = ["int", "product1", "product2"]


def flat(t):
    """All coordinates of a (nested) Product, outermost first."""
    if isinstance(t, int):
        return (t,)
    return (*flat(t.outer), t.inner)


def ref_le(a, b) -> bool:
    """A reference partial order written from the definitions, not from the library."""
    if isinstance(a, int):
        return a <= b
    if isinstance(a, Product):
        return ref_le(a.outer, b.outer) and a.inner <= b.inner
    assert isinstance(a, Lex)
    if a.outer == b.outer:
        return a.inner <= b.inner
    return ref_le(a.outer, b.outer)


def random_like(t, rng: random.Random):
    """A random time of the same shape as ``t`` (coordinates in 0..6)."""
    if isinstance(t, int):
        return rng.randint(0, 6)
    return t.__class__(random_like(t.outer, rng), rng.randint(0, 6))


def same(x, y) -> bool:
    """Equal including classes: ``Product(1, 2) == Lex(1, 2)`` as tuples, reprs differ."""
    return repr(x) == repr(y)


def triples(name):
    s = ORDERS[name]
    return st.tuples(s, s, s)


def family_params(names):
    return pytest.mark.parametrize("name", names)


# --------------------------------------------------------------------------- partial order


@family_params(list(ORDERS))
@SETTINGS
@given(data=st.data())
def test_less_equal_matches_reference(name, data):
    a, b = data.draw(st.tuples(ORDERS[name], ORDERS[name]))
    assert less_equal(a, b) == ref_le(a, b)
    assert less_than(a, b) == (a != b and ref_le(a, b))


@family_params(list(ORDERS))
@SETTINGS
@given(data=st.data())
def test_partial_order_laws(name, data):
    a, b, c = data.draw(triples(name))
    # reflexive
    assert less_equal(a, a)
    assert not less_than(a, a)
    # antisymmetric
    if less_equal(a, b) and less_equal(b, a):
        assert a == b
    # transitive
    if less_equal(a, b) and less_equal(b, c):
        assert less_equal(a, c)
    # the documented invariant: the partial order is contained in the tuple/int total order
    if less_equal(a, b):
        assert a <= b
    if less_than(a, b):
        assert a < b


@family_params(list(ORDERS))
def test_partial_order_laws_exhaustively_on_a_small_cube(name):
    """Transitivity and the sort invariant over every triple of a small universe."""
    coords = range(3)
    universe = {
        "int": list(coords),
        "product1": [Product(a, b) for a in coords for b in coords],
        "product2": [Product(Product(a, b), c) for a in range(2) for b in range(2) for c in coords],
        "lex_int": [Lex(a, b) for a in coords for b in coords],
        "lex_product": [Lex(Product(a, b), c) for a in range(2) for b in range(2) for c in coords],
        "product_lex": [Product(Lex(a, b), c) for a in range(2) for b in range(2) for c in coords],
    }[name]
    le = {(a, b): less_equal(a, b) for a in universe for b in universe}
    for a, b in itertools.product(universe, repeat=2):
        if le[a, b]:
            assert a <= b
            if le[b, a]:
                assert a == b
    for a, b, c in itertools.product(universe, repeat=3):
        if le[a, b] and le[b, c]:
            assert le[a, c], (a, b, c)
    # sorting by the total order lists every time before the times that could follow it
    ordered = sorted(universe)
    for i, a in enumerate(ordered):
        for b in ordered[:i]:
            assert not less_than(a, b), (a, b)


def test_product_is_really_partial_and_lex_is_total_over_ints():
    assert not less_equal(Product(1, 5), Product(2, 3))
    assert not less_equal(Product(2, 3), Product(1, 5))
    assert less_equal(Lex(1, 5), Lex(2, 3))
    assert not less_equal(Lex(2, 3), Lex(1, 5))
    # Lex over a partial outer order is partial too
    x, y = Lex(Product(0, 1), 0), Lex(Product(1, 0), 9)
    assert not less_equal(x, y) and not less_equal(y, x)


# --------------------------------------------------------------------------- lattice laws


@family_params(LATTICES)
@SETTINGS
@given(data=st.data())
def test_lattice_laws(name, data):
    a, b, c = data.draw(triples(name))
    # commutative
    assert same(join(a, b), join(b, a))
    assert same(meet(a, b), meet(b, a))
    # associative
    assert same(join(join(a, b), c), join(a, join(b, c)))
    assert same(meet(meet(a, b), c), meet(a, meet(b, c)))
    # idempotent
    assert same(join(a, a), a)
    assert same(meet(a, a), a)
    # absorption
    assert same(join(a, meet(a, b)), a)
    assert same(meet(a, join(a, b)), a)
    # consistency with the order
    assert less_equal(a, b) == same(join(a, b), b)
    assert less_equal(a, b) == same(meet(a, b), a)


@family_params(LATTICES)
@SETTINGS
@given(data=st.data())
def test_join_is_least_upper_bound_and_meet_greatest_lower_bound(name, data):
    s = ORDERS[name]
    a, b = data.draw(st.tuples(s, s))
    rng = data.draw(st.randoms(use_true_random=False))
    sample = [random_like(a, rng) for _ in range(40)]
    j, m = join(a, b), meet(a, b)
    assert less_equal(a, j) and less_equal(b, j)
    assert less_equal(m, a) and less_equal(m, b)
    for c in sample:
        if less_equal(a, c) and less_equal(b, c):
            assert less_equal(j, c), (a, b, j, c)
        if less_equal(c, a) and less_equal(c, b):
            assert less_equal(c, m), (a, b, m, c)


@family_params(PRODUCTS)
@SETTINGS
@given(data=st.data())
def test_product_join_meet_are_componentwise(name, data):
    s = ORDERS[name]
    a, b = data.draw(st.tuples(s, s))
    assert flat(join(a, b)) == tuple(map(max, flat(a), flat(b)))
    assert flat(meet(a, b)) == tuple(map(min, flat(a), flat(b)))


@SETTINGS
@given(a=prod2, b=prod2, bumps=st.lists(st.integers(0, 3), min_size=3, max_size=3))
def test_product_join_below_constructed_upper_bound(a, b, bumps):
    """Every upper bound built as componentwise max + something is above the join."""
    upper = [max(x, y) + d for x, y, d in zip(flat(a), flat(b), bumps, strict=True)]
    u = Product(Product(upper[0], upper[1]), upper[2])
    assert less_equal(a, u) and less_equal(b, u)
    assert less_equal(join(a, b), u)
    lower = [max(0, min(x, y) - d) for x, y, d in zip(flat(a), flat(b), bumps, strict=True)]
    v = Product(Product(lower[0], lower[1]), lower[2])
    assert less_equal(v, meet(a, b))


# --------------------------------------------------------------------------- Lex


@SETTINGS
@given(a=lex_int, b=lex_int)
def test_lex_over_ints_is_total_with_max_and_min(a, b):
    assert less_equal(a, b) or less_equal(b, a)
    assert join(a, b) == max(a, b)
    assert meet(a, b) == min(a, b)


@SETTINGS
@given(a=lex_prod, b=lex_prod, rng=st.randoms(use_true_random=False))
def test_lex_join_is_an_upper_bound(a, b, rng):
    sample = [random_like(a, rng) for _ in range(40)]
    j = join(a, b)
    assert isinstance(j, Lex)
    assert less_equal(a, j) and less_equal(b, j)
    # and the least one among a sample of upper bounds
    for c in sample:
        if less_equal(a, c) and less_equal(b, c):
            assert less_equal(j, c), (a, b, j, c)
    # comparable arguments: the join is the larger one
    if less_equal(a, b):
        assert j == b


@SETTINGS
@given(o1=prod1, o2=prod1, i=small, k=small)
def test_lex_meet_of_incomparable_outer_parts_raises(o1, o2, i, k):
    a, b = Lex(o1, i), Lex(o2, k)
    if not less_equal(o1, o2) and not less_equal(o2, o1):
        with pytest.raises(ValueError, match="greatest lower bound"):
            meet(a, b)
        with pytest.raises(ValueError):
            b.meet(a)
    else:
        m = meet(a, b)
        assert m in (a, b)
        assert less_equal(m, a) and less_equal(m, b)


def test_lex_meet_raises_on_a_known_incomparable_pair():
    with pytest.raises(ValueError):
        Lex(Product(0, 1), 3).meet(Lex(Product(1, 0), 3))
    assert Lex(Product(0, 0), 7).meet(Lex(Product(1, 0), 0)) == Lex(Product(0, 0), 7)


# --------------------------------------------------------------------------- helpers


@SETTINGS
@given(t=st.one_of(small, prod1, prod2, lex_int, lex_prod, prod_lex))
def test_minimum_like_and_depth(t):
    low = minimum_like(t)
    assert type(low) is type(t)
    assert depth(low) == depth(t)
    assert less_equal(low, t)
    assert set(flat_any(low)) == {0}
    assert depth(t) == len(flat_any(t)) - 1


def flat_any(t):
    if isinstance(t, int):
        return (t,)
    return (*flat_any(t.outer), t.inner)
