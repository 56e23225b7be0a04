"""The timely operators ``partition``, ``broadcast``, ``delay``, ``capture`` and the unordered
input, and regions, checked once each on real processes over TCP: two processes of two workers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import naiad
from naiad.runtime.harness import run_everywhere
from tests.cluster.test_departures import naiad_run
from tests.cluster.timely_builds import EPOCHS, PAIRS

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


def test_unordered_input_on_real_processes(tmp_path: Path) -> None:
    """Every worker of two processes opens times 2 and 5, sends out of order (5 before 2, 7
    with the capability for 5), drops its initial capability, then the one for 2: each time
    completes once every process has let go of it, and holds every process's records."""
    done = naiad_run(
        tmp_path,
        """
        import asyncio, json, os, naiad
        me = int(os.environ["NAIAD_PROCESS"])
        async def main():
            completed = []
            async with naiad.Runtime() as rt:
                def build(s):
                    handle, stream = s.new_unordered_input()
                    routed = stream.exchange(lambda r: r[1])
                    done = routed.subscribe(lambda t, rs: completed.append((t, sorted(rs))))
                    return handle, done
                df = rt.dataflow(build)
                for w, (handle, _) in zip(df.workers, df.results):
                    start = handle.capability
                    two, five = start.delayed(2), start.delayed(5)
                    start.drop()
                    five.send([(5, w), (5, w + 1)])
                    five.send([(7, w)], time=7)
                    two.send([(2, w)])
                    two.send([(3, w)], time=3)
                    two.drop()
                for _, done in df.results:
                    await done.wait(4)  # every process has dropped 2 and what came before
                for handle, _ in df.results:
                    handle.close()
            with open(os.path.join(os.environ["OUT"], f"{me}.json"), "w") as out:
                json.dump(completed, out)
        asyncio.run(main())
        """,
        env={"OUT": str(tmp_path)},
        workers=2,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got: Counter[tuple[int, int]] = Counter()
    for process in range(2):
        for t, records in json.loads((tmp_path / f"{process}.json").read_text()):
            assert all(r[0] == t for r in records)  # each record at its own time
            got.update((t, r[1]) for r in records)
    want: Counter[tuple[int, int]] = Counter()
    for w in range(4):
        want.update([(5, w), (5, w + 1), (7, w), (2, w), (3, w)])
    assert got == want


def test_exchange_by_key_of_numpy_batches_on_real_processes() -> None:
    """Structured and 2-d batches routed by a key per record arrive as arrays of their dtype
    on the worker of the key (a list of np.void or row arrays could not cross processes)."""
    results = run_everywhere("tests.cluster.timely_builds:exchanged_arrays", 2, 2, "tcp")
    assert len(results) == 4
    got: Counter[Any] = Counter()
    for index, seen in enumerate(results):
        for t, dtype, records in seen:
            assert dtype in (str(PAIRS), "int64")
            for record in records:
                assert record[0] % 4 == index
                got[(t, tuple(record))] += 1
    want = Counter((t, (r, r / 2)) for t, r in ALL.elements())
    want.update((t, (r, -r)) for t, r in ALL.elements())
    assert got == want
