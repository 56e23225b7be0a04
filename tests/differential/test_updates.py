"""Consolidation laws of columnar update batches, against a dict oracle."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from naiad.differential import Updates
from naiad.progress import Lex, Product

ints = st.integers(-3, 3)
words = st.sampled_from(["a", "b", "c", ("t", 1), None])
root = st.lists(st.tuples(ints, st.integers(0, 3), st.integers(-2, 2)), max_size=40)
looped = st.lists(
    st.tuples(words, st.builds(Product, st.integers(0, 2), st.integers(0, 2)), st.integers(-2, 2)),
    max_size=40,
)


def oracle(records: list[tuple[Any, Any, int]]) -> Counter[Any]:
    sums: Counter[Any] = Counter()
    for d, t, r in records:
        sums[(d, t)] += r
    return Counter({k: v for k, v in sums.items() if v})


def as_counter(u: Updates) -> Counter[Any]:
    return Counter({(d, t): r for d, t, r in u.to_records()})


@settings(max_examples=100, deadline=None)
@given(root)
def test_consolidate_sums_equal_updates_and_drops_zeros(records: list[Any]) -> None:
    u = Updates.from_records(records).consolidate()
    assert as_counter(u) == oracle(records)
    assert len(u) == len(oracle(records))  # one update per (data, time), none zero
    assert (u.diffs != 0).all()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3)), min_size=1, max_size=300),
    st.sampled_from([-2, -1, 0, 1, 3]),
)
def test_consolidate_updates_that_share_one_diff(rows: list[Any], diff: int) -> None:
    """Every update with the same diff (a load of insertions; sums from the group sizes),
    past the Python path's size too."""
    u = Updates.from_records([(d, t, diff) for d, t in rows]).consolidate()
    assert as_counter(u) == oracle([(d, t, diff) for d, t in rows])
    assert u.diffs.dtype == np.int64


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4)), min_size=0, max_size=150),
    st.booleans(),
)
def test_time_groups_split_rows_by_time_in_order(rows: list[Any], lex: bool) -> None:
    """Few rows are grouped in Python, many with the packed sort: both give each distinct
    time once, in lexicographic order, with exactly its rows (None: every row)."""
    from naiad.differential.lattice import time_row
    from naiad.differential.updates import time_groups

    times = np.array(rows, dtype=np.int64).reshape(len(rows), 2)
    groups = time_groups(times, (lex,))
    expected: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(rows):
        expected.setdefault(row, []).append(i)
    got = {}
    for t, idx in groups:
        row = tuple(time_row(t, 1))
        assert isinstance(t, Lex if lex else Product)
        got[row] = list(range(len(rows))) if idx is None else sorted(idx.tolist())
    assert got == expected
    assert [tuple(time_row(t, 1)) for t, _ in groups] == sorted(expected)


@settings(max_examples=100, deadline=None)
@given(looped)
def test_consolidate_object_data_and_product_times(records: list[Any]) -> None:
    u = Updates.from_records(records, depth=1).consolidate()
    assert as_counter(u) == oracle(records)


@settings(max_examples=60, deadline=None)
@given(root, root)
def test_consolidation_laws(a: list[Any], b: list[Any]) -> None:
    ua, ub = Updates.from_records(a), Updates.from_records(b)
    both = ua.concat(ub)
    # idempotent, and consolidating parts first changes nothing
    once = both.consolidate()
    assert as_counter(once.consolidate()) == as_counter(once)
    assert as_counter(ua.consolidate().concat(ub.consolidate()).consolidate()) == as_counter(once)
    # x + (-x) consolidates to nothing
    assert len(both.concat(both.negate()).consolidate()) == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.tuples(ints, ints), st.integers(0, 2), ints), max_size=30))
def test_multi_field_records(records: list[Any]) -> None:
    u = Updates.from_records(records, fields=2).consolidate()
    assert as_counter(u) == oracle(records)


def test_exchange_can_route_an_update_batch_by_key() -> None:
    from naiad.dataflow.channels import Exchange

    u = Updates.from_records([(k, 0, 1) for k in range(10)])
    parts = Exchange(keys=lambda b: b.data[0]).partition(u, 3)
    assert sorted(w for w, _ in parts) == [0, 1, 2]
    for w, part in parts:
        assert (part.data[0] % 3 == w).all()
    assert sum(len(p) for _, p in parts) == 10
    assert isinstance(parts[0][1].data[0], np.ndarray)


@settings(max_examples=40, deadline=None)
@given(looped)
def test_update_batches_cross_the_wire_intact(records: list[Any]) -> None:
    from naiad.transport.codec import decode_message, encode_message

    u = Updates.from_records(records, depth=1)
    time, back = decode_message(b"".join(bytes(p) for p in encode_message(Product(0, 1), u)))
    assert time == Product(0, 1)
    assert isinstance(back, Updates) and back.to_records() == u.to_records()


