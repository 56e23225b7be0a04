"""The process-wide interner forgets the values nobody holds: under a churn of fresh strings
with a bounded live collection its table stays bounded, and every epoch's output equals the
reference recomputed from scratch, with collections at the workers' safe points (forced at
random moments by hypothesis), on 1 and 2 workers and 2 simulated processes."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, import_trace
from naiad.differential.updates import INTERNER, Interner
from tests.differential import reference as ref

WINDOW = 3  # epochs a record lives
FRESH = 8  # new keys per epoch


@pytest.fixture(autouse=True)
def small_growth() -> Iterator[None]:
    """Collections after every 40 new values (1024 by default), from a clean table."""
    saved = INTERNER.min_growth
    INTERNER.min_growth = 40
    gc.collect()  # batches of earlier tests' dataflows, in reference cycles
    INTERNER.collect()
    try:
        yield
    finally:
        INTERNER.min_growth = saved


def epoch_records(e: int) -> list[tuple[str, str]]:
    """Epoch ``e``'s fresh records: keys never seen before, with fresh string values."""
    return [(f"s{e}.{i}", f"v{e}.{i}") for i in range(FRESH)]


def live_input(e: int) -> Counter:
    """The input accumulated up to epoch ``e``: the records of the last ``WINDOW`` epochs."""
    return Counter({r: 1 for d in range(max(0, e - WINDOW + 1), e + 1) for r in epoch_records(d)})


def reach(edges: Counter, roots: set[Any]) -> Counter:
    seen, todo = set(roots), list(roots)
    while todo:
        node = todo.pop()
        for (a, b), c in edges.items():
            if a == node and c > 0 and b not in seen:
                seen.add(b)
                todo.append(b)
    return Counter(dict.fromkeys(seen, 1))


def chain_edges(live: Counter) -> Counter:
    """Each record ``(k, v)`` as the edges ``k -> v -> k!``: a path of fresh strings."""
    out: Counter = Counter()
    for (k, v), c in live.items():
        out[(k, v)] += c
        out[(v, k + "!")] += c
    return out


