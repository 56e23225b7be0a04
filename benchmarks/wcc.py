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
from benchmarks._common import error_entry, goal, log, ratio, report, reps_for, rounded
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


def wrong_labels(
    records: list[list[int]], expected: np.ndarray, src: np.ndarray, dst: np.ndarray
) -> str | None:
    """Why naiad's ``[node, label, multiplicity]`` records are not the answer ``expected``
    (scipy's label of every node) on the edges ``src -> dst``, or None if they are: every
    endpoint of an edge exactly once, with multiplicity 1 and its component's least node, and
    no other node (``graph.wcc`` labels the endpoints only).

    >>> edges = np.array([0, 2]), np.array([1, 2])
    >>> expected = np.array([0, 0, 2, 3])
    >>> wrong_labels([[0, 0, 1], [1, 0, 1], [2, 2, 1]], expected, *edges) is None
    True
    >>> wrong_labels([[1, 0, 1], [2, 2, 1]], expected, *edges)
    '1 of 3 nodes without a label, e.g. 0; 0 nodes labelled that are no endpoint'
    >>> wrong_labels([[0, 0, 2], [1, 0, 1], [2, 2, 1]], expected, *edges)
    'node 0 label 0 has multiplicity 2'
    >>> wrong_labels([[0, 0, 1], [1, 0, 1], [1, 1, 1], [2, 2, 1]], expected, *edges)
    'node 1 has two labels, 0 and 1'
    """
    labels: dict[int, int] = {}
    for node, label, count in records:
        if count != 1:
            return f"node {node} label {label} has multiplicity {count}"
        if node in labels:
            return f"node {node} has two labels, {labels[node]} and {label}"
        labels[node] = label
    ends = np.union1d(src, dst)
    got = np.fromiter(labels, dtype=np.int64, count=len(labels))
    missing = np.setdiff1d(ends, got)
    extra = np.setdiff1d(got, ends)
    if len(missing) or len(extra):
        example = f", e.g. {missing[0]}" if len(missing) else ""
        return (
            f"{len(missing)} of {len(ends)} nodes without a label{example}; "
            f"{len(extra)} nodes labelled that are no endpoint"
        )
    values = np.fromiter(map(labels.__getitem__, ends.tolist()), np.int64, count=len(ends))
    wrong = np.flatnonzero(values != expected[ends])
    if len(wrong):
        node = int(ends[wrong[0]])
        return (
            f"{len(wrong)} nodes labelled wrongly, e.g. node {node}: {labels[node]} "
            f"instead of {int(expected[node])}"
        )
    return None


def naiad_wcc(
    processes: int,
    nodes: int,
    edges: int,
    seed: int,
    changes: int = 0,
    timeout: float = 1800,
    prioritized: bool = False,
) -> dict[str, Any]:
    """One cluster run of ``_cluster_wcc.py``: seconds, latencies, and every process's
    ``[node, label, multiplicity]`` records (see :func:`wrong_labels`)."""
    args = ["--nodes", str(nodes), "--edges", str(edges), "--seed", str(seed)]
    if prioritized:
        args.append("--prioritized")
    if changes:
        args += ["--changes", str(changes)]
    members = run_cluster("_cluster_wcc.py", 1, processes, args, timeout)
    start = max(m["start"] for m in members)
    loaded = max(m["loaded"] for m in members)
    end = max(m["end"] for m in members)
    return {
        "seconds": loaded - start,
        "total_seconds": end - start,
        "latencies": members[0]["latencies"],
        "cpu_seconds": sum(m["cpu_seconds"] for m in members),
        "peak_rss_mb": round(sum(m["peak_rss_mb"] for m in members), 1),
        "labels": [record for m in members for record in m["labels"]],
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
            wrong = wrong_labels(run["labels"], expected, src, dst)
            ok = wrong is None
            results[name] = {
                "seconds": rounded(run["seconds"]),
                "cpu_seconds": rounded(run["cpu_seconds"]),
                "peak_rss_mb": run["peak_rss_mb"],
                "processes": processes,
                "prioritized": prioritized,
                "correct": ok,
            }
            verdict = "equal scipy's" if ok else f"DIFFER from scipy's: {wrong}"
            log(f"  {name}: {run['seconds']:.3f} s, labels {verdict}")
        except ClusterRunError as exc:
            log(f"  {name} failed: {exc}")
            results[name] = error_entry(exc)
    peer_reps = reps_for(args, full=3, quick=3)  # scipy and networkx; --tiny: 1
    results |= wcc_peers(nodes, src, dst, expected, threads=threads, reps=peer_reps)
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
    # A peer that cannot run here is excused; naiad without an answer is not correct.
    naiad_ran = all("error" not in results[n] for n in results if n.startswith("naiad"))
    correct = naiad_ran and all(
        r.get("correct", True) for r in results.values() if "error" not in r
    )
    params = {
        "nodes": nodes,
        "edges": edges,
        "seed": args.seed,
        "pathway_threads": threads,
        "naiad_workers_per_process": 1,
        "reps": {"naiad": 1, "pathway": 1, "scipy": peer_reps, "networkx": peer_reps},
        "load": machine_load(),
    }
    report(NAME, args.quick, params, results, ratios, goals, correct)
