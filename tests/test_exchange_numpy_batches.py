"""``exchange(key)`` of numpy batches: the key is called on each record, and each worker
receives numpy arrays of the batch's dtype and record shape (structured records, rows of a 2-d
array, plain numbers), which cross processes as their bytes; checked against the records
routed by hand, on one and two workers and two simulated processes."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import naiad

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
PAIR = np.dtype([("a", "i4"), ("b", "f8")])

# the key of each kind of batch, given one record (a numpy element) and returning a numpy
# integer; and the record as a Python value, to compare
KINDS: dict[str, tuple[Any, Any]] = {
    "structured": (lambda r: r["a"], lambda r: (int(r["a"]), float(r["b"]))),
    "rows": (lambda r: r[0], lambda r: tuple(int(x) for x in r)),
    "plain": (lambda r: r, int),
    "floats": (lambda r: int(r), float),
}


def as_batch(kind: str, values: list[int]) -> np.ndarray:
    if kind == "structured":
        return np.array([(v, v / 4) for v in values], dtype=PAIR)
    if kind == "rows":
        return np.array([[v, -v, 7] for v in values], dtype=np.int64).reshape(-1, 3)
    if kind == "plain":
        return np.array(values, dtype=np.int16)
    return np.array(values, dtype=np.float32)


def exchanged(kind: str, epochs: list[list[int]], config: dict[str, int]) -> list[Any]:
    key, _ = KINDS[kind]
    batches = [as_batch(kind, values) for values in epochs]

    def build(s: naiad.Scope) -> tuple[int, list[Any]]:
        seen: list[Any] = []
        s.from_epochs(batches).exchange(key).inspect_batch(lambda t, b: seen.append((t, b))).probe()
        return s.index, seen

    return naiad.run(build, **config)


@pytest.mark.parametrize("config", CONFIGS)
@settings(max_examples=12, deadline=None)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    epochs=st.lists(st.lists(st.integers(-40, 40), max_size=10), min_size=1, max_size=3),
)
def test_exchange_by_key_keeps_numpy_batches_whole(
    config: dict[str, int], kind: str, epochs: list[list[int]]
) -> None:
    key, plain = KINDS[kind]
    results = exchanged(kind, epochs, config)
    peers = len(results)
    assert peers == config["workers"] * config.get("processes", 1)
    template = as_batch(kind, [])
    got: Counter[Any] = Counter()
    for index, seen in results:
        for t, batch in seen:
            # the dtype and record shape survive the exchange (and, between processes, the
            # codec): never a list of numpy scalars, np.void or row arrays
            assert isinstance(batch, np.ndarray)
            assert batch.dtype == template.dtype and batch.shape[1:] == template.shape[1:]
            assert len(batch)
            for record in batch:
                assert int(key(record)) % peers == index
                got[(t, plain(record))] += 1
    want = Counter((t, plain(r)) for t, values in enumerate(epochs) for r in as_batch(kind, values))
    assert got == want


@pytest.mark.parametrize("config", CONFIGS[1:])
def test_a_numpy_batch_keyed_by_floats_is_refused_not_truncated(config: dict[str, int]) -> None:
    """A key of 1.5 was routed as 1 (numpy truncated it), where a list refuses it."""
    with pytest.raises(TypeError, match=r"key\(record\) must return an integer, not") as info:
        naiad.run(
            lambda s: (
                s.from_epochs([np.array([1.5, 2.5])]).exchange(lambda r: r, name="by").probe()
            ),
            **config,
        )
    assert "while routing records to operator 'by'" in "".join(info.value.__notes__)


@pytest.mark.parametrize("batch", [[1, 2], np.array([1, 2])], ids=["list", "numpy"])
def test_a_key_that_raises_is_reported_once(batch: Any) -> None:
    """Regression (h22): the error of a key function that raises a TypeError was shown twice,
    the second copy raised "during handling of" the first (the key was called again to see
    whether it returned a non-integer)."""
    from naiad.dataflow.channels import Exchange

    def key(record: Any) -> int:
        raise TypeError(f"no key for {record!r}")

    with pytest.raises(TypeError, match=r"no key for (np\.int64\()?1") as info:
        Exchange(key=key).partition(batch, 2)
    assert info.value.__context__ is None or info.value.__suppress_context__


@pytest.mark.parametrize("workers", [2, 3, 6])
@settings(max_examples=10, deadline=None)
@given(keys=st.lists(st.integers(0, 2**64 - 1), max_size=12))
@example(keys=[2**64 - 1, 2**63, 2**63 + 1, 5])
def test_uint64_keys_meet_the_same_keys_routed_one_by_one(workers: int, keys: list[int]) -> None:
    """Regression: ``keys(batch)`` of uint64 was cast to int64 before ``% peers``, so a key
    from 2**63 up wrapped negative and went to another worker than ``key % peers`` (what
    ``key(record)`` gives): of 6 workers, 2**64 - 1 went to worker 5, not 3, so the records of
    one key routed by the two forms did not meet."""

    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        batch = s.from_epochs([np.array(keys, dtype=np.uint64)]).exchange(keys=lambda b: b)
        one_by_one = s.from_epochs([keys]).exchange(lambda k: k)
        return batch.map(int).collect(), one_by_one.collect()

    results = naiad.run(build, workers=workers)
    for w, (by_batch, by_record) in enumerate(results):
        expected = sorted((0, k) for k in keys if k % workers == w)
        assert sorted(by_batch) == sorted(by_record) == expected


async def routed_whole(batch: list[Any], workers: int) -> list[list[Any]]:
    """Each worker's records of ``batch``, sent whole by worker 0 and routed by
    ``keys=list`` (the key of a record is itself, given as a list of Python ints)."""
    got: list[list[Any]] = [[] for _ in range(workers)]
    async with naiad.Runtime(workers=workers) as rt:

        def build(s: naiad.Scope) -> naiad.InputHandle:
            handle, stream = s.new_input()
            w = s.index
            stream.exchange(keys=list).inspect_batch(lambda t, b: got[w].extend(b))
            return handle

        df = rt.dataflow(build)
        first, *others = df.results
        for other in others:
            other.close()
        try:
            first.send(batch)
        finally:
            first.close()
            await df.finished()
    return got


@pytest.mark.parametrize("workers", [2, 3, 6])
@settings(max_examples=10, deadline=None)
@given(keys=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=12))
@example(keys=[2**63, 1])
@example(keys=[2**63 + 1, 5, 2**64 - 1])
def test_a_list_of_keys_from_2_63_up_routes_as_key_mod_peers(workers: int, keys: list[int]) -> None:
    """Regression: ``keys(batch)`` returning a list mixing an int from 2**63 up with others
    was made float64 by numpy and refused as 'not 1-d float64 [9.22337204e+18, ...]', though
    the same keys as a uint64 array were routed; it now routes each record to key % peers."""
    got = asyncio.run(routed_whole(keys, workers))
    assert got == [[k for k in keys if k % workers == w] for w in range(workers)]


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        ([2**64, 1], r"returned 18446744073709551616, beyond 64 bits"),
        ([-1, 2**63], r"returned -1 and 9223372036854775808, which no 64-bit array holds"),
        (  # a numpy -1 wrapped to 2**64 - 1 in a first version of the fix
            [np.int64(-1), 2**63],
            r"returned -1 and 9223372036854775808, which no 64-bit array holds",
        ),
    ],
)
async def test_a_list_of_keys_beyond_64_bits_is_refused_naming_the_values(
    keys: list[Any], named: str
) -> None:
    with pytest.raises(TypeError, match=named) as refused:
        await routed_whole(keys, 2)
    assert any("exchange" in note for note in getattr(refused.value, "__notes__", []))
