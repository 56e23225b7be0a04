"""``delay`` and ``delay_batch`` against a plain-Python oracle: every record at its new time,
delivered only once the input has passed that time (records of lists in one message per time
and worker, the batches of ``delay_batch`` one message each); on 1 and 2 workers and 2
simulated processes."""

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
epochs_of_ints = st.lists(st.lists(st.integers(-50, 50), max_size=12), min_size=1, max_size=6)


def later(r: int, t: int) -> int:
    return t + abs(r) % 5


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, configs)
def test_delay_retimes_every_record_and_sends_each_time_once(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        messages: list[Any] = []
        # exchanged first: a worker's records at one new time come from several epochs
        delayed = s.from_epochs(epochs).exchange(lambda x: x).delay(later)
        delayed.inspect_batch(lambda t, b: messages.append(t))
        return delayed.collect(), messages

    results = naiad.run(build, **config)
    want = Counter((later(r, t), r) for t, rs in enumerate(epochs) for r in rs)
    assert Counter(pair for got, _ in results for pair in got) == want
    for _, messages in results:  # what waits for a time leaves in one message
        assert len(messages) == len(set(messages))


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 1000), max_size=30), min_size=1, max_size=5),
    st.integers(0, 3),
    configs,
)
def test_delay_batch_retimes_whole_numpy_batches(
    values: list[list[int]], step: int, config: dict[str, int]
) -> None:
    calls: list[int] = []

    def f(t: int) -> int:
        calls.append(t)
        return t // 2 * 2 + 1 + step  # epochs 2k and 2k + 1 share a new time

    def build(s: naiad.Scope) -> list[Any]:
        epochs = [np.array(v, dtype=np.int64) for v in values]
        delayed = s.from_epochs(epochs).delay_batch(f)
        delayed.inspect_batch(lambda t, b: check_array(b))
        return delayed.map(int).collect()

    results = naiad.run(build, **config)
    want = Counter((t // 2 * 2 + 1 + step, r) for t, rs in enumerate(values) for r in rs)
    assert Counter(pair for got in results for pair in got) == want
    assert len(calls) <= sum(1 for v in values if v) * config["workers"] * 2  # per batch


def check_array(batch: Any) -> None:
    assert isinstance(batch, np.ndarray)


async def test_records_wait_until_the_input_passes_their_new_time() -> None:
    arrived: list[tuple[int, list[int]]] = []
    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> tuple[Any, Any, Any]:
            handle, stream = s.new_input()
            delayed = stream.delay(lambda r, t: t + r)
            delayed.inspect_batch(lambda t, b: arrived.append((t, list(b))))
            return handle, stream.probe(), delayed.probe()

        ((handle, before, after),) = rt.dataflow(build).results
        handle.send([5, 0, 2])  # new times 5, 0, 2
        handle.advance_to(2)
        await asyncio.wait_for(before.wait(1), 10)
        await asyncio.wait_for(after.wait(0), 10)
        assert arrived == [(0, [0])]
        assert after.frontier.frontier == [2]  # the input's frontier: 2 is still open
        handle.advance_to(5)
        await asyncio.wait_for(after.wait(4), 10)
        assert arrived == [(0, [0]), (2, [2])]
        assert after.frontier.frontier == [5]
        handle.send([1])  # at epoch 5, delayed to 6
        handle.advance_to(100)
        await asyncio.wait_for(before.wait(99), 10)
        await asyncio.wait_for(after.wait(99), 10)
        assert arrived == [(0, [0]), (2, [2]), (5, [5]), (6, [1])]
        handle.close()


def test_many_pending_times_complete_in_order() -> None:
    seen: list[int] = []

    def build(s: naiad.Scope) -> list[Any]:
        delayed = s.from_epochs([list(range(300)), [7]]).delay(lambda r, t: t + 1000 - 3 * r)
        delayed.subscribe(lambda t, rs: seen.extend([t] if rs else []))
        return delayed.collect()

    (got,) = naiad.run(build)
    assert sorted(got) == sorted([(1000 - 3 * r, r) for r in range(300)] + [(980, 7)])
    assert seen == sorted(seen) and len(seen) == 301  # every time its own


async def test_the_messages_of_a_time_one_per_kind_of_batch() -> None:
    """What waits for one new time leaves at its notification: ``delay`` as one list for the
    records that came in lists and one array per dtype for the rows of numpy batches;
    ``delay_batch`` as the batches themselves, one message each."""
    messages: dict[str, list[Any]] = {"delay": [], "delay_batch": []}
    async with naiad.Runtime(1) as rt:

        def build(s: naiad.Scope) -> Any:
            handle, stream = s.new_input()
            stream.delay(lambda r, t: 5).inspect_batch(
                lambda t, b: messages["delay"].append((t, b))
            )
            stream.delay_batch(lambda t: 5).inspect_batch(
                lambda t, b: messages["delay_batch"].append((t, b))
            )
            return handle, stream.probe()

        ((handle, probe),) = rt.dataflow(build).results
        sent = [[1, 2], np.array([3, 4]), [5], np.array([6.5]), np.array([7])]
        for epoch, batch in enumerate(sent):
            handle.send(batch)
            handle.advance_to(epoch + 1)
        await asyncio.wait_for(probe.wait(4), 10)
        assert messages == {"delay": [], "delay_batch": []}  # time 5 is still open
        handle.close()
        await asyncio.wait_for(probe.wait(), 10)

    def kinds(batches: list[Any]) -> list[tuple[str, list[Any]]]:
        return [(getattr(b, "dtype", "list"), list(b)) for _, b in batches]

    assert {t for _, batches in messages.items() for t, _ in batches} == {5}
    assert sorted(kinds(messages["delay"]), key=str) == sorted(
        [("list", [1, 2, 5]), (np.dtype(np.int64), [3, 4, 7]), (np.dtype(np.float64), [6.5])],
        key=str,
    )
    assert kinds(messages["delay_batch"]) == kinds([(5, b) for b in sent])


def test_delay_inside_a_loop() -> None:
    def build(s: naiad.Scope) -> list[Any]:
        nums = s.from_epochs([[3, 1]])
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            body = nums.enter(loop).concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).connect_loop(handle)
        # each record leaves at the epoch after the one it entered with plus the record
        return body.delay(lambda r, t: naiad.Product(t.outer + r, t.inner)).leave().collect()

    (got,) = naiad.run(build)
    assert sorted(got) == [(0, 0), (0, 0), (1, 1), (1, 1), (2, 2), (3, 3)]


@pytest.mark.parametrize(
    ("delayed", "error", "says"),
    [
        (lambda s: s.delay(lambda r, t: t - 1, "D"), ValueError, "record 9 at time 2 returned 1"),
        (lambda s: s.delay(lambda r, t: 2.5, "D"), TypeError, "record 9 must be an integer"),
        (lambda s: s.delay(lambda r, t: naiad.Product(t, 0), "D"), TypeError, "record 9"),
        (lambda s: s.delay_batch(lambda t: t - 1, "D"), ValueError, "f(time) at time 2 returned"),
    ],
)
def test_a_new_time_before_the_record_s_names_the_operator(
    delayed: Any, error: Any, says: str
) -> None:
    with pytest.raises(error) as info:
        naiad.run(lambda s: delayed(s.from_epochs([[], [], [9]])).collect())
    message = str(info.value)
    assert "'D'" in message and says in message


def test_bad_arguments_and_raising_functions() -> None:
    with pytest.raises(TypeError, match="delay 'delay': f must be a function, not 3"):
        naiad.run(lambda s: s.from_epochs([[1]]).delay(3))
    with pytest.raises(TypeError, match="delay_batch 'delay_batch': f must be a function"):
        naiad.run(lambda s: s.from_epochs([[1]]).delay_batch(None))

    def wrong_arity(t: int) -> int:  # delay's f takes (record, time)
        return t

    with pytest.raises(TypeError) as info:
        naiad.run(lambda s: s.from_epochs([[1]]).delay(wrong_arity, name="Late").collect())
    assert any("'Late'" in note for note in info.value.__notes__)
