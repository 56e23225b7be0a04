"""Idle activations (``Vertex.activate_when_idle``, ``Worker.schedule_idle``): a vertex asks
for ``on_idle`` once the worker has nothing else to do; asked several times before then, it
runs once; it runs again only if asked again, and the worker group sleeps once nobody asks.
Counted, never timed."""

from __future__ import annotations

import asyncio
from typing import Any

import naiad
from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.progress.capability import Capability


class Asker(Vertex):
    """Asks for ``rounds`` idle activations in a row after each message (asking three
    times per call: once counts)."""

    def __init__(self, rounds: int) -> None:
        self.rounds, self.left, self.calls, self.seen = rounds, 0, 0, 0

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        self.seen += len(batch)
        self.left = self.rounds
        for _ in range(3):
            self.activate_when_idle()

    def on_idle(self) -> None:
        self.calls += 1
        self.left -= 1
        if self.left > 0:
            self.activate_when_idle()
            self.activate_when_idle()


async def test_idle_activations_run_once_per_ask_and_stop() -> None:
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> tuple[Any, Asker]:
            handle, stream = scope.new_input()
            asker = Asker(rounds=5)
            scope.add_operator("asker", asker, [(stream, Pipeline())])
            return handle, asker

        df = rt.dataflow(build)
        handle, asker = df.results[0]
        worker, group = rt.processes[0].workers[0], rt.processes[0].group
        for _ in range(50):
            await asyncio.sleep(0)
        assert asker.calls == 0 and worker.idle_activations == 0  # nobody asked
        handle.send([1, 2])
        handle.advance_to(1)
        for _ in range(200):
            await asyncio.sleep(0)
        assert (asker.seen, asker.calls, worker.idle_activations) == (2, 5, 5)
        assert group._sleeping  # nothing asks: the group sleeps
        handle.send([3])
        handle.close()
        await asyncio.wait_for(df.finished(), 30)  # completion waits for no idle work
        for _ in range(200):
            await asyncio.sleep(0)
        assert (asker.seen, asker.calls, worker.idle_activations) == (3, 10, 10)
