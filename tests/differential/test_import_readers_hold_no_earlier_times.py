"""The readers built on an import (join, reduce, count_total) hold the source's trace with
handles that follow their input frontiers. Taken when the source was compacted to ``S``
already, such a handle must never go back before ``S``: on the old code it followed the
importing dataflow's frontier back to time 0, the source's compaction frontier with it, so a
handle taken on the source later claimed every time from 0 readable and its cursor read
wrong accumulations (0 records at time 5 where 6 were there), and merged batches claimed
``since [[0]]`` for rows compacted to 10. (A join's handle on the imported side follows the
frontier of its other input, the importing dataflow's own: the join cases without an import
frontier fail on the old code; the reduce and count_total ones, whose inputs start at the
source's upper frontier, and the imports as of a frontier, which present no earlier time,
guard the other readers.)"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, import_trace


def source(scope: naiad.Scope) -> Any:
    session, collection = Collection.new_input(scope)
    arranged = collection.arrange_by_key()
    return session, arranged, arranged.stream.probe()


def reader(kind: str, frontier: list[int] | None) -> Any:
    def build(scope: naiad.Scope) -> Any:
        session, keys = Collection.new_input(scope)
        imported = import_trace(held[scope.index], scope, frontier=frontier)
        if kind == "join":
            keys.join(imported).probe()
        elif kind == "reduce":
            imported.count(total=False).probe()
        else:
            imported.count_total().probe()
        return session

    held: list[Any] = []
    return build, held


def accumulated(updates: list[tuple[Any, int]], t: int) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for record, at in updates:
        if at <= t:
            out[record] += 1
    return out


def read(handles: list[Any], t: int) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for handle in handles:
        cursor = handle.cursor(at=t)
        for _ in cursor:
            for value, history in cursor.values():
                out[(cursor.key(), value)] += sum(d for _, d in history)
    return +out


@pytest.mark.parametrize("frontier", [None, [12]])
@pytest.mark.parametrize("kind", ["join", "reduce", "count_total"])
@pytest.mark.parametrize("workers", [1, 2])
async def test_a_handle_taken_after_an_import_reads_only_what_is_exact(
    workers: int, kind: str, frontier: list[int] | None
) -> None:
    updates: list[tuple[Any, int]] = []
    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(source)
        sessions = [s for s, _, _ in df.results]
        arranged = [a for _, a, _ in df.results]
        probe = df.results[0][2]
        handles = [a.trace for a in arranged]

        async def feed(epochs: range) -> None:
            for e in epochs:
                sessions[e % workers].insert((e % 3, e))
                updates.append(((e % 3, e), e))
                for s in sessions:
                    s.advance_to(e + 1)
                await asyncio.wait_for(probe.wait(e), 30)

        await feed(range(10))
        for h in handles:
            h.set_logical_compaction([10])
        await feed(range(10, 30))  # merges compact the history before 10 to 10
        build, held = reader(kind, frontier)
        held.extend(handles)
        query = rt.dataflow(build)  # its readers' inputs start at time 0
        for h in handles:
            h.close()  # only the query's readers hold the source now
        await feed(range(30, 40))
        late = [a.handle() for a in arranged]
        since = [int(h.logical[0, 0]) for h in late]
        assert min(since) >= 10  # on the old code: 0
        for t in (5, 9):
            with pytest.raises(ValueError, match="not in advance of the logical compaction"):
                late[0].cursor(at=t)
        for t in range(max(since), 40):
            assert read(late, t) == accumulated(updates, t), f"time {t}"
        for h in late:
            h.close()
        query.close_inputs()
        for s in sessions:
            s.close()
        await asyncio.wait_for(df.finished(), 30)
        await asyncio.wait_for(query.finished(), 30)
