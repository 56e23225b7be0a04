"""A dataflow whose build raises never runs, and leaves nothing behind in what outlives it: a
``ProbeHandle`` shared with other dataflows keeps probing only theirs, and an imported trace
is not held back by the readers the failed build made on it, nor by a ``.trace`` handle
taken in it. A dataflow refused after its build (an ``on_start`` that raises, a peer that
left without building it) stops the runtime, as a callback's error does, rather than stay
half started."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

import naiad
from naiad import BuildError
from naiad.differential import Collection, import_trace
from naiad.runtime.process import ClusterError


def failing(build: Any, failure: str) -> Any:
    """``build``, then a build error of kind ``failure`` (on the last worker only: the other
    workers' builds completed)."""

    def wrapped(scope: naiad.Scope) -> Any:
        build(scope)
        if scope.index == scope.peers - 1:
            if failure == "raise":
                raise RuntimeError("the user's build failed")
            scope.feedback()  # never connected: check_complete refuses the build

    return wrapped


@pytest.mark.parametrize("failure", ["raise", "open loop"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_shared_probe_handle_keeps_only_the_dataflows_that_run(
    failure: str, workers: int
) -> None:
    async def main() -> list[Any]:
        async with naiad.Runtime(workers=workers) as rt:
            shared = naiad.ProbeHandle()

            def build(s: naiad.Scope) -> Any:
                handle, stream = s.new_input()
                stream.probe_with(shared)
                return handle

            live = rt.dataflow(build).results
            with pytest.raises((RuntimeError, BuildError)):
                rt.dataflow(failing(build, failure))
            seen = [list(shared.frontier)]
            for h in live:
                h.send([1])
                h.advance_to(3)
            await asyncio.wait_for(shared.wait(2), 30)  # the live dataflow's frontier only
            seen.append(list(shared.frontier))
            for h in live:
                h.close()
            await asyncio.wait_for(shared.wait(), 30)
            return seen

    # before the fix: AttributeError ('ProbeVertex' object has no attribute 'shard'), which
    # also failed the live dataflow when its probe read the handle
    assert asyncio.run(main()) == [[0], [3]]


async def replace_one_record(sessions: list[Any], probe: naiad.ProbeHandle, epochs: range) -> None:
    """Feeds ``epochs`` of one record alive, replaced at every epoch: a spine that compacts
    holds a few rows, one held back the whole history (2 rows per epoch)."""
    for epoch in epochs:
        sessions[0].insert(epoch)
        if epoch:
            sessions[0].remove(epoch - 1)
        for session in sessions:
            session.advance_to(epoch + 1)
        await asyncio.wait_for(probe.wait(epoch), 30)


def arranged_source(s: naiad.Scope) -> Any:
    """An input, its arrangement (by whole records) and a probe: what the imports read."""
    session, c = Collection.new_input(s)
    return session, c.arrange_by_self(), c.probe()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_import_does_not_hold_the_source_trace(workers: int) -> None:
    async def main() -> tuple[int, int, int]:
        async with naiad.Runtime(workers=workers) as rt:
            src = rt.dataflow(arranged_source)
            traces = [arranged.trace for _, arranged, _ in src.results]
            spines = [t.spine for t in traces]

            def importer(s: naiad.Scope) -> None:
                imported = import_trace(src.result(s.index)[1].trace, s)
                imported.join(Collection.from_epochs(s, [[(1, 1)]]))  # readers of the spine
                imported.count()

            with pytest.raises(RuntimeError, match="the user's build failed"):
                rt.dataflow(failing(importer, "raise"))
            for t in traces:
                t.close()
            readers = sum(len(s.handles) for s in spines)
            sessions = [session for session, _, _ in src.results]
            epochs = 100
            await replace_one_record(sessions, src.results[0][2], range(epochs))
            rows = sum(len(b) for s in spines for b in s.batches)
            for session in sessions:
                session.close()
            return readers, rows, 2 * epochs

    readers, rows, history = asyncio.run(main())
    # before the fix: 3 readers per worker stayed, and the spines kept the whole history
    assert readers == 0
    assert rows < history // 4


@pytest.mark.parametrize("frontier", [None, [0]])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_trace_taken_in_a_failed_build_does_not_hold_the_source(
    workers: int, frontier: Any
) -> None:
    """``import_trace(...).trace`` is a handle on the source's spine: taken in a build that
    then raised, it stayed open for as long as anything referred to it (here the user's
    list; the exception's traceback does too), and held the source's history."""

    taken: list[Any] = []

    async def main() -> tuple[int, int, int]:
        async with naiad.Runtime(workers=workers) as rt:
            src = rt.dataflow(arranged_source)
            for _, arranged, _ in src.results:
                arranged.trace.close()
            spines = [arranged.spine for _, arranged, _ in src.results]

            def importer(s: naiad.Scope) -> None:
                reader = src.result(s.index)[1].spine.reader()
                taken.append(import_trace(reader, s, frontier=frontier).trace)
                reader.close()

            with pytest.raises(RuntimeError, match="the user's build failed") as raised:
                rt.dataflow(failing(importer, "raise"))
            readers = sum(len(s.handles) for s in spines)
            sessions = [session for session, _, _ in src.results]
            await replace_one_record(sessions, src.results[0][2], range(100))
            rows = sum(len(b) for s in spines for b in s.batches)
            for session in sessions:
                session.close()
            assert raised.value is not None  # kept to the end, as a user logging it may
            return readers, rows, 200

    readers, rows, history = asyncio.run(main())
    # before the fix: 1 reader stayed open (on the worker whose build raised, or on each,
    # as the user kept them), and the spines kept all but one of the 200 rows per worker
    assert readers == 0
    assert rows < history // 4
    assert len(taken) == workers
    for handle in taken:  # closed, so refused by name rather than read as a stale history
        with pytest.raises(ValueError, match=r"cursor: the trace handle .* is closed"):
            handle.cursor()


def test_an_import_refused_by_a_running_dataflow_does_not_hold_the_source() -> None:
    """``import_trace`` into the scope of a dataflow already running is refused; the reader
    it had made on the source stayed open while the exception was kept."""

    async def main() -> int:
        async with naiad.Runtime() as rt:
            session, arranged, _ = rt.dataflow(arranged_source).results[0]
            arranged.trace.close()
            running = rt.dataflow(lambda s: s).results[0]
            reader = arranged.spine.reader()
            with pytest.raises(BuildError, match="already built and running") as raised:
                import_trace(reader, running)
            reader.close()
            session.close()
            assert raised.value is not None
            return len(arranged.spine.handles)

    assert asyncio.run(main()) == 0  # before the fix: 1


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_an_on_start_that_raises_stops_the_runtime(workers: int, processes: int) -> None:
    """An operator's ``on_start`` raising (here on the last worker) made ``rt.dataflow``
    raise, but left the dataflow half started and running: the shards started before it
    ran, the failed operator received messages, and the runtime went on as if nothing had
    happened. It is a callback's error: it now stops the runtime, as any other does."""
    received: list[Any] = []

    class FailsToStart(naiad.Vertex):
        def __init__(self, fails: bool) -> None:
            self.fails = fails

        def on_start(self, cap: naiad.Capability) -> None:
            if self.fails:
                raise ValueError("cannot open the sink")

        def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
            received.append(batch)

    inputs: list[Any] = []
    outcome: list[str] = []

    def build(s: naiad.Scope) -> None:
        handle, stream = s.new_input()
        inputs.append(handle)
        stream.unary(FailsToStart(s.index == s.peers - 1), name="sink")

    async def main() -> None:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
            with pytest.raises(ValueError, match="cannot open the sink") as raised:
                rt.dataflow(build)
            assert "naiad: raised in operator 'sink'" in raised.value.__notes__[0]
            for handle in inputs:
                try:
                    handle.send([1])
                    handle.advance_to(1)
                except naiad.DataflowStopped as exc:
                    outcome.append(str(exc))
            await asyncio.sleep(0.05)
            with pytest.raises(naiad.DataflowStopped, match="cannot build dataflow 'later'"):
                rt.dataflow(lambda s: None, "later")

    with pytest.raises(ValueError, match="cannot open the sink"):
        asyncio.run(main())
    # before the fix: every send accepted, each delivered (also to the failed operator),
    # and the block ended without an error
    assert received == []
    assert len(outcome) == workers * processes
    assert all("cannot open the sink" in o for o in outcome)


def test_a_peer_gone_before_the_announcement_stops_the_runtime_and_undoes_the_build() -> None:
    """A build that every local worker completed, refused when announced (a peer left the
    cluster without building it: simulated here by the goodbye it would have sent): the
    runtime went on, and the build was not undone, so a probe handle shared with a running
    dataflow kept a stream that never ran, and its next read raised AttributeError (which
    then stopped the runtime in place of the cause)."""

    seen: list[Any] = []

    async def main() -> None:
        async with naiad.Runtime(workers=1, processes=2, transport="inproc") as rt:
            shared = naiad.ProbeHandle()

            def build(s: naiad.Scope) -> Any:
                handle, stream = s.new_input()
                stream.probe_with(shared)
                return handle

            rt.dataflow(build)
            rt.processes[0].goodbyes.add(1)  # as process 1's goodbye frame does
            with pytest.raises(ClusterError, match="left the cluster without building"):
                rt.dataflow(build)
            seen.append(list(shared.frontier))  # the running dataflow's only
            with pytest.raises(naiad.DataflowStopped, match="left the cluster"):
                rt.dataflow(build)

    with pytest.raises(ClusterError, match="left the cluster without building") as raised:
        asyncio.run(main())
    assert "'ProbeVertex' object has no attribute" not in str(raised.value)
    assert seen == [[0]]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_handles_of_a_failed_build_refuse_naming_why(workers: int) -> None:
    """Handles the build function made, kept by the user (here in a dict; on the workers
    whose build completed, too), of a dataflow that never runs. Before: an input said "the
    dataflow is still being built; send once rt.dataflow(...) has returned" (it had
    returned, raising), a probe reported every time complete (``done()`` True, ``wait``
    returned at once), a subscription's ``wait`` never returned, and a view raised
    AttributeError ('ViewVertex' object has no attribute 'shard')."""
    kept: list[dict[str, Any]] = []

    def build(s: naiad.Scope) -> None:
        handle, stream = s.new_input()
        unordered, _ = s.new_unordered_input()
        _, collection = Collection.new_input(s)
        subscription = stream.subscribe(lambda time, records: None)
        kept.append(
            {
                "input": handle,
                "unordered": unordered,
                "probe": stream.probe(),
                "subscription": subscription,
                "view": collection.view(gather=False),
            }
        )

    async def main() -> None:
        async with naiad.Runtime(workers=workers) as rt:
            with pytest.raises(RuntimeError, match="the user's build failed"):
                rt.dataflow(failing(build, "raise"))
            assert len(kept) == workers
            for handles in kept:
                reads = {
                    "input 'input'": partial(handles["input"].send, [1]),
                    "unordered input 'unordered_input'": partial(
                        getattr, handles["unordered"], "capability"
                    ),
                    "probe 'probe'": handles["probe"].done,
                    "view 'view'": partial(handles["view"].at, 0),
                }
                for what, read in reads.items():
                    with pytest.raises(ValueError, match=f"{what}: the build of its dataflow"):
                        read()
                waits = {
                    "probe 'probe'": handles["probe"].wait(5),
                    "subscribe": handles["subscription"].wait(0),
                    "view 'view'": handles["view"].wait(0),
                }
                for what, waiting in waits.items():
                    with pytest.raises(BuildError, match=f"{what}: .* never runs"):
                        await asyncio.wait_for(waiting, 5)

    asyncio.run(main())
