"""Word count over Zipf-distributed words: naiad beside ``collections.Counter`` and bytewax.

The words are generated once from a seeded numpy generator (ranks from ``rng.zipf(1.1)``
folded into a vocabulary of 100,000 words ``w0 .. w99999``) and every implementation counts
the very same list:

* ``counter``: ``collections.Counter(words)``, the single-threaded C floor;
* ``naiad_w1`` / ``naiad_w2``: ``scope.from_epochs`` over batches of the words (epoch ``i`` is
  batch ``i``), into a :class:`CountVertex` that keeps running totals with one
  ``Counter.update(batch)`` per batch (C speed) and, when the progress protocol notifies it
  that an epoch is complete, emits ``(epoch, words counted in it)``. With more than one
  worker, batches are exchanged by ``hash(word)`` (computed per batch into a numpy array, so
  the routing is numpy's), so each word is counted on one worker;
* ``bytewax``: bytewax 0.21, ``TestingSource`` (emitting the same words, one item per word,
  polled in batches of the same size) into ``op.count_final``, run with ``run_main``.

Every implementation's final counts are compared with ``Counter``'s.

``--processes P``: naiad on P real processes over TCP on loopback
(``benchmarks/_cluster_wordcount.py``, launched with ``naiad run``): every process generates
the same words and each worker counts its share with a combiner, then exchanges only
``[word, count]`` pairs (routed by ``zlib.crc32``, the same in every process) to a summing
vertex; timed inside the processes from a barrier epoch to the end, against ``Counter`` here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import naiad
from benchmarks._common import (
    Runs,
    error_entry,
    goal,
    interleaved,
    log,
    median,
    parser,
    ratio,
    repeat,
    report,
    reps_for,
    rounded,
    timed,
)

NAME = "wordcount"
DESCRIPTION = "Zipf word count: naiad (1 and 2 workers) vs collections.Counter vs bytewax"
VOCABULARY = 100_000


def zipf_ranks(count: int, seed: int, vocabulary: int = VOCABULARY) -> np.ndarray:
    """``count`` Zipf(1.1) ranks folded into ``range(vocabulary)``."""
    rng = np.random.default_rng(seed)
    ranks: np.ndarray = (rng.zipf(1.1, size=count) - 1) % vocabulary
    return ranks


def vocabulary_words(vocabulary: int = VOCABULARY) -> np.ndarray:
    return np.array([f"w{r}" for r in range(vocabulary)], dtype=object)


def make_words(count: int, seed: int, vocabulary: int = VOCABULARY) -> list[str]:
    """``count`` Zipf words: rank ``r`` is the word ``w{r}`` (shared string objects)."""
    words: list[str] = vocabulary_words(vocabulary)[zipf_ranks(count, seed, vocabulary)].tolist()
    return words


def oracle(count: int, seed: int, vocabulary: int = VOCABULARY) -> Counter[str]:
    """The counts by another road than ``Counter``: ``numpy.bincount`` of the ranks."""
    counts = np.bincount(zipf_ranks(count, seed, vocabulary), minlength=vocabulary)
    present = np.flatnonzero(counts)
    words = vocabulary_words(vocabulary)[present].tolist()
    return Counter(dict(zip(words, counts[present].tolist(), strict=True)))


def batches_of(words: list[str], size: int) -> list[list[str]]:
    return [words[i : i + size] for i in range(0, len(words), size)]


# --- naiad -------------------------------------------------------------------------------------
class CountVertex(naiad.Vertex):
    """Running word counts; one ``Counter.update`` per batch, one notification per epoch."""

    def __init__(self) -> None:
        self.totals: Counter[str] = Counter()
        self.epoch_words: dict[Any, int] = {}

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        time = cap.time
        seen = self.epoch_words.get(time)
        if seen is None:
            self.notify_at(cap)
            seen = 0
        self.epoch_words[time] = seen + len(batch)
        self.totals.update(batch)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, [(cap.time, self.epoch_words.pop(cap.time))])


def hash_keys(batch: list[str]) -> np.ndarray:
    """The routing keys of a batch of words, in one numpy array."""
    return np.fromiter(map(hash, batch), dtype=np.int64, count=len(batch))


ROUTES: dict[str, Any] = {
    "key": hash,  # per record: Exchange(key=hash)
    "keys": naiad.Exchange(keys=hash_keys),  # per batch: a numpy array of routing keys
}


def run_naiad(
    batches: list[list[str]], workers: int, route: str = "key"
) -> tuple[Counter[str], int]:
    """The merged counts of every worker, and the words the epoch records account for."""

    def build(scope: naiad.Scope) -> tuple[CountVertex, list[tuple[Any, Any]]]:
        counter = CountVertex()
        words = scope.from_epochs(batches)
        exchange = None if workers == 1 else ROUTES[route]
        done = words.unary(counter, exchange=exchange).collect()
        return counter, done

    outs: list[tuple[CountVertex, list[tuple[Any, Any]]]] = naiad.run(build, workers=workers)
    if workers == 1:
        totals = outs[0][0].totals
    else:  # each word was counted on exactly one worker: check, then merge
        totals = Counter()
        for vertex, _ in outs:
            if totals.keys() & vertex.totals.keys():
                raise AssertionError("a word was counted on two workers")
            totals.update(vertex.totals)
    accounted = sum(n for _, done in outs for _, (_, n) in done)
    return totals, accounted


# --- bytewax -----------------------------------------------------------------------------------
def run_bytewax(words: list[str], batch: int) -> Counter[str]:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("wordcount")
    stream = op.input("words", flow, TestingSource(words, batch_size=batch))
    counts = op.count_final("count", stream, key=lambda w: w)
    out: list[tuple[str, int]] = []
    op.output("out", counts, TestingSink(out))
    run_main(flow)
    return Counter(dict(out))


def entry(runs: Runs[Any], n: int, ok: bool) -> dict[str, Any]:
    rate = rounded(n / median(runs.seconds))
    return runs.summary() | {"words_per_s": rate, "correct": ok}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(NAME, DESCRIPTION)
    p.add_argument("--words", type=int, help="default 5,000,000, quick 500,000")
    p.add_argument("--batch", type=int, default=100_000, help="words per epoch / source batch")
    p.add_argument(
        "--workers",
        help="naiad worker counts (per process), comma-separated (default 1,2; tcp clusters 1)",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="naiad processes; more than 1: local processes over tcp, each generating the "
        "same words and counting its share, against Counter (bytewax not run)",
    )
    p.add_argument(
        "--route",
        choices=sorted(ROUTES),
        default="key",
        help="workers > 1: exchange by hash per record (key) or per batch (keys)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-bytewax", action="store_true", help="skip bytewax (reported as error)")
    p.add_argument("--peer-reps", type=int, help="bytewax repetitions (default min(reps, 3))")
    args = p.parse_args(argv)
    reps = reps_for(args)
    peer_reps = args.peer_reps or min(reps, 3)
    n = args.words or (20_000 if args.tiny else 500_000 if args.quick else 5_000_000)
    batch = min(args.batch, 2_000) if args.tiny else args.batch
    if args.processes < 1:
        raise SystemExit("--processes must be at least 1")
    if args.processes > 1:
        return main_cluster(args, reps, n, batch)
    worker_counts = [int(w) for w in (args.workers or "1,2").split(",")]

    gen_s, words = timed(lambda: make_words(n, args.seed))
    batches = batches_of(words, batch)
    log(f"{n:,} words ({len(batches)} batches of {batch:,}) generated in {gen_s:.2f} s")

    for workers in worker_counts:  # warm-up: imports and first-call costs, not timed
        run_naiad(batches[:2], workers, args.route)

    expected = Counter(words)  # the reference; itself checked against the oracle
    expected_ok = expected == oracle(n, args.seed)

    def keep(name: str, result: Any) -> bool:
        """Whether a run's answer equals ``Counter``'s (kept instead of the answer)."""
        if name.startswith("naiad"):
            totals, accounted = result
            return bool(totals == expected and accounted == n)
        return bool(result == expected)

    fns: dict[str, Callable[[], Any]] = {"counter": lambda: Counter(words)}
    for workers in worker_counts:
        fns[f"naiad_w{workers}"] = partial(run_naiad, batches, workers, args.route)
    runs = interleaved(reps, fns, keep)
    results: dict[str, Any] = {
        name: entry(r, n, all(r) and expected_ok) for name, r in runs.items()
    }
    del runs

    if args.no_bytewax:
        results["bytewax"] = {"error": "skipped (--no-bytewax)"}
    else:
        try:
            bw_runs = repeat("bytewax", peer_reps, lambda: run_bytewax(words, batch), keep)
            results["bytewax"] = entry(bw_runs, n, all(bw_runs))
        except Exception as exc:  # a peer that cannot run is reported, not dropped
            log(f"  bytewax failed: {exc!r}")
            results["bytewax"] = error_entry(exc)

    correct = all(e.get("correct", True) for e in results.values())
    best = max(results[f"naiad_w{w}"]["words_per_s"] for w in worker_counts)
    ratios: dict[str, float | None] = {
        "naiad_w1_over_counter": ratio(
            results.get("naiad_w1", {}).get("words_per_s"), results["counter"]["words_per_s"]
        ),
        "naiad_over_bytewax": ratio(best, results["bytewax"].get("words_per_s")),
    }
    goals = [
        goal(ratios, "naiad_w1_over_counter", ">=", 0.7),
        goal(ratios, "naiad_over_bytewax", ">=", 10),
    ]
    best_cpu = min(results[f"naiad_w{w}"]["cpu_seconds"] for w in worker_counts)
    ratios["naiad_w1_over_counter_cpu"] = ratio(
        results["counter"]["cpu_seconds"], results.get("naiad_w1", {}).get("cpu_seconds")
    )
    ratios["naiad_over_bytewax_cpu"] = ratio(results["bytewax"].get("cpu_seconds"), best_cpu)
    params = {
        "words": n,
        "vocabulary": VOCABULARY,
        "zipf_a": 1.1,
        "seed": args.seed,
        "batch": batch,
        "workers": worker_counts,
        "reps": reps,
        "bytewax_reps": peer_reps,
        "words_objects": "ranks map to the shared vocabulary strings f'w{rank}'",
        "naiad": "from_epochs(batches of `batch` words) -> unary(CountVertex: running totals, "
        "one Counter.update per batch, one notification per epoch emitting (epoch, words)); "
        "naiad_over_bytewax uses the best naiad worker count",
        "naiad_route": {
            "key": "workers > 1: unary(..., exchange=hash), routing per record",
            "keys": "workers > 1: Exchange(keys=np.fromiter(map(hash, batch))), per batch",
        }[args.route],
        "bytewax": "TestingSource(words, batch_size=batch): one item per word, polled in "
        "batches; op.count_final(key=identity); TestingSink; run_main (1 worker)",
        "oracle": "Counter checked against numpy.bincount of the ranks; every other implementation "
        "against Counter",
        "statistic": "counter and naiad configurations run alternately, reps rounds, then "
        "bytewax bytewax_reps times; median over runs of wall-clock seconds (cpu_seconds: "
        "median process CPU time; peak_rss_mb: highest process peak RSS during a run, the "
        "words included); naiad includes dataflow construction",
        "generation_s": rounded(gen_s),
        "cpu_ratios": "ratios ending in _cpu compare median CPU seconds instead: steadier "
        "when other processes load the machine; informative only, goals use wall-clock",
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)


# --- tcp clusters --------------------------------------------------------------------------------
def cluster_run(n: int, batch: int, seed: int, workers: int, processes: int) -> dict[str, Any]:
    """One cluster run: its timing and the merged totals, with the checks that each word
    was summed on exactly one worker, the one its crc32 routes it to."""
    from benchmarks._cluster import run_cluster
    from benchmarks._cluster_wordcount import word_route

    members = run_cluster(
        "_cluster_wordcount.py",
        workers,
        processes,
        ["--words", str(n), "--batch", str(batch), "--seed", str(seed)],
    )
    peers = workers * processes
    totals: Counter[str] = Counter()
    routed = True
    for m in members:
        for w in m["workers"]:
            part = w["totals"]
            if totals.keys() & part.keys():
                routed = False  # a word summed on two workers
            routed &= all(word_route([word]) % peers == w["index"] for word in part)
            totals.update(part)
    start = min(m["start"] for m in members)
    return {
        "seconds": max(m["end"] for m in members) - start,
        "counting_seconds": min(m["counted"] for m in members) - start,
        "cpu_seconds": sum(m["cpu_seconds"] for m in members),
        "max_process_cpu_seconds": max(m["cpu_seconds"] for m in members),
        "peak_rss_mb": max(m["peak_rss_mb"] for m in members),
        "totals": totals,
        "routed": routed,
        "words_read": sum(sum(m["words_read"]) for m in members),
    }


def counter_run(words: list[str]) -> dict[str, Any]:
    cpu = time.process_time()
    seconds, totals = timed(lambda: Counter(words))
    return {"seconds": seconds, "cpu_seconds": time.process_time() - cpu, "totals": totals}


def main_cluster(args: Any, reps: int, n: int, batch: int) -> dict[str, Any]:
    """``--processes P``: naiad on P local processes over TCP vs ``Counter`` here."""
    from benchmarks._cluster import alternate, machine_load

    load_before = machine_load()

    procs = args.processes
    worker_counts = [int(w) for w in (args.workers or "1").split(",")]
    gen_s, words = timed(lambda: make_words(n, args.seed))
    log(f"{n:,} words generated in {gen_s:.2f} s (and again in every process)")
    expected = Counter(words)
    expected_ok = expected == oracle(n, args.seed)

    def keep(result: dict[str, Any]) -> dict[str, Any]:
        """A run's verdict instead of its totals (which are large)."""
        totals = result.pop("totals")
        ok = totals == expected and result.pop("routed", True)
        if "words_read" in result:
            ok &= result.pop("words_read") == n
        return result | {"ok": bool(ok)}

    fns: dict[str, Callable[[], Any]] = {"counter": lambda: keep(counter_run(words))}
    for workers in worker_counts:
        fns[f"naiad_p{procs}_w{workers}"] = partial(
            lambda w: keep(cluster_run(n, batch, args.seed, w, procs)), workers
        )
    runs = alternate(reps, fns)
    results: dict[str, Any] = {}
    for name, rs in runs.items():
        seconds = median([r["seconds"] for r in rs])
        results[name] = {
            "seconds": rounded(seconds),
            "words_per_s": rounded(n / seconds),
            "cpu_seconds": rounded(median([r["cpu_seconds"] for r in rs])),
        }
        if name != "counter":
            results[name] |= {
                "counting_seconds": rounded(median([r["counting_seconds"] for r in rs])),
                "max_process_cpu_seconds": rounded(
                    median([r["max_process_cpu_seconds"] for r in rs])
                ),
                "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            }
        results[name]["correct"] = all(r["ok"] for r in rs) and expected_ok
    correct = all(e["correct"] for e in results.values())
    ratios: dict[str, float | None] = {}
    for workers in worker_counts:
        name = f"naiad_p{procs}_w{workers}"
        ratios[f"{name}_over_counter"] = ratio(
            results[name]["words_per_s"], results["counter"]["words_per_s"]
        )
    goals = [goal(ratios, f"naiad_p{procs}_w{worker_counts[0]}_over_counter", ">=", 1.0)]
    for workers in worker_counts:  # as if every process had a core of its own
        name = f"naiad_p{procs}_w{workers}"
        ratios[f"{name}_over_counter_cpu"] = ratio(
            results["counter"]["cpu_seconds"], results[name]["max_process_cpu_seconds"]
        )
    params = {
        "words": n,
        "vocabulary": VOCABULARY,
        "zipf_a": 1.1,
        "seed": args.seed,
        "batch": batch,
        "processes": procs,
        "workers_per_process": worker_counts,
        "transport": "tcp (naiad run: local processes over loopback)",
        "reps": reps,
        "machine": {"before": load_before, "after": machine_load()},
        "naiad": "every process generates the same words (same seed); global worker g of G "
        "reads the g-th contiguous 1/G of them in batches of `batch`; input -> "
        "unary(Combine: one Counter.update per batch, sends its [word, count] pairs once "
        "the epoch is complete) -> exchange(zlib.crc32(word) % peers) -> unary(Sum: adds "
        "the counts, emits its final totals once the epoch is complete) -> collect; routing "
        "keys computed per batch (naiad.Exchange(keys=...)); gc.freeze() after the input is "
        "generated (the input lists would otherwise be traversed by every full collection)",
        "timing": "naiad: inside the processes, CLOCK_MONOTONIC (one clock for the machine), "
        "from the earliest process seeing the empty epoch 0 complete (a barrier) to the "
        "last process seeing the dataflow finished; word generation, process start-up, "
        "connection and dataflow construction are not included. counter: "
        "collections.Counter(words) in the parent, same words",
        "oracle": "Counter checked against numpy.bincount of the ranks; naiad's merged totals "
        "against Counter, each word summed on exactly the worker crc32 routes it to, and the "
        "words read adding up to all of them",
        "statistic": "counter and naiad run alternately, reps rounds; median over runs; "
        "cpu_seconds: sum over processes of the CPU time of the timed span; "
        "counting_seconds: from the start to the first combiner notified (every word "
        "counted everywhere); the rest is the exchange of pairs, the sums and the end; "
        "max_process_cpu_seconds: the busiest process's CPU time",
        "cpu_ratios": "*_over_counter_cpu: Counter's CPU seconds over the busiest naiad "
        "process's: the ratio if each process had a core to itself (informative; the goal "
        "uses wall-clock time; see machine)",
        "generation_s": rounded(gen_s),
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)
