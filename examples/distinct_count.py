"""Naiad's Figure 4: the ``DistinctCount`` vertex, one input and two outputs (§2.2).

``on_recv`` sends a record on output 0 the first time it is seen at its time, at once, for
low latency, and on the first record of a time calls ``notify_at``; ``on_notify``, which runs
only once no record at that time can still arrive (§2.3), sends ``(record, count)`` for that
time on output 1 and forgets the time. The input is exchanged by a stable hash of the record
(``zlib.crc32``) so that every copy of a record meets on one worker, which makes the per-time
distinct set and counts global rather than per worker.

The script runs the vertex over a few epochs of seeded random words and prints both outputs
per epoch; then it holds an epoch open to show the latency difference: output 0 already
carries the distinct records while output 1 must wait for the epoch to close.

Both outputs are gathered on worker 0 for printing, so the script runs the same on one
process or on a cluster: ``python examples/distinct_count.py [--workers N]``, or ``naiad run
examples/distinct_count.py -w W -n P`` (process 0 reports).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import zlib
from typing import Any

import naiad
from naiad.runtime.launch import script_workers, worker_count

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]


def sample_epochs(epochs: int = 4, size: int = 10, seed: int = 4) -> list[list[str]]:
    """``epochs`` batches of ``size`` words drawn (seeded) from a small vocabulary."""
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(size)] for _ in range(epochs)]


def record_key(record: Any) -> int:
    """A routing key stable across runs (``hash`` of a str is salted per process)."""
    return zlib.crc32(repr(record).encode())


class DistinctCount(naiad.Vertex):
    """Figure 4: distinct records on output 0 as soon as seen; counts on output 1 at the end."""

    def __init__(self) -> None:
        self.counts: dict[Any, dict[Any, int]] = {}  # time -> record -> count

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        counts = self.counts.get(cap.time)
        if counts is None:
            counts = self.counts[cap.time] = {}
            self.notify_at(cap)
        fresh = []
        for record in batch:
            if record not in counts:
                counts[record] = 0
                fresh.append(record)
            counts[record] += 1
        self.send(cap, fresh, port=0)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, list(self.counts.pop(cap.time).items()), port=1)


def to_first(record: Any) -> int:
    """Routes every record to worker 0, which gathers the outputs for the report."""
    return 0


def build(scope: naiad.Scope, epochs: list[list[Any]]) -> tuple[list[Any], list[Any]]:
    """DistinctCount over ``epochs``; returns this worker's (output 0, output 1) collections:
    everything on worker 0, nothing elsewhere."""
    records = scope.from_epochs(epochs)
    distinct, counts = records.unary(DistinctCount(), exchange=record_key, outputs=2)
    return distinct.exchange(to_first).collect(), counts.exchange(to_first).collect()


def distinct_count(
    epochs: list[list[Any]], workers: int = 1
) -> tuple[dict[int, list[Any]], dict[int, dict[Any, int]]]:
    """Runs the dataflow; returns (epoch -> distinct records as emitted, epoch -> counts): all
    of them in the process of worker 0, empty in the other processes of a cluster."""
    results = naiad.run(lambda scope: build(scope, epochs), workers=workers)
    distinct: dict[int, list[Any]] = {t: [] for t in range(len(epochs))}
    counts: dict[int, dict[Any, int]] = {t: {} for t in range(len(epochs))}
    for out0, out1 in results:  # merge the workers' shares
        for t, record in out0:
            distinct[t].append(record)
        for t, (record, n) in out1:
            counts[t][record] = n
    return distinct, counts


async def open_epoch_demo(batch: list[Any], workers: int = 1) -> tuple[list[Any], list[Any]]:
    """Sends ``batch`` at epoch 0 without closing it; returns what outputs 0 and 1 hold then.

    Output 0 fills while the epoch is still open; output 1 stays empty until it closes. In a
    cluster the process of worker 0 sends and watches (both outputs are gathered there); the
    others return two empty lists.
    """
    seen0: list[Any] = []
    seen1: list[Any] = []
    arrived = asyncio.Event()
    want = len(set(batch))

    def saw_distinct(record: Any) -> None:
        seen0.append(record)
        if len(seen0) == want:
            arrived.set()

    def build_open(scope: naiad.Scope) -> naiad.InputHandle:
        handle, records = scope.new_input()
        distinct, counts = records.unary(DistinctCount(), exchange=record_key, outputs=2)
        distinct.exchange(to_first).inspect(saw_distinct)
        counts.exchange(to_first).inspect(seen1.append)
        return handle

    async with naiad.Runtime(workers=workers) as rt:
        dataflow = rt.dataflow(build_open, name="open-epoch")
        if 0 not in dataflow.workers:
            return [], []  # leaving closes this process's inputs; worker 0's process reports
        dataflow.result(0).send(batch)  # epoch 0 stays open: no advance_to, no close
        await asyncio.wait_for(arrived.wait(), timeout=10)
        snapshot = (list(seen0), list(seen1))
    return snapshot


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers",
        type=worker_count,
        help="workers per process (default: naiad run's -w, else 2)",
    )
    parser.add_argument("--epochs", type=int, default=4, help="number of epochs (default 4)")
    parser.add_argument("--seed", type=int, default=4, help="random seed for the input words")
    args = parser.parse_args(argv)
    if args.epochs < 1:  # the open-epoch demo sends the first epoch's words
        parser.error(f"--epochs must be at least 1, not {args.epochs}")
    workers = script_workers(args.workers)
    cluster = naiad.Runtime(workers=workers)  # not started: its place in a `naiad run` cluster
    first = cluster.process_index == 0  # the process of worker 0 reports

    epochs = sample_epochs(args.epochs, seed=args.seed)
    distinct, counts = distinct_count(epochs, workers)
    batch = epochs[0]
    out0, out1 = asyncio.run(open_epoch_demo(batch, workers))  # every process takes part
    if not first:
        return
    processes = f" x {cluster.process_count} processes" if cluster.process_count > 1 else ""
    print(f"DistinctCount (Figure 4) on {workers} workers{processes}, {len(epochs)} epochs\n")
    for t, words in enumerate(epochs):
        print(f"epoch {t} input   : {' '.join(words)}")
        print(f"  output 0 (distinct, from on_recv) : {', '.join(sorted(distinct[t]))}")
        pairs = ", ".join(f"{w}={n}" for w, n in sorted(counts[t].items()))
        print(f"  output 1 (counts, from on_notify) : {pairs}")

    print("\nholding epoch 0 open after sending:", " ".join(batch))
    print(f"  output 0 already has : {', '.join(sorted(out0))}")
    print(f"  output 1 has         : {out1 or 'nothing yet (the epoch is not complete)'}")


if __name__ == "__main__":
    main()
