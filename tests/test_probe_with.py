"""One ``ProbeHandle`` on several streams (``probe_with``): its frontier is the meet of theirs.

Oracle: inputs advanced by random steps; the streams they feed are probed by one handle, whose
frontier must then be exactly the least epoch any input still holds (an input that closed
holds none), on 1 and 2 workers and 2 simulated processes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import BuildError

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 1, "processes": 2}]

# per step: (which input, how far it advances; 0 closes it)
steps = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=8)


def build_three(s: naiad.Scope) -> tuple[list[naiad.InputHandle], naiad.ProbeHandle]:
    probe = naiad.ProbeHandle()
    inputs = []
    for k in range(3):
        handle, stream = s.new_input(name=f"in{k}")
        # different paths to the probe: a map, an exchange, the input itself
        [stream.map(str), stream.exchange(lambda x: x), stream][k].probe_with(probe)
        inputs.append(handle)
    return inputs, probe


async def check_meet(config: dict[str, int], moves: list[tuple[int, int]]) -> None:
    async with naiad.Runtime(**config) as rt:
        df = rt.dataflow(build_three)
        epochs: list[int | None] = [0, 0, 0]
        probes = [probe for _, probe in df.results]
        for which, step in moves:
            current = epochs[which]
            if current is None:
                continue
            epochs[which] = None if step == 0 else current + step
            for inputs, _ in df.results:  # every worker's input, alike
                if step == 0:
                    inputs[which].close()
                else:
                    inputs[which].advance_to(current + step)
            held = [e for e in epochs if e is not None]
            for probe in probes:
                if not held:
                    await asyncio.wait_for(probe.wait(), 10)
                    assert probe.done() and probe.frontier.is_empty()
                    continue
                least = min(held)
                if least > 0:
                    await asyncio.wait_for(probe.wait(least - 1), 10)
                assert list(probe.frontier) == [least]
                assert probe.less_equal(least) and not probe.less_equal(least - 1)
                assert probe.less_than(least + 1) and not probe.less_than(least)
                assert not probe.done()
        df.close_inputs()


@settings(max_examples=12, deadline=None)
@given(steps, st.sampled_from(CONFIGS))
def test_a_handle_on_several_streams_reports_their_meet(
    moves: list[tuple[int, int]], config: dict[str, int]
) -> None:
    asyncio.run(check_meet(config, moves))


async def test_wait_returns_once_every_stream_probed_passed_the_time() -> None:
    async with naiad.Runtime() as rt:
        ((a, b, probe),) = rt.dataflow(
            lambda s: (lambda x, y: (x[0], y[0], build_pair(x[1], y[1])))(
                s.new_input(), s.new_input()
            )
        ).results
        waiting = asyncio.ensure_future(probe.wait(3))
        a.advance_to(10)
        await asyncio.sleep(0.05)
        assert not waiting.done()  # b still holds epoch 0
        b.advance_to(4)
        await asyncio.wait_for(waiting, 10)
        a.close()
        b.close()
        await asyncio.wait_for(probe.wait(), 10)


def build_pair(x: naiad.Stream, y: naiad.Stream) -> naiad.ProbeHandle:
    probe = naiad.ProbeHandle()
    assert x.probe_with(probe) is x  # returns the stream, for chaining
    y.probe_with(probe)
    return probe


async def test_one_handle_on_streams_of_two_dataflows() -> None:
    probe = naiad.ProbeHandle()
    assert probe.done()  # probes nothing yet: an empty frontier, as timely's new()

    def build(s: naiad.Scope) -> naiad.InputHandle:
        handle, stream = s.new_input()
        stream.probe_with(probe)
        return handle

    async with naiad.Runtime() as rt:
        (first,) = rt.dataflow(build).results
        (second,) = rt.dataflow(build).results
        first.advance_to(2)
        second.advance_to(7)
        await asyncio.wait_for(probe.wait(1), 10)
        assert list(probe.frontier) == [2]
        first.close()
        await asyncio.wait_for(probe.wait(6), 10)
        assert list(probe.frontier) == [7]
        second.close()
        await asyncio.wait_for(probe.wait(), 10)


def test_probe_with_refuses_a_non_handle_and_mixed_depths() -> None:
    with pytest.raises(TypeError, match=r"probe_with 'P': the handle must be a naiad\.ProbeHandle"):
        naiad.run(lambda s: s.from_epochs([[1]]).probe_with(object(), name="P"))  # type: ignore[arg-type]

    def mixed(s: naiad.Scope) -> Any:
        probe = naiad.ProbeHandle()
        stream = s.from_epochs([[1]]).probe_with(probe)
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            stream.enter(loop).concat(cycle).probe_with(probe, name="inner").filter(
                lambda x: False
            ).connect_loop(handle)

    with pytest.raises(BuildError, match="probe_with 'inner': the handle probes streams of"):
        naiad.run(mixed)


async def test_a_failure_reaches_waiters_of_a_shared_handle() -> None:
    def boom(x: int) -> int:
        raise ZeroDivisionError("boom")

    waited: list[BaseException] = []
    with pytest.raises(ZeroDivisionError):  # the runtime reports it too, on leaving
        async with naiad.Runtime() as rt:

            def build(s: naiad.Scope) -> tuple[naiad.InputHandle, naiad.ProbeHandle]:
                probe = naiad.ProbeHandle()
                handle, stream = s.new_input()
                stream.probe_with(probe)
                stream.map(boom).probe_with(probe)
                return handle, probe

            ((handle, probe),) = rt.dataflow(build).results
            waiting = asyncio.ensure_future(probe.wait(0))
            handle.send([1])
            handle.advance_to(1)
            try:
                await asyncio.wait_for(waiting, 10)
            except ZeroDivisionError as exc:
                waited.append(exc)
    assert len(waited) == 1


async def test_a_probe_frontier_reads_alike_for_one_stream_and_for_several() -> None:
    """``list(frontier)`` and ``frontier.elements``: on one stream the frontier is the
    stream's own (a MutableAntichain), on several their meet (an Antichain); both read alike
    (one stream's used to raise "'MutableAntichain' object is not iterable")."""
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> Any:
            (a, sa), (b, sb) = scope.new_input(), scope.new_input()
            shared = naiad.ProbeHandle()
            sa.probe_with(shared)
            sb.probe_with(shared)
            return a, b, sa.probe(), sa.subscribe(lambda t, rs: None), shared

        df = rt.dataflow(build)
        a, b, one, subscribed, shared = df.results[0]
        a.advance_to(3)
        b.advance_to(5)
        await one.wait(2)
        await shared.wait(2)
        await subscribed.wait(2)
        for probe in (one, subscribed, shared):
            assert list(probe.frontier) == probe.frontier.elements == [3], probe
        a.close()
        b.close()


@pytest.mark.parametrize("config", CONFIGS)
async def test_dataflows_that_ended_leave_a_shared_handle(config: dict[str, int]) -> None:
    """A handle shared by many short dataflows and one long one holds (and meets) only the
    long one's sources once the others end: an empty frontier adds nothing to a meet."""
    probe = naiad.ProbeHandle()

    def build(s: naiad.Scope) -> naiad.InputHandle:
        handle, stream = s.new_input()
        stream.map(lambda x: x).probe_with(probe)
        return handle

    async with naiad.Runtime(**config) as rt:
        long_lived = rt.dataflow(build)
        for handle in long_lived.results:
            handle.advance_to(5)
        await asyncio.wait_for(probe.wait(4), 10)
        live = len(probe._sources)
        assert live >= 1
        for i in range(20):
            df = rt.dataflow(build)
            for handle in df.results:
                handle.send([i])
                handle.close()
            await asyncio.wait_for(df.finished(), 10)
            assert len(probe._sources) == live, i  # the ended dataflow's sources are gone
            assert list(probe.frontier) == [5]  # and the live one still counts
        for handle in long_lived.results:
            handle.advance_to(9)
        await asyncio.wait_for(probe.wait(8), 10)
        assert list(probe.frontier) == [9]
        long_lived.close_inputs()
        await asyncio.wait_for(probe.wait(), 10)
        assert probe._sources == [] and probe.done()


def test_probe_with_refuses_product_and_lex_loops_on_one_handle() -> None:
    """``Product(3, 0) == Lex(3, 0)`` as tuples, but the two are ordered differently: one
    handle's meet over both would compare one loop's times by the other's order."""

    def mixed(first: type, second: type) -> Any:
        def build(s: naiad.Scope) -> Any:
            probe = naiad.ProbeHandle()
            stream = s.from_epochs([[1]])
            for k, time_class in enumerate((first, second)):
                with s.iterative(time_class=time_class) as loop:
                    stream.enter(loop).probe_with(probe, name=f"p{k}")

        return build

    for first, second in [(naiad.Product, naiad.Lex), (naiad.Lex, naiad.Product)]:
        with pytest.raises(BuildError) as info:
            naiad.run(mixed(first, second))
        message = str(info.value)
        assert "probe_with 'p1'" in message
        assert f"{first.__name__}(outer=0, inner=0)" in message
        assert f"{second.__name__}(outer=0, inner=0)" in message
    naiad.run(mixed(naiad.Lex, naiad.Lex))  # one order, one handle: fine


async def test_a_lex_handle_refuses_product_times() -> None:
    """A handle on a Lex loop reads times as Lex; a Product time (equal as a tuple) is an
    error, not a comparison by the wrong order."""
    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> Any:
            probe = naiad.ProbeHandle()
            handle, stream = s.new_input()
            with s.iterative(time_class=naiad.Lex) as loop:
                stream.enter(loop).probe_with(probe)
            return handle, probe

        ((handle, probe),) = rt.dataflow(build).results
        handle.advance_to(3)
        await asyncio.wait_for(probe.wait(naiad.Lex(2, 7)), 10)
        assert probe.less_equal(naiad.Lex(3, 0)) and not probe.less_equal(naiad.Lex(2, 99))
        with pytest.raises(TypeError, match=r"a probe's time must have the shape of Lex"):
            probe.less_equal(naiad.Product(2, 0))
        handle.close()


@pytest.mark.parametrize("kind", [naiad.Product, naiad.Lex])
async def test_a_subscribe_handle_refuses_the_other_kind_of_loop_time(kind: type) -> None:
    """A subscription's handle had no shape, only a depth: on a Product loop held at
    (0, 7) it answered ``less_equal(Lex(1, 0))`` False, "complete", by the Product order,
    while the callbacks of Lex-earlier times such as (0, 8) had not run; ``wait(Lex(1, 0))``
    returned at once, and waits for Product(1, 0) and Lex(1, 0) shared one entry. A probe
    on the same stream refuses the other kind; so does the subscription's handle now."""
    other = naiad.Lex if kind is naiad.Product else naiad.Product
    seen: list[Any] = []
    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> Any:
            with s.iterative(time_class=kind) as loop:
                handle, stream = loop.new_unordered_input()
                return handle, stream.subscribe(lambda t, rs: seen.append(t)), stream.probe()

        ((handle, sub, probe),) = rt.dataflow(build).results
        cap = handle.capability
        held = cap.delayed(kind(0, 7))
        cap.drop()
        await asyncio.wait_for(sub.wait(kind(0, 6)), 10)
        assert sub.less_equal(kind(0, 7)) and not sub.less_equal(kind(0, 6))
        for read in (sub, probe):
            with pytest.raises(TypeError, match=rf"time must have the shape of {kind.__name__}"):
                read.less_equal(other(1, 0))
            with pytest.raises(TypeError, match=rf"time must have the shape of {kind.__name__}"):
                await read.wait(other(1, 0))
        assert sub.less_equal(kind(1, 0)) == (kind is naiad.Lex)  # (0, 7) before it?
        held.drop()
        await asyncio.wait_for(sub.wait(), 10)
    assert seen == []  # nothing was sent: no time has records (and loop times are not epochs)


def _loop_probe(handle: naiad.ProbeHandle, time_class: Any) -> Any:
    """A build that probes a loop's stream of ``time_class`` with ``handle``, then fails."""

    def build(s: naiad.Scope) -> None:
        with s.iterative(time_class=time_class) as loop:
            s.from_epochs([[1]]).enter(loop).probe_with(handle)
        raise RuntimeError("the user's build failed after probe_with")

    return build


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("failed", [naiad.Product, naiad.Lex])
async def test_a_failed_build_gives_back_the_shape_it_gave_a_shared_handle(
    config: dict[str, int], failed: type
) -> None:
    """A build that probed a loop with a fresh shared handle and then raised left the
    handle shaped like that loop's times: a later build probing root-scope times, or the
    other kind of loop, with it was refused ("times 1 loop(s) deep, and ... 0")."""
    async with naiad.Runtime(**config) as rt:
        probe = naiad.ProbeHandle()
        with pytest.raises(RuntimeError, match="failed after probe_with"):
            rt.dataflow(_loop_probe(probe, failed))
        assert probe._sources == [] and probe.done()  # nothing of the failed build stays

        other = naiad.Lex if failed is naiad.Product else naiad.Product

        def build(s: naiad.Scope) -> naiad.InputHandle:
            handle, stream = s.new_input()
            stream.probe_with(probe)
            with s.iterative(time_class=other) as loop:
                # a handle of its own for the other kind of loop: accepted too
                stream.enter(loop).probe_with(inner)
            return handle

        inner = naiad.ProbeHandle()
        with pytest.raises(RuntimeError):
            rt.dataflow(_loop_probe(inner, failed))
        df = rt.dataflow(build)
        for handle in df.results:
            handle.advance_to(4)
        await asyncio.wait_for(probe.wait(3), 10)
        assert list(probe.frontier) == [4]
        await asyncio.wait_for(inner.wait(other(3, 9)), 10)
        assert list(inner.frontier) == [other(4, 0)]
        df.close_inputs()
        await asyncio.wait_for(probe.wait(), 10)


def test_a_stream_the_build_refuses_leaves_nothing_in_the_handle() -> None:
    """probe_with on a stream of a dataflow already built (add_operator refuses it) left the
    handle shaped by it and holding a source with no shard behind it."""
    kept: list[naiad.Stream] = []
    naiad.run(lambda s: kept.append(s.from_epochs([[1]])))
    probe = naiad.ProbeHandle()
    with pytest.raises(BuildError, match="already built"):
        naiad.run(lambda s: kept[0].probe_with(probe))
    assert probe._sources == [] and probe.done()

    def build(s: naiad.Scope) -> Any:
        with s.iterative() as loop:  # another depth than the refused stream's
            s.from_epochs([[1]]).enter(loop).probe_with(probe)

    naiad.run(build)
    assert probe.done()
