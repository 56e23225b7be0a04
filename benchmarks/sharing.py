"""Shared arrangements (K-Pg Figure 5c): memory and update latency of four graph queries over
one graph, with and without one shared arrangement of the edges.

Input: a seeded random graph (``benchmarks._graphs.random_graph``: ``--nodes`` 100,000 and
``--edges`` 1,000,000, quick a tenth; self loops and parallel edges kept), ``--queries`` query
nodes (1,000, quick 100; distinct, uniform), and ``--changes`` single-edge changes (100),
alternately the insertion of a new uniform edge and the deletion of a distinct base edge.

Four queries, each reading the edges ``(src, dst)`` arranged by ``src``:

* ``degree``: every node's out-degree (``reduce`` on the edge arrangement, one Python call per
  changed node: ``(src, degree)``);
* ``hop1``: the neighbours of the query nodes: ``queries.join(edges)`` -> ``(q, n)``;
* ``hop2``: their 2-hop neighbours: ``(q, n)`` re-keyed by ``n``, joined with the edges again
  -> ``(q, m)`` (a multiset: one record per path);
* ``neighbour_degree``: the out-degree of every distinct neighbour ``n`` of a query node: the
  edges semijoined with those neighbours (``edges.semijoin(n)``), counted per source ->
  ``(n, degree)``.

Variants, each run in its own child process (``python -m benchmarks sharing --child
VARIANT``) so peak resident sets are comparable:

* ``unshared``: one dataflow; every operator that reads the edges arranges them itself, as
  ``Collection.join`` / ``semijoin`` / ``reduce`` do (``edges.arrange_by_key()`` per use: 6
  arrangements of the edges, since ``hop2`` and ``neighbour_degree`` read them twice);
* ``shared``: one dataflow; one ``edges.arrange_by_key()`` read by all four queries;
* ``shared_import``: the edges arranged in one dataflow; each query installed afterwards as
  a dataflow of its own that imports that arrangement (``import_trace``): K-Pg's setting of
  independently installed queries sharing one index.

Measured per variant: the bytes of the edge arrangements (``Spine.nbytes()`` summed over the
distinct spines holding the edges, after the load and after the changes); the child's peak
resident set growth over its resident set once the inputs are generated (``VmHWM`` after
resetting it, minus ``VmRSS`` then: load-time temporaries included); its live resident set
growth (``VmRSS`` after the changes, dataflows still running, minus the baseline, both taken
after ``malloc_trim(0)``, since naiad keeps freed memory for reuse); the load time (until
every query's probe passes epoch 0); the update latency: each change at its own epoch, from
the update to every query's probe passing that epoch (median and p99). Correct: after the
changes, every query's materialized view equals a from-scratch recomputation
(``collections.Counter`` over an adjacency list of the final edges) in every variant.

Goal (the issue): >= 3x less memory when shared: the ratio of edge-arrangement bytes,
unshared over shared (and over shared_import). The resident-set ratios are reported beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import naiad
from benchmarks._common import (
    error_entry,
    goal,
    log,
    median,
    parser,
    peak_rss_mb,
    percentile,
    ratio,
    report,
    reps_for,
    reset_peak_rss,
    rounded,
    run_async,
)
from benchmarks._graphs import random_graph
from naiad.differential import Arranged, Collection, import_trace

NAME = "sharing"
DESCRIPTION = (
    "K-Pg Figure 5c: memory and update latency of four graph queries with and without a "
    "shared arrangement of the edges"
)
ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("unshared", "shared", "shared_import")
QUERIES = ("degree", "hop1", "hop2", "neighbour_degree")
GOAL_FACTOR = 3.0

Change = tuple[int, int, int]


# --- inputs and the oracle ---------------------------------------------------------------------
def inputs(
    nodes: int, edges: int, queries: int, changes: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Change]]:
    """The graph, the query nodes and the changes: even changes insert a new uniform edge,
    odd ones delete a distinct base edge."""
    src, dst = random_graph(nodes, edges, seed)
    rng = np.random.default_rng([seed, 3])
    qnodes = rng.choice(nodes, size=min(queries, nodes), replace=False).astype(np.int64)
    deletes = changes // 2
    gone = rng.choice(edges, size=deletes, replace=False)
    new = rng.integers(0, nodes, size=(changes - deletes, 2), dtype=np.int64)
    out: list[Change] = []
    for i in range(changes):
        if i % 2 == 0:
            s, d = new[i // 2]
            out.append((int(s), int(d), 1))
        else:
            j = gone[i // 2]
            out.append((int(src[j]), int(dst[j]), -1))
    return src, dst, qnodes, out


def final_edges(src: np.ndarray, dst: np.ndarray, changes: list[Change]) -> list[tuple[int, int]]:
    """The edge multiset after ``changes`` (each deletion removes one copy)."""
    present = Counter(zip(src.tolist(), dst.tolist(), strict=True))
    for s, d, diff in changes:
        present[(s, d)] += diff
        if present[(s, d)] < 0:
            raise ValueError(f"deletion of absent edge {s} -> {d}")
    return [edge for edge, n in present.items() for _ in range(n)]


def oracle(edges: list[tuple[int, int]], qnodes: np.ndarray) -> dict[str, dict[Any, int]]:
    """Every query's answer, from scratch: ``{record: multiplicity}``."""
    adj: defaultdict[int, list[int]] = defaultdict(list)
    for s, d in edges:
        adj[s].append(d)
    qs = qnodes.tolist()
    degree = {(s, len(ns)): 1 for s, ns in adj.items() if ns}
    hop1 = Counter((q, n) for q in qs for n in adj.get(q, ()))
    hop2 = Counter((q, m) for q in qs for n in adj.get(q, ()) for m in adj.get(n, ()))
    first = {n for q in qs for n in adj.get(q, ())}
    neighbour_degree = {(n, len(adj[n])): 1 for n in first if adj.get(n)}
    return {
        "degree": degree,
        "hop1": dict(hop1),
        "hop2": dict(hop2),
        "neighbour_degree": neighbour_degree,
    }


