"""A vertex holding many pending notifications pays, per activation, for the notifications it
delivers, not for every one it holds. ``deliver_notifications`` tested every pending time
against the input frontiers at each activation, so n times in flight released one at a time
cost n**2 tests (a prioritized loop's consolidate waits on one time per priority: 320,000
tests in a 400-node prioritized connected components)."""

from __future__ import annotations

import asyncio
import heapq
from typing import Any

import pytest

import naiad
from naiad.actors.vertex import VertexShard
from tests.counting import Work


class Waiter(naiad.Vertex):
    """Asked for ``n`` on input 0, requests a notification at each of the epochs 1..n at
    once; each notification sends its epoch. Input 1 only holds the frontier back."""

    def on_recv(self, port: int, cap: Any, batch: list[int]) -> None:
        for n in batch:
            for t in range(1, n + 1):
                self.notify_at(cap.delayed(t))

    def on_notify(self, cap: Any) -> None:
        self.send(cap, [cap.time])


async def released_stepwise(epochs: int) -> list[Any]:
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            ask, asks = scope.new_input("ask")
            hold, held = scope.new_input("hold")
            out = asks.binary(held, Waiter())
            return ask, hold, out.collect(), out.probe()

        df = rt.dataflow(build)
        ask, hold, out, probe = df.results[0]
        ask.send([epochs])
        ask.close()
        for e in range(1, epochs + 1):
            hold.advance_to(e + 1)
            await probe.wait(e)
        hold.close()
        await df.finished()
        return out


@pytest.mark.timeout(60)
def test_an_activation_costs_the_notifications_it_delivers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = Work(monkeypatch)  # pending times tested against the frontiers, heap entries popped
    steps.count(VertexShard, "_blocked")
    steps.count(heapq, "heappop")
    work = {}
    for n in (200, 400):
        steps.reset()
        out = asyncio.run(released_stepwise(n))
        assert sorted(out) == [(e, e) for e in range(1, n + 1)]
        work[n] = steps.total
    # the old scan: n**2 / 2 tests and more (20,300 and 80,600 steps here)
    assert work[200] <= 2_000 and work[400] <= 2.5 * work[200], work
    assert work[200] > 0, work  # the counting reached the shards
