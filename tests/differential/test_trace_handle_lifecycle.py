"""A service keeps one arranged source for long and installs queries that import it: the
trace handle it imports through must hold the history it promises. A closed handle holds
nothing (the spine compacts past its frontier), so reading or importing through it would
present compacted times as exact ones; it is refused by name instead."""

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


async def compacted_source(rt: naiad.Runtime, epochs: int) -> Any:
    """A source whose own handle was closed at once: with nobody holding it, its spine
    compacts as epochs complete (200 keys per epoch, enough for merges to happen)."""
    df = rt.dataflow(source)
    session, arranged, probe = df.results[0]
    arranged.trace.close()
    for e in range(epochs):
        for k in range(200):
            session.insert((k, e))
        session.advance_to(e + 1)
        await probe.wait(e)
    # the closed handle still claims the minimum time; the spine moved on
    assert int(arranged.spine.since()[0, 0]) > 2
    return df


@pytest.mark.parametrize("frontier", [None, [2]])
async def test_a_closed_handle_is_neither_imported_nor_read(frontier: Any) -> None:
    """On the old code the import was accepted and read no record at epoch 5 (the truth:
    1200), every update presented at the later times the spine had compacted it to."""
    async with naiad.Runtime(workers=1) as rt:
        df = await compacted_source(rt, 12)
        session, arranged, _ = df.results[0]
        closed = arranged._trace
        with pytest.raises(ValueError, match=r"imp: the trace handle of 'arrange' is closed"):
            rt.dataflow(lambda s: import_trace(closed, s, name="imp", frontier=frontier))
        with pytest.raises(ValueError, match=r"cursor: the trace handle .* is closed"):
            closed.cursor()
        with pytest.raises(ValueError, match=r"set_logical_compaction: .* is closed"):
            closed.set_logical_compaction([12])

        # a handle taken now holds what is left (from the spine's compaction frontier on),
        # and an import through it accumulates exactly there
        fresh = arranged.trace
        assert fresh is not closed and not fresh.closed
        at = int(fresh.logical[0, 0])
        query = rt.dataflow(lambda s: import_trace(fresh, s).as_collection().changes())
        await asyncio.sleep(0)
        query.close_inputs()
        await asyncio.wait_for(query.finished(), 30)
        fresh.close()
        changes = query.results[0]
        assert at == 12
        assert sum(d for _, t, d in changes if t <= at) == 12 * 200
        session.close()
