"""A reduce inside a loop holds, after an incremental change, one later time per iteration of
a key's history (the joins of the changed time with it), and each round completes the least
of them: a round costs the times it completes. The reduce scanned every pending time for the
ready ones at each frontier step, and took the minimal elements of all of them, so a key
whose value changed at each of n iterations made the change cost n**2."""

from __future__ import annotations

import asyncio
import heapq
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, lattice
from naiad.differential.reduce import ReduceVertex
from naiad.progress.antichain import MutableAntichain
from tests.counting import Work


async def count_up_then_change(n: int) -> list[Any]:
    """Key ``a`` counts up by one per iteration to ``n`` (a min per iteration); then the start
    value changes, and the key's whole history of iterations is revisited."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            step = c.iterate(lambda cur: cur.map(lambda kv: (kv[0], min(kv[1] + 1, n))).min())
            out = step.consolidate()
            return session, out.changes(), out.probe()

        df = rt.dataflow(build)
        session, out, probe = df.results[0]
        session.update(("a", 0), 1)
        session.advance_to(1)
        await probe.wait(0)
        session.update(("a", 0), -1)
        session.update(("a", 1), 1)
        session.advance_to(2)
        await probe.wait(1)
        session.close()
        await df.finished()
        return out


@pytest.mark.timeout(60)
def test_a_round_costs_the_later_times_it_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    # in reduce's frontier steps: frontier tests, time rows, heap entries popped
    work = Work(monkeypatch)
    work.within(ReduceVertex, "on_frontier", "reduce")
    work.count(MutableAntichain, "less_equal")
    work.count(lattice, "time_row")
    work.count(heapq, "heappop")
    totals = {}
    for n in (100, 200):
        work.reset()
        out = asyncio.run(count_up_then_change(n))
        assert out == [(("a", n), 0, 1)]  # the same fixed point from either start
        totals[n] = work.total
    # twice the iterations, about twice the work (the old scans: 11,905 and 43,805)
    assert totals[100] <= 5_000 and totals[200] <= 2.5 * totals[100], totals
    assert totals[100] > 0, totals  # the counting reached reduce
