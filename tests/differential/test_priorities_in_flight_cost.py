"""A prioritized loop holds one time per priority in flight (seed 002 §5.1.2), and each
round completes the least of them: an arrangement pays, per round, for the times a frontier
step completes, not for every time it holds. It scanned every pending time at depth > 0 at
each step (and took the minimal elements of all of them), so n priorities cost n**2:
prioritized connected components of an 800-node path took 88 s (2.9 million time rows),
where 200 nodes took 8.5 s. (The reduce after it sees only completed times here.)"""

from __future__ import annotations

import heapq
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, lattice
from naiad.differential.arrange import ArrangeVertex
from naiad.libraries import graph
from naiad.progress.antichain import MutableAntichain
from tests.counting import Work


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
    # in arrange: frontier tests, time rows, heap entries popped
    counted = Work(monkeypatch)
    counted.within(ArrangeVertex, "on_frontier", "arrange")
    counted.count(MutableAntichain, "less_equal")
    counted.count(lattice, "time_row")
    counted.count(heapq, "heappop")
    totals = {}
    for n in (100, 200):
        counted.reset()
        out = path_components(n)
        assert sorted(r for r, _, d in out if d > 0) == [(i, 0) for i in range(n + 1)]
        totals[n] = dict(counted.counts)
    # twice the priorities, about twice the work (the old scans: 92,610 and 365,210)
    assert totals[200]["arrange"] <= 2.5 * totals[100]["arrange"], totals
    assert totals[100]["arrange"] <= 10_000, totals
