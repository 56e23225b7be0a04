"""Work counted for the cost tests: calls of patched functions, never time.

A cost test patches the functions whose calls measure an operator's work (frontier tests,
time rows, heap pops, ...), runs the computation at two sizes, and compares the counts.

>>> import math, pytest
>>> patch = pytest.MonkeyPatch()
>>> work = Work(patch)
>>> work.count(math, "sqrt", "roots")
>>> work.count(math, "fsum", "terms", weight=len)
>>> math.sqrt(4.0), math.fsum([1.0, 2.0])
(2.0, 3.0)
>>> work.counts == {"roots": 1, "terms": 2}
True
>>> patch.undo()
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest


class Work:
    """Counts the calls of the functions :meth:`count` patches, each adding ``weight(*args)``
    (1 by default) to its label. Once :meth:`within` has named methods, only the calls made
    while one of them runs count, under the label of the innermost."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.counts: Counter[str] = Counter()
        self.gated = False  # whether within() was called: count only inside those methods
        self.inside: list[str] = []

    def count(
        self,
        owner: Any,
        name: str,
        label: str = "work",
        weight: Callable[..., int] | None = None,
    ) -> None:
        original = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            if not self.gated:
                self.counts[label] += 1 if weight is None else weight(*args, **kwargs)
            elif self.inside:
                self.counts[self.inside[-1]] += 1 if weight is None else weight(*args, **kwargs)
            return original(*args, **kwargs)

        self.monkeypatch.setattr(owner, name, counted)

    def within(self, owner: Any, name: str, label: str) -> None:
        """Counts only during calls of ``owner.name`` (and other methods named so)."""
        self.gated = True
        original = getattr(owner, name)

        def scoped(*args: Any, **kwargs: Any) -> Any:
            self.inside.append(label)
            try:
                return original(*args, **kwargs)
            finally:
                self.inside.pop()

        self.monkeypatch.setattr(owner, name, scoped)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        self.counts.clear()
