"""A prioritized loop holds one time per priority in flight (seed 002 §5.1.2), and each
round completes the least of them: an arrangement pays, per round, for the times a frontier
step completes, not for every time it holds. It scanned every pending time at depth > 0 at
each step (and took the minimal elements of all of them), so n priorities cost n**2:
prioritized connected components of an 800-node path took 88 s (2.9 million time rows),
where 200 nodes took 8.5 s. (The reduce after it sees only completed times here.)"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, lattice
from naiad.differential.arrange import ArrangeVertex
from naiad.libraries import graph
from naiad.progress.antichain import MutableAntichain


def path_components(n: int) -> list[Any]:
    """Components of the path 0 - 1 - ... - n, each node's priority its own label: n
    priorities enter at once; label 0 sweeps the path at priority 0 over n rounds."""

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, [[((i, i + 1), 1) for i in range(n)]])
        labels = graph.nodes(edges).map_columns(lambda x: (x, x))
        both = graph.undirected(edges)
        result = graph.propagate_min(labels, both, lambda node, label: label)
        return result.consolidate().changes()

    return naiad.run(build)[0]


@pytest.mark.timeout(120)
def test_a_round_costs_the_times_it_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    work: Counter = Counter()  # in arrange: frontier tests, time rows, heap entries popped
    inside: list[str] = []
    le, row, pop = MutableAntichain.less_equal, lattice.time_row, heapq.heappop

    def counting_le(self: MutableAntichain, t: Any) -> bool:
        if inside:
            work[inside[-1]] += 1
        return le(self, t)

    def counting_row(t: Any, depth: int) -> list[int]:
        if inside:
            work[inside[-1]] += 1
        return row(t, depth)

    def counting_pop(heap: list[Any]) -> Any:
        if inside:
            work[inside[-1]] += 1
        return pop(heap)

    on_frontier = ArrangeVertex.on_frontier

    def counted(self: ArrangeVertex) -> None:
        inside.append("arrange")
        try:
            on_frontier(self)
        finally:
            inside.pop()

    monkeypatch.setattr(ArrangeVertex, "on_frontier", counted)
    monkeypatch.setattr(MutableAntichain, "less_equal", counting_le)
    monkeypatch.setattr(lattice, "time_row", counting_row)
    monkeypatch.setattr(heapq, "heappop", counting_pop)
    totals = {}
    for n in (100, 200):
        work.clear()
        out = path_components(n)
        assert sorted(r for r, _, d in out if d > 0) == [(i, 0) for i in range(n + 1)]
        totals[n] = dict(work)
    # twice the priorities, about twice the work (the old scans: 92,610 and 365,210)
    assert totals[200]["arrange"] <= 2.5 * totals[100]["arrange"], totals
    assert totals[100]["arrange"] <= 10_000, totals