def concatenated(key: Any, values: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [("+".join(sorted(str(v) for v, c in values if c > 0)), 1)]


# per operator: (build from the input, the reference from the live input)
Op = tuple[Callable[[Collection], Collection], Callable[[Counter], Counter]]
OPS: dict[str, Op] = {
    "join": (
        lambda c: c.join(c.map(lambda r: (r[0], r[1] + "#"))),
        lambda a: ref.join(a, Counter({(k, v + "#"): n for (k, v), n in a.items()})),
    ),
    "reduce": (lambda c: c.reduce(concatenated), lambda a: ref.reduce(a, concatenated)),
    "count": (
        lambda c: c.map(lambda r: r[1]).count(),
        lambda a: ref.count(Counter(v for (_, v) in a.elements())),
    ),
    "distinct": (
        lambda c: c.map(lambda r: r[1]).distinct(),
        lambda a: ref.distinct(Counter(v for (_, v) in a.elements())),
    ),
    "min": (
        lambda c: c.map(lambda r: (len(r[0]), r[1])).min(),
        lambda a: ref.extreme(Counter((len(k), v) for (k, v) in a.elements()), False),
    ),
    "max": (
        lambda c: c.map(lambda r: (r[0][:2], r[0])).max(),
        lambda a: ref.extreme(Counter((k[:2], k) for (k, _) in a.elements()), True),
    ),
    "iterate": (
        # reachability over an outer arrangement entered into the loop
        lambda c: _reach_in_loop(c),
        lambda a: reach(chain_edges(a), {k for (k, _) in a}),
    ),
}


def _reach_in_loop(c: Collection) -> Collection:
    edges = c.concat(c.map(lambda r: (r[1], r[0] + "!"))).arrange_by_key()
    roots = c.map(lambda r: r[0])

    def step(nodes: Collection) -> Collection:
        hops = nodes.join(edges.enter(nodes.scope)).map(lambda r: r[1])
        return roots.enter(nodes.scope).concat(hops).distinct()

    return roots.iterate(step)


async def churn(
    op: str, epochs: int, workers: int = 1, processes: int = 1, forced: frozenset[int] = frozenset()
) -> list[int]:
    """Drives ``epochs`` epochs of churn through ``OPS[op]``, checking every epoch's output
    with the reference; the interner's size at every epoch. ``forced``: records (numbered
    from 0 in input order) whose passage through a ``map`` makes a collection due, so that
    it runs at the next safe point, with batches in flight."""
    build_op, reference = OPS[op]
    seen = [0]

    def note(r: Any) -> Any:
        if seen[0] in forced:
            INTERNER.collect_soon()
        seen[0] += 1
        return r

    sizes = []
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            return session, build_op(c.map(note)).view(history=False)

        df = rt.dataflow(build)
        sessions = [s for s, _ in df.results]
        view = df.results[0][1]
        for e in range(epochs):
            for r in epoch_records(e):
                sessions[hash(r) % len(sessions)].insert(r)
            if e >= WINDOW:
                for r in epoch_records(e - WINDOW):
                    sessions[0].remove(r)
            for s in sessions:
                s.advance_to(e + 1)
            await asyncio.wait_for(view.wait(e), 20)
            assert Counter(view.at(e)) == reference(live_input(e)), (op, e)
            sizes.append(len(INTERNER))
        for s in sessions:
            s.close()
        await df.finished()
    return sizes


@pytest.mark.parametrize("op", sorted(OPS))
async def test_under_churn_the_interner_stays_bounded(op: str) -> None:
    """150 epochs of 8 fresh keys with fresh values (some 2,400 to 4,800 new strings, with
    the operators' own): the table holds what is alive and at most about as much again."""
    before, slots = len(INTERNER), len(INTERNER.values)
    sizes = await churn(op, epochs=150)
    grown = [s - before for s in sizes]
    assert max(grown) <= 400, grown[::10]
    assert max(grown[-30:]) <= max(grown[:60]) + 40, grown[::10]  # not growing
    # its codes reused, not extended (codes freed by earlier tests count as free here: the
    # table's length less its values alive before was 3,400 after a test of threads)
    assert len(INTERNER.values) - slots <= 800


async def test_a_shared_arrangement_imported_by_another_dataflow() -> None:
    """Dataflow 1 arranges the churned input; dataflow 2 imports it and joins its own churn
    against it: both keep the interner bounded, and the join agrees with the reference."""
    before = len(INTERNER)
    sizes = []
    async with naiad.Runtime(2) as rt:

        def first(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            return session, c.arrange_by_key()

        df1 = rt.dataflow(first)

        def second(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            imported = import_trace(df1.result(scope.index)[1].trace, scope)
            return session, c.join(imported).view(history=False)

        df2 = rt.dataflow(second)
        for _, arranged in df1.results:
            arranged.trace.close()  # the import holds its own
        view = df2.results[0][1]
        for e in range(120):
            for r in epoch_records(e):
                df1.results[0][0].insert(r)
                df2.results[0][0].insert((r[0], r[1] + "*"))
            if e >= WINDOW:
                for r in epoch_records(e - WINDOW):
                    df1.results[0][0].remove(r)
                for r in epoch_records(e - WINDOW + 1):  # a window one epoch shorter
                    df2.results[0][0].remove((r[0], r[1] + "*"))
            for (s1, _), (s2, _) in zip(df1.results, df2.results, strict=True):
                s1.advance_to(e + 1)
                s2.advance_to(e + 1)
            await asyncio.wait_for(view.wait(e), 20)
            mine = Counter({(k, v + "*"): n for (k, v), n in live_input(e).items()})
            if e >= WINDOW:
                for k, v in epoch_records(e - WINDOW + 1):
                    del mine[(k, v + "*")]
            assert Counter(view.at(e)) == ref.join(mine, live_input(e)), e
            sizes.append(len(INTERNER) - before)
        for (s1, _), (s2, _) in zip(df1.results, df2.results, strict=True):
            s1.close()
            s2.close()
        await df1.finished()
        await df2.finished()
    assert max(sizes) <= 400, sizes[::10]  # of some 3,800 strings interned


@settings(max_examples=12, deadline=None)
@given(
    op=st.sampled_from(sorted(OPS)),
    layout=st.sampled_from([(1, 1), (2, 1), (2, 2)]),
    forced=st.frozensets(st.integers(0, 25 * FRESH * 2), max_size=30),
)
def test_collections_at_random_moments_change_no_answer(
    op: str, layout: tuple[int, int], forced: frozenset[int]
) -> None:
    """Collections forced at random moments (a record passing through a map makes one due,
    so it runs at the next safe point, with batches in flight and reduces pending)."""
    ref.watchdog(churn(op, 25, *layout, forced=forced))


def test_collect_refuses_to_run_inside_a_callback() -> None:
    def build(scope: Any) -> Any:
        def collect(r: Any) -> Any:
            INTERNER.collect()
            return r

        return Collection.from_epochs(scope, [[("a", 1)]]).map(collect).changes()

    with pytest.raises(RuntimeError, match=r"Interner\.collect: not at a safe point"):
        naiad.run(build)


def test_freed_codes_are_taken_by_new_values() -> None:
    interner = Interner()

    class Holder:
        def __init__(self, codes: np.ndarray) -> None:
            self.codes = codes

        def interned_columns(self) -> list[np.ndarray]:
            return [self.codes]

    kept = Holder(interner.encode(np.array(["a", "b"], dtype=object)))
    interner.hold(kept)
    interner.encode(np.array(["c", "d"], dtype=object))
    assert interner.collect() == 2 and len(interner) == 2
    again = interner.encode(np.array(["e", 2.0, 2], dtype=object))
    assert sorted(again.tolist()) == [2, 2, 3] and len(interner.values) == 4
    assert interner.decode(kept.codes).tolist() == ["a", "b"]
    assert interner.decode(again).tolist() == ["e", 2, 2]  # an int replaces an equal float
    del kept
    assert interner.collect() == 4 and len(interner) == 0


async def read_trace(compact: bool, cursor_at: int, epochs: int = 40) -> tuple[Any, Any]:
    """Churns an arrangement with a collection at every epoch (from a coroutine of the
    runtime's loop: a safe point); its trace handle compacted behind the input (``compact``)
    or left at the start. The records a cursor taken at ``cursor_at`` reads, with their
    diffs summed, and those of a cursor taken at the end."""

    def read(cursor: Any) -> dict[Any, int]:
        return {
            (cursor.key(), v): sum(d for _, d in ts) for _ in cursor for v, ts in cursor.values()
        }

    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            arranged = c.arrange_by_key()
            return session, arranged.trace, arranged.as_collection().view(history=False)

        ((session, handle, view),) = rt.dataflow(build).results
        early = None
        for e in range(epochs):
            for r in epoch_records(e):
                session.insert(r)
            if e >= WINDOW:
                for r in epoch_records(e - WINDOW):
                    session.remove(r)
            session.advance_to(e + 1)
            await asyncio.wait_for(view.wait(e), 20)
            if e == cursor_at:
                early = handle.cursor()
            if compact:
                handle.set_logical_compaction([e + 1])
            INTERNER.collect()
        assert early is not None
        cursor = handle.cursor()
        INTERNER.collect()
        session.close()
        handle.close()
        return read(early), read(cursor)


async def test_a_reader_holding_an_old_frontier_keeps_its_values() -> None:
    """A trace handle left at the start holds every time: collections free none of its
    codes, and a cursor taken at the end reads every value of the whole history."""
    _, history = await read_trace(compact=False, cursor_at=0)
    assert set(history) == {r for e in range(40) for r in epoch_records(e)}
    assert {r for r, n in history.items() if n} == set(live_input(39))


async def test_a_cursor_outlives_the_batches_it_read() -> None:
    """A cursor taken at epoch 5 reads its values after its batches were compacted away
    and their codes' values would have been freed (and the codes taken by others)."""
    early, _ = await read_trace(compact=True, cursor_at=5)
    assert {r for r, n in early.items() if n} == set(live_input(5))


class _Kept:
    """A holder of some codes (as a batch or a cursor is)."""

    def __init__(self, codes: np.ndarray) -> None:
        self.codes = codes

    def interned_columns(self) -> list[np.ndarray]:
        return [self.codes]


class _CountedReads(list[Any]):
    """The interner's table of values, counting the reads of its slots."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        self.reads += 1
        return super().__getitem__(index)


def test_collections_after_a_peak_cost_the_codes_in_use() -> None:
    """Once a peak of values is freed, later collections visit the codes in use, not every
    code of the peak again: a Python pass over every code (those freed earlier included),
    and over the dict's deleted slots, once cost 240 ms per collection after a peak of a
    million values, against 0.7 ms to intern the thousand values that made it due."""
    interner = Interner()
    peak = 20_000
    kept = _Kept(interner.encode(np.array([f"p{i}" for i in range(peak)], dtype=object))[:10])
    interner.hold(kept)
    assert interner.collect() == peak - 10
    # iterating a dict visits the slots of its deleted entries: it is as small as its entries
    assert sys.getsizeof(interner.codes) <= sys.getsizeof({f"p{i}": i for i in range(10)})
    interner.values = table = _CountedReads(interner.values)
    for r in range(5):
        interner.encode(np.array([f"r{r}.{i}" for i in range(100)], dtype=object))
        assert interner.collect() == 100
    assert table.reads <= 5 * 110, table.reads  # at most the codes in use, not the peak
    assert interner.decode(kept.codes).tolist() == [f"p{i}" for i in range(10)]
    fresh = interner.encode(np.array(["x", "p3", 2.0, 2], dtype=object))
    assert interner.decode(fresh).tolist() == ["x", "p3", 2, 2]
    assert len(interner.values) == peak  # freed codes are taken again, not appended


def test_no_runtime_starts_in_another_thread_during_a_collection() -> None:
    """A collection checked that no runtime ran in another thread, then ran: one starting
    meanwhile encoded values and made batches while it marked and swept, so codes of its
    new batches could be freed and given to other values (two threads, 60 s of churn:
    ``('b33.0!', 'b33.299!')`` came out of an arrangement of ``('b33.0', 'b33.0!')``), or
    the collection failed (``IndexError``: codes beyond the table it had sized). A runtime
    that starts in another thread now waits for the collection to end."""
    built, finished = threading.Event(), threading.Event()
    words = [f"t{i}" for i in range(50)]
    out: list[Any] = []

    def other_thread() -> None:
        def build(scope: Any) -> Any:
            built.set()
            records = [((w, w + "!"), 1) for w in words]
            return Collection.from_epochs(scope, [records]).arrange_by_key().as_collection()

        out.extend(naiad.run(lambda s: build(s).changes()))
        finished.set()

    class Slow:
        """A holder whose listing waits for the other thread's runtime (or 3 s)."""

        ran_meanwhile: bool | None = None

        def interned_columns(self) -> list[np.ndarray]:
            if Slow.ran_meanwhile is None:  # (the first collection only)
                thread.start()
                built.wait(10)
                Slow.ran_meanwhile = finished.wait(3)
            return []

    thread = threading.Thread(target=other_thread)
    slow = Slow()
    INTERNER.hold(slow)
    INTERNER.collect()
    del slow
    thread.join(20)
    assert Slow.ran_meanwhile is False  # it waited
    got = Counter(r for part in out for r, _, d in part for _ in range(d))
    assert got == Counter((w, w + "!") for w in words)
