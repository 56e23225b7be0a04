"""An arrangement holding many epochs in flight (their updates arrived, the frontier has not
passed them) pays for a frontier step in proportion to the epochs it completes. It scanned
every pending time at each step (and took their minimal elements), so n epochs released one
at a time cost n**2: 2,000 epochs spent 2 million frontier tests and 2 million time rows."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, lattice
from naiad.differential.arrange import batch_updates
from naiad.progress.antichain import MutableAntichain
from tests.counting import Work


async def arrange_released_stepwise(epochs: int) -> Counter:
    """Input ``a`` sends every epoch at once; input ``b`` holds the frontier back and lets it
    pass one epoch at a time. The arrangement's final contents."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            sa, a = Collection.new_input(scope, "a")
            sb, b = Collection.new_input(scope, "b")
            arranged = a.concat(b).arrange_by_key()
            return sa, sb, arranged, arranged.stream.probe()

        df = rt.dataflow(build)
        sa, sb, arranged, probe = df.results[0]
        for e in range(epochs):
            sa.update((e % 7, e), 1)
            if e >= 7:
                sa.update((e % 7, e - 7), -1)
            sa.advance_to(e + 1)
        sa.close()
        for e in range(epochs):
            sb.advance_to(e + 1)
            await probe.wait(e)
        sb.close()
        await df.finished()
    contents: Counter = Counter()
    for batch in arranged.spine.batches:
        for record, _, diff in batch_updates(batch).to_records():
            contents[record] += diff
    return +contents


@pytest.mark.timeout(60)
def test_a_frontier_step_costs_the_epochs_it_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = Work(monkeypatch)
    counted.count(MutableAntichain, "less_equal", "tests")
    counted.count(lattice, "time_row", "rows")
    work = {}
    for n in (150, 300):
        counted.reset()
        contents = asyncio.run(arrange_released_stepwise(n))
        assert contents == Counter({(e % 7, e): 1 for e in range(n - 7, n)})
        work[n] = (counted.counts["tests"], counted.counts["rows"])
    # twice the epochs, about twice the work (the old scan: three to four times as much)
    assert work[300][0] <= 2.5 * work[150][0], work
    assert work[300][1] <= 2.5 * work[150][1], work
    assert min(work[150]) > 0, work  # the counting reached arrange
