"""Exchange (Naiad §5.1): all-to-all throughput of 8-byte records between workers.

Every worker emits numpy ``int64`` batches, one batch per epoch, from ``scope.from_epochs``
(epoch ``i`` is one array of ``workers * batch`` records, of which worker ``w`` takes the view
``[w::workers]``; the source paces itself with notifications);
``.exchange(keys=lambda b: b)`` routes record ``x`` to worker ``x % peers``; a :class:`Sink`
vertex counts and sums what it receives and checks that every record belongs to its worker:
each worker's count and sum (modulo 2**64) must equal what the epochs hold for it.

Floor: the same views through bare asyncio: one sender task per worker partitions each batch
with naiad's own numpy routine (``naiad.Exchange(keys=...).partition``, so partitioning costs
the same) and puts the parts on the destination's bounded ``asyncio.Queue``; one receiver task
per worker counts, sums and checks them.

``--processes P`` (``--transport inproc``): the same, with naiad's workers spread over P
simulated processes in this one (the codec and protocol of a cluster, no sockets).

``--processes P --transport tcp``: naiad on P real processes over TCP on loopback
(``benchmarks/_cluster_exchange.py``, launched with ``naiad run``; each worker feeds its own
seeded batches through an input, at most ``--window`` epochs in flight), timed inside the
processes from a barrier epoch to the end; every worker's counts and sums are checked here.
Floor: raw 64 KiB ``sendall`` writes from one process to another (``_cluster.
tcp_stream_floor``). Goal: naiad's records/s x 8 bytes >= half the raw bytes/s.
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
MASK = 2**64 - 1  # records are summed as uint64, wrapping around


def keys(batch: np.ndarray) -> np.ndarray:
    return batch


def make_epochs(seed: int, workers: int, batch_size: int, count: int) -> list[np.ndarray]:
    """``count`` epochs of ``workers * batch_size`` int64 records (``POOL`` distinct arrays,
    cycled); worker ``w`` takes ``epoch[w::workers]``, as ``from_epochs`` does."""
    rng = np.random.default_rng(seed)
    pool = [rng.integers(0, 2**62, size=workers * batch_size, dtype=np.int64) for _ in range(POOL)]
    return [pool[i % POOL] for i in range(count)]


Received = tuple[int, int, int]
"""``(received, misrouted, sum)``: what one worker received: records, records of another
worker, and their sum modulo 2**64 (a record changed on the way keeps the count and routing)."""


def checksum(batch: np.ndarray) -> int:
    """The sum of ``batch``'s records as uint64, modulo 2**64."""
    return int(batch.view(np.uint64).sum())


def expected_inproc(epochs: list[np.ndarray], peers: int) -> list[tuple[int, int]]:
    """``(records, sum modulo 2**64)`` that every worker should receive from ``epochs``."""
    uses: dict[int, int] = {}
    distinct: dict[int, np.ndarray] = {}
    for epoch in epochs:  # POOL distinct arrays, cycled: each routed once
        uses[id(epoch)] = uses.get(id(epoch), 0) + 1
        distinct[id(epoch)] = epoch
    counts, sums = [0] * peers, [0] * peers
    for key, epoch in distinct.items():
        routes = epoch % peers
        for dest in range(peers):
            part = epoch[routes == dest]
            counts[dest] += uses[key] * len(part)
            sums[dest] = (sums[dest] + uses[key] * checksum(part)) & MASK
    return list(zip(counts, sums, strict=True))


class Sink(naiad.Vertex):
    """Counts and sums records and checks that each one was routed to this worker."""

    def __init__(self) -> None:
        self.received = 0
        self.misrouted = 0
        self.sum = 0

    def on_recv(self, port: int, cap: naiad.Capability, batch: np.ndarray) -> None:
        self.received += len(batch)
        self.misrouted += int(np.count_nonzero(batch % self.peers != self.index))
        self.sum = (self.sum + checksum(batch)) & MASK


def run_naiad(epochs: list[np.ndarray], workers: int, processes: int = 1) -> list[Received]:
    """What every worker received (``processes`` simulated in this one, inproc)."""

    def build(scope: naiad.Scope) -> Sink:
        sink = Sink()
        scope.from_epochs(epochs).exchange(keys=keys).unary(sink)
        return sink

    sinks: list[Sink] = naiad.run(build, workers=workers, processes=processes, transport="inproc")
    return [(s.received, s.misrouted, s.sum) for s in sinks]