# --- the queries -------------------------------------------------------------------------------
def out_degree(_node: int, values: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(sum(count for _, count in values), 1)]


def build_queries(
    scope: Any, edges_by_src: Any, qnodes: np.ndarray, only: str | None = None
) -> dict[str, Collection]:
    """The queries (or only the one named ``only``); ``edges_by_src()`` gives the edge
    arrangement each use reads (the shared one, or a fresh one per use)."""
    out: dict[str, Collection] = {}
    query_nodes = Collection.from_columns(scope, [(qnodes,)], name="query_nodes")
    if only in (None, "degree"):
        out["degree"] = edges_by_src().reduce(out_degree, name="degree").as_collection()
    if only in (None, "hop1"):
        out["hop1"] = query_nodes.join(edges_by_src(), name="hop1")
    if only in (None, "hop2"):
        first = query_nodes.join(edges_by_src(), name="hop2.first")
        rekeyed = first.map_columns(lambda q, n: (n, q), name="hop2.rekey")
        second = rekeyed.join(edges_by_src(), name="hop2.second")
        out["hop2"] = second.map_columns(lambda n, q, m: (q, m), name="hop2.project")
    if only in (None, "neighbour_degree"):
        first = query_nodes.join(edges_by_src(), name="nd.first")
        neighbours = first.map_columns(lambda q, n: n, name="nd.neighbours").distinct()
        edges = edges_by_src().semijoin(neighbours, name="nd.semijoin")
        out["neighbour_degree"] = edges.map_columns(lambda n, m: n, name="nd.src").count()
    return out


def sinks(queries: dict[str, Collection]) -> dict[str, tuple[Any, Any]]:
    return {name: (q.probe(name + ".probe"), q.view(gather=False)) for name, q in queries.items()}


# --- one variant (child process) ---------------------------------------------------------------
def rss_mb(trim: bool = False) -> float:
    """This process's resident set (MB); with ``trim``, after glibc's ``malloc_trim(0)`` has
    returned the freed memory the allocator keeps (naiad keeps up to 256 MiB of it:
    ``naiad.runtime.memory``), so that it counts live memory only."""
    if trim:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: no trim
            ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


