"""``lattice.advance_by`` of Product times (no Lex coordinate) takes a path of componentwise
max and min: it must give the meet over the frontier of the joins, as the general path
(``join`` and ``_partial_meet``) defines it, and must not call that path."""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from naiad.differential import lattice

I64 = st.integers(-(2**63), 2**63 - 1)
SMALL = st.integers(0, 6)
lattice_join = lattice.join  # the general path's join, before a test counts its calls


@st.composite
def product_times(draw: Any) -> tuple[np.ndarray, np.ndarray, tuple[bool, ...]]:
    width = draw(st.integers(1, 3))
    values = draw(st.sampled_from([SMALL, I64]))
    rows = st.lists(values, min_size=width, max_size=width)
    times = np.array(draw(st.lists(rows, min_size=1, max_size=40)), dtype=np.int64)
    elements = np.array(draw(st.lists(rows, min_size=1, max_size=4)), dtype=np.int64)
    frontier = lattice.minimal_rows(elements)  # an antichain, as a since is
    # Product flags written out, or none (the same order: see lattice._flags)
    lex = draw(st.sampled_from([(), (False,) * (width - 1)]))
    return times, frontier, lex


def by_definition(times: np.ndarray, frontier: np.ndarray) -> np.ndarray:
    """The meet over the frontier's elements of each time's join with them."""
    joins = [lattice.join(times, f[None, :]) for f in frontier]
    return reduce(lattice.meet, joins)


@settings(max_examples=200, deadline=None)
@given(product_times())
@example((np.array([[0, 5], [3, 0], [1, 1]]), np.array([[0, 2], [2, 0]]), ()))
def test_product_advance_is_the_meet_of_joins_without_the_general_path(drawn: Any) -> None:
    times, frontier, lex = drawn
    want = by_definition(times, frontier)
    general = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lattice, "join", lambda *a, **k: general.append(1) or lattice_join(*a, **k))
        got = lattice.advance_by(times, frontier, lex)
    assert general == []  # the fast path: no call of the general path's join
    assert got.dtype == np.int64 and got.shape == times.shape
    assert got.tolist() == want.tolist()
    assert got is not times


def test_lex_times_keep_the_general_path() -> None:
    """A Lex coordinate still goes through ``join`` (and gets the lexicographic answer)."""
    times = np.array([[0, 5], [1, 0]])
    frontier = np.array([[1, 2]])
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lattice, "join", lambda *a, **k: calls.append(1) or lattice_join(*a, **k))
        got = lattice.advance_by(times, frontier, (True,))
    assert calls and got.tolist() == [[1, 2], [1, 2]]
