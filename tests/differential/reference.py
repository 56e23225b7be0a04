"""Slow references for the differential layer, and the harness that compares naiad with them.

A multiset is a ``Counter`` (record -> count, zeros dropped). Every operator has a function
here that recomputes its output from scratch from the accumulated input(s); the harness
accumulates naiad's ``changes()`` (summed over every worker) up to each epoch and compares
them with the reference evaluated on the inputs accumulated up to that epoch, so a change
that appears at the wrong epoch fails the comparison too.

Records follow naiad's convention: a tuple of fixed length is one field per column, the
first field the key; anything else is a one-field record (a key only).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, defaultdict
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from typing import Any

import hypothesis.strategies as st
import numpy as np

import naiad
from naiad.differential import reduce as reduce_module
from naiad.runtime.runtime import run_coroutine

Multiset = Counter
Epochs = list[list[tuple[Any, int]]]
Results = list[list[tuple[Any, Any, int]]]

# (workers, processes); processes > 1 simulates processes in-process, through the codec
LAYOUTS = [(1, 1), (2, 1), (4, 1), (2, 2)]
layouts = st.tuples(st.sampled_from(LAYOUTS), st.booleans()).map(lambda p: (*p[0], p[1]))
"""``(workers, processes, small)``: with ``small`` False, reduce takes its vectorized path even
for the few rows of these tests (otherwise evaluated in Python), so both paths are checked."""


WATCHDOG = 60.0
"""Seconds a single run may take before it counts as hung."""


@contextlib.contextmanager
def vectorized_reduce() -> Iterator[None]:
    """Reduce evaluates every key set with numpy, however few its rows."""
    saved = reduce_module.SMALL_ROWS
    reduce_module.SMALL_ROWS = -1
    try:
        yield
    finally:
        reduce_module.SMALL_ROWS = saved


class Hung(BaseException):
    """A run that never finished. A ``BaseException``, so that hypothesis stops at once
    instead of shrinking (and re-running) an example that hangs each time."""


def watchdog(coro: Coroutine[Any, Any, Any], seconds: float | None = None) -> Any:
    """Runs ``coro`` on a fresh event loop; raises :class:`Hung` after ``seconds``
    (:data:`WATCHDOG` by default)."""
    seconds = WATCHDOG if seconds is None else seconds
    try:
        return run_coroutine(asyncio.wait_for(coro, seconds))
    except TimeoutError:
        raise Hung(f"the run did not finish within {seconds} s") from None


def run(build: Callable[[Any], Any], layout: tuple[int, ...]) -> list[Any]:
    """``naiad.run(build)`` on ``layout`` (in-process transport), under the watchdog."""
    workers, processes, *small = layout
    if small and not small[0]:
        with vectorized_reduce():
            return run(build, (workers, processes))

    async def main() -> list[Any]:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
            dataflow = rt.dataflow(build)
            dataflow.close_inputs()
            await dataflow.finished()
        return dataflow.results

    result: list[Any] = watchdog(main())
    return result


# --- multisets ---------------------------------------------------------------------------------
def clean(c: Counter) -> Counter:
    return Counter({k: v for k, v in c.items() if v != 0})


def accumulated(epochs: Epochs, upto: int) -> Counter:
    """The input after the changes of epochs ``0..upto``."""
    out: Counter = Counter()
    for changes in epochs[: upto + 1]:
        for record, diff in changes:
            out[record] += diff
    return clean(out)


def fields(record: Any) -> tuple[Any, ...]:
    return record if isinstance(record, tuple) else (record,)


def record_of(values: Sequence[Any]) -> Any:
    return tuple(values) if len(values) > 1 else values[0]


def key_of(record: Any) -> Any:
    return fields(record)[0]


def value_of(record: Any) -> Any:
    """The value of a keyed record as naiad hands it to ``reduce``: the one other field, a
    tuple of the other fields, or ``()`` for a key-only record."""
    rest = fields(record)[1:]
    if not rest:
        return ()
    return rest[0] if len(rest) == 1 else tuple(rest)


def by_key(c: Counter) -> dict[Any, list[tuple[Any, int]]]:
    groups: dict[Any, list[tuple[Any, int]]] = defaultdict(list)
    for record, count in c.items():
        if count:
            groups[key_of(record)].append((value_of(record), count))
    return groups


# --- operators, from scratch -----------------------------------------------------------------
def join(a: Counter, b: Counter) -> Counter:
    out: Counter = Counter()
    right: dict[Any, list[tuple[Any, int]]] = defaultdict(list)
    for r, c in b.items():
        right[key_of(r)].append((r, c))
    for ra, ca in a.items():
        for rb, cb in right.get(key_of(ra), ()):
            out[record_of((*fields(ra), *fields(rb)[1:]))] += ca * cb
    return clean(out)


def semijoin(a: Counter, keys: Counter) -> Counter:
    return clean(Counter({r: c * keys.get(key_of(r), 0) for r, c in a.items()}))


def antijoin(a: Counter, keys: Counter) -> Counter:
    out = Counter(a)
    out.subtract(semijoin(a, keys))
    return clean(out)


def reduce(
    a: Counter, f: Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]]
) -> Counter:
    out: Counter = Counter()
    for key, values in by_key(a).items():
        for value, count in f(key, values) or ():
            out[record_of((key, *fields(value)))] += count
    return clean(out)


def count(a: Counter) -> Counter:
    return Counter({record_of((*fields(r), c)): 1 for r, c in a.items() if c})


def distinct(a: Counter) -> Counter:
    return Counter({r: 1 for r, c in a.items() if c > 0})


def threshold(a: Counter, f: Callable[[int], int]) -> Counter:
    return clean(Counter({r: f(c) for r, c in a.items() if c}))


def capped(counts: np.ndarray) -> np.ndarray:
    """A ``threshold`` function: multiplicities capped at 2."""
    return np.minimum(counts, 2)


def capped_threshold(a: Counter) -> Counter:
    """``threshold(capped)`` from scratch."""
    return threshold(a, lambda c: min(c, 2))


def sum_(a: Counter) -> Counter:
    return Counter({(k, sum(v * c for v, c in vs)): 1 for k, vs in by_key(a).items()})


def extreme(a: Counter, largest: bool) -> Counter:
    out: Counter = Counter()
    for k, vs in by_key(a).items():
        positive = [v for v, c in vs if c > 0]
        if positive:
            pick = max(positive) if largest else min(positive)
            out[record_of((k, *fields(pick)))] = 1
    return out


# --- graphs, from scratch --------------------------------------------------------------------
def edge_set(edges: Counter) -> set[tuple[Any, Any]]:
    return {e for e, c in edges.items() if c > 0}


def reach(roots: Counter, edges: Counter) -> Counter:
    """Nodes reachable from the roots (the roots included)."""
    adjacency: dict[Any, set[Any]] = defaultdict(set)
    for s, d in edge_set(edges):
        adjacency[s].add(d)
    seen = {r for r, c in roots.items() if c > 0}
    frontier = list(seen)
    while frontier:
        n = frontier.pop()
        for m in adjacency[n]:
            if m not in seen:
                seen.add(m)
                frontier.append(m)
    return Counter({n: 1 for n in seen})


def closure(edges: Counter) -> Counter:
    """Every ``(src, dst)`` joined by a path of edges."""
    pairs = edge_set(edges)
    while True:
        more = pairs | {(a, d) for a, b in pairs for c, d in pairs if b == c}
        if more == pairs:
            return Counter(dict.fromkeys(pairs, 1))
        pairs = more


def components(edges: Counter) -> Counter:
    """``(node, least node of its weakly connected component)`` for every node of an edge."""
    parent: dict[Any, Any] = {}

    def find(x: Any) -> Any:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s, d in edge_set(edges):
        for n in (s, d):
            parent.setdefault(n, n)
        a, b = find(s), find(d)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return Counter({(n, find(n)): 1 for n in parent})


def parity_reach(roots: Counter, edges: Counter) -> tuple[Counter, Counter]:
    """Nodes at the end of some walk of even (resp. odd) length from a root."""
    adjacency: dict[Any, set[Any]] = defaultdict(set)
    for s, d in edge_set(edges):
        adjacency[s].add(d)
    seen = {(r, 0) for r, c in roots.items() if c > 0}
    frontier = list(seen)
    while frontier:
        n, p = frontier.pop()
        for m in adjacency[n]:
            if (m, 1 - p) not in seen:
                seen.add((m, 1 - p))
                frontier.append((m, 1 - p))
    even = Counter({n: 1 for n, p in seen if p == 0})
    odd = Counter({n: 1 for n, p in seen if p == 1})
    return even, odd


def fixpoint(step: Callable[[Counter], Counter], start: Counter, bound: int = 200) -> Counter:
    """Iterates ``step`` from ``start`` until it stops changing (at most ``bound`` steps)."""
    current = clean(start)
    for _ in range(bound):
        following = clean(step(current))
        if following == current:
            return current
        current = following
    raise AssertionError(f"no fixed point within {bound} steps")


# --- comparing naiad with a reference --------------------------------------------------------
def flatten(results: Results) -> list[tuple[Any, Any, int]]:
    return [u for part in results for u in part]


def accumulate_changes(results: Results, epochs: int) -> list[Counter]:
    """Per epoch ``e < epochs``: naiad's output accumulated over every worker up to ``e``.
    Every change must be non-zero and at an integer epoch ``< epochs``."""
    per_time: dict[int, Counter] = defaultdict(Counter)
    for record, time, diff in flatten(results):
        assert isinstance(time, int) and 0 <= time < max(epochs, 1), f"change at time {time!r}"
        assert diff != 0, f"a zero change for {record!r} at {time}"
        per_time[time][record] += diff
    out = []
    total: Counter = Counter()
    for e in range(epochs):
        total.update(per_time.get(e, Counter()))
        out.append(clean(total))
    return out


def diff_text(got: Counter, want: Counter) -> str:
    missing = want - got if all(v > 0 for v in want.values()) else None
    extra = Counter(got)
    extra.subtract(want)
    extra = clean(extra)
    return f"got - want = {dict(extra)!r}" + (f" (missing {dict(missing)!r})" if missing else "")


def check(results: Results, expected: Sequence[Counter]) -> None:
    """naiad's accumulated changes equal ``expected[e]`` at every epoch ``e``."""
    got = accumulate_changes(results, len(expected))
    for e, (g, w) in enumerate(zip(got, expected, strict=True)):
        assert g == clean(w), (
            f"epoch {e}: {diff_text(g, clean(w))}\n got {dict(g)}\nwant {dict(clean(w))}"
        )


