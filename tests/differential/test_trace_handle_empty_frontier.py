"""A reader that advances its trace handle to the empty frontier (``set_logical_compaction
([])``) promises to read at no time again: it must hold no history back, as a closed handle
holds none. On the old code it held all of it (the spine's compaction frontier, the meet of
its handles', became empty, and advancing times to the empty frontier changes none): 399
rows after 200 epochs of churn, against 7 with the handle closed. Importing through such a
handle would present that compacted history as exact, so it is refused by name."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, import_trace


def source(scope: naiad.Scope) -> Any:
    session, collection = Collection.new_input(scope)
    arranged = collection.arrange_by_key()
    return session, arranged, arranged.stream.probe()


async def churn(workers: int, release: str, epochs: int = 200) -> tuple[int, list[Any]]:
    """Rows held by the spines after ``epochs`` epochs that each replace one record, the
    handle taken at the start released by ``release`` (``close``, ``empty``: advanced to the
    empty frontier, ``keep``: held at time 0); and each worker's handle."""
    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(source)
        sessions = [session for session, _, _ in df.results]
        handles = [arranged.trace for _, arranged, _ in df.results]
        for h in handles:
            if release == "close":
                h.close()
            elif release == "empty":
                h.set_logical_compaction([])
        probe = df.results[0][2]
        for e in range(epochs):
            sessions[e % workers].insert((e % 3, e))
            if e:
                sessions[(e - 1) % workers].remove(((e - 1) % 3, e - 1))
            for s in sessions:
                s.advance_to(e + 1)
            await asyncio.wait_for(probe.wait(e), 30)
        rows = sum(arranged.spine.total() for _, arranged, _ in df.results)
        for s in sessions:
            s.close()
        await asyncio.wait_for(df.finished(), 30)
    return rows, handles


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_handle_at_the_empty_frontier_holds_no_history(workers: int) -> None:
    kept, _ = await churn(workers, "keep")
    closed, _ = await churn(workers, "close")
    emptied, _ = await churn(workers, "empty")
    assert kept == 399  # every update of every epoch: 200 inserts, 199 removals
    assert closed < 20  # one live record, and a few small batches waiting to be merged
    assert emptied == closed  # on the old code: 399, as if the handle were kept


async def test_a_handle_at_the_empty_frontier_reads_and_imports_nothing() -> None:
    async with naiad.Runtime(workers=1) as rt:
        df = rt.dataflow(source)
        session, arranged, probe = df.results[0]
        handle = arranged.trace
        handle.set_logical_compaction([])
        for e in range(20):
            session.insert((e % 3, e))
            session.advance_to(e + 1)
            await asyncio.wait_for(probe.wait(e), 30)
        with pytest.raises(ValueError, match=r"not in advance of the logical compaction frontier"):
            handle.cursor(at=19)
        for frontier in (None, [19]):
            with pytest.raises(
                ValueError, match=r"imp: the trace handle of 'arrange' is at the em"
            ):
                rt.dataflow(lambda s, f=frontier: import_trace(handle, s, name="imp", frontier=f))
        with pytest.raises(ValueError, match=r"cannot move the logical compaction frontier back"):
            handle.set_logical_compaction([19])
        # a handle taken now holds what is left (from the upper frontier on), read exactly
        fresh = arranged.handle()
        at = int(fresh.logical[0, 0])
        session.advance_to(at + 1)
        await asyncio.wait_for(fresh.wait(at), 30)
        cursor = fresh.cursor(at=at)
        records = {
            (cursor.key(), v): sum(d for _, d in h) for _ in cursor for v, h in cursor.values()
        }
        assert at == 20
        assert records == {(e % 3, e): 1 for e in range(20)}
        fresh.close()
        session.close()
        await asyncio.wait_for(df.finished(), 30)
