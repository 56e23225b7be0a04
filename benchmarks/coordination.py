"""Coordination (Naiad §5.2): the cost of one notification round per loop iteration.

A cyclic dataflow exchanges no data: inside ``scope.iterative()`` a feedback stream enters a
:class:`Ticker` vertex whose output closes the loop. The ticker asks for a notification at
its initial time and, from every notification at ``(outer, i)``, for the next one at
``(outer, i + 1)``; each notification needs the progress protocol to prove that no worker can
still produce anything at or before that time. Worker 0 stamps ``perf_counter`` at every
notification; the gaps between stamps are the iteration times.

Floor: the bare asyncio round trip: two tasks ping-ponging through two ``asyncio.Queue``.

``--processes P``: the same loop on P real processes over TCP on loopback
(``benchmarks/_cluster_coordination.py``, launched with ``naiad run``), stamped in process 0;
floor: the round trip of an 8-byte message between two processes over a TCP_NODELAY
connection, asyncio streams on uvloop at both ends (``_cluster.tcp_pingpong_floor``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import naiad
from benchmarks._common import (
    Runs,
    goal,
    interleaved,
    log,
    median,
    parser,
    percentile,
    ratio,
    report,
    reps_for,
    rounded,
    run_async,
)

NAME = "coordination"
DESCRIPTION = "notification round per iteration of an empty cyclic dataflow vs asyncio ping-pong"
GOAL_FACTOR = 10.0


class Ticker(naiad.Vertex):
    """Requests a notification at every iteration of the loop; receives nothing."""

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations
        self.stamps: list[float] = []
        self.inners: list[int] = []

    def on_start(self, cap: naiad.Capability) -> None:
        self.notify_at(cap)

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        raise AssertionError(f"the ticker received data at {cap.time!r}")

    def on_notify(self, cap: naiad.Capability) -> None:
        t = cap.time
        self.stamps.append(time.perf_counter())
        self.inners.append(t.inner)
        if t.inner + 1 < self.iterations:
            self.notify_at(cap.delayed(naiad.Product(t.outer, t.inner + 1)))


def ticker_loop(scope: naiad.Scope, iterations: int) -> Ticker:
    """The benchmark's dataflow: a :class:`Ticker` alone on an empty cycle."""
    ticker = Ticker(iterations)
    with scope.iterative() as loop:
        handle, cycle = loop.feedback()
        cycle.unary(ticker).connect_loop(handle)
    return ticker


def run_naiad(iterations: int, workers: int) -> list[Ticker]:
    tickers: list[Ticker] = naiad.run(lambda s: ticker_loop(s, iterations), workers=workers)
    return tickers


def ticker_correct(tickers: list[Ticker], iterations: int) -> bool:
    return all(t.inners == list(range(iterations)) for t in tickers)


async def ping_pong(rounds: int) -> list[float]:
    """Two tasks, two queues; the stamps of ``rounds`` round trips, seen by the pinger."""
    ping: asyncio.Queue[int] = asyncio.Queue()
    pong: asyncio.Queue[int] = asyncio.Queue()

    async def ponger() -> None:
        while True:
            x = await ping.get()
            pong.put_nowait(x)
            if x < 0:
                return

    task = asyncio.get_running_loop().create_task(ponger())
    clock = time.perf_counter
    stamps = [clock()]
    for i in range(rounds):
        ping.put_nowait(i)
        await pong.get()
        stamps.append(clock())
    ping.put_nowait(-1)
    await pong.get()
    await task
    return stamps


def gaps_us(stamps: list[float]) -> list[float]:
    return [(b - a) * 1e6 for a, b in itertools.pairwise(stamps)]


def summarize(runs: Runs[list[float]]) -> dict[str, float]:
    """Median over runs of each run's median and p95 gap (µs), and the run's timing."""
    gaps = [gaps_us(stamps) for stamps in runs]
    return {
        "median_us": rounded(median([median(g) for g in gaps])),
        "p95_us": rounded(median([percentile(g, 95) for g in gaps])),
        "mean_us": rounded(median([sum(g) / len(g) for g in gaps])),
    } | runs.summary()


