"""Per-record operators that pass records through unchanged (``filter``, ``branch``,
``partition``, ``delay``) keep a numpy batch a numpy array of its dtype and record shape: the
function is called per record (an element, a 2-d batch's row, a structured record), and what
comes out crosses processes as the array's bytes. A list of the batch's elements would not: a
structured record (``np.void``) is refused between processes. Checked against the records
routed and re-timed by hand, on one and two workers and two simulated processes (each output
is exchanged, so records do cross processes)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from tests.test_exchange_numpy_batches import CONFIGS, KINDS, as_batch

# what each operator does to a record whose key is k, at time t: (output, new time) or None
OPERATORS: dict[str, Any] = {
    "filter": lambda k, t: (0, t) if k % 3 else None,
    "branch": lambda k, t: (0 if k % 2 else 1, t),
    "partition": lambda k, t: (k % 3, t),
    "delay": lambda k, t: (0, t + k % 2),
}


def outputs(op: str, stream: naiad.Stream, key: Any) -> list[naiad.Stream]:
    k = lambda r: int(key(r))  # noqa: E731
    if op == "filter":
        return [stream.filter(lambda r: k(r) % 3 != 0)]
    if op == "branch":
        return list(stream.branch(lambda r: k(r) % 2 == 1))
    if op == "partition":
        return stream.partition(3, lambda r: k(r) % 3)
    return [stream.delay(lambda r, t: t + k(r) % 2)]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("op", sorted(OPERATORS))
@settings(max_examples=8, deadline=None)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    epochs=st.lists(st.lists(st.integers(-40, 40), max_size=10), min_size=1, max_size=3),
)
def test_numpy_batches_stay_arrays(
    config: dict[str, int], op: str, kind: str, epochs: list[list[int]]
) -> None:
    key, plain = KINDS[kind]
    batches = [as_batch(kind, values) for values in epochs]

    def build(s: naiad.Scope) -> list[Any]:
        seen: list[Any] = []
        for n, out in enumerate(outputs(op, s.from_epochs(batches), key)):
            out.exchange(key).inspect_batch(lambda t, b, n=n: seen.append((n, t, b))).probe()
        return seen

    template = as_batch(kind, [])
    got: Counter[Any] = Counter()
    for seen in naiad.run(build, **config):
        for n, t, batch in seen:
            assert isinstance(batch, np.ndarray), (op, type(batch))
            assert batch.dtype == template.dtype and batch.shape[1:] == template.shape[1:]
            got.update((n, t, plain(r)) for r in batch)
    want: Counter[Any] = Counter()
    for t, batch in enumerate(batches):
        for r in batch:
            placed = OPERATORS[op](int(key(r)), t)
            if placed is not None:
                want[(placed[0], placed[1], plain(r))] += 1
    assert got == want


def test_a_structured_batch_partitioned_crosses_processes() -> None:
    """The reproduction: a structured batch partitioned, then broadcast between two processes,
    was refused (``cannot send a numpy.void between processes``)."""
    pair = np.dtype([("a", "i4"), ("b", "f8")])

    def build(s: naiad.Scope) -> Any:
        batch = np.array([(1, 2.5), (2, 4.5)], dtype=pair)
        parts = s.from_epochs([batch]).partition(2, lambda r: int(r["a"]) % 2)
        return parts[0].broadcast().collect()

    results = naiad.run(build, workers=1, processes=2)
    assert [[(t, int(r["a"]), float(r["b"])) for t, r in got] for got in results] == [
        [(0, 2, 4.5)],
        [(0, 2, 4.5)],
    ]
