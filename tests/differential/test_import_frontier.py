"""``import_trace(trace, scope, frontier=[f])`` (differential dataflow's ``import_frontier``):
an arrangement imported as of a frontier, against recomputation from scratch.

A first dataflow arranges a change history ``a``; after ``before`` epochs (its trace perhaps
compacted up to ``before`` by its own handle), a second dataflow imports it as of a drawn
frontier ``f >= before`` and reads it as a collection, with ``count`` and ``count_total``,
and joined (on both sides) with its own input ``b``, fed from epoch 0 while the source goes
on. Every output change lies at ``f`` or later, nothing at all appears before ``f``, and at
every epoch from ``f`` on the accumulations equal the reference; on 1 and 2 workers and 2
simulated processes. Without ``frontier`` the import shows the old times (the test
checks that too). A frontier before the trace's compaction, or not a list of epochs, is
refused naming the import.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, import_trace
from tests.differential import reference as ref
from tests.differential.test_sharing import (
    A_RECORDS,
    B_RECORDS,
    arranged_source,
    check_from,
    share,
)


async def imported_as_of(
    a: ref.Epochs, b: ref.Epochs, before: int, at: int | None, layout: Any, compact: bool
) -> list[Any]:
    """Dataflow 1 arranges ``a``; after ``before`` epochs of it, dataflow 2 imports the
    arrangement as of ``[at]`` (``None``: no frontier) and reads it, its input ``b`` fed
    from epoch 0 beside the rest of ``a``."""
    workers, processes = layout
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df1 = await arranged_source(rt, a, before, compact)
        peers = len(df1.results)

        def second(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            trace = df1.results[scope.index][1]
            imported = import_trace(trace, scope, frontier=None if at is None else [at])
            return (
                session,
                imported.as_collection().changes(),
                imported.count(total=False).changes(),  # the generic reduce
                imported.count_total().changes(),
                collection.join(imported).changes(),
                imported.join(collection).changes(),
            )

        df2 = rt.dataflow(second)
        for _, handle, _ in df1.results:
            handle.close()
        for e in range(len(a)):
            for w, ((s1, _, _), (s2, *_)) in enumerate(zip(df1.results, df2.results, strict=True)):
                if e >= before:
                    for record, diff in share(w, peers, a[e]):
                        s1.update(record, diff)
                    s1.advance_to(e + 1)
                for record, diff in share(w, peers, b[e]):
                    s2.update(record, diff)
                s2.advance_to(e + 1)
        df1.close_inputs()
        await asyncio.wait_for(df1.finished(), 30)  # closing df2 stops its import there
        df2.close_inputs()
        await asyncio.wait_for(df2.finished(), 30)
    return df2.results


@settings(max_examples=15, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            ref.histories(A_RECORDS, count=n),
            ref.histories(B_RECORDS, count=n),
            st.integers(1, n - 1),
            st.integers(0, 2),
        )
    ),
    st.sampled_from([(1, 1), (2, 1), (2, 2)]),
    st.booleans(),
)
def test_an_import_as_of_a_frontier_starts_there_and_agrees_from_there_on(
    drawn: Any, layout: Any, compact: bool
) -> None:
    a, b, before, later = drawn
    at = min(before + later, len(a) - 1)
    results = ref.watchdog(imported_as_of(a, b, before, at, layout, compact))
    expected = [
        ref.expect_unary(a, lambda x: x),
        ref.expect_unary(a, ref.count),
        ref.expect_unary(a, ref.count),
        ref.expect_binary(b, a, ref.join),
        ref.expect_binary(a, b, ref.join),
    ]
    for i, want in enumerate(expected, 1):
        part = [r[i] for r in results]
        early = [c for c in ref.flatten(part) if c[1] < at]
        assert not early, f"output {i}: changes before the frontier {at}: {early}"
        check_from(part, want, at)


@pytest.mark.parametrize("layout", [(1, 1), (2, 2)])
def test_without_a_frontier_the_old_times_are_shown(layout: Any) -> None:
    """What ``frontier`` changes: a plain import presents the history at its own epochs."""
    a = [[((1, "x"), 1)], [((2, "y"), 1)], [((1, "x"), -1)], []]
    b: ref.Epochs = [[], [], [], []]
    plain = ref.watchdog(imported_as_of(a, b, 3, None, layout, False))
    advanced = ref.watchdog(imported_as_of(a, b, 3, 3, layout, False))
    assert sorted(c for r in plain for c in r[1]) == [
        ((1, "x"), 0, 1),
        ((1, "x"), 2, -1),
        ((2, "y"), 1, 1),
    ]
    assert sorted(c for r in advanced for c in r[1]) == [((2, "y"), 3, 1)]


async def refused(frontier: Any) -> None:
    async with naiad.Runtime(workers=1) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            return session, collection.arrange_by_key().trace

        df1 = rt.dataflow(first)
        session, trace = df1.results[0]
        trace.set_logical_compaction([3])
        try:
            rt.dataflow(lambda s: import_trace(trace, s, name="imp", frontier=frontier))
        finally:
            trace.close()
            session.close()


@pytest.mark.parametrize(
    ("frontier", "error", "message"),
    [
        ([2], ValueError, r"imp: frontier \[2\] is before the trace's logical compaction frontier"),
        (5, TypeError, r"imp: frontier must be a list of epochs, such as \[5\], not 5"),
        ([], ValueError, r"imp: the frontier is empty"),
        ([3.5], TypeError, r"imp: an epoch of the frontier must be an integer, not 3.5"),
    ],
)
def test_a_bad_frontier_is_refused_naming_the_import(
    frontier: Any, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        ref.watchdog(refused(frontier))


@pytest.mark.parametrize("workers", [1, 2])
async def test_the_trace_of_an_import_as_of_a_frontier_is_imported_as_of_it(workers: int) -> None:
    async with naiad.Runtime(workers=workers) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            return session, collection.arrange_by_key().trace

        df1 = rt.dataflow(first)
        for epoch, word in enumerate(["a", "b", "c"]):
            df1.results[0][0].insert(word)
            for session, _ in df1.results:
                session.advance_to(epoch + 1)
        df1.close_inputs()
        await df1.finished()
        df2 = rt.dataflow(lambda s: import_trace(df1.results[s.index][1], s, frontier=[2]).trace)
        await df2.finished()
        df3 = rt.dataflow(lambda s: import_trace(df2.results[s.index], s).as_collection().changes())
        await df3.finished()
        for _, trace in df1.results:
            trace.close()
        for trace in df2.results:
            trace.close()
    assert sorted(c for part in df3.results for c in part) == [
        ("a", 2, 1),
        ("b", 2, 1),
        ("c", 2, 1),
    ]
