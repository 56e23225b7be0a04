"""Progress traffic (Naiad §5.3, Figure 6c): bytes and frames of the progress protocol with and
without local accumulation, on a cluster of processes over TCP.

Two iterative computations, each run on ``P`` processes x ``W`` workers (2 x 8 by default,
as Figure 6c: "8 workers per computer") with ``naiad.Runtime(accumulate=False)`` ("off",
Figure 6c's *None*) and ``accumulate=True`` ("local", *LocalAcc*), and also with
``central=True`` (progress routed through process 0: *GlobalAcc*, and *LocalAcc + GlobalAcc*):

* ``wcc``: connected components by label propagation on a seeded random graph (Figure 6c's
  computation), one notification per worker and iteration (``benchmarks/_cluster_progress.py``);
* ``circulate``: batches of records circulate for ``hops`` iterations of a loop, each hop to
  a pseudo-random worker; data-driven (no notifications).

Local accumulation merges the updates of a process's workers into one broadcast, so its
saving grows with the workers per process: with few (``--workers 2``) each iteration still
needs a frame from every process and "off" sends only a few per process, which bounds the
ratio well below Figure 6c's.

For each run: the PROGRESS frames and bytes (headers included) every process sent
(``transport.stats``), and the progress batches and updates (``ProgressStats``), summed over
the processes. Every run's answer is checked: the labels against a union-find in this
process, the circulated records' counts, sum and hop numbers against what was sent.

Analysis (on unless ``--no-analysis``): one more run of each workload with and without
accumulation, instrumented (private hooks, observing only): per flush, the updates, distinct
locations and distinct times, what triggered it (a local worker batch, or a batch from
another process), and the updates per location; and two prototypes of other accumulation
policies, patched into the progress actor of the member processes (not naiad's code):
``proto_turn`` (hold everything, broadcast once per event-loop turn) and ``proto_resident``
(also hold a decrement while a message at that pointstamp waits in a mailbox of the process).
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

import numpy as np

from benchmarks._common import (
    goal,
    log,
    median,
    parser,
    ratio,
    report,
    reps_for,
    rounded,
)

NAME = "progress-traffic"
DESCRIPTION = "progress protocol bytes with and without local accumulation (Naiad Figure 6c)"
GOAL = 10.0
MODES: dict[str, list[str]] = {
    "off": ["--accumulate", "off"],
    "local": ["--accumulate", "on"],
    "central": ["--accumulate", "off", "--central"],
    "local_central": ["--accumulate", "on", "--central"],
}
PROTOTYPES: dict[str, list[str]] = {
    "proto_turn": ["--accumulate", "turn"],
    "proto_resident": ["--accumulate", "resident"],
}
WORKLOADS = ("wcc", "circulate")


# --- oracles -----------------------------------------------------------------------------------
def wcc_oracle(nodes: int, edges: int, seed: int) -> list[int]:
    """The least node of every node's component, by union-find (union by least root, so a
    root is its component's least node)."""
    from benchmarks._cluster_progress import random_edges

    src, dst = random_edges(nodes, edges, seed)
    parent = list(range(nodes))

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for u, v in zip(src.tolist(), dst.tolist(), strict=True):
        ru, rv = find(u), find(v)
        if ru < rv:
            parent[rv] = ru
        elif rv < ru:
            parent[ru] = rv
    return [find(x) for x in range(nodes)]


def wcc_labels(members: list[dict[str, Any]], nodes: int) -> list[int]:
    """The labels of every node, from the workers' local label arrays."""
    per_worker = {}
    for m in members:
        first = m["process"] * len(m["result"]["labels"])
        for local, labels in enumerate(m["result"]["labels"]):
            per_worker[first + local] = labels
    peers = len(per_worker)
    out = np.empty(nodes, dtype=np.int64)
    for w, labels in per_worker.items():
        out[w::peers] = labels
    return out.tolist()


