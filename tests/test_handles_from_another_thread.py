"""The handles of a runtime other than an input's, used from another thread than the
runtime's event loop, are refused by name and change nothing: an unordered input's
capabilities and handle, ``Dataflow.drop`` and ``close_inputs``, ``Runtime.dataflow``, and
the waits of probes, trace handles, views and subscriptions (run on another thread's event
loop, nothing would ever wake them). A runtime whose event loop runs in a thread of its own
works as before, and so does a wait passed to its loop from another thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import naiad
from naiad import InputError
from naiad.differential import Collection

OFF_LOOP = "is used from another thread than its runtime's event loop"


def in_thread(call: Callable[[], Any]) -> list[BaseException]:
    """The exceptions ``call()`` raised, run in a new thread (joined)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as e:  # reported to the test
            errors.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return errors


def refused(call: Callable[[], Any], error: type[BaseException], what: str) -> None:
    errors = in_thread(call)
    assert len(errors) == 1 and type(errors[0]) is error, errors
    assert str(errors[0]).startswith(f"{what} {OFF_LOOP}"), str(errors[0])


def unordered(s: naiad.Scope) -> Any:
    handle, stream = s.new_unordered_input("events")
    return handle, stream.collect(), stream.probe()


@pytest.mark.parametrize("call", ["downgrade", "send", "delayed", "drop", "close", "capability"])
@pytest.mark.parametrize("workers", [1, 2])
async def test_an_unordered_input_used_from_another_thread_is_refused(
    call: str, workers: int
) -> None:
    """These changed the workers' state from the thread: a downgrade or a close there left
    probe.wait pending (3 s and more, until a timer woke the loop), and a send ran the
    operators downstream on the calling thread."""
    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(unordered)
        handles = [r[0] for r in df.results]
        handle, out, probe = df.results[0]
        cap = handle.capability
        calls: dict[str, Callable[[], Any]] = {
            "downgrade": lambda: cap.downgrade(1),
            "send": lambda: cap.send(["thread"]),
            "delayed": lambda: cap.delayed(3),
            "drop": lambda: cap.drop(),
            "close": lambda: handle.close(),
            "capability": lambda: handle.capability,
        }
        refused(calls[call], InputError, "unordered input 'events'")
        # nothing changed: the capability is held at 0, alone, and works from the loop
        assert cap.valid and cap.time == 0 and handle.capabilities == [cap]
        cap.send(["loop"])
        for h in handles:
            h.capability.downgrade(1)
        await asyncio.wait_for(probe.wait(0), 30)
        for h in handles:
            h.close()
    assert out == [(0, "loop")]


@pytest.mark.parametrize("workers", [1, 2])
async def test_close_inputs_from_another_thread_is_refused_and_closes_nothing(
    workers: int,
) -> None:
    """It closed the unordered input (unlocked, not waking the loop), then failed on the
    ordinary one with an InputError naming that input: half done."""

    def build(s: naiad.Scope) -> Any:
        free, a = s.new_unordered_input("free")
        ordered, b = s.new_input("ordered")
        return free, ordered, a.concat(b).collect()

    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(build)
        refused(df.close_inputs, RuntimeError, "dataflow 'dataflow': close_inputs()")
        for free, ordered, _ in df.results:
            assert not free.closed and not ordered.closed
        free, ordered, out = df.results[0]
        ordered.send(["after"])
        df.close_inputs()
        await asyncio.wait_for(df.finished(), 30)
    assert out == [(0, "after")]


@pytest.mark.parametrize("workers", [1, 2])
async def test_drop_from_another_thread_is_refused_and_drops_nothing(workers: int) -> None:
    """It dropped the dataflow off the loop: df.finished(), awaited on the loop, stayed
    pending (3 s and more) although the dataflow had ended."""
    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(lambda s: (lambda h, st: (h, st.collect()))(*s.new_input()))
        refused(df.drop, RuntimeError, "dataflow 'dataflow': drop()")
        assert not df.dropped and not df.done
        handle, _ = df.results[0]
        handle.send([1])
        df.drop()
        with pytest.raises(naiad.DataflowDropped):
            await asyncio.wait_for(df.finished(), 30)


async def test_building_a_dataflow_from_another_thread_is_refused_and_the_runtime_goes_on() -> None:
    """It built the dataflow, then failed as "no running event loop" while starting it,
    which stopped the runtime."""
    async with naiad.Runtime(2) as rt:
        refused(
            lambda: rt.dataflow(lambda s: s.from_epochs([[1]]).collect(), name="late"),
            RuntimeError,
            "runtime.dataflow('late')",
        )
        df = rt.dataflow(lambda s: s.from_epochs([[1, 2]]).collect())
        await asyncio.wait_for(df.finished(), 30)
    assert sorted(r for part in df.results for r in part) == [(0, 1), (0, 2)]


