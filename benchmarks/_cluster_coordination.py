"""Cluster member of ``python -m benchmarks coordination --processes P``.

Every process builds the coordination dataflow of ``benchmarks.coordination`` (an iterative
scope whose :class:`~benchmarks.coordination.Ticker` notifies itself at ``(0, i + 1)`` from
the notification at ``(0, i)``) and runs it to completion. Each notification needs the
progress protocol to prove, across the processes, that no worker can still produce anything
at or before that time, so every iteration is a round of progress traffic over TCP.

Written for the parent: the ``perf_counter`` stamps of every notification of global worker 0
(process 0 only; the gaps between stamps are the iteration times, so process start-up is not
in them), the process's CPU time per iteration, whether every local worker saw the times
``0 .. iterations - 1`` in order, and this process's progress and transport statistics.
"""

from __future__ import annotations

import argparse
from typing import Any

import naiad
from benchmarks._cluster import (
    cpu_seconds,
    member_index,
    member_run,
    member_write,
    peak_rss_mb,
)
from benchmarks.coordination import Ticker, ticker_correct, ticker_loop


async def member(iterations: int) -> dict[str, Any]:
    async with naiad.Runtime() as rt:
        cpu = cpu_seconds()
        df = rt.dataflow(lambda scope: ticker_loop(scope, iterations))
        await df.finished()
        cpu = cpu_seconds() - cpu
    tickers: list[Ticker] = df.results
    process = rt.processes[0]
    transport = process.transport
    return {
        "stamps": tickers[0].stamps if member_index() == 0 else [],
        "notifications": [len(t.stamps) for t in tickers],
        "ok": ticker_correct(tickers, iterations),
        "cpu_us_per_iteration": cpu / iterations * 1e6,
        "peak_rss_mb": peak_rss_mb(),
        "frames": dict(transport.stats.frames) if transport is not None else {},
        "bytes": dict(transport.stats.bytes) if transport is not None else {},
        "progress": vars(process.progress.stats),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, required=True)
    args = p.parse_args()
    member_write(member_run(member(args.iterations)))


if __name__ == "__main__":
    main()
