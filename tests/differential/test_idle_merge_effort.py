"""Idle merge effort (``Spine.exert``): an arrangement whose readers let go of its history
must shrink to its live records while its dataflow goes on with epochs of few or no changes,
not only once the dataflow completes.

The reproduction (h29): a source arrangement held at [0] by its trace handle runs 50 epochs
rewriting 200 keys each; the handle then advances to [50] (or closes) and the source goes on
with idle epochs. On the old code its spines kept 19800 updates for 200 live records until
the source completed. Checked on 1 and 2 workers and 2 simulated processes, the contents
against a recomputation from scratch. A hypothesis test drives one spine with random
changes, reader frontiers, acknowledgements and idle steps, and checks after every step that
the accumulations every reader may still ask for are exact, that no merge straddles what a
reader acknowledged, and that idle steps bring the spine down to its live records.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from random import Random
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.differential import trace as tr
from naiad.differential.trace import Spine, TraceHandle

KEYS, HELD_EPOCHS = 200, 50
LAYOUTS = [(1, 1), (2, 1), (1, 2)]  # (workers per process, processes)


def source(scope: naiad.Scope) -> Any:
    session, collection = Collection.new_input(scope)
    arranged = collection.arrange_by_key()
    arranged.trace  # noqa: B018  # a handle taken when building holds every time
    return session, arranged, arranged.stream.probe()


async def step(df: Any, epoch: int) -> None:
    """Advances every worker's input to ``epoch + 1`` and waits until every spine has sealed
    ``epoch`` (a probe downstream may pass an epoch before the arrangement's frontier step
    ran: the arrangement holds no capability then)."""
    for session, _, _ in df.results:
        session.advance_to(epoch + 1)
    for _, _, probe in df.results:
        await probe.wait(epoch)
    for _ in range(10_000):
        if all(int(a.spine.upper[0, 0]) > epoch for _, a, _ in df.results):
            return
        await asyncio.sleep(0)
    raise AssertionError(f"the arrangements did not seal epoch {epoch}")


def move_every_key(session: Any, epoch: int, keys: int) -> None:
    """Moves each of ``keys`` keys from value ``epoch - 1`` to value ``epoch`` (inserts them
    at epoch 0)."""
    for k in range(keys):
        session.insert((k, epoch))
        if epoch:
            session.remove((k, epoch - 1))


def contents(df: Any, at: int | None = None) -> Counter[Any]:
    """The arranged collection accumulated at epoch ``at`` (None: over every time held),
    read through a cursor of each worker's handle (one open at least as far back as ``at``)."""
    out: Counter[Any] = Counter()
    for _, arranged, _ in df.results:
        cursor = arranged.trace.cursor()
        for _ in cursor:
            for value, history in cursor.values():
                out[(cursor.key(), value)] += sum(d for t, d in history if at is None or t <= at)
    return +out


def expected(epoch: int, extra: int = 0) -> Counter[Any]:
    """The collection from scratch at ``epoch``: every key at the last held epoch's value,
    and the ``extra`` single inserts of the epochs after the idle ones."""
    live = Counter({(k, min(epoch, HELD_EPOCHS - 1)): 1 for k in range(KEYS)})
    live.update({(1000 + i, 0): 1 for i in range(extra)})
    return live


@pytest.mark.parametrize("how", ["advance", "close"])
@pytest.mark.parametrize("layout", LAYOUTS)
async def test_an_idle_arrangement_shrinks_once_its_reader_lets_go(
    layout: tuple[int, int], how: str
) -> None:
    """On the old code the spines held 19800 updates after the idle epochs (and 19810 after
    the single inserts), for 200 (210) live records."""
    workers, processes = layout
    idle = (tr.MERGE_OVERHEAD_ROWS + KEYS * (2 * HELD_EPOCHS - 1)) // tr.IDLE_MERGE_ROWS + 10
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df = rt.dataflow(source)
        first = df.results[0][0]
        for e in range(HELD_EPOCHS):
            move_every_key(first, e, KEYS)
            await step(df, e)
        spines = [a.spine for _, a, _ in df.results]
        assert sum(s.total() for s in spines) == KEYS * (2 * HELD_EPOCHS - 1)  # held at [0]
        assert contents(df, 10) == expected(10)
        for _, arranged, _ in df.results:
            if how == "advance":
                arranged.trace.set_logical_compaction([HELD_EPOCHS])
            else:
                arranged.trace.close()
        e = HELD_EPOCHS
        for e in range(HELD_EPOCHS, HELD_EPOCHS + idle):
            await step(df, e)
        assert sum(s.total() for s in spines) <= 2 * KEYS
        assert contents(df, e) == expected(e)
        for i in range(10):
            e += 1
            first.insert((1000 + i, 0))
            await step(df, e)
        assert sum(s.total() for s in spines) <= 2 * (KEYS + 10)
        assert contents(df, e) == expected(e, 10)
        for _, arranged, _ in df.results:
            arranged.trace.close()
        df.close_inputs()
        await asyncio.wait_for(df.finished(), 30)


# --- one spine, at random ----------------------------------------------------------------


def accumulate(spine: Spine, at: int) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for b in spine.batches:
        for k, v, t, d in zip(
            b.keys.tolist(), b.vals[0].tolist(), b.times[:, 0], b.diffs, strict=True
        ):
            if t <= at:
                out[(k, v)] += int(d)
    return Counter({r: c for r, c in out.items() if c})