async def run_variant(
    variant: str, src: np.ndarray, dst: np.ndarray, qnodes: np.ndarray, changes: list[Change]
) -> dict[str, Any]:
    spines: list[Any] = []  # the distinct spines holding the edges
    outs: dict[str, tuple[Any, Any]] = {}
    async with naiad.Runtime(workers=1) as rt:
        start = time.perf_counter()
        if variant in ("shared", "unshared"):

            def build(scope: Any) -> tuple[Any, dict[str, tuple[Any, Any]]]:
                session, edges = Collection.new_input(scope)
                shared: list[Arranged] = []

                def edges_by_src() -> Arranged:
                    if variant == "shared" and shared:
                        return shared[0]
                    arranged = edges.arrange_by_key(name=f"edges{len(spines)}")
                    shared.append(arranged)
                    spines.append(arranged.spine)
                    return arranged

                return session, sinks(build_queries(scope, edges_by_src, qnodes))

            session, outs = rt.dataflow(build, name=variant).results[0]
            session.send_columns((src, dst))
            session.advance_to(1)
        else:

            def base(scope: Any) -> tuple[Any, Any, Any]:
                session, edges = Collection.new_input(scope)
                arranged = edges.arrange_by_key(name="edges")
                spines.append(arranged.spine)
                return session, arranged.trace, arranged.stream.probe()

            session, trace, probe = rt.dataflow(base, name="edges").results[0]
            session.send_columns((src, dst))
            session.advance_to(1)
            await probe.wait(0)
            for name in QUERIES:  # each query installed as a dataflow of its own

                def query(scope: Any, name: str = name) -> dict[str, tuple[Any, Any]]:
                    imported = import_trace(trace, scope)
                    return sinks(build_queries(scope, lambda: imported, qnodes, only=name))

                outs |= rt.dataflow(query, name=name).results[0]
            trace.close()  # the queries' own handles hold what they need
        for probe, _ in outs.values():
            await probe.wait(0)
        load_s = time.perf_counter() - start
        bytes_loaded = sum(s.nbytes() for s in spines)
        log(f"  {variant}: loaded in {load_s:.2f} s, edge arrangements {bytes_loaded / 1e6:.1f} MB")
        latencies = []
        for epoch, (s, d, diff) in enumerate(changes, start=1):
            start = time.perf_counter()
            session.update((s, d), diff)
            session.advance_to(epoch + 1)
            for probe, _ in outs.values():
                await probe.wait(epoch)
            latencies.append(time.perf_counter() - start)
        bytes_end = sum(s.nbytes() for s in spines)
        live = rss_mb(trim=True)  # every dataflow still alive and holding its state
        session.close()
    return {
        "edge_arrangements": len(spines),
        "edge_arrangement_bytes": bytes_loaded,
        "edge_arrangement_bytes_end": bytes_end,
        "load_seconds": rounded(load_s),
        "live_rss_mb": live,
        "latencies": latencies,
        "views": {name: view for name, (_, view) in outs.items()},
    }


def child(args: Any) -> None:
    """Runs one variant and prints its measurements as one JSON line."""
    src, dst, qnodes, changes = inputs(
        args.nodes, args.edges, args.queries, args.changes, args.seed
    )
    baseline = rss_mb(trim=True)
    reset_peak_rss()
    run = run_async(run_variant(args.child, src, dst, qnodes, changes))
    peak = peak_rss_mb()
    expected = oracle(final_edges(src, dst, changes), qnodes)
    final = len(changes)
    sizes, ok = {}, {}
    for name in QUERIES:
        got = run["views"][name].at(final)
        sizes[name] = sum(got.values())
        ok[name] = got == expected[name]
        if not ok[name]:
            log(f"  {args.child}: {name} differs from the oracle")
    lat = run["latencies"]
    out = {
        "edge_arrangements": run["edge_arrangements"],
        "edge_arrangement_bytes": run["edge_arrangement_bytes"],
        "edge_arrangement_bytes_end": run["edge_arrangement_bytes_end"],
        "baseline_rss_mb": baseline,
        "peak_rss_mb": peak,
        "rss_growth_mb": round(peak - baseline, 1),
        "live_rss_growth_mb": round(run["live_rss_mb"] - baseline, 1),
        "load_seconds": run["load_seconds"],
        "update_latency_median_s": rounded(median(lat)) if lat else None,
        "update_latency_p99_s": rounded(percentile(lat, 99)) if lat else None,
        "result_sizes": sizes,
        "correct": all(ok.values()),
    }
    print(json.dumps(out), flush=True)


