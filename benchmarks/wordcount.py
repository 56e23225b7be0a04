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
"""

from __future__ import annotations

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
    p.add_argument("--workers", default="1,2", help="naiad worker counts, comma-separated")
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
    worker_counts = [int(w) for w in args.workers.split(",")]

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
