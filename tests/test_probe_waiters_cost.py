"""A handle with many waits pending pays, per frontier move, for the waits it completes, not
for every wait it holds. ``ProbeHandle._check_waiters`` tested every pending wait against the
frontier at each move, so a driver awaiting one task per epoch, n at once, while the input
advances an epoch at a time, cost n**2 / 2 tests (20,100 at n = 200). Subscriptions
(``subscribe``, ``collect``) and differential ``View``s wait through the same handle."""

from __future__ import annotations

import asyncio
import heapq
from typing import Any

import pytest

import naiad
from naiad.differential import Collection
from naiad.operators.probe import ProbeHandle
from naiad.progress.antichain import Antichain, MutableAntichain
from tests.counting import Work

KINDS = ["probe", "probe in a loop", "subscribe", "view"]


async def awaited_at_once(epochs: int, kind: str) -> list[int]:
    """One task per epoch awaits that epoch, all at once; the input then advances one epoch at
    a time. Returns the epochs in the order their waits returned."""
    async with naiad.Runtime(1) as rt:

        def build(s: naiad.Scope) -> Any:
            if kind == "view":
                session, collection = Collection.new_input(s)
                return session, collection.view()
            handle, stream = s.new_input()
            if kind == "subscribe":
                return handle, stream.subscribe(lambda t, rs: None)
            if kind == "probe in a loop":
                with s.iterative() as loop:
                    return handle, stream.enter(loop).probe()
            return handle, stream.probe()

        ((handle, waited),) = rt.dataflow(build).results
        returned: list[int] = []

        async def wait(epoch: int) -> None:
            await waited.wait(naiad.Product(epoch, 0) if kind == "probe in a loop" else epoch)
            returned.append(epoch)

        tasks = [asyncio.ensure_future(wait(e)) for e in range(epochs)]
        await asyncio.sleep(0)  # every wait pending
        for e in range(epochs):
            assert returned == list(range(e))  # no wait returns before its epoch completes
            handle.advance_to(e + 1)
            await tasks[e]
        handle.close()
        await asyncio.gather(*tasks)
    return returned


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
def test_a_frontier_move_costs_the_waits_it_completes(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    work = Work(monkeypatch)  # waits tested against the frontier, heap entries popped
    work.within(ProbeHandle, "_check_waiters", "check")
    work.count(MutableAntichain, "less_equal")
    work.count(Antichain, "less_equal")
    work.count(heapq, "heappop")
    cost = {}
    for n in (200, 400):
        work.reset()
        assert asyncio.run(awaited_at_once(n, kind)) == list(range(n))
        cost[n] = work.total
    # the old scan: n**2 / 2 tests and more (20,100 at n = 200; 200 with the index)
    assert cost[200] <= 2_000 and cost[400] <= 2.5 * cost[200], cost
    assert cost[200] > 0, cost  # the counting reached the handle
