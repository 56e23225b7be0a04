"""``enter_at`` counters must leave the loop room to iterate: a loop's times are int64
columns, and its frontier runs one feedback step ahead of the times in it, so a counter
near ``2**63`` made the loop fail obscurely (``OverflowError: Python int too large to
convert to C long`` in a join's arrangement, or ``sending backwards in time`` once the
feedback wrapped a counter to ``-2**63``). Counters are refused from ``2**62`` on, naming
the function that gave them; below that, the loop iterates to the from-scratch answer."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, Variable
from tests.differential import reference as ref

ROOTS = [[(1, 1)], [(4, 1)], [(1, -1)]]
EDGES = [[((1, 2), 1), ((2, 3), 1)], [((4, 1), 1)], [((2, 3), -1)]]


def reach_entering_at(counter: int, arranged: bool) -> Any:
    """Reachability whose roots enter the loop at ``counter``; edges entered at 0."""

    def build(scope: Any) -> Any:
        roots = Collection.from_epochs(scope, ROOTS)
        edges = Collection.from_epochs(scope, EDGES)
        loop = scope.iterative("loop")
        if arranged:
            start = (
                roots.map(lambda n: (n, 0))
                .arrange_by_key()
                .enter_at(loop, lambda n, z: z + counter)
            )
            start = start.as_collection().map(lambda r: r[0])
        else:
            start = roots.enter_at(loop, lambda n: n * 0 + counter)
        reach = Variable(loop, name="reach")
        step = reach.collection.join(edges.enter(loop)).map(lambda r: r[1]).concat(start)
        return reach.set(step.distinct()).leave().changes()

    return build


@pytest.mark.parametrize("arranged", [False, True])
@pytest.mark.parametrize("counter", [2**63 - 1, 2**63 - 3, 2**62])
def test_a_counter_without_room_to_iterate_is_refused_by_name(counter: int, arranged: bool) -> None:
    with pytest.raises(
        ValueError, match=r"enter_at: at\(\*columns\) must return integers in \[0, 2\*\*62\)"
    ):
        naiad.run(reach_entering_at(counter, arranged))


@pytest.mark.parametrize("arranged", [False, True])
@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (2, 2)])
def test_the_largest_counter_taken_iterates_to_the_fixed_point(arranged: bool, layout: Any) -> None:
    results = ref.run(reach_entering_at(2**62 - 1, arranged), layout)
    want = [
        ref.reach(ref.accumulated(ROOTS, e), ref.accumulated(EDGES, e)) for e in range(len(ROOTS))
    ]
    assert want[-1] == Counter({4: 1, 1: 1, 2: 1})
    ref.check(results, want)
