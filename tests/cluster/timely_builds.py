"""Build functions for the timely operators' tests on real processes (importable by the
member processes of a TCP cluster, which run them through ``naiad.runtime.harness``)."""

from __future__ import annotations

from typing import Any

import numpy as np

import naiad

EPOCHS = [[3, 14, 15, 92], [], [65, 35, 89, 79, 32], [38, 46]]


def partition_parts(scope: naiad.Scope) -> list[list[tuple[Any, Any]]]:
    stream = scope.from_epochs(EPOCHS).exchange(lambda x: x // 3)
    lists = stream.partition(3, lambda x: x % 3)
    arrays = scope.from_epochs([np.array(e, dtype=np.int64) for e in EPOCHS]).partition_batch(
        3, lambda b: b % 3
    )
    return [p.collect() for p in lists] + [p.map(int).collect() for p in arrays]


def broadcast_everywhere(scope: naiad.Scope) -> tuple[list[Any], list[Any]]:
    stream = scope.from_epochs(EPOCHS)
    arrays = scope.from_epochs([np.array(e, dtype=np.int64) for e in EPOCHS])
    return stream.broadcast().collect(), arrays.broadcast().map(int).collect()


def delayed(scope: naiad.Scope) -> list[tuple[Any, Any]]:
    # exchanged across the processes first: each worker delays records of every process
    return scope.from_epochs(EPOCHS).exchange(lambda x: x).delay(lambda r, t: t + r % 4).collect()


def captured(scope: naiad.Scope) -> list[Any]:
    # the events of this worker's log (filled as the dataflow runs): plain data, which the
    # harness's codec writes back once the run is over
    return scope.from_epochs(EPOCHS).exchange(lambda x: x).capture().events


def in_regions(scope: naiad.Scope) -> list[tuple[Any, Any]]:
    # exchanged across the processes inside a region, counted down by a loop in another
    # region (its body in a region of the loop): each record x gives x % 5, ..., 0
    with scope.region("spread") as spread:
        spread_out = scope.from_epochs(EPOCHS).enter(spread).exchange(lambda x: x)
    with scope.region("loops") as loops, loops.iterative() as loop:
        handle, cycle = loop.feedback()
        body = spread_out.leave().map(lambda x: x % 5).enter(loops).enter(loop).concat(cycle)
        with loop.region("step") as step:
            down = body.enter(step).map(lambda x: x - 1).filter(lambda x: x >= 0)
        down.leave().connect_loop(handle)
    return body.leave().leave().collect()


PAIRS = np.dtype([("a", "i4"), ("b", "f8")])


def exchanged_arrays(scope: naiad.Scope) -> list[tuple[Any, str, list[Any]]]:
    # numpy batches routed by a per-record key: structured records and rows of a 2-d array,
    # as (time, dtype, records) of the batches each worker received
    pairs = [np.array([(r, r / 2) for r in e], dtype=PAIRS) for e in EPOCHS]
    rows = [np.array([[r, -r] for r in e], dtype=np.int64).reshape(-1, 2) for e in EPOCHS]
    seen: list[tuple[Any, str, list[Any]]] = []
    for batches, key in ((pairs, lambda r: r["a"]), (rows, lambda r: r[0])):
        scope.from_epochs(batches).exchange(key).inspect_batch(
            lambda t, b: seen.append((t, str(b.dtype), b.tolist()))
        ).probe()
    return seen
