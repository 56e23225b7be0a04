"""Incremental WCC (issue 4): single-edge insertions, then deletions, one epoch each, on a
sparse seeded graph where each change really merges or splits components; per-update latency
of naiad beside Pathway's streaming mode doing the same changes.

* ``naiad``: ``naiad.libraries.graph.wcc`` on one process (``benchmarks/_cluster_wcc.py``):
  the base graph at epoch 1, then each change at its own epoch, timed from the send to the
  probe passing that epoch;
* ``pathway``: ``benchmarks/_graphs.py``'s streaming run (one commit per change), its best
  of 1 and 2 threads.

The final labels of both are compared with scipy's on the final graph. Full size: 200,000
nodes, 100,000 edges, 1,000 insertions then 1,000 deletions; ``--quick``: a tenth.
"""

from __future__ import annotations

from typing import Any

from benchmarks._cluster import ClusterRunError, machine_load
from benchmarks._common import error_entry, goal, log, percentile, ratio, report, rounded
from benchmarks._graphs import (
    apply_changes,
    edge_changes,
    graph_parser,
    pathway_threads,
    random_graph,
    scipy_wcc,
    wcc_incremental_peers,
)
from benchmarks.wcc import naiad_wcc, wrong_labels

NAME = "wcc-incremental"
DESCRIPTION = "incremental WCC: per-update latency of naiad vs Pathway's streaming mode"


def main(argv: list[str]) -> None:
    args = graph_parser(NAME, DESCRIPTION).parse_args(argv)
    nodes, edges, changes = 200_000, 100_000, 2_000
    if args.quick:
        nodes, edges, changes = nodes // 10, edges // 10, changes // 10
    if args.tiny:
        nodes, edges, changes = 2_000, 1_000, 20
    threads = pathway_threads(args)
    log(f"wcc-incremental: {nodes} nodes, {edges} edges, {changes} changes; {machine_load()}")
    src, dst = random_graph(nodes, edges, args.seed)
    half = changes // 2
    stream = edge_changes(nodes, src, dst, half, changes - half, args.seed)
    final_src, final_dst = apply_changes(src, dst, stream)
    expected = scipy_wcc(nodes, final_src, final_dst)
    results: dict[str, Any] = {}
    try:
        run = naiad_wcc(1, nodes, edges, args.seed, changes=changes)
        lat = [x * 1000 for x in run["latencies"]]
        wrong = wrong_labels(run["labels"], expected, final_src, final_dst)
        if len(lat) != changes:
            wrong = f"{len(lat)} latencies for {changes} changes"
        ok = wrong is None
        if not ok:
            log(f"  naiad: wrong answer: {wrong}")
        results["naiad"] = {
            "median_ms": rounded(percentile(lat, 50)),
            "p99_ms": rounded(percentile(lat, 99)),
            "max_ms": rounded(max(lat)),
            "inserts_median_ms": rounded(percentile(lat[:half], 50)),
            "deletes_median_ms": rounded(percentile(lat[half:], 50)),
            "updates": len(lat),
            "initial_seconds": rounded(run["seconds"]),
            "peak_rss_mb": run["peak_rss_mb"],
            "correct": ok,
        }
        log(f"  naiad: {results['naiad']}")
    except ClusterRunError as exc:
        log(f"  naiad failed: {exc}")
        results["naiad"] = error_entry(exc)
    if threads:
        results |= wcc_incremental_peers(
            nodes, src, dst, stream, expected, inserts=half, threads=threads
        )
    else:
        results["pathway"] = {"error": "skipped (--no-pathway)"}
    naiad_r, pw = results["naiad"], results["pathway"]
    ratios = {
        "naiad_median_ms": naiad_r.get("median_ms"),
        "naiad_p99_ms": naiad_r.get("p99_ms"),
        "pathway_over_naiad_median": ratio(pw.get("median_ms"), naiad_r.get("median_ms")),
        "pathway_over_naiad_p99": ratio(pw.get("p99_ms"), naiad_r.get("p99_ms")),
    }
    goals = [goal(ratios, "naiad_median_ms", "<=", 1), goal(ratios, "naiad_p99_ms", "<=", 10)]
    # A peer that cannot run here is excused; naiad without an answer is not correct.
    correct = "error" not in results["naiad"] and all(
        r.get("correct", True) for r in results.values() if "error" not in r
    )
    params = {
        "nodes": nodes,
        "edges": edges,
        "inserts": half,
        "deletes": changes - half,
        "seed": args.seed,
        "pathway_threads": threads,
        "reps": 1,  # one run each: the latencies are over the changes of that run
        "load": machine_load(),
    }
    report(NAME, args.quick, params, results, ratios, goals, correct)
