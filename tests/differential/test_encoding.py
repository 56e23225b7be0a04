"""A column that brought numbers and then Python objects switches its spine to interned
codes; batches written before the switch, possibly still on their way to readers, must
still be read as numbers (each batch carries the encoding it was written with)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from naiad.differential.arrange import batch_updates
from naiad.differential.join import JoinVertex
from naiad.differential.trace import Spine, TraceHandle
from naiad.differential.updates import INTERNER, column_hashes, stable_hash


def insert(spine: Spine, keys: list[object], vals: list[object], t: int) -> object:
    column = np.empty(len(keys), dtype=object)
    column[:] = keys
    if all(isinstance(k, int) for k in keys):
        column = np.array(keys, dtype=np.int64)
    return spine.insert_updates(
        column,
        (np.array(vals, dtype=np.int64),),
        np.full((len(keys), 1), t, np.int64),
        np.ones(len(keys), np.int64),
        upper=np.array([[t + 1]]),
    )


def test_a_batch_written_before_the_switch_reads_as_numbers() -> None:
    spine = Spine(depth=0)
    reader = TraceHandle(spine)  # holds the history back: merges keep the times
    early = insert(spine, [5, 7], [50, 70], 0)
    insert(spine, ["x"], [1], 1)  # the key column switches to codes
    assert spine.encoded[0] is True
    assert batch_updates(early).to_records() == [((5, 50), 0, 1), ((7, 70), 0, 1)]
    # the spine's own (recoded) batches read the same
    stored = sorted((r for b in spine.batches for r in batch_updates(b).to_records()), key=str)
    assert stored == sorted([((5, 50), 0, 1), ((7, 70), 0, 1), (("x", 1), 1, 1)], key=str)
    reader.close()


def test_join_reads_each_batch_with_its_own_encoding() -> None:
    left, right = Spine(depth=0), Spine(depth=0)
    early = insert(left, [5, 7], [50, 70], 0)
    insert(left, ["x"], [1], 1)  # left switches; `early` is still numeric
    late = insert(right, [7, "x"], [700, 10], 1)
    vertex = JoinVertex((left, right), (TraceHandle(left), TraceHandle(right)), True)
    out = vertex._join(early, late)  # type: ignore[arg-type]
    assert out is not None
    assert out.to_records() == [((7, 70, 700), 1, 1)]


def test_mixed_key_types_across_epochs_join_and_count() -> None:
    """End to end: numbers at epoch 0, strings at epoch 1, joined and counted per key."""

    def build(scope: naiad.Scope) -> list[tuple[object, object, int]]:
        left = Collection.from_epochs(scope, [[((1, 10), 1), ((2, 20), 1)], [(("a", 30), 1)]])
        right = Collection.from_epochs(scope, [[((1, 100), 1)], [(("a", 300), 1), ((2, 200), 1)]])
        return left.join(right).map(lambda r: r[0]).count().changes()

    (changes,) = naiad.run(build)
    assert sorted(changes, key=str) == sorted(
        [((1, 1), 0, 1), ((2, 1), 1, 1), (("a", 1), 1, 1)], key=str
    )


def test_an_int_interned_after_an_equal_float_keeps_sums_exact() -> None:
    """The interner decodes equal values to one form; with 5.0 seen first (in a full test
    run, by some earlier test), 5 came back as 5.0, and -2**70 + 5.0 rounds to -2**70: the
    int form replaces the float one. A number no other test interns stands in for 5."""
    five = 98_765_431
    INTERNER.encode(np.array([float(five), "x"], dtype=object))

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((False, -(2**70)), 1), ((False, five), 1)]])
        return c.sum().changes()

    assert naiad.run(build) == [[((False, -(2**70) + five), 0, 1)]]


def test_ints_of_uint64s_range_beside_int64s_stay_exact() -> None:
    """numpy holds ints from 2**63 to 2**64 as uint64, and uint64 with int64 as float64: two
    such keys merged with a later -1 into one float, counted twice."""
    epochs = [[(2**63 + 1, 1), (2**63 + 3, 1)], [(-1, 1)], [(2**63 + 1, -1)]]

    def build(scope: naiad.Scope) -> Any:
        return Collection.from_epochs(scope, epochs).distinct().view()

    view = naiad.run(build)[0]
    assert view.at(2) == {2**63 + 3: 1, -1: 1}
    columns = (np.array([2**63 + 1, 5], dtype=np.uint64),)
    assert naiad.run(lambda s: Collection.from_columns(s, [columns]).changes()) == [
        [(5, 0, 1), (2**63 + 1, 0, 1)]
    ]


EQUAL_VALUES = [
    (2**63 + 2048, float(2**63 + 2048)),  # an integral float beyond int64
    (-(2**64), float(-(2**64))),
    (frozenset([0, 8]), frozenset([8, 0])),  # equal sets whose reprs differ
    (Decimal("1.0"), Decimal("1")),
    (Fraction(1, 2), 0.5),
    (Fraction(3, 1), 3),
    (Decimal("0.1"), Decimal("0.10")),
    (complex(2, 0), 2),
]


@pytest.mark.parametrize(("a", "b"), EQUAL_VALUES)
def test_equal_keys_hash_alike_and_meet_on_one_worker(a: Any, b: Any) -> None:
    """Regression: an integral float beyond int64 hashed by its bits (an int by its value),
    and other values by their repr: equal keys were routed to different workers, so a count
    on 2 workers gave two keys and a join found nothing."""
    assert a == b and stable_hash(a) == stable_hash(b)
    floats = [v for v in (a, b) if isinstance(v, float)]
    if floats:  # the vectorized hash of a float column agrees
        assert column_hashes(np.array(floats)).tolist() == [stable_hash(floats[0])]

    def build(scope: naiad.Scope) -> Any:
        left = Collection.from_epochs(scope, [[((a, "a"), 1), ((b, "b"), 1)]])
        keys = left.map(lambda r: r[0])
        return keys.count().changes(), left.join(left).changes()

    counts, joined = [], []
    for c, j in naiad.run(build, workers=2):
        counts += c
        joined += j
    assert [(n, t, d) for (_, n), t, d in counts] == [(2, 0, 1)]
    assert len(joined) == 4  # every pair of the key's two records


def test_string_columns_from_send_columns_stay_strings() -> None:
    """Regression: a numpy string column was kept as a numeric one, and an int key beside it
    was merged into the string '1' (count 2) and joined with it."""

    async def main() -> list[Any]:
        async with naiad.Runtime() as rt:

            def build(scope: naiad.Scope) -> Any:
                session, records = Collection.new_input(scope)
                return session, records.count().changes()

            ((session, changes),) = rt.dataflow(build).results
            session.send_columns((np.array(["1", "a"]), np.array([7, 7])))
            session.advance_to(1)
            session.insert((1, 7))
            session.close()
        return changes

    got = sorted(asyncio.run(main()), key=repr)
    assert got == [(("1", 7, 1), 0, 1), (("a", 7, 1), 0, 1), ((1, 7, 1), 1, 1)]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_join_compares_integer_and_float_keys_exactly(workers: int) -> None:
    """Regression: two arrangements, one of integers and one of floats, were searched with
    numpy, which rounds the integers: 2**53 + 1 joined 2.0**53."""

    def build(scope: naiad.Scope) -> Any:
        ints = Collection.from_epochs(scope, [[((2**53 + 1, "odd"), 1), ((2**53, "even"), 1)]])
        floats = Collection.from_epochs(scope, [[((2.0**53, "float"), 1)]])
        keys = floats.map(lambda r: r[0])
        return ints.join(floats).changes(), ints.semijoin(keys).changes()

    joined, kept = [], []
    for j, k in naiad.run(build, workers=workers):
        joined += j
        kept += k
    assert joined == [((2**53, "even", "float"), 0, 1)]
    assert kept == [((2**53, "even"), 0, 1)]


def test_a_float_is_not_decoded_as_an_equal_fraction_seen_before() -> None:
    """Regression (found by the suite's order): the process-wide interner decoded 0.5 as
    the Fraction(1, 2) an earlier dataflow had interned."""
    INTERNER.encode(np.array([Fraction(1, 2), Decimal("0.25")], dtype=object))
    # beside an int that float64 would round, the floats are Python values, interned
    epoch = [((0.5, "x"), 1), ((2**60 + 1, "y"), 1)]
    out = naiad.run(lambda s: Collection.from_epochs(s, [epoch]).distinct().changes())
    records = sorted(r for r, _, _ in out[0])
    assert records == [(0.5, "x"), (2**60 + 1, "y")] and type(records[0][0]) is float


@pytest.mark.parametrize(
    "records",
    [
        [np.uint64(2**64 - 1), 1],  # numpy: float64 of both, and 2**64 - 1 became 2**64
        [np.uint64(2**63 + 1), -1.5],
        [np.int64(2**53 + 1), 0.5],  # 2**53 + 1 became 2**53
        [(1, np.int64(-(2**62) - 1)), (2, 0.25)],
    ],
)
@pytest.mark.parametrize("layout", [(1, 1), (2, 2)])
def test_numpy_ints_beside_floats_keep_their_values(records: list[Any], layout: Any) -> None:
    """Regression: numpy integers (not Python ints) that float64 would round went into a
    float column with the numbers beside them, as Python ints beyond 2**53 do not: an input
    session's np.uint64(2**64 - 1) came out as 2**64, a different record."""

    async def main() -> Any:
        async with naiad.Runtime(layout[0], processes=layout[1]) as rt:

            def build(scope: naiad.Scope) -> Any:
                session, c = Collection.new_input(scope)
                return session, c.distinct().view()

            df = rt.dataflow(build)
            session, view = df.results[0]
            for r in records:
                session.insert(r)
            for other, _ in df.results:
                other.close()
            await view.wait()
            return view.at(0)

    contents = asyncio.run(main())
    assert contents == {r: 1 for r in records}
    exact = [int(f) for r in contents for f in (r if isinstance(r, tuple) else (r,))]
    assert sorted(exact) == sorted(
        int(f) for r in records for f in (r if isinstance(r, tuple) else (r,))
    )
