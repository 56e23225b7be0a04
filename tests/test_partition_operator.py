"""``partition`` and ``partition_batch`` against a plain-Python oracle: every record on the
stream its route names, at its own time, on 1 and 2 workers and 2 simulated processes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import BuildError
from naiad.actors.vertex import OutputPort
from naiad.dataflow.channels import split_by_routes

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_ints = st.lists(st.lists(st.integers(-50, 50), max_size=12), min_size=1, max_size=5)


def gathered(results: list[list[tuple[Any, Any]]]) -> Counter[tuple[Any, Any]]:
    return Counter(pair for part in results for pair in part)


def oracle(epochs: list[list[int]], route: Any, part: int) -> Counter[tuple[Any, Any]]:
    return Counter((t, r) for t, rs in enumerate(epochs) for r in rs if route(r) == part)


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, st.integers(1, 5), configs)
def test_partition_sends_every_record_to_the_part_its_route_names(
    epochs: list[list[int]], parts: int, config: dict[str, int]
) -> None:
    def route(x: int) -> int:
        return (x * 7 + 3) % parts

    def build(s: naiad.Scope) -> list[list[Any]]:
        return [p.collect() for p in s.from_epochs(epochs).partition(parts, route)]

    results = naiad.run(build, **config)
    for part in range(parts):
        assert gathered([r[part] for r in results]) == oracle(epochs, route, part)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 1000), max_size=40), min_size=1, max_size=4),
    st.integers(1, 7),
    configs,
)
def test_partition_batch_splits_numpy_batches_by_one_call_per_batch(
    values: list[list[int]], parts: int, config: dict[str, int]
) -> None:
    epochs = [np.array(v, dtype=np.int64) for v in values]
    calls: list[int] = []

    def routes(batch: np.ndarray) -> np.ndarray:
        calls.append(len(batch))
        return batch % parts

    def build(s: naiad.Scope) -> list[list[Any]]:
        streams = s.from_epochs(epochs).partition_batch(parts, routes)
        # numpy batches stay numpy batches
        return [p.inspect_batch(check_array).map(int).collect() for p in streams]

    results = naiad.run(build, **config)
    for part in range(parts):
        want = oracle(values, lambda x: x % parts, part)
        assert gathered([r[part] for r in results]) == want
    assert sum(calls) == sum(len(v) for v in values)  # once per batch, not per record


def check_array(_time: Any, batch: Any) -> None:
    assert isinstance(batch, np.ndarray)


def test_partition_batch_of_lists() -> None:
    def build(s: naiad.Scope) -> list[list[Any]]:
        parts = s.from_epochs([["a", "bb", "ccc"], ["dd"]]).partition_batch(
            3, lambda b: [len(w) - 1 for w in b]
        )
        return [p.collect() for p in parts]

    assert naiad.run(build) == [[[(0, "a")], [(0, "bb"), (1, "dd")], [(0, "ccc")]]]


@pytest.mark.parametrize(
    ("route", "error", "says"),
    [
        (lambda x: 3, ValueError, "not 3"),
        (lambda x: -1, ValueError, "not -1"),  # would pick the last part by list indexing
        (lambda x: "0", TypeError, "not '0'"),
        (lambda x: 1.0, TypeError, "not 1.0"),
        (lambda x: True, TypeError, "not True"),
    ],
)
def test_a_route_outside_the_parts_names_the_operator(route: Any, error: Any, says: str) -> None:
    with pytest.raises(error) as info:
        naiad.run(lambda s: s.from_epochs([[5]]).partition(3, route, name="Split")[0].collect())
    message = str(info.value)
    assert "'Split'" in message and "range(3)" in message and says in message
    assert "record 5" in message


def test_numpy_integer_routes_are_part_indices() -> None:
    def build(s: naiad.Scope) -> list[Any]:
        parts = s.from_epochs([[1, 2, 3]]).partition(2, lambda x: np.int64(x % 2))
        return [p.collect() for p in parts]

    assert naiad.run(build) == [[[(0, 2)], [(0, 1), (0, 3)]]]


@pytest.mark.parametrize(
    ("routes", "error", "says"),
    [
        (lambda b: np.full(len(b), 2), ValueError, "part 2"),
        (lambda b: np.full(len(b), -1), ValueError, "part -1"),
        # regression: uint64 parts from 2**63 up were named as the negative int64 they wrap to
        (lambda b: np.full(len(b), 2**64 - 1, np.uint64), ValueError, "part 18446744073709551615"),
        (lambda b: np.full(len(b), 2**63, np.uint64), ValueError, "part 9223372036854775808"),
        (lambda b: np.zeros(len(b) + 1, dtype=int), ValueError, "2 routes for a batch of 1"),
        (lambda b: np.zeros(len(b)), TypeError, "1-d array of integers"),
        (lambda b: 0, TypeError, "1-d array of integers"),
    ],
)
def test_bad_batch_routes_name_the_operator(routes: Any, error: Any, says: str) -> None:
    with pytest.raises(error) as info:
        naiad.run(
            lambda s: s.from_epochs([[5]]).partition_batch(2, routes, name="Cut")[0].collect()
        )
    assert "'Cut'" in str(info.value) and says in str(info.value)


def test_bad_arguments_fail_at_build_time() -> None:
    stream_of = lambda s: s.from_epochs([[1]])  # noqa: E731
    with pytest.raises(BuildError, match="'partition': parts must be at least 1, not 0"):
        naiad.run(lambda s: stream_of(s).partition(0, lambda x: 0))
    with pytest.raises(TypeError, match="'partition': parts must be a positive integer"):
        naiad.run(lambda s: stream_of(s).partition("2", lambda x: 0))
    with pytest.raises(TypeError, match="'P': the route must be a function, not 3"):
        naiad.run(lambda s: stream_of(s).partition(2, 3, name="P"))
    with pytest.raises(TypeError, match="'partition_batch': the route must be a function"):
        naiad.run(lambda s: stream_of(s).partition_batch(2, None))


def test_an_exception_in_route_reaches_the_caller_naming_the_operator() -> None:
    def route(x: int) -> int:
        raise KeyError(x)

    with pytest.raises(KeyError) as info:
        naiad.run(lambda s: s.from_epochs([[9]]).partition(2, route, name="Router")[0].collect())
    assert any("'Router'" in note for note in info.value.__notes__)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 299), max_size=40), st.integers(1, 300))
def test_splitting_a_list_by_routes_keeps_each_part_in_order(routes: list[int], parts: int) -> None:
    routes = [r % parts for r in routes]
    batch = [f"r{i}" for i in range(len(routes))]
    got = split_by_routes(batch, np.array(routes, dtype=np.int64), parts)
    want = [(w, [b for b, r in zip(batch, routes, strict=True) if r == w]) for w in range(parts)]
    assert got == [(w, part) for w, part in want if part]


def test_a_batch_costs_its_records_not_the_number_of_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    # One-record batches split 300 ways: partition used to call send on every output (empty
    # ones included) and partition_batch of lists to scan the routes once per part (a
    # flatnonzero each): 300 calls per batch where one is enough.
    parts, epochs = 300, [[i] for i in range(40)]
    calls = Counter[str]()
    send, flatnonzero = OutputPort.send, np.flatnonzero

    def counted_send(self: OutputPort, at: Any, batch: Any) -> None:
        calls["send"] += 1
        send(self, at, batch)

    def counted_scan(a: Any) -> Any:
        calls["scan"] += 1
        return flatnonzero(a)

    monkeypatch.setattr(OutputPort, "send", counted_send)
    monkeypatch.setattr(np, "flatnonzero", counted_scan)

    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        stream = s.from_epochs(epochs)
        by_record = stream.partition(parts, lambda x: x * 7 % parts)
        by_batch = stream.partition_batch(parts, lambda b: [x * 7 % parts for x in b])
        return by_record[21].collect(), by_batch[21].collect()

    ((by_record, by_batch),) = naiad.run(build)
    assert by_record == by_batch == [(3, 3)]  # 3 * 7 % 300 == 21
    # the input's 40 sends and at most one per batch in each partition
    assert calls["send"] <= 3 * len(epochs)
    assert calls["scan"] <= len(epochs)
