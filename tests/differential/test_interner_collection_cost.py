"""An interner collection costs the codes held, not the rows that hold them.

A collection is due once the table has doubled since the last one (by at least
``min_growth`` values), so that its pass is paid for by the values interned since. But the
pass read every row of every held batch: a large arrangement whose column has a few distinct
strings (a country per user) made each collection cost its rows, and each fresh value
interned elsewhere (a session id) pay rows / min_growth of that pass: O(state) per update.
A batch never changes, so it now lists its distinct codes, found once.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from naiad.differential.updates import INTERNER, Interner

COUNTRIES = 10


async def churn_beside(n: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, set[Any]]:
    """Holds ``n`` rows of (user, country) arranged; then a fresh string per epoch goes
    through a ``distinct`` and leaves the next epoch, with collections forced. Returns the
    collections run, the code-column entries they read, and the countries read back."""
    read = [0, 0]
    collect = Interner._collect

    def counted(self: Interner) -> int:
        read[0] += 1
        for ref in self._holders:
            holder = ref()
            if holder is not None:
                read[1] += sum(len(c) for c in holder.interned_columns())
        return collect(self)

    async with naiad.Runtime() as rt:

        def build(scope: Any) -> Any:
            users_in, users = Collection.new_input(scope, "users")
            fresh_in, fresh = Collection.new_input(scope, "fresh")
            held = users.arrange_by_key("users")
            return users_in, fresh_in, fresh.distinct().probe(), held.trace

        df = rt.dataflow(build)
        users_in, fresh_in, probe, trace = df.results[0]
        countries = np.array([f"country{i % COUNTRIES}" for i in range(n)], dtype=object)
        users_in.send_columns((np.arange(n), countries))
        users_in.close()
        fresh_in.advance_to(1)
        await probe.wait(0)
        monkeypatch.setattr(Interner, "_collect", counted)
        for epoch in range(1, 9):
            fresh_in.insert(f"session-{epoch}")
            if epoch > 1:
                fresh_in.remove(f"session-{epoch - 1}")
            INTERNER.collect_soon()  # at the next safe point
            fresh_in.advance_to(epoch + 1)
            await probe.wait(epoch)
        monkeypatch.undo()
        fresh_in.close()
        await df.finished()
        cursor = trace.cursor()
        seen = {value for _ in cursor for value, _ in cursor.values()}
        trace.close()
    return read[0], read[1], seen


def test_a_collection_reads_the_distinct_codes_of_a_large_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.collect()  # batches of earlier tests' dataflows, in reference cycles
    results = {n: asyncio.run(churn_beside(n, monkeypatch)) for n in (20_000, 200_000)}
    for collections, _, seen in results.values():
        assert collections >= 8
        # the arrangement's values survive every collection, decoded as they were
        assert seen == {f"country{i}" for i in range(COUNTRIES)}
    per_collection = {n: read / collections for n, (collections, read, _) in results.items()}
    # ten times the rows, the same distinct codes: the old pass read every row (200,000
    # entries per collection at the larger size)
    assert per_collection[200_000] < 1_000, per_collection
    assert per_collection[200_000] <= per_collection[20_000] + 100, per_collection
