"""A trace handle says which times are complete in its spine (``upper``, ``complete``,
``wait``) and ``cursor(at=t)`` reads a time only once it is.

Regression: the handle had no notion of completeness, and a reader that waited on a probe of
the collection it arranged (upstream of the arrangement) read whatever the spine held then.
With 1 worker in each of 2 simulated processes, over 60 epochs of random inserts and
removals, 16 to 22 of 60 reads of an ``arrange_by_key`` trace lacked updates and 38 to 39 of
60 reads of a reduce's output trace (``count``) were wrong; the probe had passed the epoch
while the other process's updates were still on their way.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import naiad
from naiad.actors.supervision import DataflowStopped
from naiad.differential import Collection, import_trace
from naiad.differential.reduce import CountLogic
from naiad.progress.timestamp import Product
from tests.differential.reference import watchdog

# (worker, key, value, remove): a removal of a record not present is an insertion instead
operations = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 2), st.booleans()),
    max_size=6,
)


def build(scope: Any) -> Any:
    session, collection = Collection.new_input(scope)
    arranged = collection.arrange_by_key()
    counted = arranged.reduce(CountLogic(), "counted")
    return session, collection.probe(), arranged.trace, counted.trace


def contents(handle: Any, time: int) -> Counter:
    """``{(key, *value fields): multiplicity}`` read through ``cursor(at=time)``."""
    out: Counter = Counter()
    cursor = handle.cursor(at=time)
    for _ in cursor:
        for value, history in cursor.values():
            fields = value if isinstance(value, tuple) else (value,)
            out[(cursor.key(), *fields)] += sum(d for _, d in history)
    return +out


async def read_every_epoch(layout: tuple[int, int], epochs: list[Any], wait: bool) -> int:
    """Runs ``epochs`` of operations; after each epoch waits on the collection's probe on
    every worker (the pattern that read incomplete traces), then, with ``wait``, on every
    trace handle, and compares the traces read at the epoch (summed over the workers) with
    the contents recomputed from scratch. Without ``wait`` a read may be refused (the time
    is not complete yet), never wrong. Returns how many reads were refused."""
    workers, processes = layout
    refused = 0
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df = rt.dataflow(build)
        results = [df.result(w) for w in range(workers * processes)]
        truth: Counter = Counter()
        for e, ops in enumerate(epochs):
            for w, key, value, remove in ops:
                session = results[w % len(results)][0]
                if remove and truth[(key, value)] > 0:
                    session.remove((key, value))
                    truth[(key, value)] -= 1
                else:
                    session.insert((key, value))
                    truth[(key, value)] += 1
            for session, *_ in results:
                session.advance_to(e + 1)
            for _, probe, *_ in results:
                await probe.wait(e)
            arranged, counted = +truth, Counter({(k, v, n): 1 for (k, v), n in truth.items() if n})
            for i, want in ((2, arranged), (3, counted)):
                handles = [r[i] for r in results]
                if wait:
                    for handle in handles:
                        await handle.wait(e)
                        assert handle.complete(e) and not handle.complete(e + 1)
                try:
                    got = sum((contents(h, e) for h in handles), Counter())
                except ValueError as error:
                    assert not wait and "is not complete in trace" in str(error)
                    refused += 1
                    continue
                assert got == want, (layout, e, i, got, want)
        for session, *_ in results:
            session.close()
        await df.finished()
        for _, _, *handles in results:
            for handle in handles:
                assert handle.upper == []
                await handle.wait()  # complete: at once
                handle.close()
    return refused


@pytest.mark.parametrize(
    "layout", [(1, 1), (2, 1), (1, 2), (2, 2)], ids=["1x1", "2x1", "1x2", "2x2"]
)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epochs=st.lists(operations, min_size=1, max_size=25))
def test_after_wait_a_cursor_at_the_epoch_reads_its_contents(
    layout: tuple[int, int], epochs: list[Any]
) -> None:
    watchdog(read_every_epoch(layout, epochs, wait=True))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epochs=st.lists(operations, min_size=1, max_size=25))
def test_without_wait_a_cursor_at_the_epoch_is_refused_or_right(epochs: list[Any]) -> None:
    watchdog(read_every_epoch((1, 2), epochs, wait=False))


def test_reads_without_wait_are_refused_where_the_trace_lags() -> None:
    """The guard is not idle: the pattern that read incomplete traces is refused there (on
    the old code the same reads were wrong in about a third of the epochs)."""
    epochs = [[(0, e % 6, 0, False), (1, (e + 1) % 6, 1, e % 3 == 0)] for e in range(40)]
    assert watchdog(read_every_epoch((1, 2), epochs, wait=False)) > 0


async def test_wait_errors_name_the_mistake() -> None:
    async with naiad.Runtime() as rt:
        df = rt.dataflow(build)
        session, _, trace, counted = df.results[0]
        with pytest.raises(TypeError, match=r"wait: a time of trace 'arrange'.*not 'a'"):
            await trace.wait("a")
        with pytest.raises(TypeError, match=r"wait: a time of trace 'counted'"):
            await counted.wait(Product(1, 0))
        with pytest.raises(TypeError, match=r"complete: a time of trace 'arrange'"):
            trace.complete(1.5)
        assert trace.upper == [0] and not trace.complete(0)

        # closed while waiting: the wait raises (at once, the upper moving or not)
        waiting = asyncio.create_task(trace.wait(3))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        trace.close()
        session.advance_to(5)
        with pytest.raises(ValueError, match=r"wait: the trace handle of 'arrange' is closed"):
            await asyncio.wait_for(waiting, 10)
        with pytest.raises(ValueError, match=r"wait: the trace handle of 'arrange' is closed"):
            await trace.wait(1)
        session.close()
        await df.finished()
        await counted.wait(10**30)  # the spine is complete: every time is
        assert counted.upper == []


async def test_a_close_ends_the_handles_own_waits_at_once() -> None:
    """A wait pending when its handle was closed raised only at the next move of the upper
    frontier: with the input idle from then on it never returned (the read below timed
    out after 5 s). A wait on another handle of the same spine goes on waiting."""
    async with naiad.Runtime() as rt:
        df = rt.dataflow(build)
        session, _, trace, _ = df.results[0]
        other = trace.spine.reader()
        session.advance_to(1)
        await trace.wait(0)
        closed = asyncio.create_task(trace.wait(3))
        kept = asyncio.create_task(other.wait(3))
        whole = asyncio.create_task(other.wait())
        await asyncio.sleep(0.01)
        assert not closed.done() and not kept.done()
        trace.close()
        with pytest.raises(ValueError, match=r"wait: the trace handle of 'arrange' is closed"):
            await asyncio.wait_for(closed, 5)
        await asyncio.sleep(0.01)
        assert not kept.done() and not whole.done() and other.upper == [1]
        session.advance_to(4)
        await asyncio.wait_for(kept, 10)
        assert other.complete(3) and not whole.done()
        session.close()
        await asyncio.wait_for(whole, 10)
        other.close()


async def test_cursor_at_refuses_times_it_cannot_read() -> None:
    async with naiad.Runtime() as rt:
        df = rt.dataflow(build)
        session, _, trace, _ = df.results[0]
        session.insert((1, "a"))
        session.advance_to(2)
        await trace.wait(1)
        assert trace.upper == [2]
        assert contents(trace, 0) == Counter({(1, "a"): 1})
        with pytest.raises(
            ValueError,
            match=r"cursor: time 2 is not complete in trace 'arrange' yet \(its upper frontier "
            r"is \[2\]\): .* await the handle's wait\(2\) first",
        ):
            trace.cursor(at=2)
        with pytest.raises(TypeError, match=r"at= reads every batch.*seq="):
            trace.cursor(0, at=1)
        with pytest.raises(TypeError, match=r"cursor: a time of trace 'arrange'"):
            trace.cursor(at=(1, 0))
        trace.set_logical_compaction([1])
        with pytest.raises(
            ValueError,
            match=r"cursor: time 0 is not in advance of the logical compaction frontier \[1\]",
        ):
            trace.cursor(at=0)
        assert contents(trace, 1) == Counter({(1, "a"): 1})
        assert len(list(trace.cursor())) == 1  # cursor() reads what the spine holds, as before
        session.close()
        await df.finished()
        trace.close()


def failing_build(scope: Any) -> Any:
    session, collection = Collection.new_input(scope)
    arranged = collection.map(lambda r: (1 // r[0], r[1])).arrange_by_key()
    counted = arranged.reduce(CountLogic(), "counted")
    return session, arranged.trace, counted.trace


async def test_a_wait_on_a_dataflow_that_fails_raises_naming_the_trace() -> None:
    waits: list[asyncio.Task[None]] = []
    with pytest.raises(ZeroDivisionError):
        async with naiad.Runtime() as rt:
            df = rt.dataflow(failing_build)
            session, trace, counted = df.results[0]
            session.insert((1, "a"))
            session.advance_to(1)
            await trace.wait(0)
            waits += [asyncio.create_task(trace.wait(3)), asyncio.create_task(counted.wait())]
            await asyncio.sleep(0.01)
            session.insert((0, "b"))  # fails the dataflow at epoch 1
            session.advance_to(2)
            await df.finished()
    for task, what in zip(waits, ["'arrange': time 3", "'counted': every time"], strict=True):
        with pytest.raises(DataflowStopped, match=f"trace {what} will never be complete") as e:
            await asyncio.wait_for(task, 10)
        assert isinstance(e.value.__cause__, ZeroDivisionError)
    await trace.wait(0)  # complete before the failure: still complete
    with pytest.raises(DataflowStopped, match=r"'arrange': time 1 will never be complete.*\[1\]"):
        await trace.wait(1)  # after it: at once
    with pytest.raises(ValueError, match=r"time 1 is not complete.*never will be"):
        trace.cursor(at=1)


async def test_a_wait_on_a_cancelled_runtime_raises() -> None:
    stopped: list[Any] = []
    try:
        async with asyncio.timeout(0.3):
            async with naiad.Runtime() as rt:
                _, _, trace, _ = rt.dataflow(build).results[0]
                stopped.append(trace)
                await trace.wait(0)  # never complete: the runtime is cancelled
    except TimeoutError:
        pass
    with pytest.raises(DataflowStopped, match=r"'arrange': time 0 will never be complete"):
        await asyncio.wait_for(stopped[0].wait(0), 10)


async def test_the_trace_of_an_import_as_of_a_frontier_waits_on_its_source() -> None:
    """An imported arrangement's handle reads the source spine through a view: it is woken
    as the source's upper frontier moves."""
    async with naiad.Runtime() as rt:
        source = rt.dataflow(build)
        session, _, trace, _ = source.results[0]
        session.insert((1, "a"))
        session.advance_to(3)
        await trace.wait(2)
        later = rt.dataflow(lambda s: import_trace(trace, s, frontier=[2]).trace)
        imported = later.results[0]
        waiting = asyncio.create_task(imported.wait(4))
        await asyncio.sleep(0.01)
        assert not waiting.done() and imported.upper == [3]
        session.insert((2, "b"))
        session.advance_to(6)
        await asyncio.wait_for(waiting, 10)
        assert contents(imported, 4) == Counter({(1, "a"): 1, (2, "b"): 1})
        with pytest.raises(ValueError, match=r"time 6 is not complete in trace 'arrange@import'"):
            imported.cursor(at=6)
        imported.close()
        later.close_inputs()
        session.close()
        await source.finished()
        await later.finished()
        trace.close()