def expect_unary(epochs: Epochs, f: Callable[[Counter], Counter]) -> list[Counter]:
    return [f(accumulated(epochs, e)) for e in range(len(epochs))]


def expect_binary(a: Epochs, b: Epochs, f: Callable[[Counter, Counter], Counter]) -> list[Counter]:
    n = max(len(a), len(b))
    return [f(accumulated(a, e), accumulated(b, e)) for e in range(n)]


def worker_consolidated(results: Results) -> list[str]:
    """The problems with ``changes()``'s promise: per worker, one change per (record, time)."""
    problems = []
    for w, part in enumerate(results):
        seen: Counter = Counter((repr(r), t) for r, t, _ in part)
        problems += [f"worker {w}: {k} appears {n} times" for k, n in seen.items() if n > 1]
    return problems


# --- strategies ------------------------------------------------------------------------------
INT_KEYS = st.integers(0, 4)
STR_KEYS = st.sampled_from(["a", "b", "c"])
MIXED_KEYS = st.one_of(st.integers(0, 2), st.sampled_from(["a", "b"]))
FLOAT_KEYS = st.sampled_from([-0.5, 1.5, 2.25, 3.0])  # a float64 column, fractions kept
INT_VALUES = st.integers(0, 3)
STR_VALUES = st.sampled_from(["x", "y", "zz"])
FLOAT_VALUES = st.sampled_from([-1.5, 0.25, 2.0])

