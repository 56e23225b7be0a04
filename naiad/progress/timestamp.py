"""Logical timestamps and their partial orders.

Root-scope times are Python ``int`` epochs. A loop context extends its enclosing scope's time
with a loop counter (Naiad §2.1): ``Product(outer, inner)`` is ordered by the *product* partial
order (the lattice differential dataflow needs), ``Lex(outer, inner)`` lexicographically (the
order of prioritized iteration).

Both are tuples, so hashing, equality and the *total* order used for sorting (the tuple's own
``<``) run in C; the partial order is :func:`less_equal`. The invariant the rest of the code
relies on: ``less_equal(a, b)`` implies ``a <= b`` in the tuple order, so sorting by the total
order lists every time before the times that could follow it.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

Timestamp = Any
"""An ``int``, a :class:`Product` or a :class:`Lex` (nested to any depth)."""


class Product(NamedTuple):
    """A time inside a loop: the enclosing time and a loop counter, ordered componentwise.

    >>> a, b = Product(1, 5), Product(2, 3)
    >>> a.less_equal(b), b.less_equal(a)
    (False, False)
    >>> a.join(b), a.meet(b)
    (Product(outer=2, inner=5), Product(outer=1, inner=3))
    >>> sorted([b, a]) == [a, b]   # the total order used for sorting
    True
    """

    outer: Any
    inner: int

    def less_equal(self, other: Product) -> bool:
        return self.inner <= other.inner and less_equal(self.outer, other.outer)

    def join(self, other: Product) -> Product:
        return Product(join(self.outer, other.outer), max(self.inner, other.inner))

    def meet(self, other: Product) -> Product:
        return Product(meet(self.outer, other.outer), min(self.inner, other.inner))


class Lex(NamedTuple):
    """A time ordered lexicographically: the outer time first, the counter breaks ties.

    With a totally ordered outer part this is a total order and a lattice (join is the
    maximum, meet the minimum). With a partially ordered outer part the join still exists
    but the meet of two times with incomparable outer parts does not; :meth:`meet` raises.

    >>> Lex(1, 9).less_equal(Lex(2, 0))
    True
    >>> Lex(1, 9).join(Lex(2, 0))
    Lex(outer=2, inner=0)
    """

    outer: Any
    inner: int

    def less_equal(self, other: Lex) -> bool:
        if self.outer == other.outer:
            return self.inner <= other.inner
        return less_equal(self.outer, other.outer)

    def join(self, other: Lex) -> Lex:
        if less_equal(self, other):
            return other
        if less_equal(other, self):
            return self
        return Lex(join(self.outer, other.outer), 0)

    def meet(self, other: Lex) -> Lex:
        if less_equal(self, other):
            return self
        if less_equal(other, self):
            return other
        raise ValueError(f"{self} and {other} have no greatest lower bound in the Lex order")


def less_equal(a: Timestamp, b: Timestamp) -> bool:
    """The partial order on timestamps of the same shape.

    >>> less_equal(3, 4), less_equal(Product(0, 2), Product(1, 1))
    (True, False)
    """
    if a.__class__ is int:
        return bool(a <= b)
    return bool(a.less_equal(b))


def less_than(a: Timestamp, b: Timestamp) -> bool:
    """``a`` strictly precedes ``b`` in the partial order.

    >>> less_than(Product(0, 1), Product(0, 2)), less_than(2, 2)
    (True, False)
    """
    return a != b and less_equal(a, b)


def join(a: Timestamp, b: Timestamp) -> Timestamp:
    """The least upper bound of two times.

    >>> join(3, 5), join(Product(3, 1), Product(2, 4))
    (5, Product(outer=3, inner=4))
    """
    if a.__class__ is int:
        return a if a >= b else b
    return a.join(b)


def meet(a: Timestamp, b: Timestamp) -> Timestamp:
    """The greatest lower bound of two times.

    >>> meet(3, 5), meet(Product(3, 1), Product(2, 4))
    (3, Product(outer=2, inner=1))
    """
    if a.__class__ is int:
        return a if a <= b else b
    return a.meet(b)


def minimum_like(t: Timestamp) -> Timestamp:
    """The least time of the same shape as ``t``.

    >>> minimum_like(Product(Product(4, 2), 7))
    Product(outer=Product(outer=0, inner=0), inner=0)
    """
    if t.__class__ is int:
        return 0
    return t.__class__(minimum_like(t.outer), 0)


def depth(t: Timestamp) -> int:
    """How many loop counters a time carries (0 for a root epoch).

    >>> depth(5), depth(Product(Product(1, 2), 3))
    (0, 2)
    """
    d = 0
    while t.__class__ is not int:
        t = t.outer
        d += 1
    return d


def as_time(value: Any, levels: int, what: str = "a time") -> Timestamp:
    """``value`` checked as a time of a scope ``levels`` loops deep, as the user may write
    it: numpy integers become ints; a float, a bool, a string or a time of another depth
    raises a ``TypeError`` (a float epoch would otherwise pass the order checks and corrupt
    the frontiers).

    >>> as_time(__import__("numpy").int64(3), 0), as_time(Product(2, 1), 1)
    (3, Product(outer=2, inner=1))
    >>> as_time(2.5, 0, "an epoch")
    Traceback (most recent call last):
    ...
    TypeError: an epoch must be an integer, not 2.5
    """
    if levels == 0:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        raise TypeError(f"{what} must be an integer, not {value!r}")
    if isinstance(value, Product | Lex):
        inner = as_time(value.inner, 0, what + "'s loop counter")
        return value.__class__(as_time(value.outer, levels - 1, what), inner)
    raise TypeError(
        f"{what} inside {levels} loop(s) must be a Product (or Lex) of {levels} level(s), "
        f"not {value!r}"
    )


def as_time_like(value: Any, reference: Timestamp, what: str = "a time") -> Timestamp:
    """``value`` checked as a time of the same shape as ``reference`` (the same class at
    every level, so ``Product`` and ``Lex`` times are not mixed), as :func:`as_time` checks
    it: numpy integers become ints, anything else raises a ``TypeError``. A value already of
    that shape costs one class comparison per level.

    >>> as_time_like(__import__("numpy").int64(3), 0), as_time_like(Product(2, 1), Product(0, 0))
    (3, Product(outer=2, inner=1))
    >>> as_time_like(5, Product(0, 0), "operator 'v': a time")
    Traceback (most recent call last):
    ...
    TypeError: operator 'v': a time inside 1 loop(s) must be a Product (or Lex) of 1 level(s), not 5
    >>> as_time_like(Lex(0, 1), Product(0, 0))
    Traceback (most recent call last):
    ...
    TypeError: a time must have the shape of Product(outer=0, inner=0), not Lex(outer=0, inner=1)
    """
    if same_shape(value, reference):
        return value
    time = as_time(value, depth(reference), what)
    if not same_shape(time, reference):
        raise TypeError(f"{what} must have the shape of {minimum_like(reference)!r}, not {value!r}")
    return time


def same_shape(value: Any, reference: Timestamp) -> bool:
    """Whether ``value`` is a time of ``reference``'s classes at every level, plain ints."""
    while value.__class__ is reference.__class__:
        if value.__class__ is int:
            return True
        if value.inner.__class__ is not int:
            return False
        value, reference = value.outer, reference.outer
    return False
