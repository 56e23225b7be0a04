"""When a process dies (SIGKILL, at a random point), the others stop promptly with an error
that names it; nothing hangs. A healthy run of the same script completes correctly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MEMBERS = str(Path(__file__).with_name("members.py"))


def run_cluster(tmp: Path, processes: int, epochs: int, victim: int, die_at: int) -> int:
    """The cluster's exit code; a cluster that hangs fails the test through the timeout."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "naiad.runtime.cli",
            "run",
            MEMBERS,
            "-w",
            "2",
            "-n",
            str(processes),
            "--",
            str(epochs),
            str(victim),
            str(die_at),
            str(tmp),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode


def reports(tmp: Path, processes: int) -> dict[int, dict[str, object]]:
    out = {}
    for index in range(processes):
        path = tmp / f"process-{index}.json"
        if path.exists():
            out[index] = json.loads(path.read_text())
    return out


def test_healthy_cluster_completes(tmp_path: Path) -> None:
    code = run_cluster(tmp_path, 3, epochs=20, victim=-1, die_at=0)
    assert code == 0
    got = reports(tmp_path, 3)
    totals: dict[str, int] = {}
    for report in got.values():
        assert report["ok"] is True
        for epoch, total in report["sums"].items():  # type: ignore[union-attr]
            totals[epoch] = totals.get(epoch, 0) + total
    assert totals == {str(e): sum(e * 10 + i for i in range(10)) * 6 for e in range(20)}


@pytest.mark.parametrize("die_at", [0, 7, 31])
def test_a_killed_process_stops_the_others_promptly(tmp_path: Path, die_at: int) -> None:
    code = run_cluster(tmp_path, 3, epochs=60, victim=1, die_at=die_at)
    assert code != 0  # and returned at all: a hang would end in subprocess's TimeoutExpired
    got = reports(tmp_path, 3)
    assert 1 not in got  # the victim died without a word
    for index in (0, 2):
        assert got[index]["ok"] is False
        assert "process 1" in str(got[index]["error"]), got[index]