async def floor(epochs: list[np.ndarray], workers: int, depth: int) -> list[Received]:
    """What every receiver received, through bare asyncio queues of ``depth``."""
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

    async def receiver(index: int) -> Received:
        queue, received, misrouted, total, done = queues[index], 0, 0, 0, 0
        while done < workers:
            part = await queue.get()
            if part is None:
                done += 1
                continue
            received += len(part)
            misrouted += int(np.count_nonzero(part % workers != index))
            total = (total + checksum(part)) & MASK
        return received, misrouted, total

    senders = [asyncio.create_task(sender(i)) for i in range(workers)]
    counts = await asyncio.gather(*(receiver(i) for i in range(workers)))
    await asyncio.gather(*senders)
    return list(counts)


def entry(runs: Runs[list[Received]], sent: int, expected: list[tuple[int, int]]) -> dict[str, Any]:
    """The result entry of one implementation: timing, records/s, correctness (every worker
    received ``expected``: its records and their sum, and no other worker's)."""
    ok = all([(r, s) for r, _, s in out] == expected for out in runs)
    ok &= all(m == 0 for out in runs for _, m, _ in out) and sum(n for n, _ in expected) == sent
    rate = rounded(sent / median(runs.seconds))
    return runs.summary() | {"records_per_s": rate, "correct": ok}


