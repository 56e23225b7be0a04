"""Shared arrangements (K-Pg): a second dataflow of the same runtime imports the first one's
arrangement with ``import_trace`` and joins against it; its answers must equal the
reference at every epoch, while both dataflows keep receiving changes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, import_trace
from tests.differential import reference as ref

KEYS = st.one_of(st.integers(0, 4), st.sampled_from(["a", "b"]))
A_RECORDS = st.tuples(KEYS, st.integers(0, 2))
B_RECORDS = st.tuples(KEYS, st.sampled_from(["x", "y"]))


def share(worker: int, workers: int, changes: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [c for i, c in enumerate(changes) if i % workers == worker]


async def arranged_source(rt: Any, a: ref.Epochs, before: int, compact: bool) -> Any:
    """Dataflow 1 of ``rt``: ``a`` arranged by key, its first ``before`` epochs fed (split
    over the workers) and complete, its history before ``before`` compacted if ``compact``;
    each worker's result is ``(session, trace handle, probe)``."""

    def first(scope: Any) -> Any:
        session, collection = Collection.new_input(scope)
        arranged = collection.arrange_by_key()
        return session, arranged.trace, arranged.stream.probe()

    df1 = rt.dataflow(first)
    peers = len(df1.results)
    for e in range(before):
        for w, (session, _, _) in enumerate(df1.results):
            for record, diff in share(w, peers, a[e]):
                session.update(record, diff)
            session.advance_to(e + 1)
    await df1.results[0][2].wait(before - 1)
    if compact:  # the history before `before` may be compacted before the import
        for _, handle, _ in df1.results:
            handle.set_logical_compaction([before])
    return df1


async def shared_join(
    a: ref.Epochs, b: ref.Epochs, before: int, workers: int, processes: int, compact: bool
) -> tuple[list[Any], list[Any]]:
    """Dataflow 1 arranges ``a``; after ``before`` epochs of it, dataflow 2 imports the
    arrangement and joins its own input ``b`` (fed from epoch ``before`` on) against it."""
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df1 = await arranged_source(rt, a, before, compact)
        peers = len(df1.results)

        def second(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            imported = import_trace(df1.results[scope.index][1], scope)
            joined = collection.join(imported)
            reversed_ = imported.join(collection)
            counted = imported.count(total=False)  # the generic reduce
            total = imported.count_total()  # historic batches first, merged and compacted
            return (
                session,
                joined.changes(),
                reversed_.changes(),
                counted.changes(),
                total.changes(),
            )

        df2 = rt.dataflow(second)
        for session, *_ in df2.results:
            session.advance_to(before)
        for _, handle, _ in df1.results:  # dataflow 1's own hold is no longer needed
            handle.close()
        for e in range(before, len(a)):
            for w, ((s1, _, _), (s2, *_)) in enumerate(zip(df1.results, df2.results, strict=True)):
                for record, diff in share(w, peers, a[e]):
                    s1.update(record, diff)
                for record, diff in share(w, peers, b[e]):
                    s2.update(record, diff)
                s1.advance_to(e + 1)
                s2.advance_to(e + 1)
        for (s1, _, _), (s2, *_) in zip(df1.results, df2.results, strict=True):
            s1.close()
            s2.close()
        await df1.finished()
        await df2.finished()
    return df1.results, df2.results


def check_from(results: list[Any], expected: list[Any], start: int) -> None:
    """Accumulations equal the reference at every epoch from ``start`` on."""
    got = ref.accumulate_changes(results, len(expected))
    for e in range(start, len(expected)):
        assert got[e] == expected[e], f"epoch {e}: {ref.diff_text(got[e], expected[e])}"


@settings(max_examples=15, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            ref.histories(A_RECORDS, count=n),
            ref.histories(B_RECORDS, count=n),
            st.integers(1, n - 1),
        )
    ),
    st.sampled_from([(1, 1), (2, 1), (2, 2)]),
    st.booleans(),
)
def test_second_dataflow_joins_against_an_imported_arrangement(
    drawn: Any, layout: Any, compact: bool
) -> None:
    a, b, before = drawn
    b = [[] for _ in range(before)] + b[before:]  # dataflow 2's input starts at `before`
    _, results = ref.watchdog(shared_join(a, b, before, *layout, compact))
    start = before if compact else 0
    check_from([r[1] for r in results], ref.expect_binary(b, a, ref.join), start)
    check_from([r[2] for r in results], ref.expect_binary(a, b, ref.join), start)
    check_from([r[3] for r in results], ref.expect_unary(a, ref.count), start)
    check_from([r[4] for r in results], ref.expect_unary(a, ref.count), start)