EDGE_INTS = st.sampled_from([-(2**63), -(2**62), 0, 2**62, 2**63 - 1])  # int64's ends
HUGE_INTS = st.sampled_from([-(2**70), 5, 2**63 + 1, 2**64])  # beyond int64: Python objects
TUPLE_KEYS = st.sampled_from([(1, "a"), (2, "b"), (1, "b")])  # composite keys
NUMBERS = st.sampled_from([2**60 + 1, 0.5, 2**61 + 3])  # float64 would round the ints

KEY_KINDS = {
    "int": INT_KEYS,
    "str": STR_KEYS,
    "mixed": MIXED_KEYS,
    "float": FLOAT_KEYS,
    "edge": EDGE_INTS,
    "huge": HUGE_INTS,
    "bool": st.booleans(),
    "tuple": TUPLE_KEYS,
    "numbers": NUMBERS,
}
VALUE_KINDS = {
    "int": INT_VALUES,
    "str": STR_VALUES,
    "float": FLOAT_VALUES,
    "edge": EDGE_INTS,
    "bool": st.booleans(),
    "numbers": NUMBERS,
}


@st.composite
def histories(
    draw: Any,
    records: st.SearchStrategy[Any],
    epochs: tuple[int, int] = (1, 4),
    size: tuple[int, int] = (0, 6),
    negative: bool = True,
    count: int | None = None,
) -> Epochs:
    """Changes per epoch: insertions of drawn records and retractions of present ones (so
    records really come and go); with ``negative``, also blind retractions that can make
    counts negative."""
    n = count if count is not None else draw(st.integers(*epochs))
    state: Counter = Counter()
    out: Epochs = []
    for _ in range(n):
        changes = []
        for _ in range(draw(st.integers(*size))):
            present = sorted((r for r, c in state.items() if c > 0), key=repr)
            if present and draw(st.booleans()):
                r = draw(st.sampled_from(present))
                d = -draw(st.integers(1, state[r]))
            else:
                r = draw(records)
                d = draw(st.sampled_from([1, 1, 2, -1] if negative else [1, 1, 2]))
            state[r] += d
            changes.append((r, d))
        out.append(changes)
    return out


@st.composite
def set_histories(
    draw: Any, elements: st.SearchStrategy[Any], count: int, size: tuple[int, int] = (0, 4)
) -> Epochs:
    """Changes of a set (multiplicities 0 or 1) over ``count`` epochs: each change toggles one
    element in or out."""
    present: set[Any] = set()
    out: Epochs = []
    for _ in range(count):
        changes: dict[Any, int] = {}
        for _ in range(draw(st.integers(*size))):
            x = draw(elements)
            if x in present:
                present.discard(x)
            else:
                present.add(x)
            changes[x] = changes.get(x, 0) + (1 if x in present else -1)
        out.append([(x, d) for x, d in changes.items() if d])
    return out
