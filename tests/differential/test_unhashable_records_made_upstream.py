"""A record made unhashable by a function inside the dataflow (a map returning a list, a
flat_map yielding sets) is found only where records are hashed, downstream of that function:
the error names the value and its row (not only "unhashable type: 'list'"), whichever
operator hashes it (consolidate, an arrangement, changes, a join), in a later epoch after
earlier ones worked; and the next dataflow runs."""

from __future__ import annotations

from typing import Any

import pytest

import naiad
from naiad.differential import Collection

EPOCHS = [[(1, 1), (2, 1)], [(3, 1)]]  # epoch 0 is fine; epoch 1 makes the bad record


def late(x: int) -> Any:
    return [x] if x == 3 else x


@pytest.mark.parametrize(
    ("make", "shown"),
    [
        (lambda c: c.map(late).changes(), r"\[3\]"),
        (lambda c: c.map(late).consolidate().changes(), r"\[3\]"),
        (lambda c: c.map(late).count().changes(), r"\[3\]"),
        (
            lambda c: c.map(lambda x: (late(x), x)).join(c.map(lambda x: ([3], 0))).changes(),
            r"\[3\]",
        ),
        (lambda c: c.flat_map(lambda x: [{x}] if x == 3 else []).distinct().changes(), r"\{3\}"),
        (
            lambda c: c.map(lambda x: (x, {x: 1} if x == 3 else x)).consolidate().changes(),
            r"\{3: 1\}",
        ),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_an_unhashable_record_is_named_where_it_is_hashed(
    make: Any, shown: str, workers: int
) -> None:
    with pytest.raises(
        TypeError,
        match=rf"record field {shown} \(row \d+ of its batch\) is not "
        r"hashable \(unhashable type: '\w+'\): records must be hashable \(a tuple",
    ):
        naiad.run(lambda s: make(Collection.from_epochs(s, EPOCHS)), workers=workers)
    got = naiad.run(lambda s: Collection.from_epochs(s, EPOCHS).map(lambda x: 10 * x).changes())
    assert sorted(got[0]) == [(10, 0, 1), (20, 0, 1), (30, 1, 1)]