# --- runs --------------------------------------------------------------------------------------
def workload_args(workload: str, sizes: dict[str, int], seed: int) -> list[str]:
    if workload == "wcc":
        return [
            "--workload",
            "wcc",
            "--nodes",
            str(sizes["nodes"]),
            "--edges",
            str(sizes["edges"]),
            "--chunk",
            str(sizes["chunk"]),
            "--seed",
            str(seed),
        ]
    return [
        "--workload",
        "circulate",
        "--hops",
        str(sizes["hops"]),
        "--batches",
        str(sizes["batches"]),
        "--batch-size",
        str(sizes["batch_size"]),
    ]


def cluster_run(
    workload: str, mode_args: list[str], args: Any, sizes: dict[str, int], analyse: bool
) -> list[dict[str, Any]]:
    from benchmarks._cluster import run_cluster

    extra = ["--analyse"] if analyse else []
    return run_cluster(
        "_cluster_progress.py",
        args.workers,
        args.processes,
        workload_args(workload, sizes, args.seed) + mode_args + extra,
    )


def summarize_run(members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "progress_bytes": sum(m["progress_bytes"] for m in members),
        "progress_frames": sum(m["progress_frames"] for m in members),
        "progress_batches": sum(m["progress"]["batches_sent"] for m in members),
        "progress_updates": sum(m["progress"]["updates_sent"] for m in members),
        "data_frames": sum(m["data_frames"] for m in members),
        "seconds": max(m["seconds"] for m in members),
        "peak_rss_mb": max(m["peak_rss_mb"] for m in members),
    }


class Checker:
    """Checks the answers of runs of one workload (against an oracle computed once)."""

    def __init__(self, workload: str, sizes: dict[str, int], args: Any) -> None:
        self.workload = workload
        self.sizes = sizes
        self.peers = args.workers * args.processes
        self.expected: Any = None
        if workload == "wcc":
            self.expected = wcc_oracle(sizes["nodes"], sizes["edges"], args.seed)

    def __call__(self, members: list[dict[str, Any]]) -> bool:
        if self.workload == "wcc":
            return wcc_labels(members, self.sizes["nodes"]) == self.expected
        batches = self.peers * self.sizes["batches"]
        records = batches * self.sizes["batch_size"]
        results = [m["result"] for m in members]
        return (
            sum(r["finished_batches"] for r in results) == batches
            and sum(r["finished_records"] for r in results) == records
            and sum(r["checksum"] for r in results) % 2**61 == records * (records - 1) // 2 % 2**61
            and all(r["wrong_hop"] == 0 for r in results)
        )


def iterations_of(members: list[dict[str, Any]], workload: str, sizes: dict[str, int]) -> int:
    if workload == "wcc":
        return max(max(m["result"]["iterations"]) for m in members)
    return sizes["hops"]


