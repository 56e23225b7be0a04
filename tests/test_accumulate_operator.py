"""``accumulate`` and ``count`` against a plain-Python oracle: one record per time and worker,
holding everything that worker saw at that time, on 1 and 2 workers and 2 simulated
processes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_ints = st.lists(st.lists(st.integers(0, 50), max_size=12), min_size=1, max_size=6)


def per_worker(epochs: list[list[int]], peers: int) -> list[dict[int, list[int]]]:
    """What each worker sees at each time once the records are exchanged by value."""
    seen: list[dict[int, list[int]]] = [{} for _ in range(peers)]
    for t, records in enumerate(epochs):
        for r in records:
            seen[r % peers].setdefault(t, []).append(r)
    return seen


def extend(accumulator: list[int], batch: list[int]) -> list[int]:
    accumulator.extend(batch)  # mutates: the default must be copied per time
    return accumulator


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, configs)
def test_accumulate_sends_one_record_per_time_and_worker_with_all_it_saw(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> list[Any]:
        # from two sources: a time's records reach the operator in several batches
        stream = s.from_epochs(epochs).concat(s.from_epochs(epochs)).exchange(lambda x: x)
        return stream.accumulate([], extend).collect()

    results = naiad.run(build, **config)
    for got, seen in zip(results, per_worker(epochs, len(results)), strict=True):
        times = [t for t, _ in got]
        assert len(times) == len(set(times))  # one record per time
        assert {t: sorted(acc) for t, acc in got} == {t: sorted(rs * 2) for t, rs in seen.items()}


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, configs)
def test_count_counts_each_worker_s_records_per_time(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    results = naiad.run(
        lambda s: s.from_epochs(epochs).exchange(lambda x: x).count().collect(), **config
    )
    for got, seen in zip(results, per_worker(epochs, len(results)), strict=True):
        assert Counter(got) == Counter((t, len(rs)) for t, rs in seen.items())


@pytest.mark.parametrize("config", CONFIGS)
def test_numpy_batches_are_folded_whole(config: dict[str, int]) -> None:
    calls: list[Any] = []

    def total(acc: int, batch: Any) -> int:
        calls.append(type(batch))
        return acc + int(batch.sum())

    values = [[1, 2, 3], [], [4, 5]]
    arrays = [np.array(v, dtype=np.int64) for v in values]
    results = naiad.run(lambda s: s.from_epochs(arrays).accumulate(0, total).collect(), **config)
    sums: Counter[int] = Counter()
    for got in results:
        for t, s in got:
            sums[t] += s
    assert sums == Counter({0: 6, 2: 9}) and set(calls) == {np.ndarray}


def test_inside_a_loop_one_record_per_iteration() -> None:
    def build(s: naiad.Scope) -> list[Any]:
        nums = s.from_epochs([[3, 1]])
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            body = nums.enter(loop).concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).connect_loop(handle)
        return body.count().leave().collect()

    (got,) = naiad.run(build)
    assert sorted(got) == [(0, 1), (0, 1), (0, 2), (0, 2)]  # 2, 2, 1 and 1 at counters 0..3


def test_bad_arguments_and_raising_functions_name_the_operator() -> None:
    with pytest.raises(TypeError, match="accumulate 'accumulate': f must be a function, not 0"):
        naiad.run(lambda s: s.from_epochs([[1]]).accumulate(0, 0))

    def wrong_arity(acc: int) -> int:
        return acc

    def raises(acc: int, batch: Any) -> int:
        raise KeyError("boom")

    for f, error in ((wrong_arity, TypeError), (raises, KeyError)):
        with pytest.raises(error) as info:
            naiad.run(lambda s, f=f: s.from_epochs([[1]]).accumulate(0, f, name="Acc").collect())
        assert any("'Acc'" in note for note in info.value.__notes__)
