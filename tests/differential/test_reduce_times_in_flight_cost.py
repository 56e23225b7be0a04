"""A reduce that finds many epochs ready at once (they were all in flight when the frontier
passed them) evaluates them in time order at a cost proportional to their number. It was
quadratic twice over: every evaluation scanned every pending time for the least ready one,
and every evaluation of a key made every later time of the key's history pending again
(each of them pending already, as the time of an input update). 1,000 epochs of one key took
10 s instead of 2.5 s, and four times longer for every doubling."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from naiad.differential.reduce import ReduceVertex
from naiad.progress.antichain import MutableAntichain
from tests.counting import Work


async def counts_in_flight(epochs: int, keys: int) -> list[Any]:
    """Every epoch inserts the record ``e % keys`` once more, all sent before the dataflow
    runs; the counts' changes."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            return session, c.count(total=False).changes()  # the generic reduce, measured

        df = rt.dataflow(build)
        session, out = df.results[0]
        for e in range(epochs):
            session.send_columns((np.array([e % keys]),))
            session.advance_to(e + 1)
        session.close()
        await df.finished()
        return out


def oracle(epochs: int, keys: int) -> list[Any]:
    out = []
    for e in range(epochs):
        k, n = e % keys, e // keys + 1  # the record's count after epoch e
        if n > 1:
            out.append(((k, n - 1), e, -1))
        out.append(((k, n), e, 1))
    return out


@pytest.mark.parametrize("keys", [1, 3])
def test_work_per_epoch_in_flight_stays_flat(keys: int, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = Work(monkeypatch)
    # (group, time) pairs made pending, and frontier tests
    counted.count(ReduceVertex, "_add_pending", "pending", weight=lambda _, g, times: len(times))
    counted.count(MutableAntichain, "less_equal", "tests")
    work = {}
    for n in (150, 300):
        counted.reset()
        out = asyncio.run(counts_in_flight(n, keys))
        assert sorted(out) == sorted(oracle(n, keys))
        work[n] = (counted.counts["pending"], counted.counts["tests"])
    # each (key, epoch) of the input is made pending once, not once per earlier epoch
    assert work[150][0] == 150 and work[300][0] == 300, work
    # twice the epochs, about twice the frontier tests (the old scan: four times as many)
    assert work[300][1] <= 2.5 * work[150][1], work
