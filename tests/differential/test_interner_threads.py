"""Runtimes in several threads intern the same fresh values at once: every equal value keeps
one code in the process-wide interner, so each runtime's counts equal the reference
recomputed from scratch at every epoch.

Without the interner's lock, two threads that both missed a value could give it two codes
(each appending it), and an arrangement then held one value under two keys: a count split in
two (``('r0.5.3', 1)`` twice instead of ``('r0.5.3', 2)``) or a retraction that cancelled
nothing. The threads step their epochs together (a barrier) so that they intern each epoch's
fresh values at about the same moment, with a short switch interval.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from naiad.differential.updates import Interner
from tests.differential import reference as ref

EPOCHS = 80
ROUNDS = 5  # of the interner-only test
FRESH = 40  # new values per epoch, the same in every thread


@pytest.fixture
def switch_often() -> Iterator[None]:
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(saved)


def fresh(run: int, e: int) -> list[str]:
    return [f"r{run}.{e}.{i}" for i in range(FRESH)] if e >= 0 else []


def epoch_changes(run: int, e: int) -> list[tuple[str, int]]:
    """Epoch ``e`` inserts its fresh values, a second copy of the last epoch's, and removes
    both copies of the values of two epochs ago."""
    return [(v, 1) for v in fresh(run, e) + fresh(run, e - 1)] + [
        (v, -2) for v in fresh(run, e - 2)
    ]


def expected(run: int) -> list[Counter]:
    """The counts per value after every epoch, from scratch."""
    out = []
    for e in range(EPOCHS):
        live: Counter = Counter()
        for d in range(e + 1):
            for v, diff in epoch_changes(run, d):
                live[v] += diff
        out.append(Counter({(v, n): 1 for v, n in live.items() if n}))
    return out


def counted_in_a_thread(run: int, workers: int, barrier: threading.Barrier) -> list[Any]:
    async def main() -> list[Any]:
        async with naiad.Runtime(workers) as rt:

            def build(scope: Any) -> Any:
                session, values = Collection.new_input(scope)
                return session, values.count().changes(), values.probe()

            df = rt.dataflow(build)
            sessions = [r[0] for r in df.results]
            for e in range(EPOCHS):
                barrier.wait(30)  # the threads intern epoch e's fresh values together
                for i, (v, diff) in enumerate(epoch_changes(run, e)):
                    sessions[i % len(sessions)].update(v, diff)
                for s in sessions:
                    s.advance_to(e + 1)
                await df.results[0][2].wait(e)
            for s in sessions:
                s.close()
            await df.finished()
        return [r[1] for r in df.results]

    return ref.watchdog(main(), 60)


@pytest.mark.parametrize("threads", [2, 4])
def test_runtimes_in_threads_intern_overlapping_values(threads: int, switch_often: None) -> None:
    run = threads  # values of their own per test
    barrier = threading.Barrier(threads)
    results: dict[int, Any] = {}

    def target(t: int) -> None:
        try:
            results[t] = counted_in_a_thread(run, 1 + t % 2, barrier)
        except BaseException as e:  # reported by the main thread
            barrier.abort()
            results[t] = e

    pool = [threading.Thread(target=target, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(120)
    want = expected(run)
    for t in range(threads):
        if isinstance(results[t], BaseException):
            raise results[t]
        ref.check(results[t], want)


def test_threads_encoding_at_once_give_each_value_one_code(switch_often: None) -> None:
    """The interner alone: four threads encode the same small batches of fresh values (a
    few rounds, each with a new interner: one race in a round is enough)."""
    for round_ in range(ROUNDS):
        interner = Interner()
        batches = [np.array([f"v{b}.{i}" for i in range(3)], dtype=object) for b in range(6000)]
        codes = encoded_in_threads(interner, batches, 4)
        # one code per value, and every code decodes to its value
        assert len(interner.values) == len(interner) == 3 * len(batches), f"round {round_}"
        for got in codes:
            for batch, batch_codes in zip(batches, got, strict=True):
                assert interner.decode(batch_codes).tolist() == batch.tolist()
                assert batch_codes.tolist() == [interner.codes[v] for v in batch.tolist()]


def encoded_in_threads(
    interner: Interner, batches: list[np.ndarray], threads: int
) -> list[list[np.ndarray]]:
    """Per thread, the codes of ``batches`` it encoded, all threads starting together."""
    barrier = threading.Barrier(threads)
    codes: list[list[np.ndarray]] = [[] for _ in range(threads)]

    def target(t: int) -> None:
        barrier.wait(10)
        codes[t] = [interner.encode(batch) for batch in batches]

    pool = [threading.Thread(target=target, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(60)
    return codes
