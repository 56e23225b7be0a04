"""``scope.new_unordered_input()`` against a plain-Python oracle: random scripts of
capabilities made, downgraded, dropped and used to send (out of order, several times open at
once, on every worker) deliver every record at its time, and after each step the stream's
frontier is exactly the meet of the capabilities held on every worker; on 1 and 2 workers and
2 simulated processes. Misuse raises at the call and loses nothing."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import InputError

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]

# one step: (worker, what, which held capability, a time step, records)
steps = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.sampled_from(["delayed", "downgrade", "drop", "send", "send", "send"]),
        st.integers(0, 7),
        st.integers(0, 4),
        st.lists(st.integers(0, 99), max_size=4),
    ),
    max_size=25,
)


def build(s: naiad.Scope) -> tuple[naiad.UnorderedInputHandle, list[Any], naiad.ProbeHandle]:
    handle, stream = s.new_unordered_input("events")
    return handle, stream.exchange(lambda x: x).collect(), stream.probe()


async def frontier_reaches(probe: naiad.ProbeHandle, want: list[int]) -> None:
    """Waits until ``probe``'s frontier is ``want``; frontiers only advance, so a frontier that
    went past ``want`` never comes back and fails the wait."""
    for _ in range(2000):
        if sorted(probe.frontier) == want:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"frontier {sorted(probe.frontier)} never became {want}")


async def play(script: list[Any], config: dict[str, int]) -> tuple[Counter[Any], Counter[Any]]:
    want: Counter[Any] = Counter()
    async with naiad.Runtime(**config) as rt:
        df = rt.dataflow(build)
        handles = [h for h, _, _ in df.results]
        probe = df.results[0][2]
        held: list[list[naiad.InputCapability]] = [[h.capability] for h in handles]
        times: list[list[int]] = [[0] for _ in handles]  # the oracle's held times
        for worker, what, which, step, records in script:
            w = worker % len(handles)
            if not held[w]:
                continue
            i = which % len(held[w])
            cap, time = held[w][i], times[w][i]
            assert cap.time == time
            if what == "delayed":
                held[w].append(cap.delayed(time + step))
                times[w].append(time + step)
            elif what == "downgrade":
                cap.downgrade(time + step)
                times[w][i] = time + step
            elif what == "drop":
                cap.drop()
                del held[w][i], times[w][i]
            else:  # at any time at or after the capability's: out of order, late ones too
                cap.send(records, time=time + step)
                want.update((time + step, r) for r in records)
            assert sorted(c.time for c in handles[w].capabilities) == sorted(times[w])
            held_times = [t for ts in times for t in ts]
            await frontier_reaches(probe, [min(held_times)] if held_times else [])
        for h in handles:
            h.close()
        await frontier_reaches(probe, [])
    got = Counter(pair for _, out, _ in df.results for pair in out)
    return got, want


@settings(max_examples=15, deadline=None)
@given(steps, st.sampled_from(CONFIGS))
def test_random_capability_scripts_deliver_every_record_with_exact_frontiers(
    script: list[Any], config: dict[str, int]
) -> None:
    got, want = asyncio.run(play(script, config))
    assert got == want


@pytest.mark.parametrize("config", CONFIGS)
async def test_several_open_times_complete_in_any_order(config: dict[str, int]) -> None:
    completed: list[int] = []
    async with naiad.Runtime(**config) as rt:

        def build(s: naiad.Scope) -> tuple[naiad.UnorderedInputHandle, list[Any], Any]:
            handle, stream = s.new_unordered_input()
            done = stream.subscribe(lambda t, rs: completed.append(t) if rs else None)
            return handle, stream.collect(), done

        df = rt.dataflow(build)
        (first, _, probe), *others = df.results
        for other, _, _ in others:
            other.close()
        start = first.capability
        three, five, nine = start.delayed(3), start.delayed(5), start.delayed(9)
        start.drop()
        nine.send(["i"])
        five.send(["f"], time=7)
        three.send(["c"])
        await frontier_reaches(probe, [3])
        assert completed == []
        five.send(["e"])  # late for nothing: 5 is still held
        three.drop()  # 3 and 4 complete; 5 is held
        await frontier_reaches(probe, [5])
        three_late = five.delayed(6)
        five.drop()
        await frontier_reaches(probe, [6])  # the callbacks up to 5 have run
        assert completed == [3, 5]
        with three_late as six:  # dropped at the end of the block
            six.send(["g"])
        await frontier_reaches(probe, [9])
        assert completed == [3, 5, 6, 7]
        assert first.frontier == naiad.Antichain([9]) and not first.closed
        first.close()
        assert first.closed and not nine.valid
        await df.finished()
    assert completed == [3, 5, 6, 7, 9]
    assert sorted(r for _, out, _ in df.results for r in out) == [
        (3, "c"),
        (5, "e"),
        (6, "g"),
        (7, "f"),
        (9, "i"),
    ]


async def test_numpy_batches_and_numpy_times() -> None:
    async with naiad.Runtime() as rt:
        handle, out = rt.dataflow(
            lambda s: (lambda h, st: (h, st.map(int).collect()))(*s.new_unordered_input())
        ).results[0]
        cap = handle.capability.delayed(np.int64(2))
        cap.send(np.arange(3), time=np.int64(4))
        assert type(cap.time) is int
        handle.close()
    assert out == [(4, 0), (4, 1), (4, 2)]


async def test_misuse_is_named_at_the_call_and_loses_nothing() -> None:
    async with naiad.Runtime() as rt:
        handle, out = rt.dataflow(
            lambda s: (lambda h, st: (h, st.collect()))(*s.new_unordered_input("clicks"))
        ).results[0]
        cap = handle.capability
        cap.downgrade(3)
        with pytest.raises(InputError, match=r"'clicks': cannot send at 1 .* time 3.*backwards"):
            cap.send(["lost?"], time=1)
        with pytest.raises(InputError, match=r"'clicks': cannot delay to 2 .* time 3"):
            cap.delayed(2)
        with pytest.raises(InputError, match=r"'clicks': cannot downgrade to 0 .* time 3"):
            cap.downgrade(0)
        with pytest.raises(TypeError, match=r"'clicks': a time to send at must be an integer"):
            cap.send(["x"], time=2.5)
        with pytest.raises(TypeError, match=r"'clicks': a batch is a list .* not a str"):
            cap.send("abc")
        cap.send(["kept"])  # still held at 3
        later = cap.delayed(5)
        cap.drop()
        for use in (lambda: cap.send(["x"]), cap.drop, lambda: cap.delayed(6)):
            with pytest.raises(InputError, match=r"'clicks': cannot .* time 3: it was dropped"):
                use()
        later.send(["late"])
        handle.close()
        handle.close()  # idempotent
        with pytest.raises(InputError, match=r"time 5: it was dropped \(the input is closed\)"):
            later.send(["x"])
    assert out == [(3, "kept"), (5, "late")]


async def test_a_batch_another_process_refuses_leaves_no_time_held() -> None:
    """A send at a later time holds that time only for the send: when another process
    refuses the batch (a set cannot cross), nothing stays held there and the input still
    completes."""
    async with naiad.Runtime(workers=1, processes=2) as rt:

        def build(s: naiad.Scope) -> Any:
            handle, stream = s.new_unordered_input("clicks")
            return handle, stream.exchange(lambda x: 1 if isinstance(x, set) else 0).collect()

        df = rt.dataflow(build)
        (first, out), (second, _) = df.results
        cap = first.capability
        for time in (5, 0):  # a time the send delays to, and the capability's own
            with pytest.raises(TypeError, match=r"cannot send a builtins\.set between processes"):
                cap.send([1, {"unsendable"}], time=time)
        cap.send([2], time=3)
        first.close()
        second.close()
        # before the fix: TimeoutError naming a capability at time 5 of 'clicks'
        await df.finished(timeout=10)
    assert out == [(3, 2)]


async def test_the_capability_exists_once_the_dataflow_runs() -> None:
    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> Any:
            handle, stream = s.new_unordered_input("early")
            with pytest.raises(InputError, match=r"'early': the dataflow is still being built"):
                handle.capability  # noqa: B018
            closed, _ = s.new_unordered_input("closed")
            closed.close()
            return handle, closed, stream.collect()

        handle, closed, out = rt.dataflow(build).results[0]
        with pytest.raises(InputError, match=r"'closed': it was closed while"):
            closed.capability  # noqa: B018
        assert closed.closed
        handle.capability.send([1])
    assert out == [(0, 1)]  # naiad.Runtime closes what is left open


def test_inside_a_loop_scope_the_capability_is_at_the_loop_s_least_time() -> None:
    async def main() -> list[Any]:
        async with naiad.Runtime() as rt:

            def build(s: naiad.Scope) -> Any:
                with s.iterative() as loop:
                    handle, stream = loop.new_unordered_input()
                    return handle, stream.leave().collect()

            handle, out = rt.dataflow(build).results[0]
            cap = handle.capability
            assert cap.time == naiad.Product(0, 0)
            cap.send(["x"], time=naiad.Product(2, 1))
            with pytest.raises(TypeError, match="Product"):
                cap.send(["y"], time=2)
        return out

    assert asyncio.run(main()) == [(2, "x")]


def explode(x: int) -> int:
    if x < 0:
        raise ValueError("bad record")
    return x


@pytest.mark.parametrize("config", CONFIGS)
async def test_after_a_failure_the_capabilities_say_the_runtime_stopped(
    config: dict[str, int],
) -> None:
    with pytest.raises(ValueError, match="bad record"):
        async with naiad.Runtime(**config) as rt:
            df = rt.dataflow(
                lambda s: (lambda h, st: (h, st.map(explode).probe()))(
                    *s.new_unordered_input("late")
                )
            )
            handle, probe = df.results[0]
            cap = handle.capability
            later = cap.delayed(3)
            cap.send([-1])
            with pytest.raises(ValueError, match="bad record"):
                await probe.wait(0)
            for call in (
                lambda: later.send([1]),
                lambda: later.delayed(4),
                lambda: later.downgrade(4),
                later.drop,
                lambda: handle.capability,
            ):
                with pytest.raises(naiad.DataflowStopped) as info:
                    call()
                assert str(info.value) == (
                    "unordered input 'late': the runtime has stopped after an error: "
                    "ValueError: bad record"
                )
