"""Driving a dataflow from outside its callbacks: inputs used while the dataflow is built,
capabilities retained by a vertex and released by the driver, the input's own batches, feed
pacing, and subscribe's reports inside loops and over epochs that jump."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

import naiad
from naiad import InputError


class HeldSource(naiad.Vertex):
    """Keeps its initial capability for the driver to use."""

    def on_start(self, cap: naiad.Capability) -> None:
        self.cap = cap.retain()

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        pass


async def test_a_capability_released_by_the_driver_moves_the_frontier() -> None:
    """A downgrade or drop outside every callback only reached the worker's progress batch,
    which nothing submitted: the frontier stayed where it was, for ever."""
    source = HeldSource()
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> tuple[Any, Any]:
            handle, stream = scope.new_input()
            handle.close()  # during the build: the input holds nothing from the start
            out = stream.unary(source, name="held")
            return out.collect(), out.probe()

        out, probe = rt.dataflow(build).results[0]
        source.send(source.cap, ["x"])
        source.cap.downgrade(1)
        await asyncio.wait_for(probe.wait(0), 30)
        source.send(source.cap, ["y"])
        source.cap.drop()
        await asyncio.wait_for(probe.wait(), 30)
    assert out == [(0, "x"), (1, "y")]


def fails(record: Any) -> Any:
    raise ValueError(f"no {record}")


@pytest.mark.parametrize("config", [{"workers": 1}, {"workers": 2, "processes": 2}])
async def test_a_capability_the_driver_holds_says_when_the_dataflow_has_stopped(
    config: dict[str, int],
) -> None:
    """After the dataflow failed, the driver's send and downgrade succeeded silently (what was
    sent went nowhere), where an input handle raises DataflowStopped."""
    sources: list[HeldSource] = []
    with pytest.raises(ValueError, match="no 1"):
        async with naiad.Runtime(**config) as rt:

            def build(scope: naiad.Scope) -> Any:
                handle, stream = scope.new_input()
                handle.close()
                sources.append(HeldSource())
                return stream.unary(sources[-1], name="held").map(fails).probe()

            probe = rt.dataflow(build).results[0]
            source = sources[0]
            source.send(source.cap, [1])
            with pytest.raises(ValueError, match="no 1"):
                await asyncio.wait_for(probe.wait(), 30)
            for use in (lambda: source.send(source.cap, [2]), lambda: source.cap.downgrade(1)):
                with pytest.raises(naiad.DataflowStopped, match=r"'held'.*ValueError: no 1"):
                    use()
            source.cap.drop()  # releasing stays quiet, as closing an input does
    async with naiad.Runtime(**config) as rt:
        done = rt.dataflow(lambda s: s.from_epochs([[1, 2]]).collect())
    assert sorted(r for part in done.results for r in part) == [(0, 1), (0, 2)]


async def test_an_input_used_while_the_dataflow_is_built() -> None:
    """close() during the build was ignored (the dataflow never finished) and send() said the
    input was closed."""
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> Any:
            handle, stream = scope.new_input("early")
            with pytest.raises(InputError, match="'early': the dataflow is still being built"):
                handle.send([1])
            handle.close()
            return stream.collect()

        dataflow = rt.dataflow(build)
        await asyncio.wait_for(dataflow.finished(), 30)
    assert dataflow.results == [[]]


async def test_the_input_copies_a_list_so_the_caller_may_reuse_it() -> None:
    async with naiad.Runtime() as rt:
        handle, out = rt.dataflow(
            lambda s: (lambda h, st: (h, st.collect()))(*s.new_input())
        ).results[0]
        buffer = [1, 2]
        handle.send(buffer)
        buffer.clear()
        buffer.append(3)
        handle.advance_to(1)
        handle.send(buffer)
        buffer.clear()
        handle.close()
    assert out == [(0, 1), (0, 2), (1, 3)]


async def test_a_dict_or_a_string_is_not_a_batch() -> None:
    """send({"a": 1}) sent the key "a" alone (the value lost, silently) and send("hi") its
    characters (from_epochs refused a dict epoch, but split a string epoch the same way)."""
    async with naiad.Runtime() as rt:
        handle, out = rt.dataflow(
            lambda s: (lambda h, st: (h, st.collect()))(*s.new_input("events"))
        ).results[0]
        for batch, kind in (({"a": 1}, "dict"), ("hi", "str"), (b"hi", "bytes")):
            with pytest.raises(TypeError, match=f"'events': a batch is a list .*not a {kind}"):
                handle.send(batch)
        handle.send([{"a": 1}, "hi"])  # the handle still works; records may be anything
    assert out == [(0, {"a": 1}), (0, "hi")]


async def test_a_value_that_is_no_iterable_is_not_a_batch_and_is_named() -> None:
    """Regression: send(None) and send(5) raised Python's own "'NoneType' object is not
    iterable", naming neither the input nor what a batch is (a str or a dict was named); a
    generator that raises a TypeError itself still raises its own."""

    def broken() -> Any:
        yield 1
        raise TypeError("the source's own error")

    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> Any:
            (handle, stream), (unordered, other) = s.new_input("events"), s.new_unordered_input("u")
            return handle, unordered, stream.concat(other).collect()

        handle, unordered, out = rt.dataflow(build).results[0]
        cap = unordered.capability
        for send, name in ((handle.send, "'events'"), (cap.send, "unordered input 'u'")):
            for batch, kind in ((None, "NoneType"), (5, "int")):
                with pytest.raises(TypeError, match=f"{name}: a batch is a list .*not a {kind}"):
                    send(batch)
            with pytest.raises(TypeError, match="the source's own error"):
                send(broken())
        handle.send([1])
        cap.send([2])
        handle.close()
        unordered.close()
    assert sorted(out) == [(0, 1), (0, 2)]


def test_a_string_is_not_an_epoch() -> None:
    with pytest.raises(TypeError, match="from_epochs: epoch 1 is a str, not a sequence"):
        naiad.run(lambda s: s.from_epochs([["x"], "hi"]).collect(), workers=2)
    assert naiad.run(lambda s: s.from_epochs([["x"], ["hi"]]).collect()) == [[(0, "x"), (1, "hi")]]


async def test_feed_needs_a_lag_of_at_least_one() -> None:
    """With lag 0, feed waited for epoch e to complete before sending it: for ever."""
    async with naiad.Runtime() as rt:
        handle, probe = rt.dataflow(
            lambda s: (lambda h, st: (h, st.probe()))(*s.new_input("paced"))
        ).results[0]
        with pytest.raises(InputError, match="'paced': lag must be >= 1, got 0"):
            await handle.feed([[1]], probe=probe, lag=0)
        await asyncio.wait_for(handle.feed([[1], [2]], probe=probe, lag=1), 30)


async def test_subscribe_inside_a_loop_reports_the_loop_times() -> None:
    """Inside a loop whose work was done before the subscribe first looked (the input sent
    and closed before the workers ran), the subscribe saw an empty frontier, took the loop's
    times for integer epochs and failed (tuple + int)."""
    seen: list[Any] = []

    def build(scope: naiad.Scope) -> naiad.InputHandle:
        handle, stream = scope.new_input()
        with scope.iterative() as loop:
            feedback, cycle = loop.feedback()
            body = stream.enter(loop).concat(cycle)
            body.map(lambda x: x - 1).filter(lambda x: x > 0).connect_loop(feedback)
            body.subscribe(lambda t, rs: seen.append((t.inner, sorted(rs))))
        return handle

    async with naiad.Runtime() as rt:
        dataflow = rt.dataflow(build)
        handle = dataflow.results[0]
        handle.send([3])
        handle.close()
        await asyncio.wait_for(dataflow.finished(), 30)
    assert seen == [(0, [3]), (1, [2]), (2, [1])]


async def test_subscribe_skips_a_long_run_of_empty_epochs() -> None:
    """Epochs that are timestamps: reporting every empty epoch of a jump to 10**12 ran out
    of memory; short runs of empty epochs are still reported."""
    seen: list[Any] = []
    async with naiad.Runtime() as rt:
        handle, done = rt.dataflow(
            lambda s: (lambda h, st: (h, st.subscribe(lambda t, rs: seen.append((t, rs)))))(
                *s.new_input()
            )
        ).results[0]
        handle.send(["a"])
        handle.advance_to(3)
        await asyncio.wait_for(done.wait(2), 30)  # a short run: reported one by one
        handle.send(["b"])
        handle.advance_to(10**12)  # a long run: skipped
        await asyncio.wait_for(done.wait(10**12 - 1), 30)
        handle.send(["c"])
        handle.advance_to(10**12 + 2)
        await asyncio.wait_for(done.wait(10**12 + 1), 30)
        handle.close()
    assert seen == [
        (0, ["a"]),
        (1, []),
        (2, []),
        (3, ["b"]),
        (10**12, ["c"]),
        (10**12 + 1, []),
    ]


class SendsLater(naiad.Vertex):
    """timely's ``session(&cap.delayed(&t))``, as a Rust user first writes it here."""

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap.delayed(cap.time + 1), batch)  # never dropped: the time stays held


async def test_a_capability_collected_while_held_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A delayed capability passed straight to send was never dropped (nothing can drop it
    once unreachable), so the dataflow never completed, without a word. It still cannot
    complete (no drop relies on __del__), but a warning names the operator and the time."""
    caplog.set_level("WARNING", logger="naiad.progress.capability")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(3):
            async with naiad.Runtime() as rt:
                df = rt.dataflow(lambda s: s.from_epochs([[1, 2]]).unary(SendsLater()).collect())
                await df.finished()
    leaks = [r.getMessage() for r in caplog.records if "garbage-collected" in r.getMessage()]
    assert leaks and all(m.startswith("operator 'SendsLater'") for m in leaks)
    assert "time 1 " in leaks[0]
    caplog.clear()
    # a capability kept, used and dropped, and one abandoned with a failed dataflow, say nothing
    await test_a_capability_released_by_the_driver_moves_the_frontier()
    await test_a_capability_the_driver_holds_says_when_the_dataflow_has_stopped({"workers": 1})
    gc.collect()  # shards and their logic refer to each other: collected by the cycle collector
    assert not [r for r in caplog.records if "garbage-collected" in r.getMessage()]
