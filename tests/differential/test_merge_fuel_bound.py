"""The merge effort a spine banks (``Spine.fuel``) stays bounded on a long run.

Every batch a spine receives credits it ``IDLE_MERGE_ROWS`` rows of merge effort
(``Spine.exert``), and "fuel beyond the next merge's cost is not kept". But while nothing
could merge (a spine holding only its small waiting tail, as every spine of a small live
collection does, or batches a reader has not acknowledged) the credit was banked anyway:
128 rows more per epoch for ever (64,000 after 500 epochs of a count over 8 live records,
256,000 after 2,000; 128 per round in a loop), against a documented bound of one merge's cost.
Now the fuel is cut to what merging every batch held would cost: the next merge covers no
more, and batches that come later bring their own effort.

Sizes are compared after N and 4N epochs (or loop rounds); contents against recomputation.
"""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from naiad.differential.trace import IDLE_MERGE_ROWS, MERGE_OVERHEAD_ROWS, Spine

LIVE = 8


def bound(spine: Spine) -> int:
    """The most fuel a spine may hold after a step: one merge of everything it holds, and the
    effort of the step that has not found a merge yet."""
    return MERGE_OVERHEAD_ROWS + spine.total() + IDLE_MERGE_ROWS


def test_a_spine_replacing_one_record_per_epoch_banks_bounded_fuel() -> None:
    spine = Spine(depth=0)
    handle = spine.reader()
    fuel = {}
    for epoch in range(400):
        keys = np.array([0, 0] if epoch else [0])
        vals = np.array([epoch, epoch - 1] if epoch else [0])
        diffs = np.array([1, -1] if epoch else [1])
        spine.insert_updates(
            keys, (vals,), np.full((len(keys), 1), epoch), diffs, upper=np.array([[epoch + 1]])
        )
        handle.set_logical_compaction([epoch])
        if epoch + 1 in (100, 400):
            fuel[epoch + 1] = spine.fuel
            assert spine.fuel <= bound(spine), (epoch, spine.fuel, spine.total())
            cursor = handle.cursor(at=epoch)
            held = Counter({v: sum(d for _, d in ds) for _ in cursor for v, ds in cursor.values()})
            assert +held == Counter({epoch: 1})
    assert fuel[400] <= fuel[100]  # the old code: 51,200 after 400 epochs, 12,800 after 100


async def run_counts(workers: int, processes: int, epochs: int) -> tuple[int, int]:
    """A count, a distinct and a join over a collection of LIVE records, one replaced per
    epoch; returns the most fuel and the most rows any of its spines holds at the end."""
    async with naiad.Runtime(workers=workers, processes=processes) as rt:

        def build(scope: naiad.Scope) -> Any:
            session, c = Collection.new_input(scope)
            keyed = c.map(lambda r: (r % 3, r))
            counts = keyed.map(lambda kv: kv[0]).count(name="fuel.count", total=False)
            joined = keyed.join(keyed.map(lambda kv: (kv[0], -kv[1])), name="fuel.join")
            out = counts.concat(joined.map(lambda t: (t[0], t[1] + t[2])).distinct(total=False))
            return session, counts.view(history=False), out.probe()

        df = rt.dataflow(build)
        for epoch in range(epochs):
            for worker, (session, _, _) in enumerate(df.results):
                if worker == 0:
                    session.insert(epoch)
                    if epoch >= LIVE:
                        session.remove(epoch - LIVE)
                session.advance_to(epoch + 1)
            for _, view, probe in df.results:
                await probe.wait(epoch)
                await view.wait(epoch)
        live = range(max(0, epochs - LIVE), epochs)
        expected = Counter(r % 3 for r in live)
        assert df.results[0][1].at(epochs - 1) == {(k, n): 1 for k, n in expected.items()}
        gc.collect()
        spines = [s for s in gc.get_objects() if isinstance(s, Spine) and s.upper.shape[1]]
        spines = [s for s in spines if s.name.startswith("fuel.") and s.worker is not None]
        assert spines
        for spine in spines:
            assert spine.fuel <= bound(spine), (spine.name, spine.fuel, spine.total())
        result = max(s.fuel for s in spines), max(s.total() for s in spines)
        for session, _, _ in df.results:
            session.close()
        await df.finished()
    return result


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
async def test_the_spines_of_a_long_run_bank_bounded_fuel(workers: int, processes: int) -> None:
    fuel_n, rows_n = await run_counts(workers, processes, 60)
    fuel_4n, rows_4n = await run_counts(workers, processes, 240)
    assert rows_4n <= rows_n + 2 * LIVE  # the data stays bounded ...
    assert fuel_4n <= MERGE_OVERHEAD_ROWS + rows_4n + IDLE_MERGE_ROWS  # ... and so does fuel
    assert fuel_4n <= fuel_n + 2 * LIVE
