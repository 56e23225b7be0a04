"""Columnar batches of differential updates: ``(data, time, diff)`` as numpy columns.

Contract. An :class:`Updates` holds ``n`` updates: ``data`` is a tuple of equally long 1-D
columns (one per field of the record; numeric dtypes, or ``object`` for arbitrary Python
values), ``times`` is an ``(n, depth + 1)`` int64 matrix (column 0 the epoch, then one loop
counter per enclosing loop, compared as ``Product`` times), and ``diffs`` an int64 column. The
batch means the multiset sum of its updates; order carries no meaning.

:meth:`Updates.consolidate` is the sort-merge of K-Pg §3 on columns: one ``np.lexsort`` by
(data, time), boundaries where any column changes, ``np.add.reduceat`` of the diffs, and the
zeros dropped. Cost: O(n log n) in numpy for numeric columns. ``object`` columns are first
dictionary-encoded to int64 codes (one Python dict lookup per value: the documented price of
arbitrary Python values), after which the sort is numeric too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from naiad.progress.timestamp import Product
from naiad.transport.codec import register_columnar


def _column(values: Sequence[Any]) -> np.ndarray:
    """A numeric column where numpy can make one, else an ``object`` column."""
    try:
        array = np.asarray(values)
    except ValueError:  # ragged values (tuples of different shapes, mixed types)
        array = np.empty(0)
    if array.ndim != 1 or array.dtype.kind not in "biuf" or len(array) != len(values):
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
    return array


def _codes(column: np.ndarray) -> np.ndarray:
    """An int64 column ordered like ``column`` for sorting purposes (equal values, equal
    codes); numeric columns are used as they are."""
    if column.dtype != object:
        return column
    table: dict[Any, int] = {}
    codes = np.fromiter((table.setdefault(v, len(table)) for v in column), np.int64, len(column))
    return codes


def time_matrix(times: Iterable[Any], depth: int) -> np.ndarray:
    """Times (ints, or ``Product`` nested ``depth`` deep) as an ``(n, depth + 1)`` matrix.

    >>> time_matrix([3, 4], 0).tolist()
    [[3], [4]]
    >>> time_matrix([Product(1, 2)], 1).tolist()
    [[1, 2]]
    """
    rows = []
    for t in times:
        row = []
        for _ in range(depth):
            row.append(t.inner)
            t = t.outer
        row.append(t)
        rows.append(row[::-1])
    return np.array(rows, dtype=np.int64).reshape(len(rows), depth + 1)


def time_of(row: np.ndarray) -> Any:
    """The timestamp of one row of a time matrix (an int at depth 0)."""
    t: Any = int(row[0])
    for counter in row[1:]:
        t = Product(t, int(counter))
    return t


class Updates:
    """A columnar batch of ``(data, time, diff)`` updates.

    >>> u = Updates.from_records([("a", 0, 1), ("b", 0, 1), ("a", 0, -1), ("a", 1, 2)])
    >>> u.consolidate().to_records()
    [('a', 1, 2), ('b', 0, 1)]
    """

    __slots__ = ("data", "diffs", "times")

    def __init__(self, data: tuple[np.ndarray, ...], times: np.ndarray, diffs: np.ndarray) -> None:
        n = len(diffs)
        if times.ndim != 2 or len(times) != n or any(len(c) != n for c in data):
            raise ValueError(
                f"columns of an update batch must have equal lengths (diffs {n}, times "
                f"{times.shape}, data {[len(c) for c in data]})"
            )
        self.data = data
        self.times = times
        self.diffs = diffs

    @classmethod
    def from_records(
        cls, records: Iterable[tuple[Any, Any, int]], fields: int = 1, depth: int = 0
    ) -> Updates:
        """From ``(data, time, diff)`` triples; ``data`` is a tuple when ``fields > 1``."""
        rows = list(records)
        if fields == 1:
            columns: tuple[np.ndarray, ...] = (_column([d for d, _, _ in rows]),)
        else:
            columns = tuple(_column([d[i] for d, _, _ in rows]) for i in range(fields))
        times = time_matrix((t for _, t, _ in rows), depth)
        diffs = np.array([r for _, _, r in rows], dtype=np.int64)
        return cls(columns, times, diffs)

    def __len__(self) -> int:
        return len(self.diffs)

    @property
    def depth(self) -> int:
        return int(self.times.shape[1]) - 1

    def take(self, index: np.ndarray) -> Updates:
        """The updates at ``index`` (an index array or a boolean mask)."""
        return Updates(tuple(c[index] for c in self.data), self.times[index], self.diffs[index])

    def __getitem__(self, index: np.ndarray) -> Updates:
        return self.take(index)  # so exchange can route a batch with an index array

    def __iter__(self) -> Any:
        raise TypeError("an Updates batch is columnar; use to_records() for its updates")

    def concat(self, *others: Updates) -> Updates:
        batches = [self, *others]
        data = tuple(np.concatenate(cols) for cols in zip(*(b.data for b in batches), strict=True))
        return Updates(
            data,
            np.concatenate([b.times for b in batches]),
            np.concatenate([b.diffs for b in batches]),
        )

    def negate(self) -> Updates:
        return Updates(self.data, self.times, -self.diffs)

    def consolidate(self) -> Updates:
        """Sums the diffs of equal ``(data, time)`` and drops zeros; sorted by data, time."""
        n = len(self)
        if n == 0:
            return self
        keys = [*(_codes(c) for c in self.data), *self.times.T]
        order = np.lexsort(keys[::-1])  # lexsort sorts by its last key first
        sorted_keys = [k[order] for k in keys]
        change = np.zeros(n, dtype=bool)
        change[0] = True
        for k in sorted_keys:
            change[1:] |= k[1:] != k[:-1]
        starts = np.flatnonzero(change)
        sums = np.add.reduceat(self.diffs[order], starts)
        keep = sums != 0
        picked = order[starts[keep]]
        return Updates(tuple(c[picked] for c in self.data), self.times[picked], sums[keep])

    def to_records(self) -> list[tuple[Any, Any, int]]:
        """The updates as ``(data, time, diff)`` triples (Python values)."""
        fields = [c.tolist() for c in self.data]
        data = fields[0] if len(fields) == 1 else list(zip(*fields, strict=True))
        return [
            (d, time_of(t), int(r))
            for d, t, r in zip(data, self.times, self.diffs.tolist(), strict=True)
        ]

    def __repr__(self) -> str:
        return f"Updates({len(self)} updates, {len(self.data)} fields, depth {self.depth})"


def _to_columns(u: Updates) -> list[np.ndarray]:
    return [*u.data, u.times, u.diffs]


def _from_columns(columns: list[np.ndarray]) -> Updates:
    *data, times, diffs = columns
    return Updates(tuple(data), times, diffs)


register_columnar(Updates, "naiad.Updates", _to_columns, _from_columns)
