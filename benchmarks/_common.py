"""Shared helpers of the benchmarks: progress output, medians, peak RSS and the JSON report.

Every benchmark prints its progress to stderr and, as the last line of stdout, one JSON object
(``/work/shared/BENCHMARKS.md``): ``benchmark``, ``quick``, ``params``, ``results``,
``ratios``, ``goals``, ``correct``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
Keep = Callable[[str, Any], Any]
"""``keep(name, result)``: what a run keeps of its result (e.g. whether it was right)."""


def log(*parts: object) -> None:
    """Progress, to stderr (never to stdout, whose last line is the report)."""
    print(*parts, file=sys.stderr, flush=True)


# --- statistics --------------------------------------------------------------------------------
def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), nearest-rank on the sorted values."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def rounded(x: float, digits: int = 4) -> float:
    """``x`` to ``digits`` significant digits (keeps the JSON readable)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


# --- memory ------------------------------------------------------------------------------------
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Resets this process's peak RSS (Linux ``clear_refs`` 5); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def peak_rss_mb() -> float:
    """This process's peak resident set since the last :func:`reset_peak_rss` (MB)."""
    kb = _status_kb("VmHWM")
    if kb is None:  # not Linux: the process's lifetime high-water mark
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kb / 1024, 1)


# --- running -----------------------------------------------------------------------------------
def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's event loop (what ``naiad.run`` uses too)."""
    import uvloop

    return uvloop.new_event_loop


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Runs ``coro`` on a fresh uvloop event loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """``(seconds, fn())``."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


class Runs(list[T]):
    """The results of repeated runs, with each run's wall-clock seconds, CPU seconds and peak
    resident set."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []
        self.cpu_seconds: list[float] = []
        self.peak_rss_mb = 0.0

    def run(self, name: str, fn: Callable[[], Any], keep: Keep | None = None) -> None:
        """Runs ``fn`` once and records it, and its result (or ``keep(name, result)``, computed
        after the clock stops: a verdict that lets the result be freed)."""
        reset_peak_rss()
        cpu = time.process_time()
        dt, result = timed(fn)
        self.cpu_seconds.append(time.process_time() - cpu)
        self.seconds.append(dt)
        self.peak_rss_mb = max(self.peak_rss_mb, peak_rss_mb())
        self.append(result if keep is None else keep(name, result))
        del result
        log(f"  {name}: run {len(self)}: {dt:.3f} s (cpu {self.cpu_seconds[-1]:.3f} s)")

    def summary(self) -> dict[str, float]:
        """Median wall-clock and CPU seconds, and the highest peak RSS of the runs. CPU time
        is less disturbed by other load on a shared machine; ratios use wall-clock time."""
        return {
            "seconds": rounded(median(self.seconds)),
            "cpu_seconds": rounded(median(self.cpu_seconds)),
            "peak_rss_mb": self.peak_rss_mb,
        }


def repeat(name: str, reps: int, fn: Callable[[], Any], keep: Keep | None = None) -> Runs[Any]:
    """Runs ``fn`` ``reps`` times."""
    runs: Runs[Any] = Runs()
    for _ in range(reps):
        runs.run(name, fn, keep)
    return runs


def interleaved(
    reps: int, fns: dict[str, Callable[[], Any]], keep: Keep | None = None
) -> dict[str, Runs[Any]]:
    """Runs every function of ``fns`` once per round, ``reps`` rounds: load from elsewhere on
    a shared machine then falls on all of them alike, which keeps their ratios fair."""
    runs: dict[str, Runs[Any]] = {name: Runs() for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            runs[name].run(name, fn, keep)
    return runs


def error_entry(exc: BaseException) -> dict[str, str]:
    """The result entry of a peer that could not run."""
    return {"error": f"{type(exc).__name__}: {exc}"}


# --- arguments and the report ------------------------------------------------------------------
def parser(name: str, description: str) -> argparse.ArgumentParser:
    """The options every benchmark has: ``--quick``, ``--reps`` and the hidden ``--tiny``."""
    p = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=description)
    p.add_argument("--quick", action="store_true", help="smaller inputs, fewer repetitions")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 5, quick 3)")
    # Smoke tests only: the smallest inputs that still exercise every implementation.
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    return p


def reps_for(args: argparse.Namespace, full: int = 5, quick: int = 3) -> int:
    if args.reps is not None:
        if args.reps < 1:
            raise SystemExit("--reps must be at least 1")
        return int(args.reps)
    if args.tiny:
        return 1
    return quick if args.quick else full


def goal(ratios: dict[str, float | None], ratio: str, op: str, value: float) -> dict[str, Any]:
    """One goal entry; not met when the ratio could not be computed."""
    actual = ratios.get(ratio)
    if actual is None:
        met = False
    elif op == ">=":
        met = actual >= value
    elif op == "<=":
        met = actual <= value
    else:
        raise ValueError(f"unknown goal operator {op!r}")
    return {"ratio": ratio, "op": op, "value": value, "met": met}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return rounded(numerator / denominator)


def naiad_version() -> str | None:
    """The git commit of the working tree's ``naiad/``, ``+dirty`` if it has changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "naiad"],
            cwd=root,
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def report(
    benchmark: str,
    quick: bool,
    params: dict[str, Any],
    results: dict[str, Any],
    ratios: dict[str, float | None],
    goals: list[dict[str, Any]],
    correct: bool,
) -> dict[str, Any]:
    """Prints a readable summary to stderr and the JSON report as the last line of stdout."""
    out = {
        "benchmark": benchmark,
        "quick": quick,
        "params": params | {"naiad_commit": naiad_version()},
        "results": results,
        "ratios": ratios,
        "goals": goals,
        "correct": correct,
    }
    log(f"== {benchmark}{' (quick)' if quick else ''}")
    for name, entry in results.items():
        log(f"  {name:<22} {json.dumps(entry)}")
    for g in goals:
        log(
            f"  goal {g['ratio']} {g['op']} {g['value']}: {ratios.get(g['ratio'])} "
            f"-> {'met' if g['met'] else 'NOT met'}"
        )
    log(f"  correct: {correct}")
    sys.stdout.flush()
    print(json.dumps(out), flush=True)
    return out
