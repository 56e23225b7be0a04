"""A capture whose stream's frontier holds k incomparable times (a loop's staircase) pays
O(k) per frontier move, not O(k**2): ``CaptureVertex.on_frontier`` tested each time of the
new frontier for membership in the old one's list and the reverse, so k moves of a k-wide
frontier compared k**3 / 3 times (333,500 comparisons at k = 100; 20,202 elements hashed or
compared with sets). The progress events it writes are the old list code's, event for event
(checked against that code, kept here as the reference, on random frontier sequences)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import Product
from naiad.operators.capture import PROGRESS, CaptureLog, CaptureVertex
from tests.counting import Work


async def staircase(k: int) -> CaptureLog:
    """A loop's input holds ``Product(i, k - i)`` for i < k and drops its start, then drops
    them one at a time, each drop awaited until the capture has logged it."""
    async with naiad.Runtime(1) as rt:

        def build(s: naiad.Scope) -> Any:
            with s.iterative() as loop:
                handle, stream = loop.new_unordered_input()
                log = stream.capture()
                probe = stream.leave().probe()
            return handle, log, probe

        ((handle, log, probe),) = rt.dataflow(build).results
        start = handle.capability
        caps = [start.delayed(Product(i, k - i)) for i in range(k)]
        for cap in [start, *caps]:
            logged = len(log)
            cap.drop()
            for _ in range(100):
                if len(log) > logged:
                    break
                await asyncio.sleep(0)
        await asyncio.wait_for(probe.wait(), 30)
    return log


@pytest.mark.timeout(120)
def test_a_wide_frontier_costs_its_width_per_move(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts the times compared or hashed while the capture vertex handles a move."""
    work = Work(monkeypatch)
    work.within(CaptureVertex, "on_frontier", "capture")

    def eq(a: Any, b: Any) -> Any:
        if work.inside:
            work.counts["compared"] += 1
        return tuple.__eq__(a, b)

    def hashed(a: Any) -> int:
        if work.inside:
            work.counts["hashed"] += 1
        return tuple.__hash__(a)

    monkeypatch.setattr(Product, "__eq__", eq)
    monkeypatch.setattr(Product, "__hash__", hashed)
    cost = {}
    for k in (100, 200):
        work.reset()
        log = asyncio.run(staircase(k))
        # every drop moved the frontier by one step of the staircase, in order
        want = [[Product(0, 0)]] + [[Product(i, k - i) for i in range(j, k)] for j in range(k)]
        assert log.frontiers() == [*want, []]
        cost[k] = work.total
    # per move: the old lists k**2 (333,500 at k = 100, 8 times that at 200); the sets about
    # 2k (20,202 and 80,402)
    assert cost[100] <= 40_000 and cost[200] <= 4.5 * cost[100], cost
    assert cost[100] > 0, cost  # the counting reached the vertex


def reference(seen: list[Any], now: list[Any]) -> list[tuple[Any, int]]:
    """The old list code: what a move from ``seen`` to ``now`` logs."""
    changes = [(t, 1) for t in now if t not in seen]
    changes.extend((t, -1) for t in seen if t not in now)
    return changes


frontiers = st.lists(
    st.lists(st.builds(Product, st.integers(0, 5), st.integers(0, 5)), unique=True, max_size=6),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(moves=frontiers)
def test_logged_changes_are_the_old_codes(moves: list[list[Any]]) -> None:
    """Any sequence of frontier lists (in any order, not only antichains: the code compares
    lists) logs what the list code logged, in the same order."""
    log = CaptureLog(minimum=Product(0, 0))
    vertex = CaptureVertex(log)
    current = SimpleNamespace(frontier=[Product(0, 0)])
    vertex.frontier = lambda port=0: current  # type: ignore[method-assign]
    want: list[Any] = []
    seen = [Product(0, 0)]
    for now in [*moves, []]:
        current.frontier = now
        vertex.on_frontier()
        if now != seen:
            changes = reference(seen, now)
            if changes:
                want.append((PROGRESS, changes))
            seen = list(now)
    assert list(log) == want
    assert not log.live
