"""Antichains: sets of mutually incomparable elements, the shape of every frontier.

``Antichain`` is a plain set of minimal elements. ``MutableAntichain`` keeps a count for every
element it has been told about and exposes the antichain of minimal elements with a positive
count, reporting exactly how that frontier changed after each batch of updates.

Elements are timestamps or path summaries: anything :func:`le` can compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from naiad.progress.timestamp import Lex, Product


def le(a: Any, b: Any) -> bool:
    """The partial order of timestamps and path summaries (ints compare natively)."""
    if a.__class__ is int:
        return bool(a <= b)
    return bool(a.less_equal(b))


class Antichain:
    """A set of mutually incomparable elements.

    >>> from naiad.progress.timestamp import Product
    >>> f = Antichain([Product(0, 3), Product(1, 1), Product(2, 2)])
    >>> sorted(f)
    [Product(outer=0, inner=3), Product(outer=1, inner=1)]
    >>> f.less_equal(Product(1, 4)), f.less_equal(Product(0, 2))
    (True, False)
    """

    __slots__ = ("_elements",)

    def __init__(self, elements: Iterable[Any] = ()) -> None:
        self._elements: list[Any] = []
        for element in elements:
            self.insert(element)

    def insert(self, element: Any) -> bool:
        """Adds ``element`` unless some element is less or equal; drops elements it precedes.

        Returns whether it was added.
        """
        for e in self._elements:
            if le(e, element):
                return False
        self._elements = [e for e in self._elements if not le(element, e)]
        self._elements.append(element)
        return True

    def less_equal(self, t: Any) -> bool:
        """Whether some element is less than or equal to ``t``: ``t`` can still occur."""
        return any(le(e, t) for e in self._elements)

    def less_than(self, t: Any) -> bool:
        """Whether some element is strictly less than ``t``."""
        return any(e != t and le(e, t) for e in self._elements)

    def dominates(self, other: Antichain) -> bool:
        """Whether every element of ``other`` is greater than or equal to some element here."""
        return all(self.less_equal(t) for t in other)

    @property
    def elements(self) -> list[Any]:
        return list(self._elements)

    def is_empty(self) -> bool:
        return not self._elements

    def __iter__(self) -> Iterator[Any]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Antichain):
            return NotImplemented
        return sorted(map(repr, self._elements)) == sorted(map(repr, other._elements))

    def __hash__(self) -> int:
        return hash(frozenset(self._elements))

    def __repr__(self) -> str:
        return f"Antichain({sorted(self._elements)!r})"


class MutableAntichain:
    """Counts per element, and the antichain of minimal elements whose count is positive.

    Counts may go negative transiently (a consumer's decrement can arrive before the matching
    increment from another process); an element only counts as present while positive.

    >>> m = MutableAntichain()
    >>> m.update_iter([(3, 1), (5, 1)])
    [(3, 1)]
    >>> m.update_iter([(3, -1)])
    [(3, -1), (5, 1)]
    >>> m.frontier, m.less_equal(4), m.less_equal(6)
    ([5], False, True)
    """

    __slots__ = ("_counts", "_frontier")

    def __init__(self) -> None:
        self._counts: dict[Any, int] = {}
        self._frontier: list[Any] = []

    @property
    def frontier(self) -> list[Any]:
        """The minimal elements with a positive count (do not mutate)."""
        return self._frontier

    def less_equal(self, t: Any) -> bool:
        """Whether some frontier element is less than or equal to ``t``."""
        if t.__class__ is int:
            for e in self._frontier:
                if e <= t:
                    return True
            return False
        for e in self._frontier:
            if le(e, t):
                return True
        return False

    def less_than(self, t: Any) -> bool:
        return any(e != t and le(e, t) for e in self._frontier)

    def is_empty(self) -> bool:
        return not self._frontier

    def count_for(self, t: Any) -> int:
        return self._counts.get(t, 0)

    def update_iter(self, updates: Iterable[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """Applies the count changes; returns the frontier's changes (+1 added, -1 removed)."""
        counts = self._counts
        frontier = self._frontier
        rebuild = False
        for t, delta in updates:
            old = counts.get(t, 0)
            new = old + delta
            if new:
                counts[t] = new
            elif old:  # a zero delta for an absent element is a no-op
                del counts[t]
            if rebuild:
                continue
            if old <= 0 < new:
                # A newly present element matters only if nothing in the frontier precedes it.
                rebuild = not self.less_equal(t)
            elif new <= 0 < old:
                rebuild = t in frontier
        if not rebuild:
            return []
        new_frontier = _minimal([t for t, c in counts.items() if c > 0])
        if new_frontier == frontier:
            return []
        self._frontier = new_frontier
        changes = [(t, -1) for t in frontier if t not in new_frontier]
        changes.extend((t, 1) for t in new_frontier if t not in frontier)
        return changes

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self._frontier!r})"


def _minimal(elements: list[Any]) -> list[Any]:
    """The minimal elements, in the total (sort) order.

    A frontier is rebuilt from every element with a positive count, and a vertex waiting on
    thousands of times (one per loop iteration) rebuilds it once per iteration: the common
    shapes take one pass of plain comparisons, not a sort and a partial-order test per pair.

    >>> _minimal([Product(1, 5), Product(0, 7), Product(0, 9), Product(2, 1)])
    [Product(outer=0, inner=7), Product(outer=1, inner=5), Product(outer=2, inner=1)]
    """
    if len(elements) <= 1:
        return elements
    first = elements[0]
    cls = first.__class__
    if cls is int:
        return [min(elements)]
    if first.outer.__class__ is int:
        if cls is Lex:  # a total order
            return [min(elements)]
        if cls is Product:  # a staircase: per outer time its least counter, then the
            best: dict[int, int] = {}  # outers whose counter is below every earlier one
            for outer, inner in elements:
                known = best.get(outer)
                if known is None or inner < known:
                    best[outer] = inner
            stairs: list[Product] = []
            for outer in sorted(best):
                inner = best[outer]
                if not stairs or inner < stairs[-1].inner:
                    stairs.append(Product(outer, inner))
            return stairs
    result: list[Any] = []
    for t in sorted(elements):
        # Sorted by a linear extension: nothing later can precede an earlier element.
        for e in result:
            if e.less_equal(t):
                break
        else:
            result.append(t)
    return result
