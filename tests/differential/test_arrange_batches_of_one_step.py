"""An arrangement inside a ``Product`` loop may seal several batches at one frontier step (one
per held capability, when epochs overlap in the loop). Each must be described from the
spine's upper *before* the step: the second one was described from the new frontier (its
``lower`` and ``since``), which its own times are not at or after, and re-sorting it when the
spine switched a column to interned codes (a string key arriving later) compacted it to that
``since``: some updates moved to later loop times, and a join read them there.

Oracle: reachability from node 0 within ``i`` steps over the edges of epoch ``e``, recomputed
in plain Python for every ``(e, i)``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, Variable, lattice
from naiad.progress import Product

# edges per epoch; epoch 4 brings the string node "s" (found by /tmp/s18/h27/bug1.py, seed 5)
EDGES: list[list[tuple[Any, int]]] = [
    [((2, 5), 1), ((2, 6), 1), ((5, 6), 1), ((5, 5), 1), ((4, 0), 1)],
    [((6, 1), 1), ((5, 0), 1), ((1, 0), 1), ((2, 3), 1)],
    [((3, 4), 1), ((0, 4), 1)],
    [((0, 5), 1), ((1, 3), 1)],
    [((1, 6), 1), ((6, 3), 1), ((1, "s"), 1), (("s", 4), 1)],
    [((3, 1), 1), ((0, 1), 1), ((1, 6), -1)],
    [((1, 4), 1), ((5, 5), -1), ((5, 1), 1)],
    [((2, 0), 1), ((2, 3), -1), ((1, 2), 1), ((0, 2), 1)],
]
ITERATIONS = 10


def reachable(epoch: int, steps: int) -> set[Any]:
    live: Counter[Any] = Counter()
    for changes in EDGES[: epoch + 1]:
        for edge, diff in changes:
            live[edge] += diff
    edges = [edge for edge, count in live.items() if count > 0]
    reach = {0}
    for _ in range(steps):
        reach = {b for a, b in edges if a in reach} | {0}
    return reach


def build(scope: Any) -> tuple[list[Any], Any]:
    """The loop variable joined with a lagging copy of itself: ``(x, 1, 0)`` is in the result
    at ``(e, i)`` exactly when ``x`` is reachable within ``i`` steps at epoch ``e``. Also
    returns every batch the variable's arrangement sent, with its description."""
    edges = Collection.from_epochs(scope, EDGES)
    roots = Collection.from_epochs(scope, [[(0, 1)]] + [[] for _ in EDGES[1:]])
    loop = scope.iterative()
    var = Variable(loop, roots.enter(loop))
    step = var.collection.join(edges.enter(loop)).map(lambda r: r[1])
    var.set(step.concat(roots.enter(loop)).distinct())
    lag = var.collection.map(lambda x: (x, 0)).consolidate().consolidate()
    arranged = var.collection.map(lambda x: (x, 1)).arrange_by_key()
    sent: list[Any] = []
    arranged.stream.inspect_batch(lambda _t, batch: sent.append(batch))
    return sent, arranged.join(lag).changes()


@pytest.mark.parametrize("workers, processes", [(1, 1), (2, 1), (2, 2)])
def test_batches_sealed_at_one_step_keep_their_times(workers: int, processes: int) -> None:
    results = naiad.run(build, workers=workers, processes=processes)
    changes = [u for _, out in results for u in out]
    for epoch in range(len(EDGES)):
        for steps in range(ITERATIONS):
            acc: Counter[Any] = Counter()
            for record, t, diff in changes:
                if t.outer <= epoch and t.inner <= steps:
                    acc[record] += diff
            got = {r for r, c in acc.items() if c}
            want = {(x, 1, 0) for x in reachable(epoch, steps)}
            assert got == want, (Product(epoch, steps), sorted(got ^ want, key=repr))
    # the descriptions themselves: every update at or after its batch's lower and since
    for sent, _ in results:
        for batch in sent:
            lex = ()
            assert lattice.beyond(batch.times, batch.lower, lex).all(), batch
            assert lattice.beyond(batch.times, batch.since, lex).all(), batch
