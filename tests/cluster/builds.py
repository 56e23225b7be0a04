"""Build functions the cluster tests run on every configuration (importable by the member
processes of a TCP cluster, which run them through ``naiad.runtime.harness``)."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from typing import Any

import numpy as np

import naiad

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "and",
    "the",
    "dog",
    "sleeps",
]


def word_epochs() -> list[list[str]]:
    rng = random.Random(7)
    return [[rng.choice(WORDS) for _ in range(rng.randrange(0, 40))] for _ in range(6)]


def crc(word: str) -> int:
    return zlib.crc32(word.encode())


class CountPerEpoch(naiad.Vertex):
    def __init__(self) -> None:
        self.counts: dict[Any, Counter[str]] = {}

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        if cap.time not in self.counts:
            self.counts[cap.time] = Counter()
            self.notify_at(cap)
        self.counts[cap.time].update(batch)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, sorted(self.counts.pop(cap.time).items()))


def wordcount(scope: naiad.Scope) -> list[tuple[Any, Any]]:
    return scope.from_epochs(word_epochs()).unary(CountPerEpoch(), exchange=crc).collect()


def countdown_loop(scope: naiad.Scope) -> list[tuple[Any, Any]]:
    """Every number circulates through an exchange inside a loop down to 0."""
    numbers = scope.from_epochs([[5, 3, 8], [2, 9], [], [4]])
    with scope.iterative() as loop:
        handle, cycle = loop.feedback()
        body = numbers.enter(loop).concat(cycle).exchange(lambda x: x * 7 + 1)
        body.map(lambda x: x - 1).filter(lambda x: x >= 0).connect_loop(handle)
    return body.leave().collect()


def nested_loops(scope: naiad.Scope) -> list[tuple[Any, Any]]:
    """An outer loop over (n, k) pairs whose inner loop counts k down, then n down."""
    pairs = scope.from_epochs([[(3, 2), (1, 4)], [(2, 1)]])
    with scope.iterative(name="outer") as outer:
        oh, ocycle = outer.feedback()
        outer_body = pairs.enter(outer).concat(ocycle)
        with outer.iterative(name="inner") as inner:
            ih, icycle = inner.feedback()
            inner_body = outer_body.enter(inner).concat(icycle).exchange(lambda p: p[0] + p[1])
            inner_body.filter(lambda p: p[1] > 0).map(lambda p: (p[0], p[1] - 1)).connect_loop(ih)
            settled = inner_body.filter(lambda p: p[1] == 0).leave()
        settled.filter(lambda p: p[0] > 0).map(lambda p: (p[0] - 1, 2)).connect_loop(oh)
    return settled.leave().collect()


def numpy_exchange(scope: naiad.Scope) -> list[tuple[Any, Any]]:
    batches = [np.arange(i * 100, i * 100 + 37, dtype=np.int64) for i in range(4)]
    routed = scope.from_epochs(batches).exchange(keys=lambda b: b // 3)
    index, peers = scope.index, scope.peers
    checked = routed.map_batch(lambda b: [int(x) for x in b if (x // 3) % peers == index])
    return checked.collect()


class DistinctCount(naiad.Vertex):
    """Naiad Figure 4."""

    def __init__(self) -> None:
        self.counts: dict[Any, Counter[Any]] = {}

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        counts = self.counts.get(cap.time)
        if counts is None:
            counts = self.counts[cap.time] = Counter()
            self.notify_at(cap)
        fresh = [r for r in dict.fromkeys(batch) if r not in counts]
        counts.update(batch)
        self.send(cap, fresh, port=0)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, sorted(self.counts.pop(cap.time).items()), port=1)


def distinct_count(scope: naiad.Scope) -> tuple[list[Any], list[Any]]:
    distinct, counts = scope.from_epochs(word_epochs()).unary(
        DistinctCount(), exchange=crc, outputs=2
    )
    return distinct.collect(), counts.collect()


def mismatched(scope: naiad.Scope) -> list[tuple[Any, Any]]:
    """Process 1 builds one operator more than process 0: the cluster must refuse it."""
    import os

    stream = scope.from_epochs([[1, 2, 3]])
    if os.environ.get("NAIAD_PROCESS") == "1":
        stream = stream.map(lambda x: x)
    return stream.collect()


BIG = 2**60 + 1  # an int64 a float64 would round


def hot_key_epochs() -> list[list[tuple[Any, int]]]:
    """300 records of one first field, then equal values as floats and strings, retractions."""
    return [
        [((0, v), 1) for v in range(300)],
        [((0, float(v)), 1) for v in range(0, 300, 3)] + [((0, f"s{v}"), 2) for v in range(50)],
        [((0, v), -1) for v in range(0, 300, 2)] + [((0, "s1"), -2), ((1, 0.5), 1)],
    ]


def hot_key_counts(scope: naiad.Scope) -> tuple[list[Any], list[Any]]:
    """count and distinct of a hot first field (spread over the workers by whole record)."""
    from naiad.differential import Collection

    hot = Collection.from_epochs(scope, hot_key_epochs())
    return hot.count().changes(), hot.distinct().changes()


def mixed_values(scope: naiad.Scope) -> tuple[list[Any], list[Any], list[Any]]:
    """Differential joins whose keys are equal numbers of different types (and integers
    beyond 64 bits), tuple keys, and a sum over floats: every process must route equal keys
    alike and carry every value exactly."""
    from naiad.differential import Collection

    ints = Collection.from_epochs(scope, [[((k, "i"), 1) for k in [*range(6), BIG]]])
    others = Collection.from_epochs(
        scope, [[((float(k), "f"), 1) for k in range(6)], [((2**70, "f"), 1), ((BIG, "f"), 1)]]
    )
    keyed = Collection.from_epochs(scope, [[(((k % 3, "t"), k), 1) for k in range(6)]])
    keys = Collection.from_epochs(scope, [[((1, "t"), 1)]])
    sums = Collection.from_epochs(scope, [[(("s", 0.5), 1), (("s", 2), 2)], [(("s", 0.25), 1)]])
    return ints.join(others).changes(), keyed.semijoin(keys).changes(), sums.sum().changes()


def gathered_outputs(scope: naiad.Scope) -> dict[str, Any]:
    """A gathered collect and gathered changes (every worker's output at worker 0; the other
    workers return a GatheredElsewhere), and a plain collect beside them."""
    from naiad.differential import Collection

    numbers = scope.from_epochs([[1, 2, 3, 4, 5], [6, 7]])
    changes = Collection.from_epochs(scope, [[("a", 1), ("b", 1), ("a", 1)], [("a", -2)]])
    return {
        "worker": scope.index,
        "both": (numbers.collect(gather=True), changes.changes(gather=True)),
        "plain": numbers.collect(),
    }
