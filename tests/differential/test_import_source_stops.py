"""An import follows its source dataflow until that dataflow ends. When the source stops
without completing instead (a failure, or its runtime cancelled), its arrangement will never
move again: the importing dataflow must fail with an error naming the source, not wait for
ever (regression: leaving the importing runtime's ``async with`` hung)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad.actors.supervision import DataflowStopped
from naiad.differential import Collection, import_trace


def source(scope: Any, reduced: bool) -> Any:
    session, collection = Collection.new_input(scope)
    arranged = collection.arrange_by_key()
    if reduced:  # a reduction's output is an arrangement too
        arranged = arranged.count().arrange_by_key(name="counted")
    return session, arranged.trace, arranged.stream.probe()


def importer(trace: Any) -> Any:
    def build(scope: Any) -> Any:
        imported = import_trace(trace, scope, name="imp").as_collection()
        return imported.changes(), imported.probe()

    return build


def failing(scope: Any) -> Any:
    return scope.from_epochs([[0]]).map(lambda x: 1 // x).probe()


@pytest.mark.parametrize("reduced", [False, True], ids=["arrange", "reduce"])
@pytest.mark.parametrize("how", ["cancelled", "failed"])
async def test_an_import_whose_source_stops_while_it_follows_fails(how: str, reduced: bool) -> None:
    stop = asyncio.Event()
    traces: list[Any] = []

    async def run_source() -> None:
        async with naiad.Runtime() as rt:
            session, trace, probe = rt.dataflow(lambda s: source(s, reduced)).results[0]
            session.insert((1, "a"))
            session.advance_to(1)
            await probe.wait(0)
            traces.append(trace)
            await stop.wait()
            if how == "failed":
                rt.dataflow(failing)  # fails the runtime, and with it the source dataflow
                await probe.wait()  # raises that failure
            await asyncio.sleep(60)  # cancelled here, with the source dataflow unfinished

    task = asyncio.create_task(run_source())
    while not traces:
        await asyncio.sleep(0.01)
    with pytest.raises(DataflowStopped, match=r"'imp' imports '(arrange|counted)', whose"):
        async with asyncio.timeout(10):  # it used to wait for ever
            async with naiad.Runtime() as importing:
                changes, probe = importing.dataflow(importer(traces[0])).results[0]
                await probe.wait(0)  # following the source
                assert changes == [((1, "a"), 0, 1)] if not reduced else [((1, 1), 0, 1)]
                stop.set()
                if how == "cancelled":
                    await asyncio.sleep(0.05)
                    task.cancel()
    with pytest.raises(ZeroDivisionError if how == "failed" else asyncio.CancelledError):
        await task


async def test_an_import_of_a_stopped_source_fails_at_once() -> None:
    try:
        async with asyncio.timeout(0.3):
            async with naiad.Runtime() as rt:
                session, trace, probe = rt.dataflow(lambda s: source(s, False)).results[0]
                session.insert((1, "a"))
                session.advance_to(1)
                await probe.wait(0)
                await asyncio.sleep(10)
    except TimeoutError:
        pass
    with pytest.raises(DataflowStopped, match="whose dataflow stopped before completing"):
        async with asyncio.timeout(10):
            async with naiad.Runtime() as other:
                other.dataflow(importer(trace))


async def test_an_import_of_a_completed_source_completes() -> None:
    async with naiad.Runtime() as rt:
        session, trace, _ = rt.dataflow(lambda s: source(s, False)).results[0]
        session.insert((1, "a"))
    async with asyncio.timeout(10):
        async with naiad.Runtime() as other:
            changes, _ = other.dataflow(importer(trace)).results[0]
    assert changes == [((1, "a"), 0, 1)]
