"""Coordination (Naiad §5.2): the cost of one notification round per loop iteration.

A cyclic dataflow exchanges no data: inside ``scope.iterative()`` a feedback stream enters a
:class:`Ticker` vertex whose output closes the loop. The ticker asks for a notification at
its initial time and, from every notification at ``(outer, i)``, for the next one at
``(outer, i + 1)``; each notification needs the progress protocol to prove that no worker can
still produce anything at or before that time. Worker 0 stamps ``perf_counter`` at every
notification; the gaps between stamps are the iteration times.

Floor: the bare asyncio round trip: two tasks ping-ponging through two ``asyncio.Queue``.
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


def run_naiad(iterations: int, workers: int) -> list[Ticker]:
    def build(scope: naiad.Scope) -> Ticker:
        ticker = Ticker(iterations)
        with scope.iterative() as loop:
            handle, cycle = loop.feedback()
            cycle.unary(ticker).connect_loop(handle)
        return ticker

    tickers: list[Ticker] = naiad.run(build, workers=workers)
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
    p.add_argument("--iterations", type=int, help="default 20000, quick 5000")
    p.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    args = p.parse_args(argv)
    reps = reps_for(args)
    iterations = args.iterations or (200 if args.tiny else 5_000 if args.quick else 20_000)
    worker_counts = [int(w) for w in args.workers.split(",")]
    if iterations < 2:
        raise SystemExit("--iterations must be at least 2")

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