def run_child(variant: str, args: Any, sizes: dict[str, int]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks", NAME, "--child", variant]
    for key, value in sizes.items():
        cmd += [f"--{key}", str(value)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"child {variant} exited with status {done.returncode}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    entry: dict[str, Any] = json.loads(lines[-1])
    return entry


# --- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    p = parser(NAME, DESCRIPTION)
    p.add_argument("--nodes", type=int, help="default 100,000, quick 10,000")
    p.add_argument("--edges", type=int, help="default 1,000,000, quick 100,000")
    p.add_argument("--queries", type=int, help="query nodes (default 1,000, quick 100)")
    p.add_argument("--changes", type=int, help="single-edge changes (default 100)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    p.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    scale = 100 if args.tiny else 10 if args.quick else 1
    args.nodes = args.nodes or 100_000 // scale
    args.edges = args.edges or 1_000_000 // scale
    args.queries = args.queries or 1_000 // scale
    args.changes = args.changes or (10 if args.tiny else 100)
    if args.child:
        child(args)
        return None
    reps = reps_for(args, full=1, quick=1)
    variants = [v for v in args.variants.split(",") if v]
    if "unshared" not in variants or len(variants) < 2:
        raise SystemExit("--variants must name unshared and at least one shared variant")
    sizes = {
        "nodes": args.nodes,
        "edges": args.edges,
        "queries": args.queries,
        "changes": args.changes,
        "seed": args.seed,
    }
    log(
        f"{args.nodes:,} nodes, {args.edges:,} edges, {args.queries:,} query nodes, "
        f"{args.changes} changes; variants {', '.join(variants)} (one child process each)"
    )
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    results: dict[str, Any] = {}
    for _ in range(reps):
        for v in variants:
            if v in results:  # failed before
                continue
            try:
                runs[v].append(run_child(v, args, sizes))
            except Exception as exc:
                log(f"  {v} failed: {exc!r}")
                results[v] = error_entry(exc)
    for v, entries in runs.items():
        if not entries or v in results:
            continue
        entry = dict(entries[-1])  # memory is deterministic; latency: median over the reps
        if reps > 1:
            for key in ("load_seconds", "update_latency_median_s", "update_latency_p99_s"):
                entry[key] = rounded(median([e[key] for e in entries]))
            entry["correct"] = all(e["correct"] for e in entries)
        results[v] = entry
    reference = results.get("unshared", {}).get("result_sizes")
    correct = all("error" not in e and e["correct"] for e in results.values()) and all(
        e["result_sizes"] == reference for e in results.values()
    )
    ratios: dict[str, float | None] = {}
    unshared = results.get("unshared", {})
    shared_variants = [v for v in variants if v != "unshared"]
    for v in shared_variants:
        e = results.get(v, {})
        ratios[f"unshared_over_{v}_bytes"] = ratio(
            unshared.get("edge_arrangement_bytes"), e.get("edge_arrangement_bytes")
        )
        ratios[f"unshared_over_{v}_rss"] = ratio(
            unshared.get("rss_growth_mb"), e.get("rss_growth_mb")
        )
        ratios[f"unshared_over_{v}_live_rss"] = ratio(
            unshared.get("live_rss_growth_mb"), e.get("live_rss_growth_mb")
        )
        ratios[f"unshared_over_{v}_latency_median"] = ratio(
            unshared.get("update_latency_median_s"), e.get("update_latency_median_s")
        )
    goals = [goal(ratios, f"unshared_over_{v}_bytes", ">=", GOAL_FACTOR) for v in shared_variants]
    params = sizes | {
        "workers": 1,
        "reps": reps,
        "statistic": "memory: edge-arrangement bytes after the load (Spine.nbytes), and peak "
        "RSS growth of each variant's own child process; latency: median and p99 over the "
        "changes (one epoch each) until all four queries' probes pass it",
        "query_names": list(QUERIES),
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)
