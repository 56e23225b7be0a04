"""A ``Variable``'s step must leave its loop room for one round: a loop's times are int64
columns and its frontier runs a step ahead of them, so from a step of ``2**62`` the round
at ``step`` put the frontier at ``2 * step``, past int64, and the loop failed with a bare
``OverflowError: Python int too large to convert to C long`` in an arrangement (even a
body that fed nothing back). Such steps are refused while the dataflow is built, naming
the variable and the range; below it, the loop reaches the from-scratch answer."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.dataflow.scope import BuildError
from naiad.differential import Collection, Variable
from tests.differential import reference as ref

EPOCHS = [[(1, 1), (5, 1)], [(1, -1), (2, 1)]]


def settled(step: int) -> Any:
    """``source`` with every record above 1 kept and the others raised to 2: the fixed
    point is reached at round 0 (round 1 feeds back nothing new)."""

    def build(scope: Any) -> Any:
        source = Collection.from_epochs(scope, EPOCHS)
        loop = scope.iterative("loop")
        v = Variable(loop, source.enter(loop), step=step, name="v")
        return v.set(v.collection.map(lambda x: max(x, 2)).distinct()).leave().changes()

    return build


@pytest.mark.parametrize("step", [2**62, 2**62 + 1, 2**63 - 1, 2**63, 2**64])
def test_a_step_without_room_for_one_round_is_refused_by_name(step: int) -> None:
    with pytest.raises(
        BuildError, match=rf"^variable 'v': step must be in \[1, 2\*\*62\), not {step}"
    ):
        naiad.run(settled(step))


@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (2, 2)])
@pytest.mark.parametrize("step", [1, 2**62 - 1])
def test_the_largest_step_taken_reaches_the_fixed_point(step: int, layout: Any) -> None:
    want = [
        Counter({max(x, 2) for x, n in ref.accumulated(EPOCHS, e).items() if n > 0})
        for e in range(len(EPOCHS))
    ]
    results = ref.run(settled(step), layout)
    ref.check(results, want)