def rewrite(spine: Spine, epoch: int, keys: np.ndarray, history: list[Any]) -> None:
    """Seals epoch ``epoch``: each of ``keys`` moves from value ``epoch - 1`` to ``epoch``."""
    n = len(keys)
    ks, vs = np.r_[keys, keys], np.repeat([epoch, epoch - 1], n)
    diffs = np.repeat([1, -1 if epoch else 0], n)
    history.extend(
        ((k, v), epoch, d) for k, v, d in zip(ks.tolist(), vs.tolist(), diffs.tolist(), strict=True)
    )
    spine.insert_updates(ks, (vs,), np.full((2 * n, 1), epoch), diffs, np.array([[epoch + 1]]))


def test_a_lone_batch_held_back_is_compacted_once_its_reader_lets_go() -> None:
    """A reader holds the history: idle effort merges the spine into one batch, compacted
    only to the reader's frontier; once the reader closes, that one batch alone is merged
    again, to the later ``since``, and shrinks to the live records."""
    spine, history = Spine(depth=0), []
    reader = spine.reader()
    for e in range(30):
        rewrite(spine, e, np.arange(100), history)
    for e in range(30, 80):
        spine.advance_upper(np.array([[e + 1]]))
    assert len(spine.batches) == 1 and spine.total() == 100 * 59  # held: nothing cancels
    reader.close()
    for e in range(80, 80 + (tr.MERGE_OVERHEAD_ROWS + spine.total()) // tr.IDLE_MERGE_ROWS + 1):
        spine.advance_upper(np.array([[e + 1]]))
    assert spine.total() == 100
    assert accumulate(spine, 10**6) == Counter({(k, 29): 1 for k in range(100)})


actions = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(0, 120)),  # an epoch rewriting that many keys
        st.tuples(st.just("idle"), st.integers(1, 40)),
        st.tuples(st.just("hold"), st.integers(0, 3)),  # the reader's frontier moves on by
        st.tuples(st.just("ack"), st.integers(0, 4)),  # the tracking reader reads on by
        st.tuples(st.just("close"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=30, deadline=None)
@given(actions, st.booleans(), st.randoms(use_true_random=False))
# the reader's frontier moved past the merged batch's since, not to the upper frontier
@example([("data", 100), ("data", 100), ("hold", 1), ("idle", 40)], False, Random(1))
# a lagging tracking reader: the batches it has not acknowledged stay apart
@example([("data", 120), ("ack", 1), *[("data", 20)] * 6, ("idle", 40)], True, Random(1))
def test_idle_merges_keep_every_readers_accumulations_and_shrink_the_spine(
    script: list[tuple[str, Any]], tracks: bool, rng: Any
) -> None:
    """A reader holding a frontier it moves at random, and perhaps a tracking reader (a
    join's: it follows the upper frontier and acknowledges the batches it read, lagging)."""
    spine = Spine(depth=0)
    reader = TraceHandle(spine)
    tracking = TraceHandle(spine) if tracks else None
    if tracking is not None:
        tracking.set_physical_compaction(-1)
    history: list[tuple[tuple[int, int], int, int]] = []  # (record, time, diff)
    epoch = 0

    def advance(n: int) -> None:
        nonlocal epoch
        if n:
            rewrite(spine, epoch, np.array(sorted(rng.sample(range(200), n))), history)
        else:
            spine.advance_upper(np.array([[epoch + 1]]))
        epoch += 1
        if tracking is not None:
            tracking.follow_frontier([epoch])

    def check() -> None:
        acked = None if tracking is None else tracking.acknowledged
        for b in spine.batches:  # no batch a reader has not acknowledged is merged
            assert acked is None or b.seq_hi <= acked or b.seq_lo == b.seq_hi, (b, acked)
        frontiers = [h.logical for h in (reader, tracking) if h is not None and not h.closed]
        least = min((int(f[0, 0]) for f in frontiers if f is not None), default=epoch)
        # times some reader may still ask for (its frontier may be ahead of the upper one)
        for at in {least, max(least, (least + epoch) // 2), max(least, epoch)}:
            want: Counter[Any] = Counter()
            for record, t, d in history:
                if t <= at:
                    want[record] += d
            assert accumulate(spine, at) == Counter({r: c for r, c in want.items() if c}), at

    for kind, arg in script:
        if kind == "data":
            advance(arg)
        elif kind == "idle":
            for _ in range(arg):
                advance(0)
        elif kind == "hold" and not reader.closed:
            reader.set_logical_compaction([int(reader.logical[0, 0]) + arg])  # type: ignore[index]
        elif kind == "ack" and tracking is not None:
            acked = tracking.acknowledged
            assert acked is not None
            tracking.set_physical_compaction(min(spine.next_seq - 1, acked + arg))
        elif kind == "close":
            reader.close()
        check()
    # the readers let go of everything: idle steps bring the spine down to its live records
    reader.close()
    idle = (tr.MERGE_OVERHEAD_ROWS + spine.total()) // tr.IDLE_MERGE_ROWS + 2
    for _ in range(idle):
        advance(0)
        if tracking is not None:
            tracking.set_physical_compaction(spine.next_seq - 1)
    check()
    live = accumulate(spine, epoch)
    waiting = spine._waiting(len(spine.batches))  # small batches waiting to merge, if any
    tail = sum(len(b) for b in spine.batches[len(spine.batches) - waiting :])
    assert spine.total() <= len(live) + 2 * tail
