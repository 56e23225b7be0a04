"""Smoke tests of the benchmarks: each runs on tiny inputs and reports a correct answer.

Nothing here asserts a speed: the benchmarks' ratios are for people to read, on a quiet machine.
The cluster modes (``--processes 2``) start real processes over TCP on loopback (about a
second per cluster run).
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
    assert names == {
        "coordination",
        "exchange",
        "wordcount",
        "progress-traffic",
        "wcc",
        "wcc-incremental",
        "arrange",
        "sharing",
    }


def test_unknown_benchmark_is_refused() -> None:
    proc = run_benchmark("no-such-benchmark")
    assert proc.returncode == 2
    assert "unknown benchmark" in proc.stderr


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("coordination", []),
        ("exchange", ["--workers", "2,3"]),
        ("exchange", ["--processes", "2", "--transport", "inproc"]),
        ("wordcount", []),
        ("coordination", ["--processes", "2"]),
        ("wordcount", ["--processes", "2"]),
        ("arrange", []),
        ("sharing", []),
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


def cluster_report(*args: str) -> dict[str, Any]:
    proc = run_benchmark(*args, "--tiny")
    assert proc.returncode == 0, proc.stderr
    report = last_json(proc.stdout)
    assert report["correct"] is True, report
    return report


def test_exchange_over_tcp_reports_the_raw_socket_floor() -> None:
    report = cluster_report("exchange", "--processes", "2", "--workers", "1,2")
    results = report["results"]
    assert results["raw_tcp"]["bytes_per_s"] > 0
    for name in ("naiad_p2_w1", "naiad_p2_w2"):  # 1 and 2 workers (inputs) per process
        naiad = results[name]
        assert naiad["correct"] is True
        assert {"records_per_s", "bytes_per_s", "data_frames", "progress_frames"} <= naiad.keys()
    assert report["goals"][0]["ratio"] == "naiad_p2_w1_bytes_over_raw"
    assert "start-up" in report["params"]["timing"]


def test_progress_traffic_counts_both_modes_and_explains_them() -> None:
    report = cluster_report("progress-traffic", "--modes", "off,local")
    assert report["benchmark"] == "progress-traffic"
    assert report.keys() >= KEYS and "reps" in report["params"]
    results = report["results"]
    for workload in ("wcc", "circulate"):
        for mode in ("off", "local"):
            entry = results[f"{workload}_{mode}"]
            assert entry["progress_bytes"] > 0 and entry["progress_frames"] > 0
            assert entry["correct"] is True
            analysis = results[f"analysis_{workload}_{mode}"]
            assert analysis["flushes"] > 0 and analysis["messages_received"] > 0
        assert f"{workload}_off_over_local_bytes" in report["ratios"]
        assert {f"{workload}_proto_turn", f"{workload}_proto_resident"} <= results.keys()
    assert [g["ratio"] for g in report["goals"]] == [
        "wcc_off_over_local_bytes",
        "circulate_off_over_local_bytes",
    ]


def test_arrange_reports_throughput_and_installs() -> None:
    report = cluster_report("arrange")
    results = report["results"]
    for name in ("naiad", "naiad_total", "naiad_generic", "naiad_records", "dict"):
        assert results[name]["updates_per_s"] > 0 and results[name]["correct"] is True
    for name in ("install_small", "install_large"):
        assert results[name]["seconds"] > 0 and results[name]["output_records"] >= 0
    assert {
        "naiad_over_dict",
        "naiad_total_over_dict",
        "naiad_generic_over_dict",
        "install_large_over_small",
        "install_large_over_arrange",
    } <= (report["ratios"].keys())


def test_sharing_runs_every_variant_in_its_own_process() -> None:
    report = cluster_report("sharing")
    results = report["results"]
    assert results["unshared"]["edge_arrangements"] > results["shared"]["edge_arrangements"] == 1
    assert results["shared_import"]["edge_arrangements"] == 1
    sizes = results["unshared"]["result_sizes"]
    assert set(sizes) == {"degree", "hop1", "hop2", "neighbour_degree"}
    for variant in ("shared", "shared_import"):
        assert results[variant]["result_sizes"] == sizes
        assert results[variant]["rss_growth_mb"] >= 0
    assert report["ratios"]["unshared_over_shared_bytes"] > 1


def test_coordination_quick_is_a_tenth_of_the_full_size() -> None:
    """``--quick`` runs a tenth of the 20,000 iterations (``/work/shared/BENCHMARKS.md``)."""
    proc = run_benchmark("coordination", "--quick", "--reps", "1", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    report = last_json(proc.stdout)
    assert report["quick"] is True and report["correct"] is True
    assert report["params"]["iterations"] == 20_000 // 10