@pytest.mark.parametrize("layout", [(2, 1), (1, 1)])
async def test_import_sees_history_and_later_batches(layout: Any) -> None:
    """A fixed scenario, also run as the brief describes: ``async with Runtime(workers=2)``."""
    workers, _ = layout
    a = [[((1, 10), 1), ((2, 20), 1)], [((1, 11), 1)], [((2, 20), -1), ((3, 30), 1)]]
    b = [[], [((1, "x"), 1), ((2, "y"), 1)], [((3, "z"), 2)]]
    async with naiad.Runtime(workers=workers) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            arranged = collection.arrange_by_key()
            return session, arranged.trace, arranged.stream.probe()

        df1 = rt.dataflow(first)
        for w, (session, _, _) in enumerate(df1.results):
            for record, diff in share(w, workers, a[0]):
                session.update(record, diff)
            session.advance_to(1)
        await df1.results[0][2].wait(0)

        def second(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            imported = import_trace(df1.results[scope.index][1], scope)
            return session, collection.join(imported).changes()

        df2 = rt.dataflow(second)
        for session, _ in df2.results:
            session.advance_to(1)
        for e in (1, 2):
            for w in range(workers):
                for record, diff in share(w, workers, a[e]):
                    df1.results[w][0].update(record, diff)
                for record, diff in share(w, workers, b[e]):
                    df2.results[w][0].update(record, diff)
                df1.results[w][0].advance_to(e + 1)
                df2.results[w][0].advance_to(e + 1)
        for w in range(workers):
            df1.results[w][0].close()
            df2.results[w][0].close()
            df1.results[w][1].close()
        await df2.finished()
    check_from([r[1] for r in df2.results], ref.expect_binary(b, a, ref.join), 0)


@pytest.mark.parametrize("workers", [1, 2])
async def test_import_after_the_source_dataflow_finished_into_two_dataflows(workers: int) -> None:
    a = [[((1, "a"), 1), ((2, "b"), 1)], [((1, "a"), -1), ((3, "c"), 1)]]
    async with naiad.Runtime(workers=workers) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            arranged = collection.arrange_by_key()
            return session, arranged.trace

        df1 = rt.dataflow(first)
        for e, changes in enumerate(a):
            for w, (session, _) in enumerate(df1.results):
                for record, diff in share(w, workers, changes):
                    session.update(record, diff)
                session.advance_to(e + 1)
        for session, _ in df1.results:
            session.close()
        await df1.finished()

        def second(scope: Any) -> Any:
            imported = import_trace(df1.results[scope.index][1], scope)
            return imported.as_collection().changes(), imported.count().changes()

        imports = [rt.dataflow(second, f"second{k}") for k in range(2)]
        for df in imports:
            await asyncio.wait_for(df.finished(), 30)
        for _, handle in df1.results:
            handle.close()
    for df in imports:
        check_from([r[0] for r in df.results], ref.expect_unary(a, lambda x: x), 0)
        check_from([r[1] for r in df.results], ref.expect_unary(a, ref.count), 0)


@pytest.mark.parametrize("workers", [1, 2])
async def test_an_imported_reduce_output_keeps_up_and_finishes(workers: int) -> None:
    """A reduce's output is an arrangement too; an import of it must hear of every frontier
    move, including those of rounds that emitted changes (it lagged an epoch behind and never
    finished when the source closed)."""
    from naiad.differential.reduce import CountLogic

    async with naiad.Runtime(workers) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            counted = collection.arrange_by_key().reduce(CountLogic())
            return session, counted.trace, counted.stream.probe()

        df1 = rt.dataflow(first)
        sessions = [r[0] for r in df1.results]
        probe1 = df1.results[0][2]
        sessions[0].insert((1, 10))
        for s in sessions:
            s.advance_to(1)
        await probe1.wait(0)

        def second(scope: Any) -> Any:
            imported = import_trace(df1.results[scope.index][1], scope)
            return imported.as_collection().changes(), imported.stream.probe()

        df2 = rt.dataflow(second)
        for r in df1.results:
            r[1].close()
        probe2 = df2.results[0][1]
        for epoch in (1, 2):
            sessions[0].insert((2, epoch))
            for s in sessions:
                s.advance_to(epoch + 1)
            await asyncio.wait_for(probe2.wait(epoch), 10)
        for s in sessions:
            s.close()
        await asyncio.wait_for(df2.finished(), 10)
    got = sorted(c for part in df2.results for c in part[0])
    assert got == [((1, 10, 1), 0, 1), ((2, 1, 1), 1, 1), ((2, 2, 1), 2, 1)]


async def test_importing_another_workers_trace_is_refused_where_it_is_imported() -> None:
    """Regression: every worker imported worker 0's trace without an error, so worker 0's
    part of the collection arrived twice and worker 1's never. (The trace here is a reduce's
    output: an arrangement of the reduce's worker too.)"""
    a = [((1, 10), 1), ((2, 20), 1), ((3, 30), 1), ((3, 3), 1)]
    async with naiad.Runtime(workers=2) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            return session, collection.arrange_by_key().reduce(total).trace

        def total(key: Any, values: Any) -> Any:
            return [(sum(v * d for v, d in values), 1)]

        df1 = rt.dataflow(first)
        for w, (session, _) in enumerate(df1.results):
            for record, diff in share(w, 2, a):
                session.update(record, diff)
            session.close()
        await df1.finished()

        def wrong(scope: Any) -> Any:
            return import_trace(df1.results[0][1], scope).as_collection().changes()

        with pytest.raises(ValueError, match=r"worker 1 imports the trace of 'reduce' on worker 0"):
            rt.dataflow(wrong)

        def second(scope: Any) -> Any:
            return import_trace(df1.results[scope.index][1], scope).as_collection().changes()

        df2 = rt.dataflow(second)
        await asyncio.wait_for(df2.finished(), 30)
        for _, handle in df1.results:
            handle.close()
    got = sorted(c for part in df2.results for c in part)
    assert got == [((1, 10), 0, 1), ((2, 20), 0, 1), ((3, 33), 0, 1)]


@pytest.mark.parametrize("workers", [1, 2])
async def test_an_importing_dataflow_completes_before_its_source(workers: int) -> None:
    """Regression: the import held a capability until its source dataflow ended, so the
    importing dataflow could not complete first. ``close_inputs`` now stops its imports at
    what they have sent; the source keeps running, and later imports still follow it."""
    async with naiad.Runtime(workers=workers) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            arranged = collection.arrange_by_key()
            return session, arranged.trace, arranged.stream.probe()

        def importer(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            imported = import_trace(df1.results[scope.index][1], scope)
            return session, collection.join(imported).changes(), imported.count().changes()

        df1 = rt.dataflow(first)
        sources = [r[0] for r in df1.results]
        sources[0].insert((1, "a"))
        for s in sources:
            s.advance_to(1)
        await df1.results[0][2].wait(0)
        early = rt.dataflow(importer)
        closed_at_once = rt.dataflow(importer)  # closed before anything else happens
        closed_at_once.close_inputs()
        late = rt.dataflow(importer)
        for _, handle, _ in df1.results:
            handle.close()
        early.results[0][0].insert((1, "x"))
        early.close_inputs()
        await asyncio.wait_for(early.finished(), 10)
        await asyncio.wait_for(closed_at_once.finished(), 10)
        sources[0].insert((1, "b"))  # the source goes on; the late import still follows it
        for s in sources:
            s.advance_to(2)
        late.results[0][0].insert((1, "y"))
        for s in sources:
            s.close()
        for session, *_ in late.results:
            session.close()
        await asyncio.wait_for(late.finished(), 10)
        await df1.finished()

    def outputs(df: Any, i: int) -> list[Any]:
        return sorted(c for r in df.results for c in r[i])

    assert outputs(early, 1) == [((1, "x", "a"), 0, 1)]
    assert outputs(early, 2) == outputs(closed_at_once, 2) == [((1, "a", 1), 0, 1)]
    assert outputs(late, 1) == [((1, "y", "a"), 0, 1), ((1, "y", "b"), 1, 1)]
    assert outputs(late, 2) == [((1, "a", 1), 0, 1), ((1, "b", 1), 1, 1)]


@pytest.mark.parametrize("workers", [1, 2])
async def test_imports_follow_their_sources_to_the_end_when_the_runtime_exits(
    workers: int,
) -> None:
    """Leaving ``async with`` closes every input and waits: an import must not be stopped
    there, before its source has sealed what its closing inputs flushed."""
    async with naiad.Runtime(workers=workers) as rt:

        def first(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            return session, collection.arrange_by_key().trace

        df1 = rt.dataflow(first)

        def second(scope: Any) -> Any:
            return import_trace(df1.results[scope.index][1], scope).as_collection().changes()

        df2 = rt.dataflow(second)
        for _, handle in df1.results:
            handle.close()
        df1.results[0][0].insert((1, "a"))
        df1.results[0][0].advance_to(1)
        df1.results[0][0].insert((2, "b"))  # staged: flushed when the runtime closes the input
    assert sorted(c for part in df2.results for c in part) == [((1, "a"), 0, 1), ((2, "b"), 1, 1)]