def waits(s: naiad.Scope) -> Any:
    session, c = Collection.new_input(s, "events")
    raw, stream = s.new_input("raw")  # a timely stream to subscribe to
    subscribed: list[Any] = []
    return (
        session,
        raw,
        {
            "probe 'probe'": c.probe(),
            "trace handle of 'arrange'": c.arrange_by_key().trace,
            "view 'view'": c.view(),
            "subscription handle": stream.subscribe(lambda t, b: subscribed.append(t)),
        },
    )


@pytest.mark.parametrize(
    "what",
    ["probe 'probe'", "trace handle of 'arrange'", "view 'view'", "subscription handle"],
)
async def test_a_wait_on_another_threads_event_loop_is_refused(what: str) -> None:
    """Such a wait was never woken: the loop that completes it sets its future from its
    own thread, which does not wake the waiting thread's loop (3 s, the whole timeout given,
    for a time complete 0.2 s after the wait began)."""
    async with naiad.Runtime() as rt:
        session, raw, handles = rt.dataflow(waits).results[0]
        handle = handles[what]

        def wait_there() -> None:
            asyncio.run(asyncio.wait_for(handle.wait(0), 3))

        thread_errors: list[BaseException] = []
        thread = threading.Thread(target=lambda: thread_errors.extend(in_thread(wait_there)))
        thread.start()
        await asyncio.sleep(0.2)
        session.insert(("a", 1))
        session.advance_to(1)
        raw.advance_to(1)
        await asyncio.to_thread(thread.join)
        assert len(thread_errors) == 1 and type(thread_errors[0]) is RuntimeError, thread_errors
        assert str(thread_errors[0]).startswith(f"{what} {OFF_LOOP}")
        assert "run_coroutine_threadsafe" in str(thread_errors[0])
        await asyncio.wait_for(handle.wait(0), 30)  # from the loop: as before
        if what.startswith("trace"):
            handle.close()
        session.close()
        raw.close()


def test_a_runtime_on_a_thread_of_its_own_is_used_there_and_waited_on_from_outside() -> None:
    """The thread kept is the loop's, not the main one: a runtime in another thread uses
    its handles (built there) as before; a ProbeHandle made on the main thread follows the
    thread that builds with it; a wait passed to the loop from the main thread
    (run_coroutine_threadsafe) completes."""
    shared = naiad.ProbeHandle()  # made here, probed over there
    ready: dict[str, Any] = {}
    started, go = threading.Event(), threading.Event()
    results: list[Any] = []

    async def main() -> None:
        async with naiad.Runtime(2) as rt:

            def build(s: naiad.Scope) -> Any:
                session, c = Collection.new_input(s, "events")
                c.stream.probe_with(shared)
                return session, c.arrange_by_key().trace, c.changes(gather=True)

            df = rt.dataflow(build)
            sessions = [r[0] for r in df.results]
            session, trace, out = df.results[0]
            ready["loop"], ready["trace"] = asyncio.get_running_loop(), trace
            started.set()
            session.insert(("a", 1))
            for s in sessions:
                s.advance_to(1)
            await asyncio.wait_for(shared.wait(0), 30)
            await asyncio.wait_for(trace.wait(0), 30)
            await asyncio.to_thread(go.wait, 30)  # the main thread's waits run meanwhile
            trace.close()
            for s in sessions:
                s.close()
            other = rt.dataflow(lambda s: s.from_epochs([[1]]).probe())
            await asyncio.wait_for(other.finished(), 30)
            results.append(out)

    def run_there() -> None:
        asyncio.run(main())

    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: errors.extend(in_thread(run_there)))
    thread.start()
    assert started.wait(30)
    loop = ready["loop"]
    asyncio.run_coroutine_threadsafe(shared.wait(0), loop).result(30)
    asyncio.run_coroutine_threadsafe(ready["trace"].wait(0), loop).result(30)
    go.set()
    thread.join(60)
    assert errors == [] and results == [[(("a", 1), 0, 1)]]
    # naiad.run on another thread: its runtime, inputs and probes are that thread's
    got: list[Any] = []
    counted = lambda s: Collection.from_epochs(s, [[(1, 2)]]).count().changes(gather=True)  # noqa: E731
    assert in_thread(lambda: got.append(naiad.run(counted, workers=2)[0])) == []
    assert got == [[((1, 2), 0, 1)]]