def test_a_malformed_columnar_batch_is_rejected() -> None:
    import pytest

    from naiad.transport.codec import FrameError, decode_message, encode_message, packb

    u = Updates.from_records([(1, 0, 1), (2, 0, 1)])
    parts = [bytes(p) for p in encode_message(0, u)]
    with pytest.raises(FrameError):
        decode_message(b"".join(parts)[:-3])  # truncated body
    head = packb([0, 2, "naiad.Updates", [["z", 1]]])
    with pytest.raises(FrameError, match="column"):
        decode_message(len(head).to_bytes(4, "little") + head)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-(2**40), 2**40),
            st.integers(0, 5),
            st.sampled_from([0, 2**32, 3 * 2**32 + 7, 2**45]),
            st.integers(-3, 3),
        ),
        min_size=1,
        max_size=300,
    ),
    st.booleans(),
)
def test_sorted_groups_of_columns_too_wide_to_pack(rows: list[Any], runs: bool) -> None:
    """Columns whose ranges do not fit one int64 (ranked, or lexsorted): the same order and
    groups as a stable lexsort, small and large batches alike."""
    from naiad.differential.updates import consolidation, sorted_groups

    cols = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
    order, change = sorted_groups(cols, runs)
    expected = np.lexsort(cols[::-1])
    assert order.tolist() == expected.tolist()
    keys = [tuple(int(c[i]) for c in cols) for i in expected]
    assert change.tolist() == [i == 0 or keys[i] != keys[i - 1] for i in range(len(keys))]
    # consolidation agrees with a Counter, whichever path (Python, packed, ranked) it takes
    data, times, diffs = cols[:2], np.stack(cols[2:3], axis=1), cols[3]
    picked, sums = consolidation(data, times, diffs)
    total: Counter[tuple[int, ...]] = Counter()
    for r in rows:
        total[r[:3]] += r[3]
    got = {
        tuple(int(c[i]) for c in (*data, times[:, 0])): int(s)
        for i, s in zip(picked, sums, strict=True)
    }
    assert got == {k: v for k, v in total.items() if v}
    assert list(got) == sorted(got)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-50, 50), min_size=0, max_size=300),
    st.lists(st.integers(-60, 60), min_size=0, max_size=40, unique=True),
)
def test_batch_key_lookups_agree_with_searchsorted(keys: list[int], wanted: list[int]) -> None:
    """A batch's rows for some keys, through the distinct-key index of large batches or the
    plain searches of small ones, are exactly the rows holding those keys."""
    from naiad.differential import trace

    k = np.sort(np.array(keys, dtype=np.int64))
    q = np.sort(np.array(wanted, dtype=np.int64))
    z = np.zeros((1, 1), np.int64)
    b = trace.Batch(k, (), np.zeros((len(k), 1), np.int64), np.ones(len(k), np.int64), z, z, z)
    lo, hi = b.key_ranges(q)
    assert lo.tolist() == k.searchsorted(q, "left").tolist() or not len(k)
    assert (hi - lo).tolist() == [int((k == x).sum()) for x in q]
    for x, a, z_ in zip(q.tolist(), lo.tolist(), hi.tolist(), strict=True):
        assert all(v == x for v in k[a:z_].tolist())
    expected = [i for i, v in enumerate(k.tolist()) if v in set(wanted)]
    saved = trace.INDEXED_ROWS
    try:
        for indexed in (saved, 0):  # as configured, and every batch indexed
            trace.INDEXED_ROWS = indexed
            for _ in range(3):  # the index is built at the third large lookup
                rows = b.rows_for(q)
                assert ([] if rows is None else np.arange(len(k))[rows].tolist()) == expected
    finally:
        trace.INDEXED_ROWS = saved


numbers = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.integers(-(2**53), 2**53).map(float),  # integral floats
    st.integers(-5, 5).map(np.int64),
    st.integers(-5, 5).map(np.float32),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(numbers, numbers)
@example(1.445411892374666e-111, np.float32(0.0))  # equal only to numpy's mixed comparison
def test_equal_numbers_route_alike_whatever_their_type(a: Any, b: Any) -> None:
    """``2 == 2.0``: both must reach the same worker, or a join of an int-keyed and a
    float-keyed collection would depend on the number of workers."""
    from naiad.differential.updates import stable_hash

    # Equal as the Python numbers they stand for, as naiad compares keys (a float32 widened
    # to float64 exactly): numpy's own ``float == np.float32`` rounds the Python float to
    # float32 first, so 1e-111 would "equal" np.float32(0.0).
    equal = (a.item() if isinstance(a, np.generic) else a) == (
        b.item() if isinstance(b, np.generic) else b
    )
    if equal:
        assert stable_hash(a) == stable_hash(b)


@settings(max_examples=200, deadline=None)
@given(st.lists(numbers, min_size=1, max_size=8))
def test_a_numeric_column_routes_as_its_values_do(values: list[Any]) -> None:
    from naiad.differential.updates import route, stable_hash

    column = np.asarray(values)
    if column.dtype.kind not in "biuf":
        return  # ints beyond 64 bits, or a mix numpy keeps as objects: routed per value
    times = np.zeros((len(column), 1), dtype=np.int64)
    got = route(Updates((column,), times, np.ones(len(column), np.int64))).tolist()
    assert got == [stable_hash(v) for v in column.tolist()]


fields = st.one_of(numbers, st.text(max_size=2), st.tuples(st.integers(0, 3), st.text(max_size=1)))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 4).flatmap(lambda w: st.lists(st.tuples(*[fields] * w), min_size=1)))
def test_records_route_alike_in_columns_and_whole(records: list[tuple[Any, ...]]) -> None:
    """consolidate's routing: a record goes where ``stable_hash`` of the whole record says,
    whether its batch holds it as one column per field or as one column of whole records."""
    from naiad.differential.updates import columns_of, route_records, stable_hash

    times, ones = np.zeros((len(records), 1), np.int64), np.ones(len(records), np.int64)
    split = Updates(columns_of(records), times, ones)
    expected = [stable_hash(r) for r in records]
    assert route_records(split).tolist() == expected
    assert route_records(split.as_one_column()).tolist() == expected
