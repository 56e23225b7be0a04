"""Polling ``CaptureLog.complete`` while a capture runs costs the events added since the last
poll, not every event so far: ``complete`` rebuilt the log's frontier from all its progress
events at each call, so a driver checking it once per epoch of n cost n**2 / 2 frontier
updates (21,108 with the final checks at n = 200; 402 now)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

import naiad
from naiad.operators.capture import CaptureLog
from naiad.progress.antichain import MutableAntichain
from tests.counting import Work


async def polled(epochs: int) -> tuple[list[bool], CaptureLog]:
    """Sends one record per epoch, awaiting each epoch, and reads ``complete`` after each."""
    async with naiad.Runtime(1) as rt:

        def build(s: naiad.Scope) -> Any:
            handle, stream = s.new_input()
            return handle, stream.capture(), stream.probe()

        ((handle, log, probe),) = rt.dataflow(build).results
        polls = []
        for t in range(epochs):
            handle.send([t])
            handle.advance_to(t + 1)
            await probe.wait(t)
            polls.append(log.complete)
        handle.close()
        await probe.wait()
        await asyncio.sleep(0.01)  # the capture vertex has seen the end too
        polls.append(log.complete)
    return polls, log


@pytest.mark.timeout(60)
def test_polling_complete_costs_the_new_events(monkeypatch: pytest.MonkeyPatch) -> None:
    work = Work(monkeypatch)
    getter = SimpleNamespace(read=CaptureLog.complete.fget)  # a property: count its reads
    work.within(getter, "read", "polls")
    monkeypatch.setattr(CaptureLog, "complete", property(lambda log: getter.read(log)))
    work.count(MutableAntichain, "update_iter")
    cost = {}
    for n in (200, 400):
        work.reset()
        polls, log = asyncio.run(polled(n))
        assert polls == [False] * n + [True]
        assert log.records() == [(t, t) for t in range(n)]
        fresh = CaptureLog(list(log), log.minimum)  # a saved log: the same answer at once
        assert fresh.complete and fresh.frontiers() == log.frontiers()
        cost[n] = work.total
    # the old rebuild: n**2 / 2 updates and more (21,108 at n = 200; 402 now)
    assert cost[200] <= 2_000 and cost[400] <= 2.5 * cost[200], cost
    assert cost[200] > 0, cost


def test_complete_follows_the_events_of_a_log_made_from_events() -> None:
    """Read before and after events are appended: the frontier so far, as ``frontiers``."""
    log = CaptureLog([("messages", 0, [1]), ("progress", [(1, 1), (0, -1)])])
    assert not log.complete and log.frontiers()[-1] == [1]
    log._append(("progress", [(2, 1), (1, -1)]))
    assert not log.complete
    log._append(("progress", [(2, -1)]))
    assert log.complete and log.frontiers()[-1] == []
