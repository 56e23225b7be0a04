"""Cluster member of ``python -m benchmarks exchange --processes P --transport tcp``.

Every process runs this script (``naiad run benchmarks/_cluster_exchange.py -w W -n P -- ...``).
Each worker feeds its own int64 batches through an input handle: epoch 0 is a warm-up batch
(it also serves as a barrier: once the probe says epoch 0 is complete, every worker of the
cluster is running), then epochs ``1..epochs`` one batch per worker each. The stream is
exchanged by ``x % peers`` into :class:`Sink`, which counts what it
receives, checks each record's routing and sums the records (``uint64`` wrap-around) so that
the parent can check that every record arrived exactly where it should.

Each worker's input is fed with ``InputHandle.feed(..., probe=probe, lag=window)``: at most
``window`` epochs in flight (before sending epoch ``e`` it waits until the probe says epoch
``e - window`` is complete, timely's usual input pacing) and no sending while the transport
holds too much unsent data.

Written for the parent (``benchmarks._cluster.member_write``): the ``CLOCK_MONOTONIC`` stamps
when epoch 0 was seen complete and when the probe's frontier became empty, CPU seconds of that
span, per-worker counts, and this process's transport and progress statistics.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import numpy as np

import naiad
from benchmarks._cluster import clock, cpu_seconds, member_run, member_write, peak_rss_mb
from benchmarks.exchange import MASK, checksum, keys

POOL = 4  # distinct batches per worker, cycled


class Sink(naiad.Vertex):
    """Counts records, checks that each one was routed to this worker (``x % peers``, as a
    bit mask when ``peers`` is a power of two), and sums them modulo 2**64."""

    def __init__(self) -> None:
        self.received = 0
        self.misrouted = 0
        self.checksum = 0

    def on_recv(self, port: int, cap: naiad.Capability, batch: np.ndarray) -> None:
        peers = self.peers
        self.received += len(batch)
        self.checksum = (self.checksum + checksum(batch)) & MASK
        if peers & (peers - 1) == 0 and len(batch):
            # Every record has low bits equal to the index exactly when the OR of all records
            # has no bit the index lacks and the AND all the bits it has: two reductions, no
            # temporary arrays (the per-record count below cost ~15% of a member's CPU).
            low = peers - 1
            both = (int(np.bitwise_or.reduce(batch)) & low, int(np.bitwise_and.reduce(batch)) & low)
            if both == (self.index, self.index):
                return
        routes = batch & (peers - 1) if peers & (peers - 1) == 0 else batch % peers
        self.misrouted += int(np.count_nonzero(routes != self.index))


def worker_batches(seed: int, worker: int, batch: int) -> list[np.ndarray]:
    """The distinct batches global worker ``worker`` cycles through (epoch ``e`` sends
    ``pool[e % POOL]``); the parent regenerates them to compute the expected sums."""
    rng = np.random.default_rng([seed, worker])
    return [rng.integers(0, 2**62, size=batch, dtype=np.int64) for _ in range(POOL)]


async def member(args: argparse.Namespace) -> dict[str, Any]:
    async with naiad.Runtime() as rt:
        sinks: list[Sink] = []

        def build(scope: naiad.Scope) -> tuple[Any, Any]:
            handle, stream = scope.new_input()
            sink = Sink()
            sinks.append(sink)
            probe = stream.exchange(keys=keys).unary(sink).probe()
            return handle, probe

        df = rt.dataflow(build)
        handles = [h for h, _ in df.results]
        probe = df.results[0][1]
        first = rt.processes[0].first
        pools = [worker_batches(args.seed, first + i, args.batch) for i in range(len(handles))]

        # epoch 0: warm-up and barrier
        for handle, pool in zip(handles, pools, strict=True):
            handle.send(pool[0])
            handle.advance_to(1)
        await probe.wait(0)
        start, cpu = clock(), cpu_seconds()
        # InputHandle.feed: one batch per epoch, waiting before epoch e until the probe has
        # passed e - window (and while the transport holds too much unsent data); closes.
        epochs = range(1, args.epochs + 1)
        await asyncio.gather(
            *(
                handle.feed([pool[e % POOL] for e in epochs], probe=probe, lag=args.window)
                for handle, pool in zip(handles, pools, strict=True)
            )
        )
        await probe.wait()
        end, cpu = clock(), cpu_seconds() - cpu
    process = rt.processes[0]
    transport = process.transport
    return {
        "start": start,
        "end": end,
        "cpu_seconds": cpu,
        "peak_rss_mb": peak_rss_mb(),
        "workers": [
            {
                "index": s.index,
                "received": s.received,
                "misrouted": s.misrouted,
                "sum": int(s.checksum),
            }
            for s in sinks
        ],
        "frames": dict(transport.stats.frames) if transport is not None else {},
        "bytes": dict(transport.stats.bytes) if transport is not None else {},
        "progress": vars(process.progress.stats),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, required=True, help="records per worker per epoch")
    p.add_argument("--epochs", type=int, required=True, help="timed epochs (after epoch 0)")
    p.add_argument("--window", type=int, default=4, help="epochs in flight")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    member_write(member_run(member(args)))


if __name__ == "__main__":
    main()
