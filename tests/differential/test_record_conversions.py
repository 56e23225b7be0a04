"""The conversions between Python records and columns that every per-record operator pays for:
``columns_of`` / ``records_of`` (records split into columns in C loops; a str, bytes or
tuple first value goes straight to an ``object`` column), ``Updates.to_records`` (each
distinct time row made a timestamp once), the dictionary codes of ``consolidate``, and
``flat_map``'s output rows (counted per input record) and ``filter``'s verdicts, on the
collection and on timely streams. Each against plain Python from scratch."""

from __future__ import annotations

from collections import Counter, namedtuple
from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, Updates
from naiad.differential.lattice import time_of
from naiad.differential.updates import columns_of, records_of
from tests.differential import reference as ref

FAST = settings(max_examples=40, deadline=None)
Pair = namedtuple("Pair", "k v")
SCALARS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([2**53 + 1, -(2**63), 2**64, 0.5, 2.0, True, None, "a", "", b"x", "é"]),
)
RECORDS = st.one_of(
    SCALARS,
    st.tuples(SCALARS, SCALARS),
    st.tuples(SCALARS),
    st.tuples(SCALARS, SCALARS, SCALARS),
    st.builds(Pair, SCALARS, SCALARS),
    st.tuples(st.integers(0, 2), st.tuples(SCALARS, SCALARS)),
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of one type where numpy keeps the type (a str stays a str, a tuple a tuple,
    None None); numbers may change type within a numeric column (2 beside 0.5 becomes 2.0)."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, str | bytes) or a is None:
        return type(a) is type(b) and a == b
    return bool(a == b)


@FAST
@given(st.lists(RECORDS, max_size=30))
@example([(1, "a"), (2, "b", 3)])  # mixed widths: one column of whole tuples
@example([(1, "a", 3), (2, "b")])
@example([(1, "a"), Pair(2, "b"), "c"])
@example(["a", 1, 2.5])  # a str first: an object column
def test_columns_of_splits_exactly_tuples_of_one_width_and_loses_nothing(values: Any) -> None:
    columns = columns_of(values)
    width = len(values[0]) if values and isinstance(values[0], tuple) else 0
    split = width > 1 and all(isinstance(v, tuple) and len(v) == width for v in values)
    assert len(columns) == (width if split else 1)
    assert all(c.ndim == 1 and len(c) == len(values) for c in columns)
    back = records_of(columns)
    assert len(back) == len(values)
    assert all(map(same, values, back)), (values, back)
    for i, c in enumerate(columns):
        field = [v[i] for v in values] if split else values
        if field and all(type(x) is int and -(2**63) <= x < 2**63 for x in field):
            assert c.dtype == np.int64  # ints within int64 make a numeric column
        if c.dtype != object:  # numeric only when every value is a number numpy holds exactly
            assert all(type(x) in (int, float, bool) for x in field)
            assert all(x == y for x, y in zip(field, c.tolist(), strict=True))


@FAST
@given(
    st.integers(0, 2).flatmap(
        lambda depth: st.tuples(
            st.just(depth),
            st.lists(st.lists(st.integers(0, 3), min_size=depth + 1, max_size=depth + 1)),
            st.lists(st.booleans(), min_size=depth, max_size=depth),
        )
    )
)
def test_to_records_makes_each_row_its_timestamp(case: Any) -> None:
    depth, rows, lex = case
    n = len(rows)
    times = np.array(rows, dtype=np.int64).reshape(n, depth + 1)
    u = Updates((np.arange(n),), times, np.arange(n, dtype=np.int64) - 2)
    want = [(i, time_of(rows[i], lex), i - 2) for i in range(n)]
    got = u.to_records(lex)
    assert got == want
    assert [type(t) for _, t, _ in got] == [type(t) for _, t, _ in want]


@FAST
@given(st.lists(st.tuples(RECORDS, st.integers(0, 2), st.integers(-2, 2)), max_size=80))
def test_consolidate_of_python_values_matches_a_dict(updates: Any) -> None:
    """Object columns are coded by a dict (equal values, one code: 1, 1.0 and True are one
    record, as in a dict), past the Python path's size too."""
    want: Counter = Counter()
    for r, t, d in updates:
        want[(r, t)] += d
    u = Updates.from_records(updates).consolidate()
    got: Counter = Counter()
    for r, t, d in u.to_records():
        assert (r, t) not in got
        got[(r, t)] = d
    assert got == ref.clean(want)


def expand(record: Any) -> Any:
    """0, 1 or 3 outputs, as a list or a generator (flat_map takes any iterable)."""
    k, v = record
    if k % 3 == 0:
        return []
    if k % 3 == 1:
        return [(k, v)]
    return ((k + i, f"{v}{i}") for i in range(3))


changes = st.lists(
    st.lists(
        st.tuples(st.tuples(st.integers(0, 8), st.sampled_from(["a", "b"])), st.integers(-2, 2)),
        max_size=12,
    ),
    min_size=1,
    max_size=3,
)


@FAST
@given(changes, st.sampled_from([(1, 1), (2, 1), (2, 2)]), st.booleans())
def test_flat_map_and_filter_match_the_reference_in_and_out_of_a_loop(
    epochs: Any, layout: tuple[int, int], in_loop: bool
) -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs)
        if in_loop:  # Product times: a two-column time matrix
            loop = scope.iterative()
            inner = c.enter(loop)
            return (
                inner.flat_map(expand).leave().changes(),
                inner.filter(lambda r: r[0] % 2).leave().changes(),
            )
        return c.flat_map(expand).changes(), c.filter(lambda r: r[0] % 2).changes()

    results = ref.run(build, layout)

    def flat(a: Counter) -> Counter:
        out: Counter = Counter()
        for r, m in a.items():
            for y in expand(r):
                out[y] += m
        return ref.clean(out)

    kept = ref.expect_unary(epochs, lambda a: Counter({r: m for r, m in a.items() if r[0] % 2}))
    ref.check([r[0] for r in results], ref.expect_unary(epochs, flat))
    ref.check([r[1] for r in results], kept)


@FAST
@given(
    st.lists(st.lists(st.integers(0, 20), max_size=15), min_size=1, max_size=3),
    st.sampled_from([(1, 1), (2, 1), (2, 2)]),
    st.booleans(),
)
def test_stream_flat_map_and_filter_match_the_reference(
    epochs: Any, layout: tuple[int, int], arrays: bool
) -> None:
    """On lists and numpy batches (the filter keeps an array an array)."""

    def build(scope: Any) -> Any:
        batches = [np.array(e, dtype=np.int64) for e in epochs] if arrays else epochs
        s = scope.from_epochs(batches)
        return (
            s.flat_map(lambda x: (x,) * (x % 3)).collect(),
            s.filter(lambda x: x % 2).map(lambda x: type(x).__name__).collect(),
            s.filter(lambda x: x % 2).collect(),
        )

    workers, processes = layout
    results = naiad.run(build, workers=workers, processes=processes, transport="inproc")
    flat = sorted(y for part in results for y in part[0])
    kept = sorted(y for part in results for y in part[2])
    want_flat = sorted((t, int(x)) for t, e in enumerate(epochs) for x in e for _ in range(x % 3))
    want_kept = sorted((t, x) for t, e in enumerate(epochs) for x in e if x % 2)
    assert [(t, int(x)) for t, x in flat] == want_flat
    assert kept == want_kept
    kinds = {k for part in results for _, k in part[1]}
    assert kinds <= ({"int64"} if arrays else {"int"})
