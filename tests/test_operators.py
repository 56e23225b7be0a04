"""The stream operators against plain-Python oracles, on random epochs and 1, 2 and 4 workers."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad

epochs_of_ints = st.lists(st.lists(st.integers(-50, 50), max_size=12), min_size=1, max_size=5)
workers_counts = st.sampled_from([1, 2, 4])


def per_time(pairs: list[tuple[Any, Any]]) -> dict[Any, Counter[Any]]:
    out: dict[Any, Counter[Any]] = {}
    for t, r in pairs:
        out.setdefault(t, Counter())[r] += 1
    return out


def gathered(results: list[Any]) -> dict[Any, Counter[Any]]:
    return per_time([pair for part in results for pair in part])


def expected(epochs: list[list[Any]], f: Any = lambda rs: rs) -> dict[Any, Counter[Any]]:
    return {t: Counter(f(rs)) for t, rs in enumerate(epochs) if f(rs)}


@settings(max_examples=25, deadline=None)
@given(epochs_of_ints, workers_counts)
def test_map_filter_flat_map(epochs: list[list[int]], workers: int) -> None:
    def build(s: naiad.Scope) -> list[Any]:
        return (
            s.from_epochs(epochs)
            .map(lambda x: x * 3)
            .filter(lambda x: x % 2 == 0)
            .flat_map(lambda x: [x, -x])
            .collect()
        )

    want = expected(epochs, lambda rs: [y for x in rs if (x * 3) % 2 == 0 for y in (x * 3, -x * 3)])
    assert gathered(naiad.run(build, workers=workers)) == want


@settings(max_examples=25, deadline=None)
@given(epochs_of_ints, workers_counts)
def test_exchange_routes_by_key_and_loses_nothing(epochs: list[list[int]], workers: int) -> None:
    def build(s: naiad.Scope) -> tuple[int, list[Any]]:
        return s.index, s.from_epochs(epochs).exchange(lambda x: x).collect()

    results = naiad.run(build, workers=workers)
    for index, pairs in results:
        assert all(r % workers == index for _, r in pairs)
    assert gathered([pairs for _, pairs in results]) == expected(epochs)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=200), workers_counts)
def test_exchange_of_numpy_batches_by_vectorized_keys(values: list[int], workers: int) -> None:
    data = np.array(values, dtype=np.int64)

    def build(s: naiad.Scope) -> tuple[int, list[Any]]:
        routed = s.from_epochs([data]).exchange(keys=lambda b: b // 3)
        return s.index, routed.inspect_batch(lambda t, b: None).map_batch(
            lambda b: b.tolist()
        ).collect()

    results = naiad.run(build, workers=workers)
    for index, pairs in results:
        assert all((r // 3) % workers == index for _, r in pairs)
    assert sorted(r for _, pairs in results for _, r in pairs) == sorted(values)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-(2**62), 2**62), max_size=300),
    st.integers(1, 9),
    st.sampled_from(["array", "rows", "list"]),
)
def test_exchange_partition_matches_a_stable_reference(
    values: list[int], peers: int, shape: str
) -> None:
    """Every record goes to ``key % peers``, in its original order, in non-empty parts: by
    masks (few peers) and by sorting (many), for arrays, arrays of rows and lists."""
    keys = np.array(values, dtype=np.int64)
    batch: Any = {
        "array": keys,
        "rows": np.stack([keys, -keys], axis=1) if values else np.empty((0, 2), np.int64),
        "list": list(values),
    }[shape]
    parts = naiad.Exchange(keys=lambda b: keys).partition(batch, peers)
    want = [
        (w, [batch[i] for i in range(len(values)) if values[i] % peers == w]) for w in range(peers)
    ]
    want = [(w, part) for w, part in want if part]
    assert [w for w, _ in parts] == [w for w, _ in want]
    for (_, part), (_, wanted) in zip(parts, want, strict=True):
        assert len(part) == len(wanted)
        assert all(np.array_equal(a, b) for a, b in zip(part, wanted, strict=True))


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, epochs_of_ints, workers_counts)
def test_concat_and_branch(a: list[list[int]], b: list[list[int]], workers: int) -> None:
    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        merged = s.from_epochs(a).concat(s.from_epochs(b))
        pos, neg = merged.branch(lambda x: x >= 0)
        return pos.collect(), neg.collect()

    results = naiad.run(build, workers=workers)
    both = {
        t: Counter(a[t] if t < len(a) else []) + Counter(b[t] if t < len(b) else [])
        for t in range(max(len(a), len(b)))
    }
    want_pos = {t: Counter({x: c for x, c in cs.items() if x >= 0}) for t, cs in both.items()}
    want_neg = {t: Counter({x: c for x, c in cs.items() if x < 0}) for t, cs in both.items()}
    assert gathered([p for p, _ in results]) == {t: c for t, c in want_pos.items() if c}
    assert gathered([n for _, n in results]) == {t: c for t, c in want_neg.items() if c}


def test_inspect_sees_every_record_once() -> None:
    seen: list[int] = []
    naiad.run(lambda s: s.from_epochs([[1, 2], [3]]).inspect(seen.append).probe(), workers=2)
    assert sorted(seen) == [1, 2, 3]


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, workers_counts)
def test_subscribe_reports_every_epoch_once_in_order(epochs: list[list[int]], workers: int) -> None:
    def build(s: naiad.Scope) -> list[tuple[int, list[int]]]:
        calls: list[tuple[int, list[int]]] = []
        s.from_epochs(epochs).subscribe(lambda t, rs: calls.append((t, rs)))
        return calls

    results = naiad.run(build, workers=workers)
    for calls in results:
        times = [t for t, _ in calls]
        assert times == sorted(set(times))  # once each, in order
        assert set(times) <= set(range(len(epochs)))
    merged = Counter((t, r) for calls in results for t, rs in calls for r in rs)
    assert merged == Counter((t, r) for t, rs in enumerate(epochs) for r in rs)


async def test_subscribe_handle_waits_for_the_callbacks_themselves() -> None:
    seen: list[int] = []

    def slow(t: int, records: list[int]) -> None:
        time.sleep(0.0001)
        seen.append(t)

    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> tuple[naiad.InputHandle, list[naiad.ProbeHandle]]:
            handle, stream = s.new_input()
            return handle, [stream.subscribe(slow) for _ in range(200)]

        handle, subscribed = rt.dataflow(build).results[0]
        handle.send([1])
        handle.advance_to(1)
        await asyncio.gather(*(h.wait(0) for h in subscribed))
        assert seen.count(0) == 200


async def test_probe_reports_frontier_and_completion() -> None:
    async with naiad.Runtime(workers=2) as rt:

        def build(s: naiad.Scope) -> tuple[naiad.InputHandle, naiad.ProbeHandle]:
            handle, stream = s.new_input()
            return handle, stream.map(lambda x: x).probe()

        df = rt.dataflow(build)
        (h0, probe), (h1, _) = df.results
        h0.send([1])
        h0.advance_to(5)
        assert probe.less_equal(0)  # worker 1 is still at epoch 0
        h1.advance_to(2)
        await probe.wait(1)
        assert not probe.less_equal(1) and probe.less_equal(2) and probe.less_than(3)
        h0.close()
        h1.close()
        await probe.wait()
        assert probe.done()
        await df.finished()


async def test_feed_paces_an_async_source_on_a_probe() -> None:
    in_flight: list[int] = []

    async with naiad.Runtime(workers=2) as rt:

        def build(s: naiad.Scope) -> tuple[naiad.InputHandle, naiad.ProbeHandle, list[Any]]:
            handle, stream = s.new_input()
            out = stream.exchange(lambda x: x).map(lambda x: x + 1)
            return handle, out.probe(), out.collect()

        df = rt.dataflow(build)
        (feeder, probe, _), (other, _, _) = df.results
        other.close()

        async def source() -> Any:
            for epoch in range(20):
                await asyncio.sleep(0)
                # epochs sent but not complete downstream, before this one is sent
                in_flight.append(sum(1 for e in range(epoch) if probe.less_equal(e)))
                yield [epoch * 3, epoch * 3 + 1]

        await feeder.feed(source(), probe=probe, lag=2)
        assert feeder.closed
    assert max(in_flight) <= 2
    got = sorted(r for _, _, part in df.results for _, r in part)
    assert got == sorted(x + 1 for e in range(20) for x in (e * 3, e * 3 + 1))


class PopsEverything(naiad.Vertex):
    """Takes the records off the list it receives, as an owner of its data may."""

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        out = []
        while batch:
            out.append(batch.pop())
        self.send(cap, out)


@pytest.mark.parametrize("config", [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}])
def test_a_consumer_that_modifies_its_batch_changes_nothing_else(config: dict[str, int]) -> None:
    """Every consumer of a stream got the same list object (and with one worker, the list
    given to from_epochs itself): a consumer popping records off it emptied what the other
    consumers received, and the caller's epochs."""
    epochs = [[1, 2, 3], [4, 5]]

    def build(s: naiad.Scope) -> list[Any]:
        stream = s.from_epochs(epochs)
        with s.iterative() as loop:
            inside = stream.enter(loop)  # a loop's ingress fans out too
            popped_inside = inside.unary(PopsEverything()).leave().collect()
            kept_inside = inside.leave().collect()
        return [
            stream.unary(PopsEverything()).collect(),
            stream.collect(),
            popped_inside,
            kept_inside,
        ]

    results = naiad.run(build, **config)
    want = expected([[1, 2, 3], [4, 5]])
    for sink in range(4):
        assert gathered([r[sink] for r in results]) == want
    assert epochs == [[1, 2, 3], [4, 5]]


def test_a_flat_map_result_that_is_no_iterable_is_named() -> None:
    """``f`` returning a record instead of a list of them failed with a bare "'int' object is
    not iterable"; a TypeError raised while its result is iterated is still the user's own."""
    with pytest.raises(TypeError) as info:
        naiad.run(lambda s: s.from_epochs([[3]]).flat_map(lambda x: x, name="F").collect())
    assert str(info.value) == "flat_map 'F': f(3) must return an iterable, not 3"

    def failing(x: int) -> Any:
        yield x
        raise TypeError("the user's own")

    with pytest.raises(TypeError) as info:
        naiad.run(lambda s: s.from_epochs([[3]]).flat_map(failing).collect())
    assert str(info.value) == "the user's own"
