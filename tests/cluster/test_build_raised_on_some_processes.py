"""A dataflow whose build raises on some processes of a real cluster only (a build that
depends on the process's configuration), in a script that catches the error and builds
another dataflow.

The failing process did not number the dataflow (a build that raises leaves no gap), so its
next dataflow took the number the others had given the first: their builds were compared
with the wrong ones ("process 1 built a different dataflow than process 0", which named no
cause), or, built alike, the next dataflow ran on process 1 as the other processes' first
one, silently, until process 0 found process 1 gone without building its second. Now every
process stops with an error naming the dataflow, the process whose build raised and its
error; a build that raises on every process leaves them all running, as in one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.test_departures import REPORTS, naiad_run

SCRIPT = """
import asyncio, os, naiad
me = int(os.environ["NAIAD_PROCESS"])
RAISING = [int(p) for p in os.environ["RAISING"].split(",")]
SECOND = os.environ["SECOND"]

def say(line):  # one write per line: the processes share stdout
    os.write(1, f"process {me}: {line}\\n".encode())

def first(s):
    stream = s.from_epochs([[1, 2]]).exchange(lambda x: x)
    if me in RAISING:
        raise ValueError(f"bad configuration on process {me}")
    return stream.collect()

def second(s):
    if SECOND == "alike":  # built as the first: the same digest
        return s.from_epochs([[1, 2]]).exchange(lambda x: x).collect()
    return s.from_epochs([[3, 4, 5]]).map(lambda x: x).exchange(lambda x: x).collect()

async def main():
    async with naiad.Runtime() as rt:
        try:
            rt.dataflow(first, name="first")
        except ValueError as e:
            say(f"caught {e}")
        df = rt.dataflow(second, name="second")
        await df.finished()
        got = sorted(x for worker in df.results for _, x in worker)
        say(f"second gave {got}")
"""


def cause(raising: int) -> str:
    return (
        f"dataflow 0: its build raised on process {raising} (ValueError: bad "
        f"configuration on process {raising}, in the build of 'first') and not on process "
        f"{1 - raising}, which runs it"
    )


@pytest.mark.parametrize("second", ["alike", "different"])
@pytest.mark.parametrize("raising", [0, 1])
def test_a_build_raising_on_one_process_stops_every_process_naming_it(
    tmp_path: Path, second: str, raising: int
) -> None:
    done = naiad_run(
        tmp_path, SCRIPT, env={"RAISING": str(raising), "SECOND": second}, tail=REPORTS
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"process {raising}: caught bad configuration on process {raising}" in done.stdout
    for process in (0, 1):  # raised by its build, or heard from the other process
        lines = [
            line for line in done.stdout.splitlines() if line.startswith(f"process {process}: ")
        ]
        assert any(cause(raising) in line for line in lines), done.stdout
    assert "second gave" not in done.stdout and "built a different dataflow" not in done.stdout


def test_a_build_raising_on_every_process_leaves_them_running(tmp_path: Path) -> None:
    done = naiad_run(tmp_path, SCRIPT, env={"RAISING": "0,1", "SECOND": "different"}, tail=REPORTS)
    assert done.returncode == 0, done.stdout + done.stderr
    for process in (0, 1):
        assert f"process {process}: caught bad configuration on process {process}" in done.stdout
    # every record on some worker of some process: each process's view is its own workers'
    gave = [line for line in done.stdout.splitlines() if "second gave" in line]
    records = sorted(
        int(x) for line in gave for x in line.split("[")[1].rstrip("]").split(",") if x
    )
    assert len(gave) == 2 and records == [3, 4, 5], done.stdout
