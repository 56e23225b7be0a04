"""Antichains: sets of mutually incomparable elements, the shape of every frontier.

``Antichain`` is a plain set of minimal elements. ``MutableAntichain`` keeps a count for every
element it has been told about and exposes the antichain of minimal elements with a positive
count, reporting exactly how that frontier changed after each batch of updates.

Elements are timestamps or path summaries: anything :func:`le` can compare.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Iterator
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

    @classmethod
    def minimal_of(cls, times: Iterable[Any]) -> Antichain:
        """The antichain of the minimal elements of ``times`` (timestamps of one shape), in
        the order they first occur, as inserting them one by one leaves it; in one pass for
        the common shapes (inserting compares each time with every element kept: times
        holding a staircase of k elements cost k comparisons each).

        >>> times = [Product(2, 2), Product(0, 3), Product(1, 1), Product(0, 3)]
        >>> Antichain.minimal_of(times).elements == Antichain(times).elements
        True
        """
        times = list(times)
        least = set(_minimal(times))
        chain = cls()
        chain._elements = list(dict.fromkeys(t for t in times if t in least))
        return chain

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

    __slots__ = ("_counts", "_frontier", "_present")

    def __init__(self) -> None:
        self._counts: dict[Any, int] = {}
        self._frontier: list[Any] = []
        # The elements with a positive count, indexed (a TimeQueue) once there are many: a
        # frontier element going away then costs a heap step, not a pass over every count
        # (in a prioritized loop each round retires one of n priorities in flight).
        self._present: TimeQueue | None = None

    @property
    def frontier(self) -> list[Any]:
        """The minimal elements with a positive count (do not mutate)."""
        return self._frontier

    @property
    def elements(self) -> list[Any]:
        """The frontier, read as an :class:`Antichain`'s elements are (do not mutate)."""
        return self._frontier

    def __iter__(self) -> Iterator[Any]:
        """The frontier's elements, as iterating an :class:`Antichain` gives them: a probe's
        frontier is one or the other (one stream, or the meet of several)."""
        return iter(self._frontier)

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
        present = self._present
        rebuild = False
        for t, delta in updates:
            old = counts.get(t, 0)
            new = old + delta
            if new:
                counts[t] = new
            elif old:  # a zero delta for an absent element is a no-op
                del counts[t]
            if old <= 0 < new:
                if present is not None:
                    present.add(t)
                # A newly present element matters only if nothing in the frontier precedes it.
                if not rebuild:
                    rebuild = not self.less_equal(t)
            elif new <= 0 < old:
                if present is not None:
                    present.discard(t)
                if not rebuild:
                    rebuild = t in frontier
        if not rebuild:
            return []
        if present is not None:
            new_frontier = present.minimal()
            if not present:
                self._present = None  # empty: back to the plain pass while there are few
        else:
            positive = [t for t, c in counts.items() if c > 0]
            if len(positive) > INDEX_ABOVE:
                present = self._present = TimeQueue(positive)
                new_frontier = present.minimal()
            else:
                new_frontier = _minimal(positive)
        if new_frontier == frontier:
            return []
        self._frontier = new_frontier
        old_in: Collection[Any] = frontier
        new_in: Collection[Any] = new_frontier
        if len(frontier) * len(new_frontier) > 64:  # wide frontiers: lists cost their product
            old_in, new_in = set(frontier), set(new_frontier)
        changes = [(t, -1) for t in frontier if t not in new_in]
        changes.extend((t, 1) for t in new_frontier if t not in old_in)
        return changes

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self._frontier!r})"


INDEX_ABOVE = 16
"""Up to how many times a plain pass over them is cheaper than a :class:`TimeQueue`: a
:class:`MutableAntichain` indexes its present elements, and a vertex its pending
notifications, once there are more."""

_TOTAL, _STAIRS, _OTHER = 0, 1, 2


def _kind(t: Any) -> tuple[int, type]:
    """How a :class:`TimeQueue` indexes times of ``t``'s shape, and that shape's class."""
    cls = t.__class__
    if cls is int:
        return _TOTAL, cls
    if cls is Lex and t.outer.__class__ is int:
        return _TOTAL, cls  # lexicographic over two integers: the tuple order, a total order
    if cls is Product and t.outer.__class__ is int:
        return _STAIRS, cls
    return _OTHER, cls


