"""Weakly connected components of a seeded random graph (issue 4): naiad beside Pathway,
scipy and networkx.

* ``naiad_p1`` / ``naiad_p2``: ``naiad.libraries.graph.wcc(prioritized=True)`` (label
  propagation in a differential ``iterate``: a join with the edges and a ``min`` per node per
  round; labels introduced in priority order ``log2(1 + label)``, seed 002 §2.6) on 1 and on
  2 processes of one worker each over TCP (``benchmarks/_cluster_wcc.py``), timed inside the
  processes from a barrier epoch to the completion of the epoch holding the edges;
  ``naiad_p1_plain``: the unprioritized formulation on one process, for comparison;
* ``pathway``: the same label propagation in Pathway (``pw.iterate``), its best of 1 and 2
  threads (``benchmarks/_graphs.py``, a child process each);
* ``scipy``: ``scipy.sparse.csgraph.connected_components``, the single-threaded floor;
* ``networkx``: ``weakly_connected_components``.

Every implementation's labels (the least node id of each component) are compared with
scipy's. Full size: 200,000 nodes and 1,000,000 edges; ``--quick``: a tenth.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks._cluster import ClusterRunError, machine_load, run_cluster
from benchmarks._common import error_entry, goal, log, ratio, report, rounded
from benchmarks._graphs import (
    graph_parser,
    pathway_threads,
    random_graph,
    scipy_wcc,
    warm_up,
    wcc_peers,
)

NAME = "wcc"
DESCRIPTION = "weakly connected components: naiad (1 and 2 processes) vs Pathway, scipy, networkx"


def labels_array(nodes: int, pairs: list[list[int]]) -> np.ndarray:
    """Labels of every node from naiad's ``(node, label)`` pairs (a node without edges is its
    own component)."""
    labels = np.arange(nodes, dtype=np.int64)
    if pairs:
        arr = np.array(pairs, dtype=np.int64)
        labels[arr[:, 0]] = arr[:, 1]
    return labels


def naiad_wcc(
    processes: int,
    nodes: int,
    edges: int,
    seed: int,
    changes: int = 0,
    timeout: float = 1800,
    prioritized: bool = False,
) -> dict[str, Any]:
    """One cluster run of ``_cluster_wcc.py``: seconds, latencies, merged labels."""
    args = ["--nodes", str(nodes), "--edges", str(edges), "--seed", str(seed)]
    if prioritized:
        args.append("--prioritized")
    if changes:
        args += ["--changes", str(changes)]
    members = run_cluster("_cluster_wcc.py", 1, processes, args, timeout)
    start = max(m["start"] for m in members)
    loaded = max(m["loaded"] for m in members)
    end = max(m["end"] for m in members)
    pairs = [pair for m in members for pair in m["labels"]]
    return {
        "seconds": loaded - start,
        "total_seconds": end - start,
        "latencies": members[0]["latencies"],
        "cpu_seconds": sum(m["cpu_seconds"] for m in members),
        "peak_rss_mb": sum(m["peak_rss_mb"] for m in members),
        "labels": labels_array(nodes, pairs),
    }


def main(argv: list[str]) -> None:
    args = graph_parser(NAME, DESCRIPTION).parse_args(argv)
    nodes, edges = (200_000, 1_000_000)
    if args.quick:
        nodes, edges = nodes // 10, edges // 10
    if args.tiny:
        nodes, edges = 2_000, 10_000
    threads = pathway_threads(args)
    log(f"wcc: {nodes} nodes, {edges} edges, seed {args.seed}; load {machine_load()}")
    src, dst = random_graph(nodes, edges, args.seed)
    warm_up()
    expected = scipy_wcc(nodes, src, dst)
    results: dict[str, Any] = {}
    configurations = [(1, True), (2, True), (1, False)]
    for processes, prioritized in configurations:
        name = f"naiad_p{processes}" + ("" if prioritized else "_plain")
        try:
            run = naiad_wcc(processes, nodes, edges, args.seed, prioritized=prioritized)
            ok = bool(np.array_equal(run["labels"], expected))
            results[name] = {
                "seconds": rounded(run["seconds"]),
                "cpu_seconds": rounded(run["cpu_seconds"]),
                "peak_rss_mb": run["peak_rss_mb"],
                "processes": processes,
                "prioritized": prioritized,
                "correct": ok,
            }
            verdict = "equal" if ok else "DIFFER from"
            log(f"  {name}: {run['seconds']:.3f} s, labels {verdict} scipy's")
        except ClusterRunError as exc:
            log(f"  {name} failed: {exc}")
            results[name] = error_entry(exc)
    results |= wcc_peers(nodes, src, dst, expected, threads=threads, reps=1 if args.tiny else 3)
    if not threads:
        results["pathway"] = {"error": "skipped (--no-pathway)"}
    best = min(
        (results[n]["seconds"] for n in ("naiad_p1", "naiad_p2") if "seconds" in results[n]),
        default=None,
    )
    ratios = {
        "pathway_over_naiad": ratio(results["pathway"].get("seconds"), best),
        "networkx_over_naiad": ratio(results["networkx"].get("seconds"), best),
        "naiad_over_scipy": ratio(best, results["scipy"].get("seconds")),
        "naiad_p1_over_p2": ratio(
            results["naiad_p1"].get("seconds"), results["naiad_p2"].get("seconds")
        ),
    }
    goals = [
        goal(ratios, "pathway_over_naiad", ">=", 15),
        goal(ratios, "networkx_over_naiad", ">=", 1),
    ]
    correct = all(r.get("correct", True) for r in results.values() if "error" not in r)
    params = {
        "nodes": nodes,
        "edges": edges,
        "seed": args.seed,
        "pathway_threads": threads,
        "naiad_workers_per_process": 1,
        "load": machine_load(),
    }
    report(NAME, args.quick, params, results, ratios, goals, correct)