def naiad_stamps(iterations: int, workers: int) -> list[float]:
    """Worker 0's notification stamps; raises if a worker saw a wrong sequence of times."""
    tickers = run_naiad(iterations, workers)
    if not ticker_correct(tickers, iterations):
        raise AssertionError(f"workers={workers}: notifications missing or out of order")
    return tickers[0].stamps


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(NAME, DESCRIPTION)
    p.add_argument("--iterations", type=int, help="default 20000, quick a tenth")
    p.add_argument(
        "--workers",
        help="worker counts (per process), comma-separated (default 1,2; tcp clusters 1)",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="naiad processes; more than 1: local processes over tcp, against the tcp "
        "ping-pong between two processes",
    )
    args = p.parse_args(argv)
    reps = reps_for(args)
    iterations = args.iterations or (200 if args.tiny else 2_000 if args.quick else 20_000)
    if iterations < 2:
        raise SystemExit("--iterations must be at least 2")
    if args.processes < 1:
        raise SystemExit("--processes must be at least 1")
    if args.processes > 1:
        return main_cluster(args, reps, iterations)
    worker_counts = [int(w) for w in (args.workers or "1,2").split(",")]

    run_async(ping_pong(100))  # warm-up: imports and first-call costs, not timed
    for workers in worker_counts:
        run_naiad(100, workers)

    log(f"{iterations} iterations / round trips, {reps} rounds")
    fns: dict[str, Callable[[], list[float]]] = {
        "asyncio_pingpong": lambda: run_async(ping_pong(iterations))
    }
    for workers in worker_counts:
        fns[f"naiad_w{workers}"] = partial(naiad_stamps, iterations, workers)
    correct = True
    try:
        runs = interleaved(reps, fns)
    except AssertionError as exc:
        log(f"  wrong answer: {exc}")
        correct = False
        runs = {}
    correct &= all(len(stamps) == iterations + 1 for stamps in runs.get("asyncio_pingpong", []))
    correct &= all(
        len(stamps) == iterations for w in worker_counts for stamps in runs.get(f"naiad_w{w}", [])
    )
    results: dict[str, Any] = {name: summarize(r) for name, r in runs.items()}

    floor = results.get("asyncio_pingpong", {}).get("median_us")
    ratios: dict[str, float | None] = {
        f"naiad_w{w}_over_floor": ratio(results.get(f"naiad_w{w}", {}).get("median_us"), floor)
        for w in worker_counts
    }
    goals = [goal(ratios, name, "<=", GOAL_FACTOR) for name in ratios]
    for w in worker_counts:  # the mean gap: steadier where the gaps are bimodal (see params)
        ratios[f"naiad_w{w}_over_floor_mean"] = ratio(
            results.get(f"naiad_w{w}", {}).get("mean_us"),
            results.get("asyncio_pingpong", {}).get("mean_us"),
        )
    for w in worker_counts:  # whole runs of as many iterations as round trips
        ratios[f"naiad_w{w}_over_floor_cpu"] = ratio(
            results.get(f"naiad_w{w}", {}).get("cpu_seconds"),
            results.get("asyncio_pingpong", {}).get("cpu_seconds"),
        )
    params = {
        "iterations": iterations,
        "workers": worker_counts,
        "reps": reps,
        "statistic": "floor and naiad configurations run alternately, reps rounds; per run: "
        "median and p95 of the gaps between consecutive notifications (worker 0) or round "
        "trips; reported: the median over runs; seconds / cpu_seconds: median wall-clock / "
        "CPU time of a whole run, naiad's including dataflow construction",
        "naiad_graph": "iterative scope: feedback -> unary(Ticker) -> connect_loop; the ticker "
        "notifies itself at (0, i + 1) from the notification at (0, i)",
        "event_loop": "uvloop",
        "bimodal_gaps": "with 2 workers each worker is notified twice in a row (the loop lets "
        "workers be one iteration apart), so worker 0's gaps alternate short / long and the "
        "median sits on the edge between the two modes; *_over_floor_mean compares mean gaps",
        "cpu_ratios": "ratios ending in _cpu compare median CPU seconds instead: steadier "
        "when other processes load the machine; informative only, goals use wall-clock",
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)


