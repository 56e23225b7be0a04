"""Dates and durations given as columns are the values given, as records inserted one by one.

``checked_columns`` (``from_columns``, ``send_columns``) and ``map_columns`` made a numpy date
or duration column an ``object`` column with ``astype(object)``, which gives Python ints of
nanoseconds for ``datetime64[ns]`` (and for durations in nanoseconds or months), ``datetime``
for ``[us]``, ``date`` for ``[D]``: a ``datetime64[ns]`` column inserted at epoch 0 and the
same dates retracted as records at epoch 1 left ``{1577840523500000000: 1, ...}`` on every
layout, and on two processes a ``[D]``, ``[s]`` or ``[us]`` column failed with "cannot send a
datetime.date between processes". Such columns now hold ``np.datetime64`` /
``np.timedelta64`` scalars of the column's unit. NaT, not equal to itself, never cancelled
(inserted and removed as two scalars, it stayed), and ``astype(object)`` had made it None: it
is refused, as NaN is.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

COLUMNS = {
    "datetime64[D]": np.array(["2020-01-01", "2021-06-05", "1969-12-31"], "datetime64[D]"),
    "datetime64[s]": np.array(["2020-01-01T01:02:03", "2021-06-05", "1969-12-31"], "datetime64[s]"),
    "datetime64[us]": np.array(["2020-01-01T01:02:03.5", "2021-06-05", "1900-01-01"], "M8[us]"),
    "datetime64[ns]": np.array(["2020-01-01T01:02:03.5", "2021-06-05", "1969-12-31"], "M8[ns]"),
    "timedelta64[ns]": np.array([5, 7, -3], "timedelta64[ns]"),
    "timedelta64[s]": np.array([5, 7, -3], "timedelta64[s]"),
    "timedelta64[M]": np.array([5, 7, -3], "timedelta64[M]"),
}


def given(column: np.ndarray) -> list[Any]:
    """The values of a column as the user holds them: numpy scalars of its unit."""
    return list(column)


def assert_same_values(results: ref.Results, column: np.ndarray) -> None:
    """Every date (a record's first field) in the output is a numpy scalar of the column's
    type (its unit may be that of an equal value interned before: the interner decodes to
    the form first seen)."""
    for record, _, _ in ref.flatten(results):
        value = ref.key_of(record)
        assert type(value) is column.dtype.type, value


@pytest.mark.parametrize("layout", ref.LAYOUTS)
@pytest.mark.parametrize("name", list(COLUMNS))
def test_a_date_column_is_retracted_as_records(name: str, layout: tuple[int, int]) -> None:
    column = COLUMNS[name]
    labels = np.array(["a", "b", "c"], dtype=object)
    records = list(zip(given(column), labels.tolist(), strict=True))
    epochs = [[(r, 1) for r in records], [(records[0], -1), (records[2], -1)]]

    def build(scope: naiad.Scope) -> Any:
        columns = Collection.from_columns(scope, [(column, labels), (column[:0], labels[:0])])
        retracted = Collection.from_epochs(scope, [[], epochs[1]])
        return columns.concat(retracted).distinct().changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(epochs, ref.distinct))
    assert_same_values(results, column)


@pytest.mark.parametrize("layout", ref.LAYOUTS)
@pytest.mark.parametrize("name", ["datetime64[ns]", "datetime64[D]", "timedelta64[M]"])
def test_dates_sent_as_columns_meet_dates_inserted(name: str, layout: tuple[int, int]) -> None:
    column = COLUMNS[name]
    workers, processes = layout

    async def main() -> list[Any]:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

            def build(scope: naiad.Scope) -> Any:
                session, collection = Collection.new_input(scope)
                return session, collection.count().changes()

            dataflow = rt.dataflow(build)
            sessions = [session for session, _ in dataflow.results]
            sessions[0].send_columns((column,))  # epoch 0: as columns on worker 0
            for session in sessions:
                session.advance_to(1)
            for value in given(column)[:2]:  # epoch 1: as records on the last worker
                sessions[-1].remove(value)
            for session in sessions:
                session.close()
            await dataflow.finished()
        return [changes for _, changes in dataflow.results]

    results = ref.watchdog(main())
    epochs = [[(v, 1) for v in given(column)], [(v, -1) for v in given(column)[:2]]]
    ref.check(results, ref.expect_unary(epochs, ref.count))
    assert_same_values(results, column)


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_dates_made_by_map_columns_are_retracted_as_records(layout: tuple[int, int]) -> None:
    base = np.datetime64("2020-01-01", "ns")

    def build(scope: naiad.Scope) -> Any:
        days = Collection.from_columns(
            scope, [(np.array([1, 2]),), (np.array([1]),)], [None, np.array([-1])]
        )
        dates = days.map_columns(lambda d: base + d.astype("timedelta64[D]"))
        retracted = Collection.from_epochs(scope, [[], [(base + np.timedelta64(2, "D"), -1)]])
        return dates.concat(retracted).distinct().changes()

    results = ref.run(build, layout)
    assert ref.accumulate_changes(results, 2) == [
        Counter({base + np.timedelta64(1, "D"): 1, base + np.timedelta64(2, "D"): 1}),
        Counter(),
    ]
    assert_same_values(results, np.array([base]))


@pytest.mark.parametrize(
    ("nat", "date"),
    [
        (np.datetime64("NaT", "s"), np.datetime64(3, "s")),
        (np.timedelta64("NaT", "ns"), np.timedelta64(3, "ns")),
    ],
)
async def test_nat_is_refused_as_nan_is_and_nothing_else_is_lost(nat: Any, date: Any) -> None:
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> Any:
            session, collection = Collection.new_input(scope)
            return session, collection.changes()

        session, changes = rt.dataflow(build).results[0]
        session.insert((1, date))
        with pytest.raises(ValueError, match="NaT"):
            session.insert((2, nat))
        with pytest.raises(ValueError, match="NaT"):
            session.remove(nat.copy())  # another NaT: it would never meet the first
        with pytest.raises(ValueError, match=r"row 1 of column 0: .*NaT"):
            session.send_columns((np.array([4, "NaT"], nat.dtype),))
        session.close()
    assert changes == [((1, date), 0, 1)]


def test_nat_in_columns_of_an_epoch_is_refused() -> None:
    column = np.array(["2020-01-01", "NaT"], "datetime64[D]")
    with pytest.raises(ValueError, match=r"row 1 of column 0: .*NaT"):
        naiad.run(lambda scope: Collection.from_columns(scope, [(column,)]).changes())
