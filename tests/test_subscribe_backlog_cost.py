"""A subscribe (and so a collect) holding many buffered times pays, per frontier move, for the
times it reports, not for every time it holds. ``SubscribeVertex.on_frontier`` scanned every
buffered time at each move, so one input running n epochs ahead of another that then catches
up one epoch at a time cost n**2 / 2 reads (2,003,000 for n = 2,000; 16,000 epochs took 2.2 s
to drive, 0.55 s with the index). Checked against a plain-Python oracle too."""

from __future__ import annotations

import asyncio
import heapq
from typing import Any

import pytest

import naiad
from naiad.operators.subscribe import SubscribeVertex
from tests.counting import Work


class ReadTimes(dict[Any, Any]):
    """A subscribe's buffered times, counting the keys read by scanning it."""

    work: Work

    def __iter__(self) -> Any:
        for key in super().__iter__():
            self.work.counts["times read"] += 1
            yield key


async def caught_up(epochs: int, in_a_loop: bool) -> list[Any]:
    """Input ``ahead`` sends one record at each of ``epochs`` epochs and closes; ``behind``
    then advances one epoch at a time, each step awaited at the subscribe's own handle."""
    async with naiad.Runtime(1) as rt:

        def build(s: naiad.Scope) -> Any:
            (ahead, a), (behind, b) = s.new_input(), s.new_input()
            reported: list[Any] = []
            if in_a_loop:
                with s.iterative() as loop:
                    handle = (
                        a.enter(loop)
                        .concat(b.enter(loop))
                        .subscribe(lambda t, rs: reported.append((t, rs)))
                    )
            else:
                handle = a.concat(b).subscribe(lambda t, rs: reported.append((t, rs)))
            return ahead, behind, handle, reported

        ((ahead, behind, handle, reported),) = rt.dataflow(build).results
        for t in range(epochs):
            ahead.send([t])
            ahead.advance_to(t + 1)
        ahead.close()
        await asyncio.sleep(0.05)  # every record buffered
        for t in range(epochs):
            behind.advance_to(t + 1)
            await handle.wait(naiad.Product(t, 0) if in_a_loop else t)
        behind.close()
        await handle.wait()
    return reported


@pytest.mark.timeout(120)
@pytest.mark.parametrize("in_a_loop", [False, True])
def test_a_frontier_move_costs_the_times_it_reports(
    monkeypatch: pytest.MonkeyPatch, in_a_loop: bool
) -> None:
    work = Work(monkeypatch)
    work.count(heapq, "heappop")  # an index's reads
    init = SubscribeVertex.__init__

    def counted(self: SubscribeVertex, *args: Any) -> None:
        init(self, *args)
        self.buffered = ReadTimes()
        self.buffered.work = work

    monkeypatch.setattr(SubscribeVertex, "__init__", counted)
    cost = {}
    for n in (200, 400):
        work.reset()
        reported = asyncio.run(caught_up(n, in_a_loop))
        want = [(naiad.Product(t, 0) if in_a_loop else t, [t]) for t in range(n)]
        assert reported == want
        cost[n] = work.total
    # the old scan: n**2 / 2 reads and more (20,301 at n = 200; 201 with the index)
    assert cost[200] <= 2_000 and cost[400] <= 2.5 * cost[200], cost
    assert cost[200] > 0, cost  # the counting reached the vertex