# --- tcp clusters --------------------------------------------------------------------------------
def warmup_skip(iterations: int) -> int:
    """Iterations left out of a cluster run's statistics: the first ones also wait for the
    other processes to build the dataflow (10%, at most 100)."""
    return min(100, iterations // 10)


def cluster_stamps(iterations: int, workers: int, processes: int) -> dict[str, Any]:
    """One cluster run: worker 0's notification stamps (after the warm-up iterations) and
    the progress traffic of every process."""
    from benchmarks._cluster import run_cluster

    members = run_cluster(
        "_cluster_coordination.py", workers, processes, ["--iterations", str(iterations)]
    )
    stamps = members[0]["stamps"][warmup_skip(iterations) :]
    gaps = gaps_us(stamps)
    return {
        "seconds": (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0,
        "gaps": gaps,
        "ok": all(m["ok"] for m in members) and len(members[0]["stamps"]) == iterations,
        "peak_rss_mb": max(m["peak_rss_mb"] for m in members),
        "cpu_us_per_iteration": max(m["cpu_us_per_iteration"] for m in members),
        "progress_frames": sum(m["frames"]["2"] for m in members),
        "progress_bytes": sum(m["bytes"]["2"] for m in members),
        "progress_updates": sum(m["progress"]["updates_sent"] for m in members),
    }


def pingpong_run(rounds: int) -> dict[str, Any]:
    from benchmarks._cluster import tcp_pingpong_floor

    stamps = tcp_pingpong_floor(rounds)
    return {"seconds": stamps[-1] - stamps[0], "gaps": gaps_us(stamps), "ok": True}


def gap_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over runs of each run's median, p95 and mean gap (µs)."""
    gaps = [r["gaps"] for r in runs]
    return {
        "median_us": rounded(median([median(g) for g in gaps])),
        "p95_us": rounded(median([percentile(g, 95) for g in gaps])),
        "mean_us": rounded(median([sum(g) / len(g) for g in gaps])),
        "seconds": rounded(median([r["seconds"] for r in runs])),
    }


def main_cluster(args: Any, reps: int, iterations: int) -> dict[str, Any]:
    """``--processes P``: the loop on P local processes over TCP vs the TCP ping-pong."""
    from benchmarks._cluster import alternate, machine_load

    load_before = machine_load()

    procs = args.processes
    worker_counts = [int(w) for w in (args.workers or "1").split(",")]
    if iterations - warmup_skip(iterations) < 2:
        raise SystemExit("--iterations too small")
    pingpong_run(100)  # warm-up, not timed
    fns: dict[str, Callable[[], dict[str, Any]]] = {
        "tcp_pingpong": partial(pingpong_run, iterations)
    }
    for workers in worker_counts:
        fns[f"naiad_p{procs}_w{workers}"] = partial(cluster_stamps, iterations, workers, procs)
    log(f"{iterations} iterations / round trips, {reps} rounds, {procs} processes")
    runs = alternate(reps, fns)
    correct = all(r["ok"] for rs in runs.values() for r in rs)
    results: dict[str, Any] = {}
    for name, rs in runs.items():
        results[name] = gap_summary(rs)
        if name != "tcp_pingpong":
            results[name] |= {
                "cpu_us_per_iteration": rounded(median([r["cpu_us_per_iteration"] for r in rs])),
                "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
                "progress_frames": rs[-1]["progress_frames"],
                "progress_bytes": rs[-1]["progress_bytes"],
                "progress_updates": rs[-1]["progress_updates"],
            }
    floor = results["tcp_pingpong"]
    ratios: dict[str, float | None] = {}
    for workers in worker_counts:
        name = f"naiad_p{procs}_w{workers}"
        ratios[f"{name}_over_floor"] = ratio(results[name]["median_us"], floor["median_us"])
    goals = [goal(ratios, f"naiad_p{procs}_w{worker_counts[0]}_over_floor", "<=", GOAL_FACTOR)]
    for workers in worker_counts:
        name = f"naiad_p{procs}_w{workers}"
        ratios[f"{name}_over_floor_p95"] = ratio(results[name]["p95_us"], floor["p95_us"])
        ratios[f"{name}_over_floor_mean"] = ratio(results[name]["mean_us"], floor["mean_us"])
    params = {
        "iterations": iterations,
        "processes": procs,
        "workers_per_process": worker_counts,
        "transport": "tcp (naiad run: local processes over loopback)",
        "reps": reps,
        "warmup_iterations_skipped": warmup_skip(iterations),
        "machine": {"before": load_before, "after": machine_load()},
        "statistic": "floor and naiad configurations run alternately, reps rounds; per run: "
        "median, p95 and mean of the gaps between consecutive notifications of worker 0 "
        "(in process 0) or between round trips; reported: the median over runs; seconds: "
        "the span of the stamps used",
        "timing": "inside process 0 (perf_counter at every notification), so process "
        "start-up, connection and dataflow construction are not included; the first "
        "warmup_iterations_skipped iterations (which also wait for the other processes to "
        "build) are left out",
        "naiad_graph": "iterative scope: feedback -> unary(Ticker) -> connect_loop; the ticker "
        "notifies itself at (0, i + 1) from the notification at (0, i), on every worker",
        "bimodal_gaps": "the loop lets workers be one iteration apart, so worker 0 is often "
        "notified twice in quick succession and then waits for the other process: its gaps "
        "alternate short / long and the median sits in one of the two modes; "
        "*_over_floor_mean compares mean gaps (informative; the goal uses the median)",
        "floor": "tcp_pingpong: an 8-byte message and its echo between this process and a "
        "child process, one TCP_NODELAY loopback connection, asyncio streams on uvloop at "
        "both ends",
        "cpu_us_per_iteration": "CPU time of the busier process from dataflow construction "
        "to completion, per iteration (what one process spends on a round, start-up "
        "excluded): an iteration cannot be shorter than this plus a one-way trip",
        "progress": "progress_frames / progress_bytes / progress_updates: PROGRESS frames, "
        "their bytes (headers included) and the updates in them, sent by all processes in "
        "the last run",
        "event_loop": "uvloop",
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)