def compare(
    workers: int, total: int, batch: int, reps: int, depth: int, seed: int, processes: int = 1
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The floor's and naiad's entries with ``workers`` workers (per simulated process), and
    the records sent. The floor has as many workers as the whole simulated cluster."""
    peers = workers * processes
    count = max(1, round(total / (peers * batch)))
    epochs = make_epochs(seed, peers, batch, count)
    sent = count * peers * batch
    run_async(floor(epochs[:2], peers, depth))  # warm-up, not timed
    run_naiad(epochs[:2], workers, processes)
    log(
        f"workers={workers} x processes={processes}: {count} epochs of {peers} x {batch} "
        f"records = {sent:,}"
    )
    floor_label, naiad_label = f"asyncio_w{peers}", naiad_name(workers, processes)
    runs = interleaved(
        reps,
        {
            floor_label: lambda: run_async(floor(epochs, peers, depth)),
            naiad_label: lambda: run_naiad(epochs, workers, processes),
        },
    )
    expected = expected_inproc(epochs, peers)
    return entry(runs[floor_label], sent, expected), entry(runs[naiad_label], sent, expected), sent


def naiad_name(workers: int, processes: int) -> str:
    return f"naiad_w{workers}" if processes == 1 else f"naiad_p{processes}_w{workers}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(NAME, DESCRIPTION)
    p.add_argument("--records", type=int, help="total records (default 50M, quick 5M)")
    p.add_argument(
        "--batch",
        type=int,
        help="records per worker batch (default 65536)",
    )
    p.add_argument(
        "--workers",
        help="worker counts (per process), comma-separated (default 2; tcp clusters 1,2)",
    )
    p.add_argument("--processes", type=int, default=1, help="naiad processes (default 1)")
    p.add_argument(
        "--transport",
        choices=("inproc", "tcp"),
        help="with --processes > 1: tcp (real processes, default) or inproc (simulated)",
    )
    p.add_argument("--window", type=int, default=4, help="tcp: epochs in flight per worker")
    p.add_argument("--queue-depth", type=int, default=16, help="floor: asyncio.Queue maxsize")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.processes < 1:
        raise SystemExit("--processes must be at least 1")
    transport = args.transport or ("tcp" if args.processes > 1 else "inproc")
    if transport == "tcp" and args.processes < 2:
        raise SystemExit("--transport tcp needs --processes 2 or more")
    if transport == "tcp":
        return main_cluster(args)
    reps = reps_for(args)
    total = args.records or (200_000 if args.tiny else 5_000_000 if args.quick else 50_000_000)
    batch = args.batch or 65536
    batch = min(batch, 4096) if args.tiny else batch
    worker_counts = [int(w) for w in (args.workers or "2").split(",")]
    depth = args.queue_depth
    procs = args.processes

    results: dict[str, Any] = {}
    ratios: dict[str, float | None] = {}
    goals: list[dict[str, Any]] = []
    records: dict[str, int] = {}
    for workers in worker_counts:
        floor_entry, naiad_entry, sent = compare(
            workers, total, batch, reps, depth, args.seed, procs
        )
        floor_label = f"asyncio_w{workers * procs}"
        results[floor_label], results[naiad_name(workers, procs)] = floor_entry, naiad_entry
        records[naiad_name(workers, procs).removeprefix("naiad_")] = sent
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
    if procs > 1:
        params |= {
            "processes": procs,
            "transport": "inproc (processes simulated in one OS process: same codec and "
            "protocol, no sockets); the floor has workers * processes workers",
        }
    return report(NAME, args.quick, params, results, ratios, goals, correct)


# --- tcp clusters --------------------------------------------------------------------------------
RAW_CHUNK = 64 * 1024


def expected_per_worker(
    seed: int, peers: int, batch: int, epochs: int
) -> tuple[list[int], list[int]]:
    """What every worker should receive over epochs ``0..epochs`` (warm-up included): the
    record count and the sum modulo 2**64, recomputed from the members' seeded batches."""
    from benchmarks._cluster_exchange import POOL, worker_batches

    uses = [len(range(k, epochs + 1, POOL)) for k in range(POOL)]
    counts, sums = [0] * peers, [0] * peers
    for sender in range(peers):
        for k, array in enumerate(worker_batches(seed, sender, batch)):
            routes = array % peers
            for dest in range(peers):
                part = array[routes == dest]
                counts[dest] += uses[k] * len(part)
                sums[dest] = (sums[dest] + uses[k] * checksum(part)) & MASK
    return counts, sums


def cluster_run(
    workers: int, processes: int, batch: int, epochs: int, window: int, seed: int
) -> dict[str, Any]:
    """One cluster run: its timing, and each worker's counts (merged over processes)."""
    from benchmarks._cluster import run_cluster

    members = run_cluster(
        "_cluster_exchange.py",
        workers,
        processes,
        [
            "--batch",
            str(batch),
            "--epochs",
            str(epochs),
            "--window",
            str(window),
            "--seed",
            str(seed),
        ],
    )
    start = min(m["start"] for m in members)
    end = max(m["end"] for m in members)
    return {
        "seconds": end - start,
        "process0_seconds": members[0]["end"] - members[0]["start"],
        "cpu_seconds": sum(m["cpu_seconds"] for m in members),
        "max_process_cpu_seconds": max(m["cpu_seconds"] for m in members),
        "peak_rss_mb": max(m["peak_rss_mb"] for m in members),
        "workers": sorted((w for m in members for w in m["workers"]), key=lambda w: w["index"]),
        "data_frames": sum(m["frames"]["1"] for m in members),
        "data_bytes": sum(m["bytes"]["1"] for m in members),
        "progress_frames": sum(m["frames"]["2"] for m in members),
        "progress_bytes": sum(m["bytes"]["2"] for m in members),
    }


def raw_run(nbytes: int) -> dict[str, Any]:
    from benchmarks._cluster import tcp_stream_floor

    return {"seconds": tcp_stream_floor(nbytes, RAW_CHUNK)}


def main_cluster(args: Any) -> dict[str, Any]:
    """``--processes P --transport tcp``: naiad on P local processes vs raw socket writes."""
    from benchmarks._cluster import alternate, machine_load

    load_before = machine_load()

    reps = reps_for(args)
    procs = args.processes
    total = args.records or (400_000 if args.tiny else 5_000_000 if args.quick else 50_000_000)
    batch = args.batch or (8192 if args.tiny else 65_536)
    worker_counts = [int(w) for w in (args.workers or "1,2").split(",")]
    window = max(1, args.window)
    raw_bytes = max(total * 8, 8 * RAW_CHUNK)

    fns: dict[str, Any] = {"raw_tcp": lambda: raw_run(raw_bytes)}
    plan: dict[str, tuple[int, int, int]] = {}  # name -> (workers, epochs, timed records)
    for workers in worker_counts:
        peers = workers * procs
        epochs = max(1, round(total / (peers * batch)))
        name = naiad_name(workers, procs)
        plan[name] = (workers, epochs, epochs * peers * batch)
        fns[name] = lambda w=workers, e=epochs: cluster_run(w, procs, batch, e, window, args.seed)
        log(
            f"{name}: {epochs} timed epochs of {peers} x {batch:,} records = "
            f"{epochs * peers * batch:,}"
        )
    log(f"raw_tcp: {raw_bytes:,} bytes in {RAW_CHUNK // 1024} KiB sendall writes")
    raw_run(8 * RAW_CHUNK)  # warm-up, not timed
    runs = alternate(reps, fns)

    results: dict[str, Any] = {}
    raw = runs.pop("raw_tcp")
    raw_s = median([r["seconds"] for r in raw])
    results["raw_tcp"] = {
        "seconds": rounded(raw_s),
        "bytes": raw_bytes,
        "bytes_per_s": rounded(raw_bytes / raw_s),
        "gb_per_s": rounded(raw_bytes / raw_s / 1e9),
    }
    correct = True
    for name, rs in runs.items():
        workers, epochs, timed = plan[name]
        peers = workers * procs
        counts, sums = expected_per_worker(args.seed, peers, batch, epochs)
        ok = all(
            [w["received"] for w in r["workers"]] == counts
            and [w["sum"] for w in r["workers"]] == sums
            and all(w["misrouted"] == 0 for w in r["workers"])
            for r in rs
        )
        correct &= ok
        seconds = median([r["seconds"] for r in rs])
        last = rs[-1]
        results[name] = {
            "seconds": rounded(seconds),
            "process0_seconds": rounded(median([r["process0_seconds"] for r in rs])),
            "cpu_seconds": rounded(median([r["cpu_seconds"] for r in rs])),
            "max_process_cpu_seconds": rounded(median([r["max_process_cpu_seconds"] for r in rs])),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "records": timed,
            "records_per_s": rounded(timed / seconds),
            "bytes_per_s": rounded(8 * timed / seconds),
            "data_frames": last["data_frames"],
            "data_bytes": last["data_bytes"],
            "progress_frames": last["progress_frames"],
            "progress_bytes": last["progress_bytes"],
            "correct": ok,
        }
    ratios: dict[str, float | None] = {}
    goals: list[dict[str, Any]] = []
    for workers in worker_counts:
        name = naiad_name(workers, procs)
        key = f"{name}_bytes_over_raw"
        ratios[key] = ratio(results[name]["bytes_per_s"], results["raw_tcp"]["bytes_per_s"])
        if workers == worker_counts[0]:
            goals.append(goal(ratios, key, ">=", GOAL))
    for workers in worker_counts:  # as if every process had a core of its own
        name = naiad_name(workers, procs)
        cpu_rate = 8 * results[name]["records"] / results[name]["max_process_cpu_seconds"]
        ratios[f"{name}_bytes_over_raw_cpu"] = ratio(cpu_rate, results["raw_tcp"]["bytes_per_s"])
    params = {
        "processes": procs,
        "transport": "tcp (naiad run: local processes over loopback)",
        "workers_per_process": worker_counts,
        "records": {name: timed for name, (_, _, timed) in plan.items()},
        "record_bytes": 8,
        "batch_per_worker": batch,
        "epochs": {name: epochs for name, (_, epochs, _) in plan.items()},
        "window_epochs": window,
        "reps": reps,
        "seed": args.seed,
        "naiad_graph": "new_input -> exchange(keys=identity: x % peers) -> unary(Sink: count, "
        "routing check, sum mod 2**64) -> probe; every worker sends one batch per epoch "
        "(4 distinct seeded batches per worker, cycled) through InputHandle.feed(probe=, "
        "lag=window): before epoch e it waits until the probe has passed e - window, and "
        "while the transport holds too much unsent data",
        "timing": "inside the processes, CLOCK_MONOTONIC (one clock for the machine): from "
        "the earliest process seeing the warm-up epoch 0 complete (a barrier: every worker "
        "is running) to the last process seeing the probe empty; process start-up, "
        "connection, dataflow construction and the warm-up epoch are not included. "
        "records_per_s counts every record of the timed epochs (the 1 - 1/processes of them "
        "that cross a socket and the rest that stay in their process)",
        "raw_tcp": "floor: a child process sendall()s raw_tcp.bytes in 64 KiB writes over "
        "loopback to this process, which recv_into()s a 64 KiB buffer until it has them "
        "all; timed from the go byte to the last byte; one direction",
        "goal": "naiad records/s x 8 bytes >= 0.5 x raw_tcp bytes/s",
        "machine": {"before": load_before, "after": machine_load()},
        "correct": "every worker's received count and sum mod 2**64 equal what the parent "
        "recomputes from the seeded batches, and no record reached a worker other than "
        "x % peers",
        "statistic": "raw_tcp and each naiad configuration run alternately, reps rounds; "
        "median over reps; cpu_seconds: sum over processes of the CPU time of the timed "
        "span (max_process_cpu_seconds: the busiest process's); *_frames / *_bytes: frames "
        "and bytes sent by all processes (last rep, headers included)",
        "cpu_ratios": "*_bytes_over_raw_cpu: naiad's bytes per second of the busiest "
        "process's CPU time over raw_tcp's bytes/s: what the run would reach if each process "
        "had a core to itself (informative; the goal uses wall-clock time; see machine)",
        "event_loop": "uvloop",
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)