def analysis_entry(
    members: list[dict[str, Any]], iterations: int, processes: int
) -> dict[str, Any]:
    """What the flushes of an instrumented run held, over all processes."""
    seen = [m["analysis"] for m in members]
    flush_updates = [n for a in seen for n in a["flush_updates"]]
    locations = [n for a in seen for n in a["flush_locations"]]
    times = [n for a in seen for n in a["flush_times"]]
    negative = sum(n for a in seen for n in a["flush_negative"])
    triggers: Counter[str] = Counter()
    by_location: Counter[str] = Counter()
    for a in seen:
        triggers.update(a["flush_trigger"])
        by_location.update(a["updates_by_location"])
    flushes = sum(a["flushes"] for a in seen)
    messages = sum(a["messages"] for a in seen)
    return summarize_run(members) | {
        "messages_received": messages,
        "worker_batches": sum(a["submits"] for a in seen),
        "worker_batch_updates": sum(a["submitted_updates"] for a in seen),
        "flushes": flushes,
        "flushes_per_iteration_per_process": rounded(flushes / max(1, iterations) / processes),
        "iterations": iterations,
        "updates_per_flush_mean": rounded(statistics.fmean(flush_updates)) if flushes else 0,
        "locations_per_flush_mean": rounded(statistics.fmean(locations)) if flushes else 0,
        "locations_per_flush_max": max(locations, default=0),
        "times_per_flush_mean": rounded(statistics.fmean(times)) if flushes else 0,
        "times_per_flush_max": max(times, default=0),
        "negative_share": rounded(negative / max(1, sum(flush_updates))),
        "flush_trigger": dict(triggers),
        "updates_by_location": dict(by_location.most_common()),
        "bytes_per_frame": rounded(
            sum(m["progress_bytes"] for m in members) / max(1, flushes * (processes - 1))
        ),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from benchmarks._cluster import alternate, machine_load

    load_before = machine_load()

    p = parser(NAME, DESCRIPTION)
    p.add_argument("--processes", type=int, default=2, help="processes (default 2)")
    p.add_argument(
        "--workers", type=int, default=8, help="workers per process (default 8, as Figure 6c)"
    )
    p.add_argument("--nodes", type=int, help="wcc: nodes (default 1,000,000; quick 100,000)")
    p.add_argument("--edges", type=int, help="wcc: edges (default 2 x nodes)")
    p.add_argument(
        "--chunk", type=int, default=0, help="wcc: rows per message (default 0: one message)"
    )
    p.add_argument("--hops", type=int, help="circulate: hops per batch (default 50; quick 20)")
    p.add_argument("--batches", type=int, help="circulate: batches per worker (default 200)")
    p.add_argument("--batch-size", type=int, default=100, help="circulate: records per batch")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ", ".join(MODES))
    p.add_argument("--no-analysis", action="store_true", help="skip the instrumented runs")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    reps = reps_for(args, full=3, quick=1)
    if args.processes < 2:
        raise SystemExit("progress traffic needs --processes 2 or more")
    modes = args.modes.split(",")
    for needed in ("off", "local"):
        if needed not in modes:
            modes.insert(0, needed)
    unknown = set(modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown modes {sorted(unknown)}; known: {', '.join(MODES)}")
    workloads = args.workloads.split(",")
    if set(workloads) - set(WORKLOADS):
        raise SystemExit(f"workloads are {', '.join(WORKLOADS)}")
    nodes = args.nodes or (2_000 if args.tiny else 100_000 if args.quick else 1_000_000)
    sizes = {
        "nodes": nodes,
        "edges": args.edges or 2 * nodes,
        "chunk": args.chunk,
        "hops": args.hops or (5 if args.tiny else 20 if args.quick else 50),
        "batches": args.batches or (5 if args.tiny else 100 if args.quick else 200),
        "batch_size": args.batch_size,
    }

    results: dict[str, Any] = {}
    ratios: dict[str, float | None] = {}
    goals: list[dict[str, Any]] = []
    correct = True
    for workload in workloads:
        check = Checker(workload, sizes, args)
        fns = {
            f"{workload}_{mode}": (
                lambda w=workload, m=mode: cluster_run(w, MODES[m], args, sizes, False)
            )
            for mode in modes
        }
        log(f"{workload}: {args.processes} processes x {args.workers} workers, modes {modes}")
        runs = alternate(reps, {k: _timed_members(f) for k, f in fns.items()})
        for name, rs in runs.items():
            members = [r["members"] for r in rs]
            ok = all(check(m) for m in members)
            correct &= ok
            summaries = [summarize_run(m) for m in members]
            entry = {
                key: rounded(median([s[key] for s in summaries]))
                for key in (
                    "progress_bytes",
                    "progress_frames",
                    "progress_batches",
                    "progress_updates",
                    "data_frames",
                    "seconds",
                )
            }
            entry["peak_rss_mb"] = max(s["peak_rss_mb"] for s in summaries)
            entry["iterations"] = iterations_of(members[-1], workload, sizes)
            entry["correct"] = ok
            results[name] = entry
        off, local = results[f"{workload}_off"], results[f"{workload}_local"]
        key = f"{workload}_off_over_local_bytes"
        ratios[key] = ratio(off["progress_bytes"], local["progress_bytes"])
        goals.append(goal(ratios, key, ">=", GOAL))
        ratios[f"{workload}_off_over_local_frames"] = ratio(
            off["progress_frames"], local["progress_frames"]
        )
        for mode in modes:
            if mode not in ("off", "local"):
                ratios[f"{workload}_off_over_{mode}_bytes"] = ratio(
                    off["progress_bytes"], results[f"{workload}_{mode}"]["progress_bytes"]
                )
        if not args.no_analysis:
            log(f"{workload}: instrumented runs and prototypes (1 each)")
            for mode, mode_args in {
                "off": MODES["off"],
                "local": MODES["local"],
                **PROTOTYPES,
            }.items():
                members = cluster_run(workload, mode_args, args, sizes, True)
                ok = check(members)
                correct &= ok
                iterations = iterations_of(members, workload, sizes)
                entry = analysis_entry(members, iterations, args.processes) | {"correct": ok}
                if mode.startswith("proto"):
                    results[f"{workload}_{mode}"] = entry
                    ratios[f"{workload}_off_over_{mode}_bytes"] = ratio(
                        off["progress_bytes"], entry["progress_bytes"]
                    )
                else:
                    results[f"analysis_{workload}_{mode}"] = entry

    params = {
        "processes": args.processes,
        "workers_per_process": args.workers,
        "transport": "tcp (naiad run: local processes over loopback)",
        "workloads": workloads,
        "modes": {
            "off": "Runtime(accumulate=False): every worker batch (one activation's updates) "
            "is broadcast as it is submitted (Figure 6c: None)",
            "local": "Runtime(accumulate=True): the process's progress actor holds updates "
            "while they are increments or decrements dominated by another active pointstamp "
            "(LocalAcc)",
            "central": "Runtime(accumulate=False, central=True): batches go to process 0, which "
            "accumulates them before broadcasting (GlobalAcc)",
            "local_central": "accumulate=True, central=True (LocalAcc + GlobalAcc)",
        },
        "wcc": {
            "nodes": sizes["nodes"],
            "edges": sizes["edges"],
            "chunk": sizes["chunk"],
            "seed": args.seed,
            "graph": "random endpoints (numpy default_rng(seed).integers), undirected",
            "dataflow": "new_input (v, v) -> iterative: enter -> concat(feedback) -> "
            "unary(WCC, exchange by node) -> connect_loop; WCC collects proposals and on "
            "the notification of each iteration lowers labels and sends them to the "
            "neighbours of the changed nodes as one (k, 2) int64 array (or in messages of "
            "chunk rows)",
        },
        "circulate": {
            "hops": sizes["hops"],
            "batches_per_worker": sizes["batches"],
            "batch_size": sizes["batch_size"],
            "dataflow": "new_input (batches of (id, value, hop) rows, all sent at epoch 0, "
            "then closed) -> iterative: enter -> concat(feedback) -> unary(Hop, exchange: a "
            "whole batch to one pseudo-random worker per hop) -> connect_loop; no "
            "notifications",
        },
        "reps": reps,
        "statistic": "the modes of a workload run alternately, reps rounds; median over reps "
        "of the sums over processes of progress_bytes / progress_frames (PROGRESS frames "
        "sent, 32-byte headers included: transport.stats), progress_batches / "
        "progress_updates (ProgressStats.batches_sent / updates_sent); seconds: the "
        "dataflow's run time in the slowest process (informative)",
        "correct": "wcc: every node's label equals the least node of its component "
        "(union-find here), in every run; circulate: every batch finished after exactly "
        "hops hops at the matching iteration, with all its records (count and sum)",
        "analysis": "analysis_<workload>_<mode>: one instrumented run (observes private "
        "hooks, changes nothing): messages_received by shards, worker_batches submitted "
        "to the progress actor, flushes (broadcast batches) and what they held; "
        "<workload>_proto_*: prototypes of other policies patched into the members' "
        "progress actors (NOT naiad's behaviour): proto_turn holds every update and "
        "broadcasts once per event-loop turn; proto_resident also holds a decrement while "
        "a mailbox of the process still holds a message at that pointstamp",
        "goal": ">= 10x fewer progress bytes with local accumulation, per workload",
        "machine": {"before": load_before, "after": machine_load()},
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)


def _timed_members(fn: Any) -> Any:
    """Adapts a cluster run to ``alternate`` (which wants a dict with ``seconds``)."""

    def run() -> dict[str, Any]:
        members = fn()
        return {"seconds": max(m["seconds"] for m in members), "members": members}

    return run
