"""Running ``members.py`` (the streaming script of the cluster tests) and reading what its
processes report: shared by the failure, fuzzing and hostfile tests."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MEMBERS = str(Path(__file__).with_name("members.py"))


def naiad_run(
    processes: int,
    script_args: list[str],
    workers: int = 2,
    index: int | None = None,
    hostfile: Path | None = None,
) -> list[str]:
    """The ``naiad run members.py`` command line: the whole local cluster, or process
    ``index`` of a cluster described by ``hostfile``."""
    member = [] if index is None else ["-p", str(index), "--hostfile", str(hostfile)]
    return [
        sys.executable,
        "-m",
        "naiad.runtime.cli",
        "run",
        MEMBERS,
        "-w",
        str(workers),
        "-n",
        str(processes),
        *member,
        "--",
        *script_args,
    ]


def start_member(
    index: int, processes: int, hostfile: Path, tmp: Path, script_args: list[str], env: Any
) -> subprocess.Popen[bytes]:
    """Process ``index`` of a hostfile cluster, its stderr in ``tmp/stderr-<index>``: a file,
    not a pipe (thousands of logged rejections would fill an unread pipe and block it)."""
    return subprocess.Popen(
        naiad_run(processes, script_args, index=index, hostfile=hostfile),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / f"stderr-{index}").open("wb"),
    )


def wait_started(tmp: Path, members: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    """Until every member reports its cluster connected and running."""
    deadline = time.monotonic() + timeout
    while not all((tmp / f"process-{i}.json.started").exists() for i in range(len(members))):
        assert time.monotonic() < deadline, "the cluster did not start"
        assert all(m.poll() is None for m in members), "a member exited during start-up"
        time.sleep(0.02)


def reports(tmp: Path, processes: int) -> dict[int, dict[str, Any]]:
    """Each process's report (those that wrote one)."""
    out = {}
    for index in range(processes):
        path = tmp / f"process-{index}.json"
        if path.exists():
            out[index] = json.loads(path.read_text())
    return out


def epoch_totals(tmp: Path, processes: int) -> dict[str, int]:
    """The per-epoch sums over all processes, every process having succeeded."""
    totals: dict[str, int] = {}
    for report in reports(tmp, processes).values():
        assert report["ok"] is True, report
        for epoch, total in report["sums"].items():
            totals[epoch] = totals.get(epoch, 0) + total
    return totals


def expected_totals(epochs: int, workers: int) -> dict[str, int]:
    """What ``epoch_totals`` must be: every worker sends ``10 e .. 10 e + 9`` at epoch ``e``."""
    return {str(e): sum(e * 10 + i for i in range(10)) * workers for e in range(epochs)}
