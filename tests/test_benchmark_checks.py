"""The benchmarks' correctness checks catch a wrong naiad.

Each case runs a benchmark on tiny inputs with a fault injected into naiad (a
``sitecustomize`` module on ``PYTHONPATH``, so the benchmark's cluster processes, which
inherit the environment, run the faulty code too) and asserts that the report says
``"correct": false``: a check that cannot fail is no check. A run without a fault reports
``true`` (``tests/test_benchmarks_smoke.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

WCC = """
import naiad.libraries.graph as graph

_wcc = graph.wcc


def wcc(edges, prioritized=False):
    labels = _wcc(edges, prioritized=prioritized)
    return {fault}


graph.wcc = wcc
"""

WCC_FAULTS = {
    # every node labelled by itself: wrong labels (caught before the audit too)
    "self_labels": "labels.map(lambda r: (r[0], r[0]))",
    # the roots' (node, node) records missing: a node without a label was taken as its own root
    "roots_dropped": "labels.filter(lambda r: r[0] != r[1])",
    # every record twice: multiplicities were not read
    "doubled": "labels.concat(labels)",
    # every node that is no root also labelled by itself: two labels for one node
    "stale_label": "labels.concat(labels.filter(lambda r: r[0] != r[1]).map(lambda r: r[:1] * 2))",
    # naiad crashes: no answer was checked, but the report said correct
    "crash": "(_ for _ in ()).throw(RuntimeError('injected fault'))",
}


def run_with_fault(tmp_path: Path, fault: str, *args: str) -> dict[str, Any]:
    """The report of ``python -m benchmarks ARGS --tiny`` with ``fault`` as sitecustomize."""
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent(fault))
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", *args, "--tiny"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    report: dict[str, Any] = json.loads(lines[-1])
    return report


@pytest.mark.parametrize("fault", sorted(WCC_FAULTS))
def test_wcc_reports_a_wrong_naiad(tmp_path: Path, fault: str) -> None:
    report = run_with_fault(tmp_path, WCC.format(fault=WCC_FAULTS[fault]), "wcc", "--no-pathway")
    assert report["correct"] is False, report["results"]
    for name in ("naiad_p1", "naiad_p2", "naiad_p1_plain"):
        assert report["results"][name].get("correct") is not True
    assert report["results"]["scipy"]["correct"] is True  # the peers were right


@pytest.mark.parametrize("fault", ["roots_dropped", "doubled", "crash"])
def test_wcc_incremental_reports_a_wrong_naiad(tmp_path: Path, fault: str) -> None:
    report = run_with_fault(
        tmp_path, WCC.format(fault=WCC_FAULTS[fault]), "wcc-incremental", "--no-pathway"
    )
    assert report["correct"] is False, report["results"]
    assert report["results"]["naiad"].get("correct") is not True


def test_wcc_reports_a_right_naiad(tmp_path: Path) -> None:
    """The control: the wrapper itself, with no fault, changes nothing."""
    report = run_with_fault(tmp_path, WCC.format(fault="labels"), "wcc", "--no-pathway")
    assert report["correct"] is True, report["results"]
    assert report["params"]["reps"]["networkx"] == 1


JOIN = """
from naiad.differential import Collection

_join = Collection.join


def join(self, other, name="join"):
    return {fault}


Collection.join = join
"""

JOIN_FAULTS = {
    # half the output missing: the size differs (caught before the audit too)
    "half_dropped": "_join(self, other, name).filter(lambda r: r[1] % 2 == 0)",
    # every joined value off by one: the size was all that was checked
    "wrong_values": "_join(self, other, name).map(lambda r: (r[0], r[1], r[2] + 1))",
}


@pytest.mark.parametrize("fault", sorted(JOIN_FAULTS))
def test_arrange_reports_a_wrong_join(tmp_path: Path, fault: str) -> None:
    report = run_with_fault(tmp_path, JOIN.format(fault=JOIN_FAULTS[fault]), "arrange")
    assert report["correct"] is False, report["results"]
    results = report["results"]
    assert results["install_small"]["correct"] is False
    assert results["install_large"]["correct"] is False
    assert results["naiad"]["correct"] is True  # the counts use no join


EXCHANGE = """
import numpy as np
from naiad.dataflow.channels import ExchangePusher

_partition = ExchangePusher._partition


def partition(self, batch):
    parts = _partition(self, batch)
    for j, (dest, part) in enumerate(parts):
        if len(part):
            {fault}
            break
    return parts


ExchangePusher._partition = partition
"""

EXCHANGE_FAULTS = {
    # one record of every batch lost (caught before the audit too)
    "dropped": "parts[j] = (dest, part[1:])",
    # one record of every batch changed, to another record of the same worker: the count and
    # the routing were all that was checked
    "changed": "parts[j] = (dest, np.concatenate([part[:1] + self.peers, part[1:]]))",
}


@pytest.mark.parametrize("fault", sorted(EXCHANGE_FAULTS))
@pytest.mark.parametrize("processes", [1, 2])
def test_exchange_reports_a_wrong_naiad(tmp_path: Path, fault: str, processes: int) -> None:
    site = EXCHANGE.format(fault=EXCHANGE_FAULTS[fault])
    args = ["exchange", "--processes", str(processes), "--transport", "inproc"]
    report = run_with_fault(tmp_path, site, *args)
    assert report["correct"] is False, report["results"]
    floor, naiad = (f"asyncio_w{2 * processes}", "naiad_w2" if processes == 1 else "naiad_p2_w2")
    assert report["results"][naiad]["correct"] is False
    assert report["results"][floor]["correct"] is True  # the floor has no naiad channel
