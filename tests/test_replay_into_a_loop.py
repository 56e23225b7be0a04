"""``loop.replay(logs)``: logs captured inside a loop replayed inside a loop of another
dataflow, at the loop's times. The replayed stream is the captured one again, and a replay
that feeds a cycle of its own loop gives what a from-scratch recomputation gives, on 1 and 2
workers and 2 simulated processes, for ``Product`` and ``Lex`` loops; logs of another time
shape are refused."""

from __future__ import annotations

import asyncio
from collections import Counter
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import BuildError
from naiad.progress import Lex, Product
from naiad.progress.timestamp import less_equal
from naiad.transport.codec import packb, unpackb

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_counts = st.lists(st.lists(st.integers(0, 4), max_size=5), min_size=1, max_size=4)


def countdown(scope: naiad.Scope, loop: naiad.Scope, start: naiad.Stream) -> naiad.Stream:
    """Each record ``x`` at loop time ``(t, i)`` and ``x - 1`` at ``(t, i + 1)`` ... down to 0."""
    handle, cycle = loop.feedback()
    body = start.concat(cycle)
    body.map(lambda x: x - 1).filter(lambda x: x >= 0).connect_loop(handle)
    return body


def counted_down(pairs: Counter[tuple[Any, int]], time_class: Any) -> Counter[tuple[Any, int]]:
    """From scratch: the countdown of each ``(time, x)`` inside a loop of ``time_class``."""
    out: Counter[tuple[Any, int]] = Counter()
    for (t, x), n in pairs.items():
        for i in range(x + 1):
            out[(time_class(t.outer, t.inner + i), x - i)] += n
    return out


def records(logs: list[naiad.CaptureLog]) -> Counter[tuple[Any, Any]]:
    return Counter(pair for log in logs for pair in log.records())


@settings(max_examples=15, deadline=None)
@given(epochs_of_counts, configs, configs, st.sampled_from([Product, Lex]), st.booleans())
def test_a_loop_stream_replayed_in_a_loop_is_the_original_and_feeds_a_cycle(
    epochs: list[list[int]],
    first: dict[str, int],
    second: dict[str, int],
    time_class: Any,
    saved: bool,
) -> None:
    def original(s: naiad.Scope) -> naiad.CaptureLog:
        loop = s.iterative(time_class=time_class)
        start = s.from_epochs(epochs).exchange(lambda x: x).enter(loop)
        return countdown(s, loop, start).capture()

    logs: list[Any] = naiad.run(original, **first)
    seeds = Counter((time_class(e, 0), x) for e, xs in enumerate(epochs) for x in xs)
    want = counted_down(seeds, time_class)
    assert records(logs) == want
    if saved:  # through the wire codec, as a file would hold them (Product and Lex survive)
        logs = [unpackb(packb(list(log))) for log in logs]

    def again(s: naiad.Scope) -> Any:
        loop = s.iterative(time_class=time_class)
        replayed = loop.replay(logs)
        # the replay is a source inside the loop, feeding a cycle of the loop
        cycled = countdown(s, loop, replayed)
        return replayed.capture(), replayed.leave().collect(), cycled.leave().collect()

    results = naiad.run(again, **second)
    assert records([log for log, _, _ in results]) == want
    for log, _, _ in results:
        frontiers = log.frontiers()
        assert frontiers[-1] == [] and all(len(f) <= 1 for f in frontiers)
        steps = [f[0] for f in frontiers[:-1]]
        assert all(a != b and less_equal(a, b) for a, b in pairwise(steps))  # forward only
    left = Counter(pair for _, out, _ in results for pair in out)
    assert left == Counter((t.outer, x) for (t, x), n in want.items() for _ in range(n))
    cycled = Counter(pair for _, _, out in results for pair in out)
    twice = counted_down(want, time_class)
    assert cycled == Counter((t.outer, x) for (t, x), n in twice.items() for _ in range(n))


