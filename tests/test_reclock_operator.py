"""``reclock`` against a plain-Python oracle: each record at the least clock time at or after
its own (records after the last tick never leave), released only once that time is complete,
on 1 and 2 workers and 2 simulated processes."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_ints = st.lists(st.lists(st.integers(0, 50), max_size=8), min_size=1, max_size=8)
# per epoch, how many clock records (several workers may tick at one time, or none)
clock_epochs = st.lists(st.integers(0, 3), min_size=1, max_size=8)


def oracle(epochs: list[list[int]], ticks: list[int]) -> Counter[tuple[int, int]]:
    clock = [t for t, n in enumerate(ticks) if n]
    want: Counter[tuple[int, int]] = Counter()
    for t, records in enumerate(epochs):
        at = next((c for c in clock if c >= t), None)
        if at is not None:
            want.update((at, r) for r in records)
    return want


@settings(max_examples=25, deadline=None)
@given(epochs_of_ints, clock_epochs, configs)
def test_records_leave_at_the_next_tick_of_the_whole_clock(
    epochs: list[list[int]], ticks: list[int], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        messages: list[Any] = []
        data = s.from_epochs(epochs).exchange(lambda x: x)
        # from_epochs splits each tick epoch among the workers: most workers see no tick
        clock = s.from_epochs([list(range(n)) for n in ticks])
        out = data.reclock(clock)
        out.inspect_batch(lambda t, b: messages.append(t))
        return out.collect(), messages

    results = naiad.run(build, **config)
    assert Counter(p for got, _ in results for p in got) == oracle(epochs, ticks)
    for _, messages in results:  # one message per tick and worker
        assert len(messages) == len(set(messages))


async def test_records_wait_for_the_tick_to_complete() -> None:
    released: list[tuple[int, list[str]]] = []
    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> Any:
            data_in, data = s.new_input()
            clock_in, clock = s.new_input()
            out = data.reclock(clock)
            out.inspect_batch(lambda t, b: released.append((t, list(b))))
            return data_in, clock_in, out.probe()

        ((data_in, clock_in, probe),) = rt.dataflow(build).results
        data_in.send(["a"])
        clock_in.advance_to(2)
        clock_in.send(["tick"])  # a tick at 2, open while the clock's input is at 2
        data_in.advance_to(2)
        data_in.send(["b"])
        data_in.advance_to(3)
        data_in.send(["c"])
        await asyncio.sleep(0.05)
        assert released == []  # the clock can still tick at 2
        clock_in.advance_to(4)
        await asyncio.wait_for(probe.wait(2), 10)
        assert released == [(2, ["a", "b"])]
        clock_in.send(["tock"])  # at 4
        clock_in.close()
        data_in.close()
        await asyncio.wait_for(probe.wait(), 10)
    assert released == [(2, ["a", "b"]), (4, ["c"])]


def test_arrays_pass_whole_and_loop_times_follow_the_partial_order() -> None:
    kinds: list[type] = []

    def build(s: naiad.Scope) -> list[Any]:
        data = s.from_epochs([np.array([1, 2]), np.array([3])])
        out = data.reclock(s.from_epochs([[], [], ["tick"]]))
        out.inspect_batch(lambda t, b: kinds.append(type(b)))
        return out.map(int).collect()

    assert naiad.run(build) == [[(2, 1), (2, 2), (2, 3)]]
    assert kinds == [np.ndarray, np.ndarray]

    def in_loop(s: naiad.Scope) -> list[Any]:
        nums = s.from_epochs([[3]])
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            body = nums.enter(loop).concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).connect_loop(handle)
            # ticks at iterations 1 and 3: (0, 0) and (0, 1) leave at (0, 1), and so on
            clock = body.filter(lambda x: x in (2, 0))
            return body.reclock(clock).inspect_batch(lambda t, b: kinds.append(t)).leave().collect()

    kinds.clear()
    (got,) = naiad.run(in_loop)
    assert sorted(got) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert sorted(kinds) == [naiad.Product(0, 1), naiad.Product(0, 3)]


def test_a_clock_that_is_not_a_stream_or_of_another_scope_is_refused() -> None:
    with pytest.raises(TypeError, match=r"reclock 'R': the clock must be a stream, not \[1\]"):
        naiad.run(lambda s: s.from_epochs([[1]]).reclock([1], name="R"))

    def across(s: naiad.Scope) -> Any:
        outer = s.from_epochs([[1]])
        with s.iterative() as loop:
            return outer.enter(loop).reclock(outer)

    with pytest.raises(naiad.BuildError, match=r"'reclock' is in scope 'dataflow/loop' but"):
        naiad.run(across)


def test_a_tick_releases_only_the_times_it_is_at_or_after_in_the_partial_order() -> None:
    """(0, 5) comes before (1, 0) in the tuple order but not in the product order: it waits
    for the tick at (1, 7)."""
    seen: list[tuple[Any, list[int]]] = []

    def build(s: naiad.Scope) -> list[Any]:
        nums = s.from_epochs([[5], [9]])
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            body = nums.enter(loop).concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).connect_loop(handle)
            # data: 0 at (0, 5) and (1, 9); ticks: (0, 3), (1, 0) and (1, 7)
            data, clock = body.filter(lambda x: x == 0), body.filter(lambda x: x in (9, 2))
            out = data.reclock(clock).inspect_batch(lambda t, b: seen.append((t, list(b))))
            return out.leave().collect()

    assert naiad.run(build) == [[(1, 0)]]
    assert seen == [(naiad.Product(1, 7), [0])]
