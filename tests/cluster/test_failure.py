"""When a process dies (SIGKILL, at a random point), the others stop promptly with an error
that names it; nothing hangs. A healthy run of the same script completes correctly."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cluster.streaming import epoch_totals, expected_totals, naiad_run, reports


def run_cluster(tmp: Path, processes: int, epochs: int, victim: int, die_at: int) -> int:
    """The cluster's exit code; a cluster that hangs fails the test through the timeout."""
    done = subprocess.run(
        naiad_run(processes, [str(epochs), str(victim), str(die_at), str(tmp)]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode


def test_healthy_cluster_completes(tmp_path: Path) -> None:
    code = run_cluster(tmp_path, 3, epochs=20, victim=-1, die_at=0)
    assert code == 0
    assert epoch_totals(tmp_path, 3) == expected_totals(20, workers=6)


@pytest.mark.parametrize("die_at", [0, 7, 31])
def test_a_killed_process_stops_the_others_promptly(tmp_path: Path, die_at: int) -> None:
    code = run_cluster(tmp_path, 3, epochs=60, victim=1, die_at=die_at)
    assert code != 0  # and returned at all: a hang would end in subprocess's TimeoutExpired
    got = reports(tmp_path, 3)
    assert 1 not in got  # the victim died without a word
    for index in (0, 2):
        assert got[index]["ok"] is False
        assert "process 1" in str(got[index]["error"]), got[index]
