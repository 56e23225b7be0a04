"""Cluster member of ``python -m benchmarks wordcount --processes P``.

Every process generates the same Zipf words (``benchmarks.wordcount.make_words``, same
seed); global worker ``g`` of ``G`` takes the contiguous ``g``-th ``1/G`` of them, in batches.
The dataflow:

    input -> unary(Combine) -> exchange(crc32(word) % peers, per batch) -> unary(Sum) -> collect

* :class:`Combine` (the combiner, on the worker that read the words): one
  ``Counter.update`` per batch; once the epoch is complete it sends its ``[word, count]``
  pairs (lists, which msgpack encodes natively), so only one pair per distinct word and
  worker crosses the exchange;
* :class:`Sum`: adds the counts of its words (each word reaches exactly one worker: routing by
  ``zlib.crc32``, which every process computes alike, unlike ``hash(str)``, randomized per
  process; the keys of a batch are computed in one call, ``naiad.Exchange(keys=...)``, and
  naiad splits the batch with numpy); once the epoch is complete it emits its final totals.

Before the clock starts, ``gc.freeze()`` moves the input (lists of millions of references) out
of the cyclic collector's reach: otherwise every full collection triggered by the run's own
allocations (the pairs, decoded batches) traverses them again, which costs more than the
counting itself (it is the input's representation, not the dataflow, that costs).

Timing: epoch 0 carries nothing and serves as a barrier (once the probe has passed it, every
worker of the cluster is running); the clock (``CLOCK_MONOTONIC``) starts there and stops
when the dataflow has finished. Word generation, start-up and construction are outside.

Written for the parent: the stamps, CPU seconds, and each worker's final totals.
"""

from __future__ import annotations

import argparse
import gc
import zlib
from collections import Counter
from typing import Any

import numpy as np

import naiad
from benchmarks._cluster import clock, cpu_seconds, member_run, member_write, peak_rss_mb
from benchmarks.wordcount import batches_of, make_words


def word_route(pair: list[Any]) -> int:
    """The routing key of a ``[word, count]`` pair: the same in every process."""
    return zlib.crc32(pair[0].encode())


def pair_routes(batch: list[list[Any]]) -> np.ndarray:
    """The routing keys of a batch of pairs, in one array (naiad partitions it with numpy)."""
    words = [pair[0] for pair in batch]
    return np.fromiter(map(zlib.crc32, map(str.encode, words)), dtype=np.int64, count=len(batch))


class Combine(naiad.Vertex):
    """This worker's word counts per epoch; sends its pairs when the epoch is complete."""

    def __init__(self) -> None:
        self.counts: dict[Any, Counter[str]] = {}
        self.notified = 0.0

    def on_recv(self, port: int, cap: naiad.Capability, batch: list[str]) -> None:
        counts = self.counts.get(cap.time)
        if counts is None:
            counts = self.counts[cap.time] = Counter()
            self.notify_at(cap)
        counts.update(batch)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.notified = clock()  # every word of the epoch is counted, in every process
        self.send(cap, [[word, n] for word, n in self.counts.pop(cap.time).items()])


class Sum(naiad.Vertex):
    """Totals of the words routed here; emits ``[word, total]`` once the epoch is complete."""

    def __init__(self) -> None:
        self.totals: dict[Any, dict[str, int]] = {}

    def on_recv(self, port: int, cap: naiad.Capability, batch: list[list[Any]]) -> None:
        totals = self.totals.get(cap.time)
        if totals is None:
            totals = self.totals[cap.time] = {}
            self.notify_at(cap)
        get = totals.get
        for word, n in batch:
            totals[word] = get(word, 0) + n

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, [[word, n] for word, n in self.totals.pop(cap.time).items()])


async def member(args: argparse.Namespace) -> dict[str, Any]:
    words = make_words(args.words, args.seed)
    combiners: list[Combine] = []
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> tuple[Any, Any, Any]:
            handle, stream = scope.new_input()
            routes = naiad.Exchange(keys=pair_routes)
            combine = Combine()
            combiners.append(combine)
            totals = stream.unary(combine).unary(Sum(), exchange=routes)
            return handle, totals.probe(), totals.collect()

        df = rt.dataflow(build)
        peers = rt.peers
        first = rt.processes[0].first
        shares = []
        for local in range(len(df.results)):
            g = first + local
            share = words[g * len(words) // peers : (g + 1) * len(words) // peers]
            shares.append(batches_of(share, args.batch))
        del words
        # The input lists (millions of references) are long-lived: keep the cyclic GC from
        # traversing them again at every collection the run's allocations trigger.
        gc.collect()
        gc.freeze()
        probe = df.results[0][1]
        for handle, _, _ in df.results:
            handle.advance_to(1)
        await probe.wait(0)  # barrier: every worker runs
        start, cpu = clock(), cpu_seconds()
        for (handle, _, _), batches in zip(df.results, shares, strict=True):
            for batch in batches:
                handle.send(batch)
            handle.close()
        await df.finished()
        end, cpu = clock(), cpu_seconds() - cpu
    return {
        "start": start,
        "end": end,
        "counted": min((c.notified for c in combiners if c.notified), default=end),
        "cpu_seconds": cpu,
        "peak_rss_mb": peak_rss_mb(),
        "workers": [
            {"index": first + i, "totals": dict(pair for _, pair in collected)}
            for i, (_, _, collected) in enumerate(df.results)
        ],
        "words_read": [sum(len(b) for b in batches) for batches in shares],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--words", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    member_write(member_run(member(args)))


if __name__ == "__main__":
    main()
