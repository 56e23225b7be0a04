"""Exchange (Naiad §5.1): all-to-all throughput of 8-byte records between workers.

Every worker emits numpy ``int64`` batches, one batch per epoch, from ``scope.from_epochs``
(epoch ``i`` is one array of ``workers * batch`` records, of which worker ``w`` takes the view
``[w::workers]``; the source paces itself with notifications);
``.exchange(keys=lambda b: b)`` routes record ``x`` to worker ``x % peers``; a :class:`Sink`
vertex counts what it receives and checks that every record belongs to its worker.

Floor: the same views through bare asyncio: one sender task per worker partitions each batch
with naiad's own numpy routine (``naiad.Exchange(keys=...).partition``, so partitioning costs
the same) and puts the parts on the destination's bounded ``asyncio.Queue``; one receiver task
per worker counts and checks them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

import naiad
from benchmarks._common import (
    Runs,
    goal,
    interleaved,
    log,
    median,
    parser,
    ratio,
    report,
    reps_for,
    rounded,
    run_async,
)

NAME = "exchange"
DESCRIPTION = "all-to-all exchange of int64 numpy batches: naiad vs bare asyncio queues"
GOAL = 0.5
POOL = 8  # distinct epochs, cycled to reach the total


def keys(batch: np.ndarray) -> np.ndarray:
    return batch


def make_epochs(seed: int, workers: int, batch_size: int, count: int) -> list[np.ndarray]:
    """``count`` epochs of ``workers * batch_size`` int64 records (``POOL`` distinct arrays,
    cycled); worker ``w`` takes ``epoch[w::workers]``, as ``from_epochs`` does."""
    rng = np.random.default_rng(seed)
    pool = [rng.integers(0, 2**62, size=workers * batch_size, dtype=np.int64) for _ in range(POOL)]
    return [pool[i % POOL] for i in range(count)]


class Sink(naiad.Vertex):
    """Counts records and checks that each one was routed to this worker."""

    def __init__(self) -> None:
        self.received = 0
        self.misrouted = 0

    def on_recv(self, port: int, cap: naiad.Capability, batch: np.ndarray) -> None:
        self.received += len(batch)
        self.misrouted += int(np.count_nonzero(batch % self.peers != self.index))


def run_naiad(epochs: list[np.ndarray], workers: int) -> list[tuple[int, int]]:
    """``(received, misrouted)`` per worker."""

    def build(scope: naiad.Scope) -> Sink:
        sink = Sink()
        scope.from_epochs(epochs).exchange(keys=keys).unary(sink)
        return sink

    sinks: list[Sink] = naiad.run(build, workers=workers)
    return [(s.received, s.misrouted) for s in sinks]


async def floor(epochs: list[np.ndarray], workers: int, depth: int) -> list[tuple[int, int]]:
    """``(received, misrouted)`` per receiver, through bare asyncio queues of ``depth``."""
    partition = naiad.Exchange(keys=keys).partition
    queues: list[asyncio.Queue[np.ndarray | None]] = [
        asyncio.Queue(maxsize=depth) for _ in range(workers)
    ]

    async def sender(index: int) -> None:
        for epoch in epochs:
            batch = epoch if workers == 1 else epoch[index::workers]
            for dest, part in partition(batch, workers):
                await queues[dest].put(part)
        for queue in queues:
            await queue.put(None)

    async def receiver(index: int) -> tuple[int, int]:
        queue, received, misrouted, done = queues[index], 0, 0, 0
        while done < workers:
            part = await queue.get()
            if part is None:
                done += 1
                continue
            received += len(part)
            misrouted += int(np.count_nonzero(part % workers != index))
        return received, misrouted

    senders = [asyncio.create_task(sender(i)) for i in range(workers)]
    counts = await asyncio.gather(*(receiver(i) for i in range(workers)))
    await asyncio.gather(*senders)
    return list(counts)


def entry(runs: Runs[list[tuple[int, int]]], sent: int) -> dict[str, Any]:
    """The result entry of one implementation: timing, records/s, correctness."""
    ok = all(sum(r for r, _ in out) == sent and all(m == 0 for _, m in out) for out in runs)
    rate = rounded(sent / median(runs.seconds))
    return runs.summary() | {"records_per_s": rate, "correct": ok}


def compare(
    workers: int, total: int, batch: int, reps: int, depth: int, seed: int
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The floor's and naiad's entries with ``workers`` workers, and the records sent."""
    count = max(1, round(total / (workers * batch)))
    epochs = make_epochs(seed, workers, batch, count)
    sent = count * workers * batch
    run_async(floor(epochs[:2], workers, depth))  # warm-up, not timed
    run_naiad(epochs[:2], workers)
    log(f"workers={workers}: {count} epochs of {workers} x {batch} records = {sent:,}")
    floor_label, naiad_label = f"asyncio_w{workers}", f"naiad_w{workers}"
    runs = interleaved(
        reps,
        {
            floor_label: lambda: run_async(floor(epochs, workers, depth)),
            naiad_label: lambda: run_naiad(epochs, workers),
        },
    )
    return entry(runs[floor_label], sent), entry(runs[naiad_label], sent), sent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(NAME, DESCRIPTION)
    p.add_argument("--records", type=int, help="total records (default 50M, quick 5M)")
    p.add_argument("--batch", type=int, default=65536, help="records per worker batch")
    p.add_argument("--workers", default="2", help="worker counts, comma-separated (e.g. 2,4)")
    p.add_argument("--queue-depth", type=int, default=16, help="floor: asyncio.Queue maxsize")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    reps = reps_for(args)
    total = args.records or (200_000 if args.tiny else 5_000_000 if args.quick else 50_000_000)
    batch = min(args.batch, 4096) if args.tiny else args.batch
    worker_counts = [int(w) for w in args.workers.split(",")]
    depth = args.queue_depth

    results: dict[str, Any] = {}
    ratios: dict[str, float | None] = {}
    goals: list[dict[str, Any]] = []
    records: dict[str, int] = {}
    for workers in worker_counts:
        floor_entry, naiad_entry, sent = compare(workers, total, batch, reps, depth, args.seed)
        results[f"asyncio_w{workers}"], results[f"naiad_w{workers}"] = floor_entry, naiad_entry
        records[f"w{workers}"] = sent
        # The goal speaks of the first worker count (2 by default); others are informative.
        first = workers == worker_counts[0]
        name = "naiad_over_asyncio" if first else f"naiad_over_asyncio_w{workers}"
        ratios[name] = ratio(naiad_entry["records_per_s"], floor_entry["records_per_s"])
        if first:
            goals.append(goal(ratios, name, ">=", GOAL))
        ratios[name + "_cpu"] = ratio(floor_entry["cpu_seconds"], naiad_entry["cpu_seconds"])

    correct = all(entry["correct"] for entry in results.values())
    params = {
        "records": records,
        "record_bytes": 8,
        "batch_per_worker": batch,
        "workers": worker_counts,
        "reps": reps,
        "seed": args.seed,
        "floor_queue_depth": depth,
        "source": "naiad: scope.from_epochs (epoch i = one array of workers*batch records, "
        "worker w takes [w::workers]); floor: the same views",
        "naiad_graph": "from_epochs -> exchange(keys=identity) -> unary(Sink)",
        "partition": "naiad.Exchange(keys=identity).partition in both",
        "statistic": "floor and naiad run alternately, reps rounds; median over reps of the "
        "wall-clock seconds of a whole run (cpu_seconds: median process CPU time; "
        "peak_rss_mb: highest process peak RSS during a run, input included); naiad includes "
        "dataflow construction",
        "event_loop": "uvloop",
        "cpu_ratios": "ratios ending in _cpu compare median CPU seconds instead: steadier "
        "when other processes load the machine; informative only, goals use wall-clock",
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)
