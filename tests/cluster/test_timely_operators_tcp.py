"""The timely operators ``partition``, ``broadcast``, ``delay`` and ``capture``, and regions,
checked once each on real processes over TCP: two processes of two workers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import naiad
from naiad.runtime.harness import run_everywhere
from tests.cluster.timely_builds import EPOCHS

ALL = Counter((t, r) for t, rs in enumerate(EPOCHS) for r in rs)


def test_partition_on_real_processes() -> None:
    results = run_everywhere("tests.cluster.timely_builds:partition_parts", 2, 2, "tcp")
    assert len(results) == 4
    for form in range(2):
        for part in range(3):
            got = Counter(pair for r in results for pair in r[form * 3 + part])
            assert got == Counter({k: n for k, n in ALL.items() if k[1] % 3 == part})


def test_broadcast_on_real_processes() -> None:
    results = run_everywhere("tests.cluster.timely_builds:broadcast_everywhere", 2, 2, "tcp")
    assert len(results) == 4
    for lists, arrays in results:  # every worker of both processes has every record
        assert Counter(lists) == ALL
        assert Counter(arrays) == ALL


def test_delay_on_real_processes() -> None:
    results = run_everywhere("tests.cluster.timely_builds:delayed", 2, 2, "tcp")
    assert len(results) == 4
    want = Counter((t + r % 4, r) for t, rs in enumerate(EPOCHS) for r in rs)
    assert Counter(pair for part in results for pair in part) == want
    for index, part in enumerate(results):  # delayed on the worker the exchange chose
        assert all(r % 4 == index for _, r in part)


def test_logs_captured_on_real_processes_replay_on_one_worker() -> None:
    logs = run_everywhere("tests.cluster.timely_builds:captured", 2, 2, "tcp")
    assert len(logs) == 4

    def build(scope: naiad.Scope) -> tuple[naiad.CaptureLog, list[Any]]:
        stream = scope.replay(logs)
        return stream.capture(), stream.collect()

    ((log, got),) = naiad.run(build)
    assert Counter(got) == ALL
    assert log.frontiers()[-1] == [] and log.complete
    passed = {tuple(f) for events in logs for f in naiad.CaptureLog(events).frontiers()}
    assert all(tuple(f) in passed for f in log.frontiers())


def test_regions_on_real_processes() -> None:
    results = run_everywhere("tests.cluster.timely_builds:in_regions", 2, 2, "tcp")
    assert len(results) == 4
    want = Counter((t, v) for t, rs in enumerate(EPOCHS) for r in rs for v in range(r % 5 + 1))
    assert Counter(pair for part in results for pair in part) == want
