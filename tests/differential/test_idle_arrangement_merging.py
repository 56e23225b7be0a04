"""Idle arrangements keep merging until their history is compacted (``Spine.wake``,
``Spine.idle_step``, a vertex's ``activate_when_idle``).

Merge effort used to come only from the batches a spine receives. After a burst of epochs
whose readers' compaction frontiers lagged, an arrangement whose input stayed open but quiet
kept that history until more epochs came or the input closed; and a reader letting go
later (``set_logical_compaction``, ``close``) gave it no effort at all. On the old code,
after 300 epochs rewriting 10 keys (on 1 and 2 workers, and 2 processes alike): the
arrangement of a join's left side held 5990 rows for 10 live ones, a ``from_upserts``
arrangement read by ``count`` 5990, and a reduce's output 5990, however long the runtime
then waited; now 10 each, within 6 to 13 idle activations.

Counted, never timed: rows held after a bounded number of event-loop turns, and the idle
activations of the workers (an idle runtime must stop asking, or it never sleeps). Answers
are checked against a recomputation from scratch: the join's and count's accumulated
output, and every arrangement read through a cursor.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import naiad
from naiad.differential import Collection
from naiad.differential.trace import ACTIVATION_MERGE_ROWS, MERGE_OVERHEAD_ROWS

KEYS, EPOCHS = 10, 300
HISTORY = 2 * KEYS * EPOCHS - KEYS  # rows of a spine that compacts nothing
LAYOUTS = [(1, 1), (2, 1), (1, 2)]  # (workers per process, processes)
# event-loop turns to wait: a spine compacts within (rows + overhead) / effort idle
# activations, one per idle round, one round per turn
TURNS = 2 * (HISTORY + MERGE_OVERHEAD_ROWS) // ACTIVATION_MERGE_ROWS + 50


def value(key: int, epoch: int) -> int:
    return 1000 * epoch + key


def idle_activations(rt: naiad.Runtime) -> int:
    return sum(w.idle_activations for p in rt.processes for w in p.workers)


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def accumulated(changes: list[tuple[Any, Any, int]]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for record, _, diff in changes:
        out[record] += diff
    return +out


def arranged_now(arranged: list[Any]) -> Counter[Any]:
    """Every worker's arrangement accumulated over all times, read through a new handle
    (taken now: it holds nothing back), closed again."""
    out: Counter[Any] = Counter()
    for a in arranged:
        handle = a.handle()
        cursor = handle.cursor()
        for _ in cursor:
            for v, history in cursor.values():
                out[(cursor.key(), v)] += sum(d for _, d in history)
        handle.close()
    return +out


# --- the three owners of spines, each read by an operator that lags ------------------------


def join_build(scope: naiad.Scope) -> dict[str, Any]:
    """An arrangement by key read by a join (its handle follows the other side's frontier)."""
    left_in, left = Collection.new_input(scope)
    right_in, right = Collection.new_input(scope)
    arranged = left.arrange_by_key()
    joined = arranged.join(right.arrange_by_key())
    return {
        "feed": [left_in, right_in],
        "arranged": arranged,
        "changes": joined.changes(),
        "probe": joined.probe(),
    }


def rewrite(session: Any, epoch: int) -> None:
    """Every key's value moves on to the epoch's."""
    for k in range(KEYS):
        session.insert((k, value(k, epoch)))
        if epoch:
            session.remove((k, value(k, epoch - 1)))


def latest() -> Counter[Any]:
    """The rewritten collection after the last epoch."""
    return Counter({(k, value(k, EPOCHS - 1)): 1 for k in range(KEYS)})


def join_epoch(feed: list[Any], epoch: int) -> None:
    left, right = feed
    rewrite(left, epoch)
    if epoch == 0:
        for k in range(KEYS):
            right.insert((k, "r"))


def join_expected() -> Counter[Any]:
    return Counter({(k, value(k, EPOCHS - 1), "r"): 1 for k in range(KEYS)})


def upsert_build(scope: naiad.Scope) -> dict[str, Any]:
    """A ``from_upserts`` arrangement read by ``count`` (a reduce: its handle follows the
    count's input frontier)."""
    upserts, stream = scope.new_input()
    arranged = Collection.from_upserts(stream)
    counted = arranged.count()
    return {
        "feed": [upserts],
        "arranged": arranged,
        "changes": counted.changes(),
        "probe": counted.probe(),
    }


def upsert_epoch(feed: list[Any], epoch: int) -> None:
    feed[0].send([(k, value(k, epoch)) for k in range(KEYS)])


def upsert_expected() -> Counter[Any]:
    return Counter({(k, value(k, EPOCHS - 1), 1): 1 for k in range(KEYS)})


def reduce_build(scope: naiad.Scope) -> dict[str, Any]:
    """A reduce's output spine (its own handle follows the reduce's input frontier)."""
    session, collection = Collection.new_input(scope)
    reduced = collection.arrange_by_key().reduce(lambda k, vals: [(max(v for v, _ in vals), 1)])
    out = reduced.as_collection()
    return {"feed": [session], "arranged": reduced, "changes": out.changes(), "probe": out.probe()}


def reduce_epoch(feed: list[Any], epoch: int) -> None:
    rewrite(feed[0], epoch)


Scenario = tuple[Callable[[naiad.Scope], dict[str, Any]], Callable[..., None], Callable[[], Any]]
SCENARIOS: dict[str, Scenario] = {  # build, one epoch's input, the answers from scratch
    "join": (join_build, join_epoch, join_expected),
    "upsert_count": (upsert_build, upsert_epoch, upsert_expected),
    "reduce_output": (reduce_build, reduce_epoch, latest),
}


async def burst(df: Any, epoch_of: Callable[..., None]) -> None:
    """EPOCHS epochs sent at once from worker 0's inputs, every worker's inputs advanced,
    then a wait until every output has them all; the inputs stay open."""
    first = df.results[0]["feed"]
    for e in range(EPOCHS):
        epoch_of(first, e)
        for r in df.results:
            for session in r["feed"]:
                session.advance_to(e + 1)
    for r in df.results:
        await r["probe"].wait(EPOCHS - 1)


def held(df: Any) -> int:
    return sum(r["arranged"].spine.total() for r in df.results)


def answers(df: Any) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for r in df.results:
        out.update(accumulated(r["changes"]))
    return +out


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("layout", LAYOUTS)
async def test_a_quiet_arrangement_compacts_to_its_live_rows(
    layout: tuple[int, int], scenario: str
) -> None:
    """On the old code the spines held 5990 rows for 10 live ones after the turns waited."""
    build, epoch_of, expected = SCENARIOS[scenario]
    workers, processes = layout
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df = rt.dataflow(build)
        await burst(df, epoch_of)
        await turns(TURNS)
        assert held(df) <= 2 * KEYS
        assert answers(df) == expected()
        assert arranged_now([r["arranged"] for r in df.results]) == latest()
        # settled: an idle runtime stops asking for activations
        settled = idle_activations(rt)
        await turns(500)
        assert idle_activations(rt) == settled
        # and the dataflow completes as ever once its inputs close
        for r in df.results:
            for session in r["feed"]:
                session.close()
        await asyncio.wait_for(df.finished(), 30)
        assert answers(df) == expected()


async def test_idle_activations_are_bounded_by_the_work() -> None:
    """The activations an idle runtime performs are about the merge work there was (rows /
    effort per activation), not the turns waited: nothing to merge, none at all."""
    async with naiad.Runtime(1, transport="inproc") as rt:
        df = rt.dataflow(join_build)
        await turns(200)
        assert idle_activations(rt) <= 2  # nothing arrived: nothing to merge
        await burst(df, join_epoch)
        before = idle_activations(rt)
        await turns(TURNS)
        spent = idle_activations(rt) - before
        # two spines (the join's sides), the left one HISTORY rows, each merge possibly
        # paid again as the readers catch up
        assert spent <= 4 * (HISTORY + MERGE_OVERHEAD_ROWS) // ACTIVATION_MERGE_ROWS + 10
        settled = idle_activations(rt)
        await turns(1000)
        assert idle_activations(rt) == settled
        for r in df.results:
            for session in r["feed"]:
                session.close()
        await asyncio.wait_for(df.finished(), 30)


@pytest.mark.parametrize("how", ["advance", "close"])
async def test_a_reader_letting_go_later_wakes_the_arrangement(how: str) -> None:
    """A trace handle taken when building holds the whole history (read at an early time,
    exact); once it advances or closes, with no epoch after, the history goes. On the old
    code the spine kept its 5990 rows."""

    def build(scope: naiad.Scope) -> dict[str, Any]:
        parts = join_build(scope)
        parts["trace"] = parts["arranged"].trace  # taken when building: holds time 0 on
        return parts

    async with naiad.Runtime(2, transport="inproc") as rt:
        df = rt.dataflow(build)
        await burst(df, join_epoch)
        await turns(TURNS)
        assert held(df) == HISTORY  # the handle holds every time: nothing may go
        at = 7
        early: Counter[Any] = Counter()
        for r in df.results:
            await r["trace"].wait(at)
            cursor = r["trace"].cursor(at=at)
            for _ in cursor:
                for v, history in cursor.values():
                    early[(cursor.key(), v)] += sum(d for _, d in history)
        assert +early == Counter({(k, value(k, at)): 1 for k in range(KEYS)})
        settled = idle_activations(rt)
        await turns(300)
        assert idle_activations(rt) == settled  # held back: nothing to do, no activation
        for r in df.results:
            if how == "advance":
                r["trace"].set_logical_compaction([EPOCHS])
            else:
                r["trace"].close()
        await turns(TURNS)
        assert held(df) <= 2 * KEYS
        assert arranged_now([r["arranged"] for r in df.results]) == latest()
        for r in df.results:
            if how == "advance":
                r["trace"].close()
            for session in r["feed"]:
                session.close()
        await asyncio.wait_for(df.finished(), 30)
        assert answers(df) == join_expected()
