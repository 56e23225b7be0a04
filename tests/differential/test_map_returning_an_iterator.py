"""``Collection.map`` whose function returns an iterator (a generator, a ``map`` or ``zip``
object, ``iter(...)``) is refused by name when the first batch arrives: such a record equals
only itself, so the record mapped again at its retraction never cancelled it (an input
emptied at epoch 1 left 2 generators and 2 negated ones in the collection, and ``distinct``
held 2 records for ever). The check costs one test per batch, none per record."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection

INSERTED_THEN_RETRACTED = [[(1, 1), (2, 1)], [(1, -1), (2, -1)]]


@pytest.mark.parametrize(
    ("f", "kind"),
    [
        (lambda x: (y for y in [x]), "generator"),
        (lambda x: map(str, [x]), "map"),
        (lambda x: zip([x], [x], strict=True), "zip"),
        (lambda x: iter((x, x)), "tuple_iterator"),
        (lambda x: reversed([x]), "list_reverseiterator"),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_map_returning_an_iterator_is_refused_by_name(f: Any, kind: str, workers: int) -> None:
    def build(s: naiad.Scope) -> Any:
        c = Collection.from_epochs(s, INSERTED_THEN_RETRACTED)
        return c.map(f, name="m").distinct().changes()

    with pytest.raises(TypeError, match=rf"^map 'm': f\([12]\) returned a {kind}, not a record"):
        naiad.run(build, workers=workers)
    # the process goes on; values equal by value (a tuple, a range, flat_map's records)
    # cancel at their retraction, as recomputation from scratch says: nothing is left
    got = naiad.run(
        lambda s: (
            [
                Collection.from_epochs(s, INSERTED_THEN_RETRACTED).map(g).distinct().changes()
                for g in (lambda x: tuple(y for y in [x, x]), lambda x: range(x))
            ]
            + [Collection.from_epochs(s, INSERTED_THEN_RETRACTED).flat_map(f).distinct().changes()]
        ),
        workers=workers,
    )
    for i in range(3):
        changes = [u for worker in got for u in worker[i]]
        assert {r for r, t, d in changes if t == 0} == {r for r, t, d in changes if t == 1}
        assert sum(d for _, _, d in changes) == 0 and len(changes) == 4


READS = [0]


class Counted:
    """A record counting the reads of its ``__class__``: what ``isinstance`` with an
    abstract class (``Iterator``) reads once per call."""

    __slots__ = ("v",)

    def __init__(self, v: int) -> None:
        self.v = v

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        READS[0] += 1
        return Counted

    def __eq__(self, other: object) -> bool:
        return type(other) is Counted and other.v == self.v  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self.v)


@pytest.mark.parametrize("n", [10, 20_000])
def test_the_check_costs_one_test_per_batch_not_per_record(n: int) -> None:
    """One batch of n records through map(Counted): the __class__ reads do not grow with n
    (a test per record would read it n more times)."""
    READS[0] = 0
    got = naiad.run(
        lambda s: (
            Collection.from_columns(s, [(np.arange(n),)]).map(Counted).map(lambda r: r.v).changes()
        )
    )
    assert sorted(r for r, _, _ in got[0]) == list(range(n))
    assert READS[0] <= 8, READS[0]
