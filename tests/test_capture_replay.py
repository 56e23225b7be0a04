"""``capture`` and ``replay``: a replayed capture is the original stream again (the same
records at the same times, its frontier moving through the same times in the same order), on
any pair of worker counts; a log followed live; saved logs; what a malformed log does."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import BuildError, DataflowStopped
from naiad.transport.codec import packb, unpackb
from tests.test_operators import PopsEverything

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_ints = st.lists(st.lists(st.integers(-50, 50), max_size=10), min_size=1, max_size=6)


def records(logs: list[naiad.CaptureLog]) -> Counter[tuple[Any, Any]]:
    return Counter(pair for log in logs for pair in log.records())


def increasing(frontiers: list[list[int]]) -> bool:
    steps = [f[0] if f else float("inf") for f in frontiers]
    return steps == sorted(steps) and len(set(steps)) == len(steps)


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, configs, configs, st.booleans())
def test_a_replayed_capture_is_the_original_stream(
    epochs: list[list[int]], first: dict[str, int], second: dict[str, int], saved: bool
) -> None:
    def original(s: naiad.Scope) -> naiad.CaptureLog:
        # exchanged: every worker's log has records, and empty epochs leave no message
        return s.from_epochs(epochs).exchange(lambda x: x).capture()

    logs: list[Any] = naiad.run(original, **first)
    assert records(logs) == Counter((t, r) for t, rs in enumerate(epochs) for r in rs)
    assert all(log.complete and not log.live for log in logs)
    if saved:  # through the wire codec, as a file would hold them
        logs = [unpackb(packb(list(log))) for log in logs]

    def again(s: naiad.Scope) -> tuple[naiad.CaptureLog, list[Any]]:
        stream = s.replay(logs)
        return stream.capture(), stream.map(lambda x: -x).collect()

    replayed = naiad.run(again, **second)
    originals = logs if not saved else [naiad.CaptureLog(events) for events in logs]
    assert records([log for log, _ in replayed]) == records(originals)
    assert Counter((t, -r) for _, out in replayed for t, r in out) == records(originals)
    seen = {tuple(f) for log in originals for f in log.frontiers()}
    for log, _ in replayed:
        frontiers = log.frontiers()
        assert frontiers[-1] == [] and increasing(frontiers)
        assert all(tuple(f) in seen for f in frontiers)  # times the original passed through


async def test_a_live_capture_is_followed_with_the_same_frontier_at_every_step() -> None:
    async with naiad.Runtime(workers=2) as rt:

        def source(s: naiad.Scope) -> tuple[Any, Any, naiad.CaptureLog]:
            handle, stream = s.new_input()
            stream = stream.exchange(lambda x: x)
            return handle, stream.probe(), stream.capture()

        first = rt.dataflow(source)
        logs = [log for _, _, log in first.results]

        def follower(s: naiad.Scope) -> tuple[Any, list[Any]]:
            stream = s.replay(logs)
            return stream.probe(), stream.collect()

        second = rt.dataflow(follower)
        inputs = [h for h, _, _ in first.results]
        probe, replayed = first.results[0][1], second.results[0][0]
        for epoch, batch in enumerate([[1, 2], [], [3], [4, 5, 6]]):
            inputs[0].send(batch)
            for handle in inputs:
                handle.advance_to(epoch + 1)
            await asyncio.wait_for(probe.wait(epoch), 10)
            await asyncio.wait_for(replayed.wait(epoch), 10)
            assert replayed.frontier.frontier == probe.frontier.frontier == [epoch + 1]
        for handle in inputs:
            handle.close()
        await asyncio.wait_for(second.finished(), 10)
    got = sorted(pair for _, out in second.results for pair in out)
    assert got == [(0, 1), (0, 2), (2, 3), (3, 4), (3, 5), (3, 6)]


async def test_follow_yields_events_as_they_come_and_ends_with_the_stream() -> None:
    async with naiad.Runtime() as rt:
        df = rt.dataflow(lambda s: (lambda h, st: (h, st.capture()))(*s.new_input()))
        ((handle, log),) = df.results
        seen: list[Any] = []

        async def read() -> None:
            async for event in log.follow():
                seen.append(event)

        reader = asyncio.ensure_future(read())
        handle.send(["a"])
        handle.advance_to(1)
        await asyncio.sleep(0.05)
        assert seen == [("messages", 0, ["a"]), ("progress", [(1, 1), (0, -1)])]
        assert not reader.done()
        handle.close()
        await asyncio.wait_for(reader, 10)
    assert seen[-1] == ("progress", [(1, -1)]) and log.complete


def test_a_consumer_that_modifies_replayed_lists_leaves_the_log_alone() -> None:
    logs = naiad.run(lambda s: s.from_epochs([[1, 2, 3]]).capture())

    def build(s: naiad.Scope) -> list[Any]:
        return s.replay(logs).unary(PopsEverything()).collect()

    assert sorted(naiad.run(build)[0]) == sorted(naiad.run(build)[0]) == [(0, 1), (0, 2), (0, 3)]
    assert logs[0].records() == [(0, 1), (0, 2), (0, 3)]


def test_more_workers_than_logs_and_split_false() -> None:
    logs = naiad.run(lambda s: s.from_epochs([[1, 2], [3]]).capture())  # one log
    everywhere = naiad.run(lambda s: s.replay(logs[0], split=False).collect(), workers=2)
    assert everywhere == [[(0, 1), (0, 2), (1, 3)]] * 2  # each worker replays what it is given
    split = naiad.run(lambda s: s.replay(logs).collect(), workers=3)
    assert split == [[(0, 1), (0, 2), (1, 3)], [], []]


async def test_a_replay_of_a_live_log_stops_at_close_inputs() -> None:
    async with naiad.Runtime() as rt:
        source = rt.dataflow(lambda s: (lambda h, st: (h, st.capture()))(*s.new_input()))
        ((handle, log),) = source.results
        handle.send([1])
        handle.advance_to(1)
        follower = rt.dataflow(lambda s: s.replay([log]).collect())
        await asyncio.sleep(0.05)
        follower.close_inputs()
        await asyncio.wait_for(follower.finished(), 10)
        handle.send([2])
        handle.close()
        await asyncio.wait_for(source.finished(), 10)
    assert follower.results == [[(0, 1)]]


async def test_a_replay_of_a_live_log_fails_when_the_source_stops() -> None:
    def boom(x: int) -> int:
        raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError):
        async with naiad.Runtime() as rt:

            def source(s: naiad.Scope) -> tuple[Any, naiad.CaptureLog]:
                handle, stream = s.new_input()
                stream.map(boom)
                return handle, stream.capture()

            ((handle, log),) = rt.dataflow(source).results
            follower = rt.dataflow(lambda s: s.replay([log], name="again").collect())
            handle.send([1])
            handle.advance_to(1)
            with pytest.raises(DataflowStopped, match="replay 'again' of log 0"):
                await asyncio.wait_for(follower.finished(), 10)
            with pytest.raises(DataflowStopped, match="follow"):
                async for _ in log.follow():
                    pass


def test_a_log_that_ends_before_its_stream_completed_is_refused() -> None:
    (log,) = naiad.run(lambda s: s.from_epochs([[1], [2]]).capture())
    truncated = list(log)[:2]
    with pytest.raises(ValueError, match=r"replay 'R': log 0 ends with its frontier at \[1\]"):
        naiad.run(lambda s: s.replay([truncated], name="R").collect())


@pytest.mark.parametrize(
    ("events", "error", "says"),
    [
        ([("message", 0, [1])], ValueError, "event 0 of log 0 is ('message'"),
        ([("progress", [(1, 1), (0, -1)]), ("messages", 0, [1])], ValueError, "after its front"),
        ([("messages", naiad.Product(0, 0), [1])], TypeError, "a time of log 0 must be an int"),
    ],
)
def test_malformed_logs_name_the_replay(events: list[Any], error: Any, says: str) -> None:
    with pytest.raises(error) as info:
        naiad.run(lambda s: s.replay([events], name="R").collect())
    assert "replay 'R'" in str(info.value) and says in str(info.value)


def test_events_after_a_log_ended_or_a_frontier_moving_back_are_refused() -> None:
    # Two saved logs run together into one list (say, appended to one file): the second's
    # records come after the first's frontier became empty, and were dropped unread.
    first, second = naiad.run(
        lambda s: (s.from_epochs([[1]]).capture(), s.from_epochs([[2]]).capture())
    )[0]
    joined = [*first, *second]
    with pytest.raises(
        ValueError, match=r"replay 'R': event 3 of log 0 is \('messages', 0, \[2\]\), after"
    ):
        naiad.run(lambda s: s.replay([joined], name="R").collect())
    # The same two logs replayed as two logs are fine.
    assert naiad.run(lambda s: s.replay([first, second], name="R").collect()) == [[(0, 1), (0, 2)]]
    # A frontier that moves back used to fail on an internal assertion ('no capability').
    back = [("progress", [(2, 1), (0, -1)]), ("progress", [(1, 1), (2, -1)])]
    with pytest.raises(ValueError, match=r"log 0's frontier gains time 1, which is not at or af"):
        naiad.run(lambda s: s.replay([back], name="R").collect())


def test_misuse_at_build_time() -> None:
    (log,) = naiad.run(lambda s: s.from_epochs([[1]]).capture())
    with pytest.raises(TypeError, match=r"logs\[0\] is an event, not a log"):
        naiad.run(lambda s: s.replay(list(log)))
    with pytest.raises(TypeError, match="logs must be a CaptureLog or a list of them"):
        naiad.run(lambda s: s.replay(3))

    def in_a_loop(s: naiad.Scope) -> None:
        with s.iterative() as loop:
            loop.replay([log])

    # a log of the root scope has root times: a loop replays logs of its own time shape
    with pytest.raises(BuildError, match=r"logs\[0\] was captured from a stream with times like 0"):
        naiad.run(in_a_loop)
