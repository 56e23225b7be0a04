"""Smoke tests of the benchmarks: each runs on tiny inputs and reports a correct answer.

Nothing here asserts a speed: the benchmarks' ratios are for people to read, on a quiet machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"benchmark", "quick", "params", "results", "ratios", "goals", "correct"}


def run_benchmark(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def last_json(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines, "the benchmark printed nothing on stdout"
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def test_list_names_every_benchmark() -> None:
    proc = run_benchmark("--list")
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert names == {"coordination", "exchange", "wordcount"}


def test_unknown_benchmark_is_refused() -> None:
    proc = run_benchmark("no-such-benchmark")
    assert proc.returncode == 2
    assert "unknown benchmark" in proc.stderr


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("coordination", []),
        ("exchange", ["--workers", "2,3"]),
        ("wordcount", []),
    ],
)
def test_benchmark_reports_a_correct_answer(name: str, extra: list[str]) -> None:
    proc = run_benchmark(name, "--tiny", *extra)
    assert proc.returncode == 0, proc.stderr
    report = last_json(proc.stdout)
    assert report.keys() >= KEYS
    assert report["benchmark"] == name
    assert report["correct"] is True, report
    assert report["results"] and report["goals"]
    for entry in report["results"].values():
        assert isinstance(entry, dict)
    for g in report["goals"]:
        assert {"ratio", "op", "value", "met"} <= g.keys()
        assert g["ratio"] in report["ratios"]
    assert "reps" in report["params"]