async def test_a_replay_holds_its_loop_back_until_its_log_passes_a_time() -> None:
    """A log still being captured (in a loop of another dataflow) holds the replaying loop's
    outer epoch open: a probe after the loop passes epoch 0 only once the log's does."""
    async with naiad.Runtime() as rt:

        def source(s: naiad.Scope) -> Any:
            handle, stream = s.new_input()
            return handle, stream.enter(s.iterative()).capture()

        ((handle, log),) = rt.dataflow(source).results

        def reader(s: naiad.Scope) -> Any:
            out = s.iterative().replay([log]).leave()
            return out.probe(), out.capture()

        second = rt.dataflow(reader)
        ((probe, got),) = second.results  # a capture shows records as they come
        handle.send([5])
        await asyncio.sleep(0.05)
        assert probe.less_equal(0) and got.records() == [(0, 5)]  # there; epoch 0 still open
        handle.advance_to(1)
        await asyncio.wait_for(probe.wait(0), 10)
        assert probe.frontier.frontier == [1]
        handle.send([6])
        handle.close()
        await asyncio.wait_for(second.finished(), 10)
    assert got.records() == [(0, 5), (1, 6)] and got.frontiers() == [[0], [1], []]


# --- misuse ------------------------------------------------------------------------------------
def test_a_log_of_another_time_shape_is_refused_at_build_time() -> None:
    (root_log,) = naiad.run(lambda s: s.from_epochs([[1]]).capture())

    def product_log(s: naiad.Scope) -> naiad.CaptureLog:
        return s.from_epochs([[1]]).enter(s.iterative()).capture()

    (loop_log,) = naiad.run(product_log)

    def into(where: str, log: Any) -> Any:
        def build(s: naiad.Scope) -> None:
            scope = {
                "root": s,
                "lex": s.iterative("L", time_class=Lex),
                "nested": s.iterative("A").iterative("B"),
            }[where]
            scope.replay([log], name="R")

        return build

    for where, log, scope, like in [
        ("root", loop_log, "dataflow", "0"),
        ("lex", loop_log, "dataflow/L", "Lex"),
        ("nested", loop_log, "dataflow/A/B", "Product(outer=Product"),
        ("lex", root_log, "dataflow/L", "Lex"),
    ]:
        with pytest.raises(BuildError) as info:
            naiad.run(into(where, log))
        message = str(info.value)
        assert message.startswith("replay 'R': logs[0] was captured from a stream with times")
        assert f"scope {scope!r} has times like {like}" in message


def test_a_list_of_events_of_another_time_shape_fails_naming_the_replay() -> None:
    (log,) = naiad.run(lambda s: s.from_epochs([[1]]).capture())
    with pytest.raises(TypeError, match=r"replay 'R': a time of log 0 inside 1 loop\(s\) must be"):
        naiad.run(lambda s: s.iterative().replay([list(log)], name="R").leave().collect())


@pytest.mark.parametrize("config", CONFIGS)
def test_a_stream_of_a_nested_loop_replays_in_a_nested_loop(config: dict[str, int]) -> None:
    def original(s: naiad.Scope) -> naiad.CaptureLog:
        inner = s.iterative("A").iterative("B", time_class=Lex)
        start = s.from_epochs([[2, 1], [3]]).enter(inner.parent).enter(inner)
        return countdown(s, inner, start).capture()

    logs = naiad.run(original, **config)

    def again(s: naiad.Scope) -> Any:
        inner = s.iterative("A").iterative("B", time_class=Lex)
        replayed = inner.replay(logs)
        return replayed.capture(), replayed.leave().leave().collect()

    results = naiad.run(again, **config)
    assert records([log for log, _ in results]) == records(logs)
    assert len(records(logs)) == 3 + 2 + 4
    got = Counter(pair for _, out in results for pair in out)
    assert got == Counter(
        {(0, 2): 1, (0, 1): 2, (0, 0): 2, (1, 3): 1, (1, 2): 1, (1, 1): 1, (1, 0): 1}
    )
