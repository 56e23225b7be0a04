"""Path summaries: how a timestamp changes along a path of the logical graph.

Contract. Along any path the only timestamp adjustments are ingress (append a loop counter
``0``), egress (drop the innermost counter) and feedback (add ``k >= 1`` to the innermost
counter). Any sequence of them has the normal form ``PathSummary(pops, add, pushes)``:
drop ``pops`` innermost coordinates, add ``add`` to the coordinate that is now innermost,
then append the constant coordinates ``pushes`` (each with its timestamp class). Normal forms
compose (:meth:`PathSummary.then`) in closed form, so the minimal summaries between every
pair of locations can be computed by propagation (``reachability.py``).

The order on summaries is conservative: ``s1 <= s2`` only when both have the same shape
(``pops`` and the classes pushed) and ``s1``'s numbers are componentwise no larger. It is
sound (``s1 <= s2`` implies ``s1(t) <= s2(t)`` for every ``t``); summaries it cannot compare
are both kept, which costs a little space and never correctness. Because every cycle adds a
positive amount to some counter, repeating a cycle yields a summary of the same shape with
larger numbers, so the propagation terminates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from naiad.progress.timestamp import Lex, Product, Timestamp

TimeClass = type[Product] | type[Lex]


@dataclass(frozen=True, slots=True)
class PathSummary:
    """A monotone map from the time at one location to the least time it implies at another.

    >>> loop_back = PathSummary.feedback(1)
    >>> loop_back.apply(Product(3, 0))
    Product(outer=3, inner=1)
    >>> around = PathSummary.egress().then(PathSummary.feedback(1)).then(PathSummary.ingress())
    >>> around.apply(Product(Product(0, 4), 9))
    Product(outer=Product(outer=0, inner=5), inner=0)
    >>> PathSummary.identity().less_equal(loop_back)
    True
    """

    pops: int = 0
    add: int = 0
    pushes: tuple[tuple[TimeClass, int], ...] = ()

    @staticmethod
    def identity() -> PathSummary:
        return _IDENTITY

    @staticmethod
    def ingress(time_class: TimeClass = Product) -> PathSummary:
        """Entering a loop context appends a counter starting at 0."""
        return PathSummary(0, 0, ((time_class, 0),))

    @staticmethod
    def egress() -> PathSummary:
        """Leaving a loop context drops its counter."""
        return PathSummary(1, 0, ())

    @staticmethod
    def feedback(step: int = 1) -> PathSummary:
        """A feedback vertex strictly advances the innermost counter."""
        if step < 1:
            raise ValueError(f"a feedback step must be at least 1, got {step}")
        return PathSummary(0, step, ())

    @property
    def is_identity(self) -> bool:
        return self.pops == 0 and self.add == 0 and not self.pushes

    @property
    def advances(self) -> bool:
        """Whether every time strictly advances (what every cycle's summary must do)."""
        return self.add > 0

    def apply(self, t: Timestamp) -> Timestamp:
        for _ in range(self.pops):
            t = t.outer
        if self.add:
            t = t + self.add if t.__class__ is int else t.__class__(t.outer, t.inner + self.add)
        for cls, value in self.pushes:
            t = cls(t, value)
        return t

    def compile(self) -> Callable[[Timestamp], Timestamp] | None:
        """A fast equivalent of :meth:`apply`; ``None`` for the identity."""
        if self.is_identity:
            return None
        add = self.add
        if not self.pops and not self.pushes:
            return lambda t: t + add if t.__class__ is int else t.__class__(t.outer, t.inner + add)
        return self.apply

    def then(self, other: PathSummary) -> PathSummary:
        """The summary of following ``self`` and then ``other``."""
        if other.pops <= len(self.pushes):
            kept = self.pushes[: len(self.pushes) - other.pops]
            if kept:
                cls, value = kept[-1]
                kept = (*kept[:-1], (cls, value + other.add))
                return PathSummary(self.pops, self.add, kept + other.pushes)
            return PathSummary(self.pops, self.add + other.add, other.pushes)
        extra = other.pops - len(self.pushes)
        return PathSummary(self.pops + extra, other.add, other.pushes)

    def less_equal(self, other: PathSummary) -> bool:
        if self.pops != other.pops or len(self.pushes) != len(other.pushes):
            return False
        if self.add > other.add:
            return False
        for (c1, v1), (c2, v2) in zip(self.pushes, other.pushes, strict=True):
            if c1 is not c2 or v1 > v2:
                return False
        return True

    def __repr__(self) -> str:
        if self.is_identity:
            return "PathSummary.identity()"
        parts = []
        if self.pops:
            parts.append(f"pop {self.pops}")
        if self.add:
            parts.append(f"+{self.add}")
        if self.pushes:
            parts.append("push " + ",".join(f"{c.__name__}:{v}" for c, v in self.pushes))
        return f"PathSummary({'; '.join(parts)})"


_IDENTITY = PathSummary()
