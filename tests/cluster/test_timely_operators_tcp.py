"""The timely operators that move records between workers (``partition``, ``broadcast``),
checked once each on real processes over TCP: two processes of two workers."""

from __future__ import annotations

from collections import Counter

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
