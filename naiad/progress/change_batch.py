"""ChangeBatch: accumulated count changes keyed by (location, time).

Compaction policy: updates to the same key are summed in place as they arrive (a dict), so a
batch never holds two entries for one key; keys whose sum reaches zero are dropped when the
batch is drained, not on every update (the common +1/-1 pair within one callback costs two
dict operations and no deletion). :meth:`drain` lists positive changes before negative ones,
the order invariant 2 of ``ARCHITECTURE.md`` requires for every batch that leaves a worker.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


class ChangeBatch:
    """Sums of count changes per key.

    >>> b = ChangeBatch()
    >>> b.update(("op", 1), 1), b.update(("op", 0), -1), b.update(("op", 1), -1)
    (1, -1, 0)
    >>> b.drain()
    [(('op', 0), -1)]
    >>> b.is_empty()
    True
    """

    __slots__ = ("_updates",)

    def __init__(self, updates: Iterable[tuple[Any, int]] = ()) -> None:
        self._updates: dict[Any, int] = {}
        for key, delta in updates:
            self.update(key, delta)

    def update(self, key: Any, delta: int) -> int:
        """Adds ``delta`` to ``key``'s changes; returns their new sum."""
        updates = self._updates
        total = updates[key] = updates.get(key, 0) + delta
        return total

    def extend(self, updates: Iterable[tuple[Any, int]]) -> None:
        for key, delta in updates:
            self.update(key, delta)

    def get(self, key: Any) -> int:
        """The sum of the changes to ``key`` (0 if none)."""
        return self._updates.get(key, 0)

    def is_empty(self) -> bool:
        """Whether no key has a nonzero sum."""
        return not any(self._updates.values())

    def drain(self) -> list[tuple[Any, int]]:
        """Removes and returns the nonzero changes, positive ones first."""
        items = [(k, d) for k, d in self._updates.items() if d]
        self._updates = {}
        items.sort(key=lambda kd: kd[1] < 0)
        return items

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        return ((k, d) for k, d in self._updates.items() if d)

    def __len__(self) -> int:
        return sum(1 for d in self._updates.values() if d)

    def __repr__(self) -> str:
        return f"ChangeBatch({list(self)!r})"
