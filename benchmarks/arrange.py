"""Arrangements (K-Pg §5.1): sustained update throughput, and join proportionality.

**(a) Throughput.** One dataflow arranges a collection of ``--keys`` distinct integer keys
(1,000,000; quick 100,000) with ``collection.arrange_by_key()`` and maintains a count on that
arrangement (``arranged.count()``, probed: with integer epochs it takes the total-order
algorithm). The keys are loaded at epoch 0 (in a random order,
so the arrangement sorts them); then ``--rounds`` rounds of ``--batch`` updates stream in, one
epoch per round: each round removes ``batch / 2`` distinct keys present at that point and
inserts ``batch / 2`` keys drawn uniformly from ``range(2 * keys)`` (half of them existing,
half new), in a shuffled order (``numpy.random.default_rng(seed)``). Each round sends its
updates, advances the input and waits on the count's probe; the round's latency is the time
from the first update sent to the probe passing the round's epoch. Updates per second is
``batch`` over the median round latency.

Five implementations take the same stream, alternating round by round (load on a shared
machine falls on all alike):

* ``naiad``: what a user gets from ``arranged.count()``, each round's updates entering as one
  columnar batch (``InputSession.send_columns((keys,), diffs)``, numpy columns); the times
  are integer epochs, so ``count`` takes the total-order algorithm (``total=None``);
* ``naiad_total``: the same with ``arranged.count_total()`` (``total=True``), differential
  dataflow's count for totally ordered times (no output arrangement, no pending times; see
  ``naiad/differential/total.py``): the same algorithm as ``naiad``, asked for by name;
* ``naiad_generic``: the same with ``arranged.count(total=False)``, the generic reduce (an
  output arrangement, each time evaluated once the frontier passes it), which partially
  ordered times (``Product`` loops) need;
* ``naiad_records``: the ordinary per-record path, ``InputSession.update(key, diff)`` per
  update (records staged in Python, turned into columns at ``advance_to``);
* ``dict``: the floor, a Python dict of counts (``counts[k] = counts.get(k, 0) + d``, zeros
  deleted), one Python statement per update; the stream is given to it as Python lists.

Correct: the final counts of the four naiad dataflows (read from a materialized view of the count)
and of the dict equal a from-scratch ``numpy.bincount`` of every update.

**(b) Join proportionality.** A second dataflow arranges a collection of ``keys`` records
``(key, value)`` (distinct keys, random order) and keeps its ``.trace`` handle; the time this
takes (send to the arrangement's probe passing epoch 0, median of ``reps`` fresh dataflows) is
``arrange_big``. Then, repeatedly, a NEW dataflow is installed that imports that arrangement
(``naiad.differential.import_trace``) and joins a collection of ``Q`` records ``(key, i)``
(keys uniform over ``range(2 * keys)``) against it; its install time runs from building the
dataflow to the join's probe passing epoch 0 (the join's output for epoch 0 complete). ``Q``
is 1,000 and 10,000 (quick 100 and 1,000), installed alternately, ``reps`` times each after an
untimed warm-up. The join's output, every ``(key, i, value)`` record with its multiplicity, is
checked against the pairs ``numpy.isin`` finds.

Goals (the issue asks that the install time "stay proportional to the small side"): installing
the large query takes at most 10x the small one (10x the records: no faster than linear), and
at most a tenth of the time to arrange the big side (it does not re-read the big side).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

import naiad
from benchmarks._common import (
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
from naiad.differential import Collection, import_trace

NAME = "arrange"
DESCRIPTION = (
    "K-Pg §5.1: updates/s into a 1M-key arrangement with a count (vs a dict), and the time "
    "to install a join against an imported arrangement (1k and 10k records)"
)
INSTALL_GROWTH_MAX = 10.0
INSTALL_OVER_ARRANGE_MAX = 0.1


# --- inputs ------------------------------------------------------------------------------------
def update_stream(
    keys: int, batch: int, rounds: int, seed: int
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The initial keys (a permutation of ``range(keys)``) and ``rounds`` rounds of
    ``(keys, diffs)``: ``batch // 2`` removals of distinct present keys, the rest insertions
    of keys uniform over ``range(2 * keys)``, shuffled."""
    rng = np.random.default_rng(seed)
    initial = rng.permutation(keys).astype(np.int64)
    counts = np.zeros(2 * keys, dtype=np.int64)
    counts[:keys] = 1
    removes = batch // 2
    out = []
    for _ in range(rounds):
        present = np.flatnonzero(counts > 0)
        gone = rng.choice(present, size=min(removes, len(present)), replace=False)
        new = rng.integers(0, 2 * keys, size=batch - len(gone), dtype=np.int64)
        k = np.concatenate([gone, new]).astype(np.int64)
        d = np.concatenate([-np.ones(len(gone), np.int64), np.ones(len(new), np.int64)])
        order = rng.permutation(len(k))
        k, d = k[order], d[order]
        np.add.at(counts, k, d)
        out.append((k, d))
    return initial, out


