"""Cancellation (``asyncio.timeout``, ``wait_for``) of the task that runs a runtime, or of a
task awaiting one of its handles: the runtime stays usable, or stops with an error that says
so, and no handle is left waiting forever."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import naiad

# bounds a hang only: each await below returns or raises at once when the runtime is right
HANG = 10.0


class Hold(naiad.Vertex):
    """Keeps its initial capability: the dataflow never completes."""

    def on_start(self, cap: naiad.Capability) -> None:
        self.cap = cap.retain()

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        pass


def holding(s: naiad.Scope) -> tuple[naiad.InputHandle, naiad.ProbeHandle]:
    handle, stream = s.new_input()
    return handle, stream.unary(Hold()).probe()


async def test_a_cancelled_probe_wait_leaves_the_runtime_usable() -> None:
    async with naiad.Runtime(workers=2) as rt:

        def build(s: naiad.Scope) -> tuple[naiad.InputHandle, list[Any], naiad.ProbeHandle]:
            handle, stream = s.new_input()
            doubled = stream.map(lambda x: 2 * x)
            return handle, doubled.collect(), doubled.probe()

        df = rt.dataflow(build)
        (h0, _, p0), (h1, _, _) = df.results
        h0.send([1, 2])
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(p0.wait(0), 0.05)  # epoch 0 is still open
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(df.finished(), 0.05)
        h0.advance_to(1)
        h1.advance_to(1)
        await asyncio.wait_for(p0.wait(0), HANG)
        h0.send([3])
    assert df.done
    assert sorted(r for _, out, _ in df.results for r in out) == [(0, 2), (0, 4), (1, 6)]


async def test_a_timeout_while_the_runtime_waits_for_its_dataflows_fails_their_handles() -> None:
    """Regression: a cancellation while leaving 'async with' (the dataflow never finished)
    was taken for a normal end: df.finished() and probe.wait() then waited forever."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2), naiad.Runtime(workers=2) as rt:
            df = rt.dataflow(holding)
    handle, probe = df.results[0]
    for awaitable in (df.finished(), probe.wait()):
        with pytest.raises(naiad.DataflowStopped, match="stopped by CancelledError"):
            await asyncio.wait_for(awaitable, HANG)
    with pytest.raises(naiad.DataflowStopped, match="stopped by CancelledError"):
        handle.send([1])


async def test_a_cancelled_runtime_fails_other_tasks_waits_with_an_error_not_a_cancel() -> None:
    """Regression: a task awaiting a probe of a runtime whose own task was cancelled got a
    bare CancelledError, as if it had been cancelled itself."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2), naiad.Runtime(workers=1) as rt:
            df = rt.dataflow(holding)
            _, probe = df.results[0]
            waiter = asyncio.create_task(probe.wait(5))
            await asyncio.sleep(HANG)
    assert not waiter.cancelled()
    with pytest.raises(naiad.DataflowStopped, match="stopped by CancelledError") as info:
        await waiter
    assert isinstance(info.value.__cause__, asyncio.CancelledError)
    with pytest.raises(naiad.DataflowStopped):
        await asyncio.wait_for(df.finished(), HANG)


async def test_stopping_a_runtime_fails_the_handles_of_its_running_dataflows() -> None:
    rt = naiad.Runtime(workers=1)
    await rt.start()
    df = rt.dataflow(holding)
    await rt.stop()
    with pytest.raises(naiad.DataflowStopped, match="a runtime runs once"):
        await asyncio.wait_for(df.results[0][1].wait(), HANG)


ENDLESS_LOOP = """
import asyncio, sys
import naiad

class Bounce(naiad.Vertex):  # a user vertex (never re-entered) in the cycle
    def on_recv(self, port, cap, batch):
        self.send(cap, batch)

def endless(s):
    with s.iterative() as loop:
        handle, cycle = loop.feedback()
        x = s.from_epochs([[0]]).enter(loop).concat(cycle).map(lambda n: n + 1)
        if sys.argv[1] == "vertex":
            x = x.unary(Bounce())
        x.connect_loop(handle)

def fed(s):
    handle, stream = s.new_input()
    return handle, stream.map(lambda x: x).probe()

async def main():
    async with naiad.Runtime(workers=int(sys.argv[2])) as rt:
        rt.dataflow(endless)
        df = rt.dataflow(fed)
        for handle, _ in df.results:
            handle.advance_to(1)
        await df.results[0][1].wait(0)
        print("the other dataflow progressed", flush=True)
        await asyncio.sleep(3600)

try:
    asyncio.run(asyncio.wait_for(main(), 0.5))
except TimeoutError:
    print("stopped")
"""


@pytest.mark.parametrize("cycle", ["stateless", "vertex"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_loop_that_never_ends_can_be_timed_out(cycle: str, workers: int) -> None:
    """Regression: a cycle of operators on one worker ran inside a single activation for
    ever (each drain of a mailbox also took the messages its own callbacks queued there), so
    the worker never yielded to the event loop: other dataflows stalled, and no timeout,
    cancellation or Ctrl-C stopped the runtime (memory grew by GBs: no progress flushed).
    Run in a subprocess, whose own timeout catches such a hang."""
    root = Path(naiad.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", ENDLESS_LOOP, cycle, str(workers)],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the runtime of an endless loop could not be timed out")
    assert done.stdout.split("\n")[:2] == ["the other dataflow progressed", "stopped"], (
        done.stdout + done.stderr
    )
