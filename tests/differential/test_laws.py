"""Algebraic laws: consolidation of update batches, and the lattice operations on time
matrices (product and lexicographic orders)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from naiad.differential import lattice
from naiad.differential.updates import Updates, columns_of, time_matrix
from naiad.progress.timestamp import Product

LAWS = settings(max_examples=40, deadline=None)

# --- consolidation -----------------------------------------------------------------------------
scalar_records = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", ("t", 1), ("t", 2)]))
pair_records = st.tuples(
    st.one_of(st.integers(0, 3), st.sampled_from(["k", "l"])), st.integers(0, 2)
)
record_kinds = st.sampled_from(["ints", "scalars", "pairs"])


@st.composite
def update_lists(draw: Any) -> tuple[list[tuple[Any, Any, int]], int]:
    kind = draw(record_kinds)
    records = {"ints": st.integers(-3, 3), "scalars": scalar_records, "pairs": pair_records}[kind]
    depth = draw(st.integers(0, 2))
    times = st.lists(st.integers(0, 2), min_size=depth + 1, max_size=depth + 1)
    rows = draw(st.lists(st.tuples(records, times, st.integers(-2, 2)), max_size=12))
    return [(r, tuple(t), d) for r, t, d in rows], depth


def as_time(row: tuple[int, ...]) -> Any:
    t: Any = row[0]
    for counter in row[1:]:
        t = Product(t, counter)
    return t


def batch(rows: list[tuple[Any, tuple[int, ...], int]], depth: int) -> Updates:
    return Updates(
        columns_of([r for r, _, _ in rows]) if rows else (np.zeros(0, dtype=np.int64),),
        time_matrix([as_time(t) for _, t, _ in rows], depth),
        np.array([d for _, _, d in rows], dtype=np.int64),
    )


def summed(rows: list[tuple[Any, tuple[int, ...], int]]) -> Counter:
    out: Counter = Counter()
    for r, t, d in rows:
        out[(r, as_time(t))] += d
    return Counter({k: v for k, v in out.items() if v})


def as_counter(u: Updates) -> Counter:
    out: Counter = Counter()
    for r, t, d in u.to_records():
        assert (r, t) not in out, f"{(r, t)} twice in a consolidated batch"
        assert d != 0
        out[(r, t)] = d
    return out


@LAWS
@given(update_lists(), st.randoms(use_true_random=False))
def test_consolidate_is_summation_idempotent_and_order_free(drawn: Any, rnd: random.Random) -> None:
    rows, depth = drawn
    once = batch(rows, depth).consolidate()
    assert as_counter(once) == summed(rows)
    twice = once.consolidate()
    assert twice.to_records() == once.to_records()
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert as_counter(batch(shuffled, depth).consolidate()) == as_counter(once)
    # splitting into two batches and concatenating changes nothing either
    cut = len(rows) // 2
    if 0 < cut < len(rows):
        joined = batch(rows[:cut], depth).concat(batch(rows[cut:], depth))
        assert as_counter(joined.consolidate()) == summed(rows)


@LAWS
@given(update_lists(), update_lists())
def test_consolidate_of_a_sum_is_the_sum_of_consolidations(a: Any, b: Any) -> None:
    (rows_a, depth), (rows_b, _) = a, b
    rows_b = [(r, (t + (0,) * depth)[: depth + 1], d) for r, t, d in rows_b]
    left = batch(rows_a, depth).consolidate().concat(batch(rows_b, depth).consolidate())
    assert as_counter(left.consolidate()) == summed(rows_a + rows_b)


# --- lattice -------------------------------------------------------------------------------------
@st.composite
def orders(draw: Any) -> tuple[int, tuple[bool, ...]]:
    width = draw(st.integers(1, 3))
    flags = tuple(draw(st.lists(st.booleans(), min_size=width - 1, max_size=width - 1)))
    return width, flags


def rows_of(width: int, values: int = 3) -> st.SearchStrategy[np.ndarray]:
    return st.lists(st.integers(0, values), min_size=width, max_size=width).map(
        lambda r: np.array(r, dtype=np.int64)
    )


def box(width: int, top: int = 4) -> np.ndarray:
    return np.array(list(itertools.product(range(top + 1), repeat=width)), dtype=np.int64)


def le(a: np.ndarray, b: np.ndarray, lex: tuple[bool, ...]) -> bool:
    return bool(lattice.less_equal(a, b, lex))


def reference_le(a: np.ndarray, b: np.ndarray, lex: tuple[bool, ...]) -> bool:
    """The order from its definition: ``Product`` componentwise, ``Lex`` column ``i``
    compared only when every column before it is equal."""
    a_l, b_l = a.tolist(), b.tolist()
    result = a_l[0] <= b_l[0]
    for i in range(1, len(a_l)):
        if lex[i - 1]:
            equal = a_l[:i] == b_l[:i]
            strictly = result and not equal
            result = strictly or (equal and a_l[i] <= b_l[i])
        else:
            result = result and a_l[i] <= b_l[i]
    return result


@LAWS
@given(
    orders().flatmap(lambda o: st.tuples(st.just(o), rows_of(o[0]), rows_of(o[0]), rows_of(o[0])))
)
def test_less_equal_is_a_partial_order_matching_its_definition(drawn: Any) -> None:
    (_, lex), a, b, c = drawn
    assert le(a, a, lex)
    assert le(a, b, lex) == reference_le(a, b, lex)
    if le(a, b, lex) and le(b, a, lex):
        assert (a == b).all()
    if le(a, b, lex) and le(b, c, lex):
        assert le(a, c, lex)


@LAWS
@given(orders().flatmap(lambda o: st.tuples(st.just(o), rows_of(o[0]), rows_of(o[0]))))
def test_join_is_the_least_upper_bound(drawn: Any) -> None:
    (width, lex), a, b = drawn
    j = lattice.join(a[None, :], b[None, :], lex)[0]
    assert le(a, j, lex) and le(b, j, lex), f"join {j} is not an upper bound of {a}, {b}"
    assert (lattice.join(b[None, :], a[None, :], lex)[0] == j).all()
    assert (lattice.join(a[None, :], a[None, :], lex)[0] == a).all()
    for c in box(width):
        if le(a, c, lex) and le(b, c, lex):
            assert le(j, c, lex), f"join {j} of {a}, {b} is not below the upper bound {c}"


@LAWS
@given(orders().flatmap(lambda o: st.tuples(st.just(o), rows_of(o[0]), rows_of(o[0]))))
def test_meet_is_the_greatest_lower_bound_where_it_exists(drawn: Any) -> None:
    (width, lex), a, b = drawn
    try:
        m = lattice.meet(a[None, :], b[None, :], lex)[0]
    except ValueError:
        assert any(lex), "meet of product times must always exist"
        return
    assert le(m, a, lex) and le(m, b, lex)
    for c in box(width):
        if le(c, a, lex) and le(c, b, lex):
            assert le(c, m, lex), f"meet {m} of {a}, {b} is not above the lower bound {c}"


@st.composite
def frontier_and_times(draw: Any) -> Any:
    width, lex = draw(orders())
    # with Lex columns meets need not exist (a Lex under a Product: incomparable outer
    # parts); advance_by must stay sound there too
    size = draw(st.integers(1, 3))
    elements = draw(st.lists(rows_of(width), min_size=size, max_size=size))
    frontier = lattice.minimal_rows(np.array(elements), lex)
    times = draw(st.lists(rows_of(width, 4), min_size=1, max_size=6))
    return width, lex, frontier, np.array(times)


@LAWS
@given(frontier_and_times())
@example((3, (False, True), np.array([[0, 3, 0], [1, 0, 0]]), np.array([[0, 0, 5], [2, 2, 2]])))
def test_advance_by_preserves_order_with_times_in_advance_of_the_frontier(drawn: Any) -> None:
    width, lex, frontier, times = drawn
    advanced = lattice.advance_by(times, frontier, lex)
    assert advanced.shape == times.shape
    beyond = [s for s in box(width, 5) if lattice.beyond(s[None, :], frontier, lex)[0]]
    for t, a in zip(times, advanced, strict=True):
        assert le(t, a, lex), f"advance_by moved {t} backwards to {a}"
        for s in beyond:
            assert le(t, s, lex) == le(a, s, lex), (
                f"{t} advanced to {a} by {frontier.tolist()}: compared with {s} in advance "
                f"of the frontier, {le(t, s, lex)} became {le(a, s, lex)}"
            )


def test_advance_by_product_frontier_collapses_to_the_frontier() -> None:
    times = np.array([[0, 0], [1, 0], [0, 3], [2, 2]])
    frontier = np.array([[1, 1]])
    assert lattice.advance_by(times, frontier).tolist() == [[1, 1], [1, 1], [1, 3], [2, 2]]


@pytest.mark.parametrize("lex", [(False,), (True,)])
def test_minimal_rows_is_the_antichain_of_least_rows(lex: tuple[bool, ...]) -> None:
    rows = np.array([[1, 0], [0, 2], [1, 1], [0, 2], [2, 0]])
    got = lattice.minimal_rows(rows, lex).tolist()
    want = [
        r.tolist()
        for r in np.unique(rows, axis=0)
        if not any(le(o, r, lex) and not (o == r).all() for o in rows)
    ]
    assert got == want


@LAWS
@given(
    orders().flatmap(
        lambda o: st.tuples(st.just(o), st.lists(rows_of(o[0]), min_size=1, max_size=6))
    )
)
def test_minimal_rows_property(drawn: Any) -> None:
    (_, lex), rows = drawn
    matrix = np.array(rows)
    got = lattice.minimal_rows(matrix, lex)
    assume(len(got))
    want = {
        tuple(r)
        for r in np.unique(matrix, axis=0).tolist()
        if not any(le(o, np.array(r), lex) and tuple(o) != tuple(r) for o in matrix)
    }
    assert {tuple(r) for r in got.tolist()} == want
