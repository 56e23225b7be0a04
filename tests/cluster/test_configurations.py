"""The same dataflows, checked by the same oracles, on every configuration: one process, and
two processes with one and two workers each, over the in-process and the TCP transport
(real processes on loopback)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from naiad.operators.gather import GatheredElsewhere
from naiad.runtime.harness import run_everywhere
from tests.cluster import builds

CONFIGS = [
    pytest.param("inproc", 1, 1, id="1 process"),
    pytest.param("inproc", 2, 1, id="inproc 2x1"),
    pytest.param("inproc", 2, 2, id="inproc 2x2"),
    pytest.param("tcp", 2, 1, id="tcp 2x1"),
    pytest.param("tcp", 2, 2, id="tcp 2x2"),
]


def gather(results: list[Any]) -> Counter[Any]:
    return Counter((t, r) for part in results for t, r in part)


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_wordcount(transport: str, processes: int, workers: int) -> None:
    results = run_everywhere("tests.cluster.builds:wordcount", workers, processes, transport)
    assert len(results) == processes * workers
    got = gather(results)
    want = Counter(
        (t, pair) for t, words in enumerate(builds.word_epochs()) for pair in Counter(words).items()
    )
    assert got == want
    for index, part in enumerate(results):  # each word counted on the worker its key names
        assert all(builds.crc(w) % (processes * workers) == index for _, (w, _) in part)


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_loop_with_exchange(transport: str, processes: int, workers: int) -> None:
    results = run_everywhere("tests.cluster.builds:countdown_loop", workers, processes, transport)
    epochs = [[5, 3, 8], [2, 9], [], [4]]
    want = Counter((e, n) for e, ns in enumerate(epochs) for start in ns for n in range(start + 1))
    assert gather(results) == want


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_nested_loops(transport: str, processes: int, workers: int) -> None:
    results = run_everywhere("tests.cluster.builds:nested_loops", workers, processes, transport)

    def settle(n: int, k: int) -> list[tuple[int, int]]:
        out = [(n, 0)]  # k counts down to 0 in the inner loop
        if n > 0:
            out += settle(n - 1, 2)
        return out

    want: Counter[Any] = Counter()
    for epoch, pairs in enumerate([[(3, 2), (1, 4)], [(2, 1)]]):
        for n, k in pairs:
            want.update((epoch, p) for p in settle(n, k))
    assert gather(results) == want


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_numpy_batches_cross_processes(transport: str, processes: int, workers: int) -> None:
    results = run_everywhere("tests.cluster.builds:numpy_exchange", workers, processes, transport)
    want = Counter((i, x) for i in range(4) for x in range(i * 100, i * 100 + 37))
    assert gather(results) == want  # and map_batch kept only correctly routed records


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_distinct_count(transport: str, processes: int, workers: int) -> None:
    results = run_everywhere("tests.cluster.builds:distinct_count", workers, processes, transport)
    epochs = builds.word_epochs()
    distinct = gather([d for d, _ in results])
    counts = gather([c for _, c in results])
    assert distinct == Counter((t, w) for t, ws in enumerate(epochs) for w in set(ws))
    assert counts == Counter((t, p) for t, ws in enumerate(epochs) for p in Counter(ws).items())


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_a_hot_key_is_counted_on_every_worker(transport: str, processes: int, workers: int) -> None:
    results = run_everywhere("tests.cluster.builds:hot_key_counts", workers, processes, transport)
    counts: Counter[Any] = Counter()
    distinct: Counter[Any] = Counter()
    for c, d in results:
        counts.update({(r, t): diff for r, t, diff in c})
        distinct.update({(r, t): diff for r, t, diff in d})
    state: Counter[Any] = Counter()
    want_counts: Counter[Any] = Counter()
    want_distinct: Counter[Any] = Counter()
    for t, changes in enumerate(builds.hot_key_epochs()):
        before = +state
        for record, diff in changes:
            state[record] += diff
        for record in set(before) | set(+state):
            old, new = before[record], state[record]
            if old != new:
                want_counts[((*record, old), t)] -= 1 if old else 0
                want_counts[((*record, new), t)] += 1 if new else 0
            if (old > 0) != (new > 0):
                want_distinct[(record, t)] += 1 if new > 0 else -1
    assert +counts == +want_counts and -counts == -want_counts
    assert +distinct == +want_distinct and -distinct == -want_distinct
    # the records of first field 0 spread over every worker, in every process
    assert all(len(c) > 20 for c, _ in results), [len(c) for c, _ in results]


def test_processes_that_build_different_dataflows_are_refused() -> None:
    with pytest.raises(RuntimeError, match=r"built a different dataflow"):
        run_everywhere("tests.cluster.builds:mismatched", 1, 2, "tcp")


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_keys_of_mixed_numeric_types_and_tuples(
    transport: str, processes: int, workers: int
) -> None:
    results = run_everywhere("tests.cluster.builds:mixed_values", workers, processes, transport)

    def changes(i: int) -> Counter[Any]:
        return Counter((repr(r), t, d) for part in results for r, t, d in part[i])

    joined = sorted((c for part in results for c in part[0]), key=lambda c: float(c[0][0]))
    assert [(float(r[0]), r[1:], t, d) for r, t, d in joined] == [
        *((float(k), ("i", "f"), 0, 1) for k in range(6)),
        (float(builds.BIG), ("i", "f"), 1, 1),
    ]
    assert joined[-1][0][0] == builds.BIG and type(joined[-1][0][0]) is int  # not rounded
    assert changes(1) == Counter({(repr(((1, "t"), 1)), 0, 1): 1, (repr(((1, "t"), 4)), 0, 1): 1})
    assert changes(2) == Counter(
        {(repr(("s", 4.5)), 0, 1): 1, (repr(("s", 4.5)), 1, -1): 1, (repr(("s", 4.75)), 1, 1): 1}
    )


@pytest.mark.parametrize(("transport", "processes", "workers"), CONFIGS)
def test_gathered_results_come_back_from_every_configuration(
    transport: str, processes: int, workers: int
) -> None:
    """A member of a TCP cluster wrote its workers' results with the wire codec, which has no
    form for the GatheredElsewhere of a worker other than 0: the run failed with "cannot send
    a naiad.operators.gather.GatheredElsewhere". Every configuration now gives worker 0 every
    record, and the other workers the same refusing stand-in as in one process."""
    results = run_everywhere("tests.cluster.builds:gathered_outputs", workers, processes, transport)
    assert [r["worker"] for r in results] == list(range(processes * workers))
    records, changes = results[0]["both"]
    assert Counter(records) == Counter([(0, x) for x in range(1, 6)] + [(1, 6), (1, 7)])
    assert Counter(records) == gather([r["plain"] for r in results])
    assert changes == [("a", 0, 2), ("b", 0, 1), ("a", 1, -2)]
    for w, result in enumerate(results[1:], 1):
        for elsewhere in result["both"]:
            assert isinstance(elsewhere, GatheredElsewhere) and elsewhere.worker == w
            with pytest.raises(ValueError, match=f"worker {w}'s share of a gathered"):
                len(elsewhere)
