"""``broadcast`` against a plain-Python oracle: every worker receives every record of every
worker, at its time, once, on 1 and 2 workers and 2 simulated processes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from tests.test_operators import PopsEverything  # empties every list it receives

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
epochs_of_ints = st.lists(st.lists(st.integers(-50, 50), max_size=12), min_size=1, max_size=5)


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, st.sampled_from(CONFIGS))
def test_every_worker_receives_every_record_once(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        # exchanged first, so that the records broadcast come from several workers
        stream = s.from_epochs(epochs).exchange(lambda x: x * 5 + 1)
        return stream.broadcast().collect(), stream.broadcast().map(lambda x: -x).collect()

    results = naiad.run(build, **config)
    assert len(results) == config["workers"] * config.get("processes", 1)
    want = Counter((t, r) for t, rs in enumerate(epochs) for r in rs)
    for plain, mapped in results:
        assert Counter(plain) == want
        assert Counter((t, -r) for t, r in mapped) == want


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(0, 10**6), max_size=50), st.sampled_from(CONFIGS))
def test_numpy_batches_arrive_whole_on_every_worker(
    values: list[int], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> list[Any]:
        return s.from_epochs([np.array(values, dtype=np.int64)]).broadcast().map(int).collect()

    for part in naiad.run(build, **config):
        assert sorted(r for _, r in part) == sorted(values)


@pytest.mark.parametrize("config", CONFIGS)
def test_a_worker_that_modifies_its_batch_changes_no_other_workers(
    config: dict[str, int],
) -> None:
    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        stream = s.from_epochs([[1, 2, 3], [4]])
        # the broadcast channel straight into the vertex that pops (a pact of unary), and
        # another consumer of the same stream after it
        popped = stream.unary(PopsEverything(), exchange=naiad.Broadcast()).collect()
        return popped, stream.collect()

    results = naiad.run(build, **config)
    for popped, _ in results:
        assert sorted(popped) == [(0, 1), (0, 2), (0, 3), (1, 4)]
    assert sorted(pair for _, kept in results for pair in kept) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 4),
    ]


def test_broadcast_inside_a_loop() -> None:
    def build(s: naiad.Scope) -> list[Any]:
        nums = s.from_epochs([[2]])
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            body = nums.enter(loop).concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).connect_loop(handle)
        return body.broadcast().leave().collect()

    for part in naiad.run(build, workers=2):
        assert sorted(part) == [(0, 0), (0, 1), (0, 2)]


async def test_a_batch_the_codec_refuses_is_delivered_nowhere() -> None:
    got: list[Any] = []
    async with naiad.Runtime(workers=1, processes=2) as rt:

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            stream.broadcast(name="Everywhere").inspect(got.append)
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        with pytest.raises(TypeError, match=r"cannot send a builtins\.set") as info:
            first.send(["local", {"remote"}])
        assert any("'Everywhere'" in note for note in info.value.__notes__)
        first.send(["fixed"])
        first.close()
        await df.finished()
    assert got == ["fixed", "fixed"]