def oracle(
    initial: np.ndarray, rounds: list[tuple[np.ndarray, np.ndarray]], keys: int
) -> dict[int, int]:
    """The final count of every key, from scratch: one ``bincount`` of all updates."""
    all_keys = np.concatenate([initial, *(k for k, _ in rounds)])
    all_diffs = np.concatenate([np.ones(len(initial), np.int64), *(d for _, d in rounds)])
    totals = np.bincount(all_keys, weights=all_diffs, minlength=2 * keys).astype(np.int64)
    present = np.flatnonzero(totals)
    return dict(zip(present.tolist(), totals[present].tolist(), strict=True))


def counts_of(view: Any, epoch: int) -> dict[int, int] | None:
    """``{key: count}`` from a view of ``(key, count)`` records (None if one appears twice)."""
    out: dict[int, int] = {}
    for (key, count), multiplicity in view.at(epoch).items():
        if multiplicity != 1 or key in out:
            return None
        out[key] = count
    return out


# --- (a) throughput ----------------------------------------------------------------------------
def counting(scope: Any) -> tuple[Any, Any, Any, Any]:
    """A count of an arrangement as a user writes it (``count()``: the algorithm chosen)."""
    return counted_by(scope, None)


def counting_total(scope: Any) -> tuple[Any, Any, Any, Any]:
    return counted_by(scope, True)


def counting_generic(scope: Any) -> tuple[Any, Any, Any, Any]:
    return counted_by(scope, False)


def counted_by(scope: Any, total: bool | None) -> tuple[Any, Any, Any, Any]:
    session, collection = Collection.new_input(scope)
    arranged = collection.arrange_by_key()
    counted = arranged.count_total() if total else arranged.count(total=total)
    return session, arranged, counted.probe(), counted.view(gather=False)


def dict_round(counts: dict[int, int], keys: list[int], diffs: list[int]) -> None:
    get = counts.get
    for k, d in zip(keys, diffs, strict=True):
        c = get(k, 0) + d
        if c:
            counts[k] = c
        else:
            del counts[k]