class TimeQueue:
    """A set of timestamps of one shape, indexed for the two questions asked of times that
    wait on a frontier: which are minimal, and which no frontier element precedes any more.

    Integers and ``Lex(int, int)`` times are totally ordered: one heap answers both in
    O(log n) per time taken. ``Product(int, int)`` times keep a heap per epoch (outer time):
    the cost grows with the epochs present, not with the loop counters waiting in each.
    Other shapes are scanned. Removal is lazy (an entry stays in its heap until it reaches
    the top); the heaps are rebuilt when stale entries outnumber the members.

    >>> q = TimeQueue([Product(1, 4), Product(0, 7), Product(0, 9), Product(1, 8)])
    >>> q.minimal()
    [Product(outer=0, inner=7), Product(outer=1, inner=4)]
    >>> q.pop_ready([[Product(0, 8)]])  # every time not at or after (0, 8)
    [Product(outer=0, inner=7), Product(outer=1, inner=4)]
    >>> sorted(q)
    [Product(outer=0, inner=9), Product(outer=1, inner=8)]
    """

    __slots__ = ("_cls", "_heap", "_kind", "_members", "_queued", "_stairs")

    def __init__(self, times: Iterable[Any] = ()) -> None:
        self._members: set[Any] = set()
        self._kind: int | None = None  # decided by the first time added
        self._cls: type | None = None
        self._heap: list[Any] = []  # _TOTAL: the members, and stale entries
        self._stairs: dict[Any, list[Any]] = {}  # _STAIRS: outer time -> heap of its times
        self._queued: set[Any] = set()  # the times in the heaps, members or stale
        for t in times:
            self.add(t)

    def __len__(self) -> int:
        return len(self._members)

    def __bool__(self) -> bool:
        return bool(self._members)

    def __contains__(self, t: Any) -> bool:
        return t in self._members

    def __iter__(self) -> Iterator[Any]:
        return iter(self._members)

    def add(self, t: Any) -> None:
        members = self._members
        if t in members:
            return
        members.add(t)
        kind = self._kind
        if kind == _OTHER:
            return
        shape = _kind(t)
        if kind is None:
            self._kind, self._cls = shape
            kind = shape[0]
        elif shape != (kind, self._cls):
            self._unindex()  # mixed shapes: nothing but a scan is sound
            return
        if kind == _OTHER or t in self._queued:
            return  # still in its heap (stale until now): a member again
        self._queued.add(t)
        if kind == _TOTAL:
            heapq.heappush(self._heap, t)
        else:
            stair = self._stairs.get(t.outer)
            if stair is None:
                self._stairs[t.outer] = [t]
            else:
                heapq.heappush(stair, t)

    def discard(self, t: Any) -> None:
        members = self._members
        if t in members:
            members.remove(t)
            if len(self._queued) > 2 * len(members) + 64:
                self._reindex()

    def _unindex(self) -> None:
        self._kind = _OTHER
        self._heap, self._stairs, self._queued = [], {}, set()

    def _reindex(self) -> None:
        """Rebuilds the heaps from the members alone (drops the stale entries)."""
        members = list(self._members)
        self._members, self._kind = set(), None
        self._heap, self._stairs, self._queued = [], {}, set()
        for t in members:
            self.add(t)

    def _top(self, heap: list[Any]) -> Any:
        """The least member in ``heap`` (None if none), stale entries above it dropped."""
        members, queued = self._members, self._queued
        while heap:
            t = heap[0]
            if t in members:
                return t
            queued.discard(heapq.heappop(heap))
        return None

    def minimal(self) -> list[Any]:
        """The minimal members, least first in the tuple order (as :func:`_minimal`)."""
        kind = self._kind
        if kind == _TOTAL:
            t = self._top(self._heap)
            return [] if t is None else [t]
        if kind == _STAIRS:
            stairs = self._stairs
            result: list[Any] = []
            for outer in sorted(stairs):
                t = self._top(stairs[outer])
                if t is None:
                    del stairs[outer]
                elif not result or t.inner < result[-1].inner:
                    result.append(t)
            return result
        return _minimal(list(self._members))

    def pop_ready(self, frontiers: Iterable[Iterable[Any]]) -> list[Any]:
        """Takes out and returns, least first in the tuple order, the members that no element
        of any of ``frontiers`` is less than or equal to (the times they no longer hold back).
        """
        members = self._members
        if not members:
            return []
        elements = [f for frontier in frontiers for f in frontier]
        kind = self._kind
        shape: Any = self._cls  # (compared with, not a type to narrow the elements to)
        if kind != _OTHER:
            for f in elements:  # an element of another shape: only the scan is sound
                if f.__class__ is not shape or (shape is not int and f.outer.__class__ is not int):
                    kind = _OTHER
                    break
        if kind == _OTHER:
            ready = [t for t in members if not any(le(f, t) for f in elements)]
            for t in ready:
                self.discard(t)
            ready.sort()
            return ready
        ready = []
        if kind == _TOTAL:
            # a total order: the members below the least element, a prefix of the heap
            self._take_below(self._heap, min(elements) if elements else None, False, ready)
            return ready
        # Product(e, k) is held back exactly when k >= the least counter of the elements at
        # epochs <= e: per epoch, a prefix of its heap. That bound is a running minimum over
        # the elements sorted by epoch, so the epochs are walked in order beside them (testing
        # every element at every epoch cost epochs x elements, and a loop with many epochs in
        # flight has a staircase frontier of about one element per epoch).
        steps = sorted((f.outer, f.inner) for f in elements)
        stairs = self._stairs
        bound = None
        i, n = 0, len(steps)
        for outer in sorted(stairs):
            while i < n and steps[i][0] <= outer:
                inner = steps[i][1]
                if bound is None or inner < bound:
                    bound = inner
                i += 1
            heap = stairs[outer]
            self._take_below(heap, bound, True, ready)
            if not heap:
                del stairs[outer]
        return ready  # (least first: epochs in order, each heap's prefix in order)

    def _take_below(self, heap: list[Any], bound: Any, inner: bool, ready: list[Any]) -> None:
        """Moves the members at the top of ``heap`` that lie below ``bound`` (their counter,
        with ``inner``; all, if ``bound`` is None) into ``ready``, least first, dropping the
        stale entries on the way."""
        members, queued, pop = self._members, self._queued, heapq.heappop
        while heap:
            t = heap[0]
            if t in members:
                if bound is not None and not (t.inner if inner else t) < bound:
                    break
                members.remove(t)
                ready.append(t)
            queued.discard(pop(heap))  # taken, or stale


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
