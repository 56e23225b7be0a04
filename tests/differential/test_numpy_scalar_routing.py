"""Records holding numpy scalars meet the equal records written otherwise on one worker.

A record is routed by :func:`~naiad.differential.updates.stable_hash` of its fields when it
travels in an ``object`` column (a batch that mixes record widths, or a column that mixes
types), and by the vectorized :func:`~naiad.differential.updates.column_hashes` of a numeric
column otherwise. ``np.True_`` (``np.bool_`` is no ``np.integer``) was hashed by its repr in
the first form and as ``1`` in the second, so the same record went to two workers: on 2
workers ``distinct`` of ``(2, -2, np.True_)`` inserted in a batch of one width and retracted
in a batch of mixed widths kept it (and ``count`` reported it twice).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from naiad.differential import Collection
from naiad.differential.updates import column_hashes, stable_hash
from tests.differential import reference as ref

# 3 workers too: np.True_'s old hash (of its repr) went to 1's worker among 2 or 4
LAYOUTS = [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2)]


@pytest.mark.parametrize(
    "value",
    [np.True_, np.False_, np.int8(-3), np.uint64(2**64 - 1), np.float32(0.5), np.float64(2.0)],
)
def test_a_numpy_scalar_hashes_as_the_equal_python_value(value: Any) -> None:
    python = value.item()
    assert stable_hash(value) == stable_hash(python)
    assert stable_hash((1, value)) == stable_hash((1, python))
    typed = np.array([value])  # the numeric column such values make
    assert column_hashes(typed).tolist() == [stable_hash(python)]
    assert column_hashes(np.array([value, "a"], dtype=object))[0] == stable_hash(python)


# a batch of one width (numeric columns), then one mixing widths (one object column)
EPOCHS = [
    [((2, -2, np.True_), 1)],
    [((2, -2, np.True_), -1), ((0, True, 5), 1), ((7, -2), -1)],
]
KEYED = [  # a key written as np.True_ in an object column (beside a str), as True in a bool one
    [((np.True_, "a"), 1), (("x", "b"), 1), ((0, 2, 3), 1)],
    [((True, "c"), 1)],
]
KEYS = [[(True, 1)], [(np.False_, 1), ("k", 1)]]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("total", [True, False])
def test_per_record_operators_meet_equal_records_written_with_numpy_bools(
    layout: tuple[int, int], total: bool
) -> None:
    for operator, oracle in [
        (lambda c: c.distinct(total=total), ref.distinct),
        (lambda c: c.count(total=total), ref.count),
    ]:
        results = ref.run(
            lambda s, o=operator: o(Collection.from_epochs(s, EPOCHS)).changes(), layout
        )
        ref.check(results, ref.expect_unary(EPOCHS, oracle))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_keyed_operators_meet_keys_written_with_numpy_bools(layout: tuple[int, int]) -> None:
    def build(s: Any, op: str) -> Any:
        left = Collection.from_epochs(s, KEYED)
        keys = Collection.from_epochs(s, KEYS)
        return getattr(left, op)(keys).changes()

    for op in ("join", "semijoin", "antijoin"):
        results = ref.run(lambda s, op=op: build(s, op), layout)
        ref.check(results, ref.expect_binary(KEYED, KEYS, getattr(ref, op)))