async def throughput(
    initial: np.ndarray, rounds: list[tuple[np.ndarray, np.ndarray]], keys: int
) -> dict[str, Any]:
    lists = [(k.tolist(), d.tolist()) for k, d in rounds]  # the per-record paths' input
    latencies: dict[str, list[float]] = {
        "naiad": [],
        "naiad_total": [],
        "naiad_generic": [],
        "naiad_records": [],
        "dict": [],
    }
    out: dict[str, Any] = {}
    reset_peak_rss()
    async with naiad.Runtime(workers=1) as rt:
        columnar = rt.dataflow(counting, name="columnar").results[0]
        total = rt.dataflow(counting_total, name="total").results[0]
        generic = rt.dataflow(counting_generic, name="generic").results[0]
        records = rt.dataflow(counting, name="records").results[0]
        naiads = (
            ("naiad", columnar),
            ("naiad_total", total),
            ("naiad_generic", generic),
            ("naiad_records", records),
        )
        for name, (session, _, probe, _) in naiads:
            start = time.perf_counter()
            session.send_columns((initial,))
            session.advance_to(1)
            await probe.wait(0)
            out[name] = {"load_seconds": time.perf_counter() - start}
        start = time.perf_counter()
        counts = dict.fromkeys(initial.tolist(), 1)
        out["dict"] = {"load_seconds": time.perf_counter() - start}
        for epoch, ((k, d), (kl, dl)) in enumerate(zip(rounds, lists, strict=True), start=1):
            for name, (session, _, probe, _) in naiads[:3]:  # the columnar ones
                start = time.perf_counter()
                session.send_columns((k,), d)
                session.advance_to(epoch + 1)
                await probe.wait(epoch)
                latencies[name].append(time.perf_counter() - start)

            session, _, probe, _ = records
            start = time.perf_counter()
            update = session.update
            for key, diff in zip(kl, dl, strict=True):
                update(key, diff)
            session.advance_to(epoch + 1)
            await probe.wait(epoch)
            latencies["naiad_records"].append(time.perf_counter() - start)

            start = time.perf_counter()
            dict_round(counts, kl, dl)
            latencies["dict"].append(time.perf_counter() - start)
            if epoch % max(1, len(rounds) // 5) == 0:
                log(
                    f"  round {epoch}/{len(rounds)}: "
                    + ", ".join(f"{n} {v[-1] * 1e3:.2f} ms" for n, v in latencies.items())
                )
        for name, (_, arranged, _, _) in naiads:
            out[name]["arrangement_bytes"] = arranged.spine.nbytes()
            out[name]["arrangement_updates"] = arranged.spine.total()
        for session, _, _, _ in (columnar, total, generic, records):
            session.close()
    peak = peak_rss_mb()
    expected = oracle(initial, rounds, keys)
    final = len(rounds)
    answers = {
        "naiad": counts_of(columnar[3], final),
        "naiad_total": counts_of(total[3], final),
        "naiad_generic": counts_of(generic[3], final),
        "naiad_records": counts_of(records[3], final),
    }
    answers["dict"] = counts
    batch = len(rounds[0][0]) if rounds else 0
    for name, lat in latencies.items():
        out[name] |= {
            "updates_per_s": rounded(batch / median(lat)),
            "round_latency_median_s": rounded(median(lat)),
            "round_latency_p99_s": rounded(percentile(lat, 99)),
            "correct": answers[name] == expected,
        }
        out[name]["load_seconds"] = rounded(out[name]["load_seconds"])
    out["naiad"]["peak_rss_mb"] = peak  # every naiad dataflow and the dict, in one process
    return out


# --- (b) join proportionality ------------------------------------------------------------------
def arranging(scope: Any) -> tuple[Any, Any, Any, Any]:
    session, collection = Collection.new_input(scope)
    arranged = collection.arrange_by_key()
    return session, arranged.trace, arranged.stream.probe(), arranged.spine


async def proportionality(
    keys: int, sizes: tuple[int, int], reps: int, seed: int
) -> dict[str, Any]:
    rng = np.random.default_rng([seed, 2])
    big_keys = rng.permutation(keys).astype(np.int64)
    big_vals = rng.integers(0, 1 << 30, size=keys, dtype=np.int64)
    big_value = np.empty(keys, dtype=np.int64)  # the value of key k (the keys: range(keys))
    big_value[big_keys] = big_vals
    arrange_s: list[float] = []
    arrange_cpu: list[float] = []
    installs: dict[int, list[tuple[float, float]]] = {q: [] for q in sizes}
    outputs_ok = True
    output_sizes: dict[int, list[int]] = {q: [] for q in sizes}
    async with naiad.Runtime(workers=1) as rt:
        big: tuple[Any, Any, Any, Any] | None = None
        for _ in range(reps):
            if big is not None:  # only the last arrangement is kept for the imports
                big[1].close()
                big[0].close()
            start, cpu = time.perf_counter(), time.process_time()
            big = rt.dataflow(arranging, name="big").results[0]
            session, _, probe, _ = big
            session.send_columns((big_keys, big_vals))
            session.advance_to(1)
            await probe.wait(0)
            arrange_s.append(time.perf_counter() - start)
            arrange_cpu.append(time.process_time() - cpu)
            log(f"  arrange {keys:,} records: {arrange_s[-1]:.3f} s")
        assert big is not None
        trace = big[1]

        async def install(q: int) -> tuple[float, float, int]:
            small_keys = rng.integers(0, 2 * keys, size=q, dtype=np.int64)

            def query(scope: Any) -> tuple[Any, Any, Any]:
                session, small = Collection.new_input(scope)
                imported = import_trace(trace, scope)
                joined = small.join(imported)
                return session, joined.probe(), joined.view(gather=False)

            start, cpu = time.perf_counter(), time.process_time()
            session, probe, view = rt.dataflow(query, name=f"install{q}").results[0]
            session.send_columns((small_keys, np.arange(q, dtype=np.int64)))
            session.advance_to(1)
            await probe.wait(0)
            seconds, cpu_s = time.perf_counter() - start, time.process_time() - cpu
            session.close()
            while not view.complete(0):  # the view is a sink of its own: it may lag the probe
                await asyncio.sleep(0)
            # The whole output, not only its size: a wrong value or a duplicate in place of a
            # missing record keeps the size.
            answer = view.at(0)
            got = sum(answer.values())
            hits = np.flatnonzero(np.isin(small_keys, big_keys))
            expected = {
                (k, int(i), v): 1
                for k, i, v in zip(
                    small_keys[hits].tolist(),
                    hits.tolist(),
                    big_value[small_keys[hits]].tolist(),
                    strict=True,
                )
            }
            if answer != expected:
                log(f"  install {q}: join output ({got} records) differs from the expected")
                return seconds, cpu_s, -1
            return seconds, cpu_s, got

        await install(sizes[0])  # warm-up: first-call costs, not timed
        for _ in range(reps):
            for q in sizes:
                seconds, cpu_s, got = await install(q)
                installs[q].append((seconds, cpu_s))
                output_sizes[q].append(got)
                outputs_ok &= got >= 0
                log(f"  install join of {q:,} records: {seconds * 1e3:.2f} ms")
        trace.close()
        big[0].close()
    out: dict[str, Any] = {
        "arrange_big": {
            "records": keys,
            "seconds": rounded(median(arrange_s)),
            "cpu_seconds": rounded(median(arrange_cpu)),
        }
    }
    for label, q in zip(("install_small", "install_large"), sizes, strict=True):
        out[label] = {
            "records": q,
            "seconds": rounded(median([s for s, _ in installs[q]])),
            "cpu_seconds": rounded(median([c for _, c in installs[q]])),
            "output_records": output_sizes[q][-1],
            "correct": all(n >= 0 for n in output_sizes[q]),
        }
    return out


# --- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(NAME, DESCRIPTION)
    p.add_argument("--keys", type=int, help="keys arranged (default 1,000,000, quick 100,000)")
    p.add_argument("--batch", type=int, help="updates per round (default 10,000)")
    p.add_argument("--rounds", type=int, help="rounds of updates (default 100, quick 50)")
    p.add_argument(
        "--install-sizes",
        help="the two small-side sizes Q of the join installs, comma-separated "
        "(default 1000,10000; quick 100,1000)",
    )
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    reps = reps_for(args)
    keys = args.keys or (10_000 if args.tiny else 100_000 if args.quick else 1_000_000)
    batch = args.batch or (1_000 if args.tiny else 10_000)
    rounds = args.rounds or (5 if args.tiny else 50 if args.quick else 100)
    if args.install_sizes:
        small, large = (int(x) for x in args.install_sizes.split(","))
    else:
        small, large = (10, 100) if args.tiny else (100, 1_000) if args.quick else (1_000, 10_000)

    start = time.perf_counter()
    initial, stream = update_stream(keys, batch, rounds, args.seed)
    gen_s = time.perf_counter() - start
    log(f"{keys:,} keys, {rounds} rounds of {batch:,} updates generated in {gen_s:.2f} s")

    log("(a) sustained updates into an arrangement with a count")
    results = run_async(throughput(initial, stream, keys))
    del initial, stream
    log("(b) installing a join against an imported arrangement")
    results |= run_async(proportionality(keys, (small, large), reps, args.seed))

    correct = all(e.get("correct", True) for e in results.values())
    install_small = results["install_small"]["seconds"]
    install_large = results["install_large"]["seconds"]
    arrange_s = results["arrange_big"]["seconds"]
    ratios: dict[str, float | None] = {
        "naiad_over_dict": ratio(
            results["naiad"]["updates_per_s"], results["dict"]["updates_per_s"]
        ),
        "naiad_total_over_dict": ratio(
            results["naiad_total"]["updates_per_s"], results["dict"]["updates_per_s"]
        ),
        "naiad_generic_over_dict": ratio(
            results["naiad_generic"]["updates_per_s"], results["dict"]["updates_per_s"]
        ),
        "naiad_records_over_dict": ratio(
            results["naiad_records"]["updates_per_s"], results["dict"]["updates_per_s"]
        ),
        "install_large_over_small": ratio(install_large, install_small),
        "install_small_over_arrange": ratio(install_small, arrange_s),
        "install_large_over_arrange": ratio(install_large, arrange_s),
    }
    goals = [
        goal(ratios, "install_large_over_small", "<=", INSTALL_GROWTH_MAX),
        goal(ratios, "install_large_over_arrange", "<=", INSTALL_OVER_ARRANGE_MAX),
    ]
    params = {
        "keys": keys,
        "batch": batch,
        "rounds": rounds,
        "install_sizes": [small, large],
        "seed": args.seed,
        "workers": 1,
        "reps": reps,
        "statistic": "updates_per_s: batch / median round latency over all rounds; the five "
        "implementations alternate round by round; arrange_big and installs: median of reps "
        "(installs alternate small/large, after one untimed warm-up install)",
        "generation_s": rounded(gen_s),
    }
    return report(NAME, args.quick, params, results, ratios, goals, correct)
