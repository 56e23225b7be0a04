"""Long-running use: what a runtime keeps must not grow with the number of epochs or of
finished dataflows when the live state does not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad.progress.progress_actor import ProgressActor
from naiad.progress.reachability import GraphBuilder
from naiad.runtime.process import Process


def _bookkeeping(processes: list[Process]) -> int:
    """The entries in every dict, set and list that a process and its progress actor hold."""
    return sum(
        len(value)
        for process in processes
        for owner in (process, process.progress)
        for value in vars(owner).values()
        if isinstance(value, dict | set | list)
    )


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_finished_dataflow_leaves_nothing_behind(processes: int) -> None:
    """Every finished dataflow left its build digests and its id (in two sets) behind, about
    1 KB per dataflow with 2 processes: a service that builds a dataflow per query grew
    without bound. Late frames for finished dataflows are still recognised and dropped."""

    def build(scope: naiad.Scope) -> tuple[Any, Any]:
        handle, stream = scope.new_input()
        return handle, stream.map(lambda x: x + 1).collect()

    def broken(scope: naiad.Scope) -> None:
        scope.new_input()
        raise ValueError("a query that fails to build")

    async with naiad.Runtime(workers=2, processes=processes) as rt:
        sizes = []
        for n in range(40):
            if n % 4 == 0:  # a build that raises leaves nothing behind either
                with pytest.raises(ValueError, match="fails to build"):
                    rt.dataflow(broken)
            df = rt.dataflow(build)
            handle = df.results[0][0]
            handle.send([n])
            df.close_inputs()
            await df.finished()
            assert [r for part in df.results for _, r in part[1]] == [n + 1]
            if n in (9, 39):
                sizes.append(_bookkeeping(rt.processes))
        assert sizes[1] == sizes[0]
        for process in rt.processes:
            assert all(process.progress.finished(d) for d in range(40))
            assert not process.progress.finished(40)  # not built yet: its frames are kept


def test_progress_actor_tells_finished_dataflows_from_unbuilt_ones() -> None:
    """Without a set of finished ids: a batch for a dataflow not registered yet (even one
    numbered below a registered one) waits for it; one for a finished dataflow is dropped."""
    g = GraphBuilder()
    a = g.add_node("in", 0, 1)
    b = g.add_node("out", 1, 0)
    g.add_edge((a, 0), (b, 0))
    r = g.build()
    src = r.source(a, 0)
    actor = ProgressActor(0, 2, lambda *_: None)
    actor.register(3, r, [((src, 0), 2)], lambda moved: None)
    actor.receive(1, 0, 1, [((src, 0), -1)])  # dataflow 1 is registered later
    actor.register(1, r, [((src, 0), 2)], lambda moved: None)
    assert actor.tracker(1).count(src, 0) == 1
    actor.unregister(3)
    actor.receive(1, 1, 3, [((src, 0), -1)])  # late: dropped, not kept for ever
    assert actor.finished(3) and not actor.finished(1) and not actor.finished(2)
    assert not actor._unbuilt
    actor.receive(1, 2, 2, [((src, 0), -1)])  # never registered so far: kept
    assert list(actor._unbuilt) == [2]


@pytest.mark.parametrize("kind", ["probe", "subscribe"])
async def test_waits_given_up_on_an_idle_input_are_not_kept(kind: str) -> None:
    """Every timed-out ``wait`` stayed in the handle's waiter list until the frontier moved
    again: a service polling a stream whose input is idle grew the list without bound."""
    seen: list[Any] = []
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> tuple[Any, Any]:
            handle, stream = scope.new_input()
            if kind == "probe":
                return handle, stream.probe()
            return handle, stream.subscribe(lambda t, rs: seen.append((t, rs)))

        handle, probe = rt.dataflow(build).results[0]
        handle.send(["a"])
        handle.advance_to(1)
        await probe.wait(0)
        for _ in range(50):  # epoch 1 cannot complete while the input stays open
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(probe.wait(1), 0.001)
        assert len(probe._waiters) == 0 and len(probe._times) == 0
        waiting = asyncio.ensure_future(probe.wait(1))  # a wait still under way is kept
        await asyncio.sleep(0)
        assert len(probe._waiters) == 1
        handle.send(["b"])
        handle.close()
        await asyncio.wait_for(waiting, 10)
        assert probe.done() and len(probe._waiters) == 0
    if kind == "subscribe":
        assert seen == [(0, ["a"]), (1, ["b"])]
