"""Iterators inside records, and the operators that let whole iterators in, are refused by
name where the records are made, as whole iterator records are (test_iterator_records.py).
A tuple hashes and compares through its fields, so a record holding an iterator (``(x,
iter([x]))``) equals only itself: made again at its retraction it is another record, and
``distinct`` held 2 such records for ever after its input was emptied, whether ``map``,
``flat_map``, ``explode``, ``join_map``, ``join_core`` or ``Arranged.flat_map`` made them
(the last let whole iterators in too), and ``map_columns`` let in ``object`` columns of
iterators. A session's ``insert((1, iter([1])))`` staged a record no ``remove`` could
cancel. ``reduce`` whose ``f`` returned an iterator value (or a tuple holding one) changed
its output at every evaluation of the key: a new value for an unchanged result.

Functions are checked on the first record (``map_columns``: the first value of each
``object`` column) of each batch, ``reduce``'s on the first value of each call (each key);
inputs per record."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref
from tests.differential.test_iterator_records import (
    OTHER,
    PAIRS,
    Shown,
    expected,
    session_run,
)
from tests.differential.test_map_returning_an_iterator import READS, Counted

# operator: (build with a function making records from g(record), the verb of its message)
MAKERS: dict[str, tuple[Any, str]] = {
    "map": (lambda c, o, g: c.map(g, name="op"), "returned"),
    "flat_map": (lambda c, o, g: c.flat_map(lambda r: [g(r)], name="op"), "yielded"),
    "explode": (lambda c, o, g: c.explode(lambda r: [(g(r), 1)], name="op"), "yielded"),
    "join_map": (
        lambda c, o, g: c.join_map(o, lambda k, a, b: g((k, a, b)), name="op"),
        "returned",
    ),
    "join_core": (
        lambda c, o, g: c.join_core(o, lambda k, a, b: [g((k, a, b))], name="op"),
        "yielded",
    ),
    "arranged_flat_map": (
        lambda c, o, g: c.arrange_by_key().flat_map(lambda k, v: [g((k, v))], name="op"),
        "yielded",
    ),
}
# where the iterator is: (make a record holding one from r, its field in the message)
HOLDING: dict[str, tuple[Any, str]] = {
    "field": (lambda r: (r, iter(r)), r"\[1\]"),
    "nested": (lambda r: (r, ("x", (r, iter(r)))), r"\[1\]\[1\]\[1\]"),
}


def built(op: str, make: Any) -> Any:
    def build(s: naiad.Scope) -> Any:
        c, o = Collection.from_epochs(s, PAIRS), Collection.from_epochs(s, OTHER)
        return MAKERS[op][0](c, o, make).distinct().changes()

    return build


def check_same_as_tuples(op: str, workers: int) -> None:
    """The process goes on; the records made with tuples cancel at their retraction, as
    the from-scratch answer (nothing left at epoch 1) says."""
    results = ref.run(built(op, tuple), (workers, 1))
    ref.check(results, [expected(op, e) for e in range(len(PAIRS))])


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("holding", list(HOLDING))
@pytest.mark.parametrize("op", list(MAKERS))
def test_a_function_making_records_holding_an_iterator_is_refused_by_name(
    op: str, holding: str, workers: int
) -> None:
    make, field = HOLDING[holding]
    verb = MAKERS[op][1]
    with pytest.raises(
        TypeError,
        match=rf"^{op.removeprefix('arranged_')} 'op': f\(.*\) {verb} a tuple whose field "
        rf"{field} is a tuple_iterator, not a value: an iterator equals only itself",
    ):
        naiad.run(built(op, make), workers=workers)
    check_same_as_tuples(op, workers)


@pytest.mark.parametrize("workers", [1, 2])
def test_arranged_flat_map_yielding_iterators_is_refused_by_name(workers: int) -> None:
    with pytest.raises(
        TypeError, match=r"^flat_map 'op': f\(., '.'\) yielded a tuple_iterator, not a record"
    ):
        naiad.run(built("arranged_flat_map", iter), workers=workers)
    check_same_as_tuples("arranged_flat_map", workers)


def iterators(values: Any) -> np.ndarray:
    """An ``object`` column of one iterator per value."""
    column = np.empty(len(values), dtype=object)
    column[:] = [iter((v,)) for v in values]
    return column


def tuples_holding_iterators(values: Any) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = [(v, iter((v,))) for v in values]
    return column


# f of map_columns over (key, value) columns: (f, the column named, what is there)
COLUMNS: dict[str, tuple[Any, int, str]] = {
    "one_column": (lambda k, v: iterators(k), 0, r"a tuple_iterator, not a value"),
    "second_column": (lambda k, v: (k, iterators(k)), 1, r"a tuple_iterator, not a value"),
    "tuples": (
        lambda k, v: (k, tuples_holding_iterators(v)),
        1,
        r"a tuple whose field \[1\] is a tuple_iterator, not a value",
    ),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", list(COLUMNS))
def test_map_columns_returning_iterators_is_refused_by_name(case: str, workers: int) -> None:
    f, column, what = COLUMNS[case]

    def build(s: naiad.Scope) -> Any:
        return Collection.from_epochs(s, PAIRS).map_columns(f, name="mc").distinct().changes()

    with pytest.raises(
        TypeError,
        match=rf"^map_columns 'mc': f\(\*columns\) returned, at row 0 of column {column}, {what}",
    ):
        naiad.run(build, workers=workers)


def test_map_columns_over_mixed_records_returning_iterators_is_refused() -> None:
    """Records of two shapes in one batch (one worker): one ``object`` column of whole
    records, in and out (on two workers a batch may hold one shape)."""
    mixed = [[(1, 1), ((2, "b"), 1)], [(1, -1), ((2, "b"), -1)]]

    def build(s: naiad.Scope) -> Any:
        c = Collection.from_epochs(s, mixed)
        return c.map_columns(iterators, name="mc").distinct().changes()

    with pytest.raises(
        TypeError,
        match=r"^map_columns 'mc': f\(\*columns\) returned, at row 0 of column 0, a "
        r"tuple_iterator, not a record",
    ):
        naiad.run(build)
    # values equal by value (tuples) cancel at their retraction: nothing is left at the end
    got = naiad.run(
        lambda s: (
            Collection.from_epochs(s, mixed)
            .map_columns(lambda c: np.array([("t", r) for r in c] + [None], object)[:-1])
            .distinct()
            .changes()
        )
    )
    held: Counter = Counter()
    for worker in got:
        for record, _, diff in worker:
            held[record] += diff
    assert not +held and len([u for w in got for u in w]) == 4


# inserted at epoch 0, one more value at 1 (f's result does not change), all gone at 2
KEYED = [[((1, "a"), 1)], [((1, "b"), 1)], [((1, "a"), -1), ((1, "b"), -1)]]
REDUCED: dict[str, tuple[Any, str]] = {
    "value": (lambda k, vs: [(iter((k,)), 1)], r"a tuple_iterator, not a value"),
    "field": (
        lambda k, vs: [(("n", iter((k,))), 1)],
        r"a tuple whose field \[1\] is a tuple_iterator, not a value",
    ),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", list(REDUCED))
def test_reduce_returning_iterator_values_is_refused_naming_the_key(
    case: str, workers: int
) -> None:
    f, what = REDUCED[case]

    def build(s: naiad.Scope) -> Any:
        return Collection.from_epochs(s, KEYED).reduce(f, name="r").changes()

    with pytest.raises(TypeError, match=rf"^reduce: f returned, for key 1, {what}") as info:
        naiad.run(build, workers=workers)
    assert any("raised in operator 'r'" in note for note in info.value.__notes__)
    # with a tuple, the output changes only where the from-scratch answer does: at 0 and 2
    got = naiad.run(
        lambda s: (
            Collection.from_epochs(s, KEYED).reduce(lambda k, vs: [(("n", (k,)), 1)]).changes()
        ),
        workers=workers,
    )
    assert sorted(u for w in got for u in w) == [
        ((1, ("n", (1,))), 0, 1),
        ((1, ("n", (1,))), 2, -1),
    ]


def test_an_input_session_refuses_a_record_holding_an_iterator_at_the_call() -> None:
    errors, held = asyncio.run(session_run(lambda: (1, 2.5, iter([1]))))
    assert len(errors) == 4, errors
    assert all(e.startswith("record (1, 2.5, <list_iterator") for e in errors), errors
    assert all("is a tuple whose field [2] is a list_iterator, not a value" in e for e in errors)
    # nothing staged before or after a refusal is lost
    assert held == Counter({2: 1})


def test_from_epochs_and_send_columns_refuse_a_record_holding_an_iterator() -> None:
    with pytest.raises(
        TypeError, match=r"^record \(1, <generator .*>\) is a tuple whose field \[1\]"
    ):
        naiad.run(lambda s: Collection.from_epochs(s, [[((1, (x for x in [1])), 1)]]).changes())

    async def send() -> None:
        async with naiad.Runtime(1) as rt:
            df = rt.dataflow(lambda s: Collection.new_input(s)[0])
            session = df.results[0]
            session.send_columns((np.arange(2), tuples_holding_iterators([1, 2])))

    with pytest.raises(
        TypeError,
        match=r"^row 0 of column 1: record \(1, <tuple_iterator .*>\) is a tuple whose field \[1\]",
    ):
        asyncio.run(send())


@pytest.mark.parametrize("n", [10, 20_000])
def test_the_check_of_fields_costs_one_test_per_batch_not_per_record(n: int) -> None:
    """One batch of n records holding a Counted field, through map, flat_map and
    map_columns: the __class__ reads do not grow with n."""
    READS[0] = 0

    def build(s: naiad.Scope) -> Any:
        c = Collection.from_columns(s, [(np.arange(n),)])
        made = c.map(lambda r: (r, Counted(r))).flat_map(lambda r: [r])
        made = made.map_columns(lambda k, v: (k, v))
        return made.map(lambda r: r[1].v, name="back").changes()

    got = naiad.run(build)
    assert sorted(r for r, _, _ in got[0]) == list(range(n))
    assert READS[0] <= 12, READS[0]


def test_the_new_checks_show_no_record_unless_they_refuse_it() -> None:
    Shown.shown = 0

    def build(s: naiad.Scope) -> Any:
        c = Collection.from_epochs(s, [[((i, Shown(i)), 1) for i in range(200)]])
        made = c.map(lambda r: (r[0], (r[1], 1))).map_columns(lambda k, v: (k, v))
        made = made.arrange_by_key().flat_map(lambda k, v: [(k, v)])
        reduced = made.reduce(lambda k, vs: [((vs[0][0][0], "x"), 1)])
        return reduced.map(lambda r: r[1][0].n).changes()

    results = ref.run(build, (1, 1))
    assert sorted(r for r, _, _ in ref.flatten(results)) == list(range(200))
    assert Shown.shown == 0
