"""What ``map_columns``'s function returns must be one column, or a tuple of columns, of
one value per record: anything else fails the dataflow with an error naming the operator
and what was returned, raised where it was returned (not downstream, where a 2-d column
became unhashable list records), and a fresh dataflow runs on."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection

EPOCHS = [[(1, 1), (2, 1), (3, 1)], [(4, 1), (5, 1)]]
PREFIX = (
    r"^map_columns 'shape': f\(\*columns\) must return a column, or a tuple of columns, of "
    r"one value per record \(3, one-dimensional\), "
)


@pytest.mark.parametrize(
    ("f", "got"),
    [
        (lambda a: a[:1], r"not ndarray of shape \(1,\)"),
        (lambda a: np.r_[a, a], r"not ndarray of shape \(6,\)"),
        (lambda a: np.stack([a, a], 1), r"not ndarray of shape \(3, 2\)"),
        (lambda a: [a, a], r"not list of shape \(2, 3\) \(a list is one column: return a tuple"),
        (lambda a: (a, a[:2]), r"not ndarray of shape \(3,\), ndarray of shape \(2,\)"),
        (lambda a: None, r"not None"),
        (lambda a: 7, r"not int of shape \(\)"),
        (lambda a: (), r"not an empty tuple"),
    ],
)
@pytest.mark.parametrize("downstream", ["changes", "count"])
def test_columns_of_the_wrong_shape_are_named_where_they_are_returned(
    f: Any, got: str, downstream: str
) -> None:
    """These failed as "unhashable type: 'list'" (raised by the operator downstream),
    "len() of unsized object", "zip() argument 2 is longer than argument 1", or "columns of
    an update batch must have equal lengths (diffs 3, times (3, 1), data [1])"."""

    def build(s: naiad.Scope) -> Any:
        c = Collection.from_epochs(s, EPOCHS).map_columns(f, name="shape")
        return getattr(c, downstream)() if downstream == "count" else c.changes()

    with pytest.raises(ValueError, match=PREFIX + got) as info:
        naiad.run(build)
    assert "operator 'shape'" in "".join(getattr(info.value, "__notes__", []))
    again = naiad.run(
        lambda s: Collection.from_epochs(s, EPOCHS).map_columns(lambda a: (a, a * a)).changes()
    )
    assert sorted(again[0]) == [((x, x * x), 0 if x < 4 else 1, 1) for x in (1, 2, 3, 4, 5)]


def test_a_column_or_a_tuple_of_columns_of_any_dtype_passes() -> None:
    got = naiad.run(
        lambda s: (
            Collection.from_epochs(s, EPOCHS)
            .map_columns(lambda a: (a % 2, a.astype(str)))
            .changes()
        )
    )
    assert sorted(got[0], key=repr) == sorted(
        [((x % 2, str(x)), 0 if x < 4 else 1, 1) for x in (1, 2, 3, 4, 5)], key=repr
    )
