"""Cluster member of ``python -m benchmarks wcc`` and ``wcc-incremental``.

Every process generates the same seeded graph (``benchmarks._graphs.random_graph``); global
worker ``g`` of ``G`` feeds the ``g``-th contiguous ``1/G`` of the edges as numpy columns
(``InputSession.send_columns``). The dataflow is ``naiad.libraries.graph.wcc`` with a view
(``--prioritized``: labels introduced in priority order ``log2(1 + label)``, seed 002 §2.6).

Timing: epoch 0 is empty and serves as a barrier (once the probe has passed it every worker of
the cluster runs); the clock starts there. ``wcc``: the edges at epoch 1, then the input closes
(a batch computation: with a later epoch still open, the loop must keep every iteration's
history apart for it); the clock stops when epoch 1 is complete. ``wcc-incremental``: the
base graph at epoch 1, then one single-edge change per epoch (worker 0 sends it), each timed
from the send to the probe passing its epoch.

Written for the parent: the stamps, latencies, CPU seconds, peak RSS, and every worker's
``[node, label, multiplicity]`` records at the final epoch.
"""

from __future__ import annotations

import argparse
import gc
from typing import Any

import naiad
from benchmarks._cluster import clock, cpu_seconds, member_run, member_write, peak_rss_mb
from benchmarks._graphs import edge_changes, random_graph
from naiad.differential import Collection
from naiad.libraries import graph


async def member(args: argparse.Namespace) -> dict[str, Any]:
    src, dst = random_graph(args.nodes, args.edges, args.seed)
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> tuple[Any, Any, Any]:
            session, edges = Collection.new_input(scope)
            labels = graph.wcc(edges, prioritized=args.prioritized)
            return session, labels.probe(), labels.view(gather=False)

        df = rt.dataflow(build)
        peers, first = rt.peers, rt.processes[0].first
        probe = df.results[0][1]
        for session, _, _ in df.results:
            session.advance_to(1)
        await probe.wait(0)  # barrier: every worker runs
        gc.collect()
        start, cpu = clock(), cpu_seconds()
        for local, (session, _, _) in enumerate(df.results):
            g = first + local
            lo, hi = g * len(src) // peers, (g + 1) * len(src) // peers
            session.send_columns((src[lo:hi], dst[lo:hi]))
            if args.changes:
                session.advance_to(2)
            else:  # a batch computation: no later epoch can need the loop's history
                session.close()
        await probe.wait(1)
        loaded = clock()
        latencies = []
        epoch = 2
        if args.changes:
            half = args.changes // 2
            changes = edge_changes(args.nodes, src, dst, half, args.changes - half, args.seed)
            for s, d, diff in changes:
                sent = clock()
                for local, (session, _, _) in enumerate(df.results):
                    if first + local == 0:
                        session.update((int(s), int(d)), int(diff))
                    session.advance_to(epoch + 1)
                await probe.wait(epoch)
                latencies.append(clock() - sent)
                epoch += 1
        for session, _, _ in df.results:
            if not session.handle.closed:
                session.close()
        await df.finished()
        end, cpu = clock(), cpu_seconds() - cpu
        # Every record with its multiplicity: the parent checks that each node has exactly
        # one label, once (a duplicate, a stale label or a missing node is a wrong answer).
        labels = [
            [int(node), int(label), int(count)]
            for _, _, view in df.results
            for (node, label), count in view.at(epoch).items()
            if count
        ]
    return {
        "start": start,
        "loaded": loaded,
        "end": end,
        "latencies": latencies,
        "cpu_seconds": cpu,
        "peak_rss_mb": peak_rss_mb(),
        "labels": labels,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--edges", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--changes", type=int, default=0)
    p.add_argument("--prioritized", action="store_true")
    args = p.parse_args()
    member_write(member_run(member(args)))


if __name__ == "__main__":
    main()
