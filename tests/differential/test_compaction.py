"""Compaction of arrangements: a trace handle advanced through random logical-compaction
frontiers never changes the accumulated collection at times in advance of the frontier (read
straight from the spine's batches), and an arrangement nobody holds compacts its history."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.differential.arrange import batch_updates
from tests.differential import reference as ref

RECORDS = st.tuples(st.integers(0, 3), st.sampled_from([0, 1, "s"]))


def spine_updates(spines: list[Any]) -> list[tuple[Any, int, int]]:
    """Every update stored in the spines' batches: ``(record, time, diff)``."""
    return [u for s in spines for b in s.batches for u in batch_updates(b).to_records()]


def accumulated_at(spines: list[Any], t: int) -> Counter:
    out: Counter = Counter()
    for record, time, diff in spine_updates(spines):
        if time <= t:
            out[record] += diff
    return ref.clean(out)


async def feed(
    workers: int, epochs: ref.Epochs, on_epoch: Any, hold: bool = True
) -> tuple[list[Any], list[Any]]:
    """Feeds ``epochs`` into an arrangement (worker 0 inserts, every worker advances) and
    calls ``on_epoch(e, arrangements)`` once epoch ``e`` is sealed in every spine."""
    async with naiad.Runtime(workers) as rt:

        def build(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            arranged = collection.arrange_by_key()
            if hold:
                arranged.trace  # noqa: B018 - the handle holds the history
            return session, arranged, arranged.stream.probe()

        df = rt.dataflow(build)
        arrangements = [a for _, a, _ in df.results]
        for e, changes in enumerate(epochs):
            for w, (session, _, _) in enumerate(df.results):
                for i, (record, diff) in enumerate(changes):
                    if i % workers == w:
                        session.update(record, diff)
                session.advance_to(e + 1)
            await df.results[0][2].wait(e)
            on_epoch(e, arrangements)
        for session, _, _ in df.results:
            session.close()
        await df.finished()
    return arrangements, [a.spine for a in arrangements]


@settings(max_examples=30, deadline=None)
@given(
    ref.histories(RECORDS, epochs=(2, 6), size=(1, 6)),
    st.lists(st.integers(0, 2), min_size=6, max_size=6),
    st.sampled_from([1, 2]),
)
def test_logical_compaction_keeps_accumulations_in_advance_of_the_frontier(
    epochs: ref.Epochs, steps: list[int], workers: int
) -> None:
    frontier = [0]
    checked = []

    def on_epoch(e: int, arrangements: list[Any]) -> None:
        spines = [a.spine for a in arrangements]
        # times in advance of the frontier (and complete) read as before compaction
        for t in range(frontier[0], e + 1):
            assert accumulated_at(spines, t) == ref.accumulated(epochs, t), (
                f"epoch {e}, frontier {frontier[0]}, time {t}"
            )
            checked.append(t)
        # the frontier advances (never past what is sealed: e + 1)
        frontier[0] = min(frontier[0] + steps[e], e + 1)
        for a in arrangements:
            a.trace.set_logical_compaction([frontier[0]])
            assert a.spine.since().tolist() == [[frontier[0]]]

    _, spines = ref.watchdog(feed(workers, epochs, on_epoch))
    last = len(epochs) - 1
    for t in range(frontier[0], last + 1):
        assert accumulated_at(spines, t) == ref.accumulated(epochs, t)
    # every stored time is either exact or advanced to the frontier: none lies before it
    # unless it was stored before the handle's frontier moved past it
    assert checked


@settings(max_examples=20, deadline=None)
@given(ref.histories(RECORDS, epochs=(2, 6), size=(1, 6)), st.sampled_from([1, 2]))
def test_an_arrangement_without_readers_keeps_its_final_contents(
    epochs: ref.Epochs, workers: int
) -> None:
    _, spines = ref.watchdog(feed(workers, epochs, lambda e, a: None, hold=False))
    final = ref.accumulated(epochs, len(epochs) - 1)
    assert accumulated_at(spines, len(epochs)) == final
    inserted = sum(len(changes) for changes in epochs)
    assert sum(s.total() for s in spines) <= inserted


def test_an_arrangement_without_readers_compacts_churn() -> None:
    """Many insertions and retractions of few records: history collapses in the merges."""
    epochs = [[((k % 3, 0), 1 if e % 2 == 0 else -1) for k in range(3)] for e in range(12)]
    epochs.append([((0, 0), 1)])
    _, spines = ref.watchdog(feed(1, epochs, lambda e, a: None, hold=False))
    assert accumulated_at(spines, len(epochs)) == Counter({(0, 0): 1})
    assert spines[0].total() < sum(len(changes) for changes in epochs) // 2


def test_an_arrangement_without_readers_compacts_fully_once_input_closes() -> None:
    """Once input closes nobody can read any time: an insertion and its later retraction
    must cancel in the final merge (they stayed when it compacted to the empty frontier)."""
    epochs = [[((k, 0), 1) for k in range(4)], [((0, 0), -1)]]
    _, spines = ref.watchdog(feed(1, epochs, lambda e, a: None, hold=False))
    assert accumulated_at(spines, 2) == ref.accumulated(epochs, 1)
    assert spines[0].total() == 3, spine_updates(spines)


def test_a_held_handle_at_the_minimum_time_keeps_every_time() -> None:
    epochs = [[((0, 0), 1), ((1, 1), 1)], [((0, 0), -1)], [((0, 0), 1)], [((1, 1), -1)]]
    arrangements, spines = ref.watchdog(feed(1, epochs, lambda e, a: None))
    for t in range(len(epochs)):
        assert accumulated_at(spines, t) == ref.accumulated(epochs, t)
    assert sorted(t for _, t, _ in spine_updates(spines)) == [0, 0, 1, 2, 3]
    arrangements[0].trace.close()


def test_a_trace_handle_refuses_to_move_its_compaction_back() -> None:
    """Regression: a frontier behind the handle's was accepted, though the trace was compacted
    to the old one already: reads at the earlier times then answered wrongly, silently. The
    physical compaction point (merged batches cannot be split again) likewise."""
    epochs = [[((e, e), 1)] for e in range(8)]
    refused: list[str] = []

    def on_epoch(e: int, arrangements: list[Any]) -> None:
        handle = arrangements[0].trace
        if e == 0:
            handle.set_logical_compaction([6])
            handle.set_physical_compaction(3)
        if e == 7:
            for move in (
                lambda: handle.set_logical_compaction([0]),
                lambda: handle.set_logical_compaction([7, 5]),  # 5 is before 6
                lambda: handle.set_physical_compaction(1),
            ):
                try:
                    move()
                except ValueError as exc:
                    refused.append(str(exc))
            assert handle.logical.tolist() == [[6]] and handle.acknowledged == 3
            handle.set_logical_compaction([7])  # forward still works
            handle.set_physical_compaction(None)

    _, spines = ref.watchdog(feed(1, epochs, on_epoch))
    assert len(refused) == 3
    assert "frontier back from [6] to [0]" in refused[0]
    assert "frontier back from [6] to [7, 5]" in refused[1]
    assert "point back from batch 3 to batch 1" in refused[2]
    assert accumulated_at(spines, 7) == ref.accumulated(epochs, 7)


@settings(max_examples=15, deadline=None)
@given(ref.histories(RECORDS, epochs=(6, 10), size=(1, 6)), st.sampled_from([1, 2]))
def test_a_handle_taken_late_starts_where_the_trace_was_compacted(
    epochs: ref.Epochs, workers: int
) -> None:
    """Regression: ``arranged.trace`` taken after epochs ran with nobody holding the trace
    (so its merges compacted it to their upper) promised every time from the minimum on:
    accumulating its cursor at an early time gave a later time's contents, silently, and
    ``set_logical_compaction([0])`` was accepted. It now starts at the trace's compaction
    frontier, and the collection at every time from there on reads right."""
    last = len(epochs) - 1
    seen: list[int] = []

    def on_epoch(e: int, arrangements: list[Any]) -> None:
        if e < last:
            return
        handles = [a.trace for a in arrangements]
        starts = [0 if h.logical is None else int(h.logical.min()) for h in handles]
        start = min(starts)
        seen.append(start)
        spines = [a.spine for a in arrangements]
        for t in range(start, e + 1):  # what the handles promise reads as the collection did
            assert accumulated_at(spines, t) == ref.accumulated(epochs, t), f"time {t}"
        for h, at in zip(handles, starts, strict=True):
            if at > 0:
                with pytest.raises(ValueError, match="frontier back"):
                    h.set_logical_compaction([0])
            h.close()

    ref.watchdog(feed(workers, epochs, on_epoch, hold=False))
    assert len(seen) == 1
