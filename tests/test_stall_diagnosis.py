"""What holds a dataflow back: ``Dataflow.holders()``, ``finished(timeout=)`` and the warning
the runtime logs while its exit waits for a dataflow that does not move.

The classic hang: an operator keeps a capability past the end of its input, so the dataflow
never completes and ``async with Runtime()`` never exits. These tests build it on purpose and
check that each diagnosis names the operator, the port and the time that hold it, on one
worker, two workers and two simulated processes, and that nothing is disturbed: once the
capability is dropped the dataflow completes with its full output.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import naiad
from naiad.runtime.runtime import Holder

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]


class Keeper(naiad.Vertex):
    """Passes records on; worker 0 keeps a capability at ``keep`` until ``release()``."""

    def __init__(self, keep: Any, kept: list[Keeper]) -> None:
        self.keep = keep
        self.kept_cap: naiad.Capability | None = None
        kept.append(self)

    def on_start(self, cap: naiad.Capability) -> None:
        if self.index == 0:
            self.kept_cap = cap.delayed(self.keep)

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, batch)

    def release(self) -> None:
        if self.kept_cap is not None:
            self.kept_cap.drop()


def build_keeper(keep: int, kept: list[Keeper]) -> Any:
    def build(scope: naiad.Scope) -> Any:
        stream = scope.from_epochs([[1, 2], [3]]).unary(Keeper(keep, kept), name="keeper")
        return stream.collect()

    return build


def release_all(kept: list[Keeper]) -> None:
    for keeper in kept:
        keeper.release()


async def settle(df: naiad.Dataflow, want: list[Holder]) -> list[Holder]:
    """The holders once they are ``want`` (the input's epochs drain asynchronously)."""
    for _ in range(200):
        if df.holders() == want:
            break
        await asyncio.sleep(0.01)
    return df.holders()


@pytest.mark.parametrize("config", CONFIGS, ids=str)
async def test_a_kept_capability_is_named_until_it_is_dropped(config: dict[str, int]) -> None:
    kept: list[Keeper] = []
    async with naiad.Runtime(**config) as rt:
        df = rt.dataflow(build_keeper(5, kept))
        want = [Holder("keeper", 0, "capability", 5, 1)]
        assert await settle(df, want) == want
        assert str(want[0]) == "capability at time 5 on output 0 of 'keeper'"
        release_all(kept)
        await df.finished()
        assert df.holders() == []
    got = sorted(r for part in df.results for r in part)
    assert got == [(0, 1), (0, 2), (1, 3)]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
async def test_an_open_input_and_a_capability_it_cannot_reach_are_both_named(
    config: dict[str, int],
) -> None:
    """The input at epoch 2 precedes a capability at 3 downstream (only the input holds) but
    not one at 1 (both hold)."""
    for keep, expected in ((3, ["input"]), (1, ["input", "keeper"])):
        kept: list[Keeper] = []
        async with naiad.Runtime(**config) as rt:

            def build(scope: naiad.Scope, keep: int = keep, kept: list[Keeper] = kept) -> Any:
                handle, stream = scope.new_input()
                stream.unary(Keeper(keep, kept), name="keeper").collect()
                return handle

            df = rt.dataflow(build)
            for handle in df.results:
                handle.advance_to(2)
            peers = config["workers"] * config.get("processes", 1)
            want = [Holder("input", 0, "capability", 2, peers)]
            if keep < 2:
                want.append(Holder("keeper", 0, "capability", keep, 1))
            got = await settle(df, want)
            assert sorted(h.operator for h in got) == expected
            assert got == want
            release_all(kept)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
async def test_finished_with_a_timeout_names_the_holder_and_leaves_the_dataflow_running(
    config: dict[str, int],
) -> None:
    kept: list[Keeper] = []
    async with naiad.Runtime(**config) as rt:
        df = rt.dataflow(build_keeper(4, kept))
        with pytest.raises(TimeoutError) as info:
            await df.finished(timeout=0.2)
        message = str(info.value)
        assert "'dataflow' did not complete within 0.2 s" in message
        assert "held by: capability at time 4 on output 0 of 'keeper'" in message
        assert not df.done
        release_all(kept)
        await df.finished(timeout=30)  # completes now, with nothing lost
    assert sorted(r for part in df.results for r in part) == [(0, 1), (0, 2), (1, 3)]


async def test_finished_with_a_zero_timeout_polls_a_dataflow_that_has_ended() -> None:
    async with naiad.Runtime(workers=2) as rt:
        df = rt.dataflow(lambda s: s.from_epochs([[1], [2]]).collect())
        await df.finished()
        await df.finished(timeout=0)  # raised TimeoutError ('did not complete within 0 s')
        await df.finished(timeout=0.0)
    assert sorted(r for part in df.results for r in part) == [(0, 1), (1, 2)]


async def test_finished_with_a_timeout_raises_the_failure_of_a_failed_dataflow() -> None:
    def fails(x: int) -> int:
        raise KeyError(x)

    with pytest.raises(KeyError):
        async with naiad.Runtime() as rt:
            df = rt.dataflow(lambda s: s.from_epochs([[1]]).map(fails).collect())
            with pytest.raises(KeyError):
                await df.finished(timeout=30)
            assert df.done
            with pytest.raises(KeyError):  # not a TimeoutError, however short the timeout
                await df.finished(timeout=0)


async def test_a_capability_inside_a_loop_is_named_with_its_loop_time() -> None:
    kept: list[Keeper] = []

    def build(scope: naiad.Scope) -> Any:
        stream = scope.from_epochs([[1]])
        with scope.iterative() as loop:
            handle, cycle = loop.feedback()
            inner = stream.enter(loop).concat(cycle)
            out = inner.unary(Keeper(naiad.Product(0, 3), kept), name="inner keeper")
            out.filter(lambda x: False).connect_loop(handle)
        return out.leave().collect()

    async with naiad.Runtime() as rt:
        df = rt.dataflow(build)
        want = [Holder("inner keeper", 0, "capability", naiad.Product(0, 3), 1)]
        assert await settle(df, want) == want
        release_all(kept)
        await df.finished(timeout=30)


@pytest.mark.parametrize("config", CONFIGS[::2], ids=str)
async def test_the_exit_of_a_runtime_that_waits_for_a_stalled_dataflow_warns_once(
    config: dict[str, int], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="naiad.runtime")
    kept: list[Keeper] = []
    warned = asyncio.Event()

    class Release(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warned.set()

    async def release_after_warnings() -> None:
        await warned.wait()
        await asyncio.sleep(0.3)  # several more intervals: no second warning, nothing moved
        release_all(kept)

    handler = Release()
    logging.getLogger("naiad.runtime").addHandler(handler)
    try:
        async with naiad.Runtime(**config) as rt:
            rt.stall_warning = 0.05
            df = rt.dataflow(build_keeper(7, kept))
            releaser = asyncio.ensure_future(release_after_warnings())
        await releaser
    finally:
        logging.getLogger("naiad.runtime").removeHandler(handler)
    stalls = [r.getMessage() for r in caplog.records if r.name == "naiad.runtime"]
    assert len(stalls) == 1, stalls
    assert "dataflow 'dataflow' has not completed after" in stalls[0]
    assert "held by: capability at time 7 on output 0 of 'keeper'" in stalls[0]
    assert sorted(r for part in df.results for r in part) == [(0, 1), (0, 2), (1, 3)]


async def test_no_warning_for_a_dataflow_that_keeps_moving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A source that moves its capability on, more slowly than the warning interval, from a
    task of its own (a source fed from outside) is not reported while the exit waits."""
    caplog.set_level(logging.WARNING, logger="naiad.runtime")

    class Ticker(naiad.Vertex):
        def on_start(self, cap: naiad.Capability) -> None:
            self.task = asyncio.ensure_future(self.tick(cap.retain()))

        async def tick(self, cap: naiad.Capability) -> None:
            for epoch in range(25):
                await asyncio.sleep(0.02)
                cap.downgrade(epoch)
                self.send(cap, [epoch])
            cap.drop()

    def build(scope: naiad.Scope) -> Any:
        return scope.from_epochs([]).unary(Ticker(), name="ticker").collect()

    async with naiad.Runtime() as rt:
        rt.stall_warning = 0.1  # 5 ticks
        df = rt.dataflow(build)
    assert df.results[0] == [(e, e) for e in range(25)]
    assert [r.getMessage() for r in caplog.records if r.name == "naiad.runtime"] == []


CLUSTER_SCRIPT = """
import asyncio, os, naiad
from test_stall_diagnosis import Keeper, build_keeper, release_all

async def main():
    kept = []
    process = int(os.environ["NAIAD_PROCESS"])
    async with naiad.Runtime() as rt:
        df = rt.dataflow(build_keeper(5, kept))
        try:  # process 1 looks first; process 0, which holds the capability, later
            await df.finished(timeout=1.0 if process else 3.0)
        except TimeoutError as exc:
            print(f"process {process}: {exc}", flush=True)
        release_all(kept)
        await df.finished(timeout=30)
    print(f"process {process} done {sorted(r for part in df.results for r in part)}", flush=True)

asyncio.run(main())
"""


def test_real_processes_name_a_capability_held_in_another_process(tmp_path: Any) -> None:
    """Process 1 names the capability worker 0 keeps in process 0 (its tracker sees the
    whole cluster's pointstamps), over TCP."""
    script = tmp_path / "keeper.py"
    script.write_text(CLUSTER_SCRIPT)
    here = str(Path(__file__).resolve().parent)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, here])}
    run = subprocess.run(
        [sys.executable, "-m", "naiad.runtime.cli", "run", str(script), "-w", "1", "-n", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    for process in (0, 1):
        held = (
            f"process {process}: dataflow 'dataflow' did not complete within "
            f"{3.0 if process == 0 else 1.0} s; held by: capability at time 5 on output 0 of "
            "'keeper'"
        )
        assert held in run.stdout, run.stdout
        # one worker per process: each received its share of the epochs' records
        assert f"process {process} done" in run.stdout
    parts = re.findall(r"done (\[.*?\])", run.stdout)
    got = sorted(r for part in parts for r in ast.literal_eval(part))
    assert got == [(0, 1), (0, 2), (1, 3)]


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (0, ValueError),
        (-1.0, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        ("10", TypeError),
        (True, TypeError),
    ],
)
def test_a_stall_warning_that_is_not_a_positive_number_of_seconds_is_refused(
    value: Any, error: type[Exception]
) -> None:
    """0 made the exit poll the holders without pause, NaN never wait at all."""
    rt = naiad.Runtime()
    with pytest.raises(error, match="stall_warning must be a"):
        rt.stall_warning = value
    assert rt.stall_warning == 10.0  # unchanged
    rt.stall_warning = None
    assert rt.stall_warning is None
    rt.stall_warning = 2
    assert rt.stall_warning == 2.0
