"""Entering a collection's or an arrangement's own scope is refused, alike.

``Collection.enter(scope)`` with the collection's own scope returned the collection as it was,
silently (``enter_at`` dropped its counters as well), while ``Arranged.enter`` of the same
scope was refused: as in differential dataflow, ``enter`` takes a loop or a region nested
inside the scope, and in its own scope a collection needs none. Entering nested loops and
regions keeps working, with the times they are expected to give."""

from __future__ import annotations

from typing import Any

import pytest

import naiad
from naiad.differential import Collection
from naiad.progress import Product

RECORDS = [(1, 1), (2, 1), (3, 1)]


def refusal(build: Any) -> str:
    with pytest.raises(ValueError) as info:
        naiad.run(build)
    return str(info.value)


@pytest.mark.parametrize("arranged", [False, True])
@pytest.mark.parametrize("method", ["enter", "enter_at"])
@pytest.mark.parametrize("where", ["dataflow", "region", "loop"])
def test_entering_its_own_scope_is_refused(arranged: bool, method: str, where: str) -> None:
    def build(scope: Any) -> Any:
        own = {"dataflow": scope, "region": scope.region(), "loop": scope.iterative()}[where]
        c = Collection.from_epochs(scope, [RECORDS])
        c = c if own is scope else c.enter(own)
        entering = c.arrange_by_self() if arranged else c
        args = (lambda r: 0,) if method == "enter_at" else ()
        getattr(entering, method)(own, *args, name="into")

    message = refusal(build)
    kind = "arrangement" if arranged else "collection"
    if where == "region" and method == "enter_at":  # refused first for its counters
        expected = "is a region, not a loop"
    else:
        expected = f"the {kind}'s own scope"
    assert message.startswith("into: ") and expected in message
    assert naiad.run(lambda s: Collection.from_epochs(s, [RECORDS]).changes()) == [
        [(r, 0, d) for r, d in RECORDS]
    ]


def test_loops_and_regions_inside_are_still_entered() -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, [RECORDS])
        loop = scope.iterative()
        inner = loop.region()
        into_region = c.enter(scope.region()).leave()
        into_loop = c.enter(loop)
        two_levels = c.enter(inner).leave().leave()  # a loop, then a region in it
        counted = c.enter_at(loop, lambda r: r).leave()
        return (
            into_region.changes(),
            into_loop.changes(),
            two_levels.changes(),
            counted.changes(),
            into_loop.arrange_by_self().enter(inner).as_collection().changes(),
        )

    [(region, loop, two, counted, arranged)] = naiad.run(build)
    expected = sorted((r, 0, d) for r, d in RECORDS)
    assert sorted(region) == sorted(two) == sorted(counted) == expected
    in_loop = sorted((r, Product(0, 0), d) for r, d in RECORDS)
    assert sorted(loop) == sorted(arranged) == in_loop
