"""Lattice operations on time matrices, vectorized over rows.

A time matrix has one row per update and ``depth + 1`` int64 columns: column 0 is the
root epoch, column ``i`` the counter of the ``i``-th enclosing loop. ``lex[i - 1]`` says how
column ``i`` combines with the columns before it: ``False`` for ``Product`` (the
componentwise order of ordinary loops), ``True`` for ``Lex`` (lexicographic: prioritized
iteration, seed 002 §5.1.2). Sorting rows lexicographically (``np.lexsort`` over the
columns) lists every time before the times that could follow it, for both orders.

>>> import numpy as np
>>> a = np.array([[0, 5], [1, 3]]); b = np.array([[1, 2], [1, 4]])
>>> less_equal(a, b).tolist(), join(a, b).tolist()
([False, True], [[1, 5], [1, 4]])
>>> less_equal(a, b, lex=(True,)).tolist()     # (0, 5) < (1, 2) lexicographically
[True, True]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from naiad.progress.timestamp import Lex, Product
from naiad.progress.timestamp import less_equal as _le

LexFlags = Sequence[bool]


def _flags(lex: LexFlags, width: int) -> Sequence[bool]:
    return lex if len(lex) == width - 1 else (False,) * (width - 1)


def less_equal(a: np.ndarray, b: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """Row-wise ``a <= b`` in the partial order (rows broadcast like numpy arrays)."""
    width = a.shape[-1]
    flags = _flags(lex, width)
    le = a[..., 0] <= b[..., 0]
    if width == 1:
        return le
    if not any(flags):
        for i in range(1, width):
            le = le & (a[..., i] <= b[..., i])
        return le
    eq = a[..., 0] == b[..., 0]
    for i in range(1, width):
        if flags[i - 1]:
            le = (le & ~eq) | (eq & (a[..., i] <= b[..., i]))
        else:
            le = le & (a[..., i] <= b[..., i])
        eq = eq & (a[..., i] == b[..., i])
    return le


def join(a: np.ndarray, b: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """Row-wise least upper bound."""
    width = a.shape[-1]
    flags = _flags(lex, width)
    if not any(flags):
        return np.maximum(a, b)
    a, b = np.broadcast_arrays(a, b)
    out = np.maximum(a[..., :1], b[..., :1])
    le_ab = a[..., 0] <= b[..., 0]
    le_ba = b[..., 0] <= a[..., 0]
    eq = a[..., 0] == b[..., 0]
    for i in range(1, width):
        ai, bi = a[..., i], b[..., i]
        if flags[i - 1]:
            le_ab = (le_ab & ~eq) | (eq & (ai <= bi))
            le_ba = (le_ba & ~eq) | (eq & (bi <= ai))
            fresh = np.concatenate([out, np.zeros_like(out[..., :1])], axis=-1)
            out = np.where(
                le_ab[..., None],
                b[..., : i + 1],
                np.where(le_ba[..., None], a[..., : i + 1], fresh),
            )
        else:
            le_ab = le_ab & (ai <= bi)
            le_ba = le_ba & (bi <= ai)
            out = np.concatenate([out, np.maximum(ai, bi)[..., None]], axis=-1)
        eq = eq & (ai == bi)
    return out


def meet(a: np.ndarray, b: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """Row-wise greatest lower bound (for ``Lex`` columns only where it exists)."""
    out, exists = _partial_meet(a, b, lex)
    if not exists.all():
        raise ValueError("the meet of lexicographic times with incomparable outer parts")
    return out


def _partial_meet(a: np.ndarray, b: np.ndarray, lex: LexFlags) -> tuple[np.ndarray, np.ndarray]:
    """The row-wise meet, and per row whether it exists: a lexicographic time inside a loop
    has none with a time whose outer part is incomparable (``Lex(Product(0, 3), j)`` and
    ``Lex(Product(1, 0), k)``); ``a``'s row stands there."""
    if not any(_flags(lex, a.shape[-1])):
        return np.minimum(a, b), np.ones(a.shape[:-1], dtype=bool)
    le_ab = less_equal(a, b, lex)
    exists = le_ab | less_equal(b, a, lex)
    return np.where((le_ab | ~exists)[..., None], a, b), exists


def advance_by(times: np.ndarray, frontier: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """Times advanced to the frontier (differential's logical compaction): each row becomes the
    meet over frontier elements ``f`` of ``join(t, f)``. For every time ``s`` in advance of the
    frontier, ``t <= s`` exactly when the advanced ``t <= s``, so accumulations at such times
    do not change. A row whose meet does not exist keeps its own time: always sound (it is
    only compacted less)."""
    if len(frontier) == 0 or len(times) == 0:
        return times
    if not any(_flags(lex, times.shape[-1])):
        # Product times: joins and meets are componentwise max and min, and every meet
        # exists; two ufunc calls per frontier element, where the general path below
        # makes about ten (a merge of a spine's small batches pays them whatever its size)
        out = np.maximum(times, frontier[0])
        for f in frontier[1:]:
            np.minimum(out, np.maximum(times, f), out=out)
        return out
    out = join(times, frontier[0:1], lex)
    kept = np.zeros(len(times), dtype=bool)
    for f in frontier[1:]:
        out, exists = _partial_meet(out, join(times, f[None, :], lex), lex)
        kept |= ~exists
    return np.where(kept[..., None], times, out) if kept.any() else out


def beyond(times: np.ndarray, frontier: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """Per row, whether some frontier element is ``<=`` it (the time is not yet complete)."""
    mask = np.zeros(len(times), dtype=bool)
    for f in frontier:
        mask |= less_equal(f[None, :], times, lex)
    return mask


def frontier_rows(frontier: Iterable[Any], depth: int) -> np.ndarray:
    """A frontier's times as a matrix (``depth + 1`` columns)."""
    rows = [time_row(t, depth) for t in frontier]
    return np.array(rows, dtype=np.int64).reshape(len(rows), depth + 1)


def time_row(t: Any, depth: int) -> list[int]:
    """One time as a row: epoch first, innermost loop counter last.

    >>> time_row(Product(Product(3, 1), 2), 2)
    [3, 1, 2]
    """
    row = []
    for _ in range(depth):
        row.append(int(t.inner))
        t = t.outer
    row.append(int(t))
    return row[::-1]


def time_of(row: Any, lex: LexFlags = ()) -> Any:
    """The timestamp of a row (an ``int`` at depth 0).

    >>> time_of([1, 2, 3], lex=(True, False))
    Product(outer=Lex(outer=1, inner=2), inner=3)
    """
    values = [int(x) for x in row]
    flags = _flags(lex, len(values))
    t: Any = values[0]
    for flag, counter in zip(flags, values[1:], strict=True):
        t = Lex(t, counter) if flag else Product(t, counter)
    return t


def minimal_rows(times: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """The minimal distinct rows (an antichain), in lexicographic order."""
    if len(times) == 0:
        return times
    width = times.shape[1]
    if width == 1:
        return times.min(axis=0, keepdims=True)  # a total order
    if width == 2 and (times[:, 0] == times[0, 0]).all():
        # one epoch and one loop counter (the common case in a loop): a total order here
        return times[np.argmin(times[:, 1])][None, :].copy()
    distinct = np.unique(times, axis=0)
    keep: list[np.ndarray] = []
    for row in distinct:  # lexicographic order: a row is minimal unless an earlier one is <= it
        if not any(bool(less_equal(k, row, lex)) for k in keep):
            keep.append(row)
    return np.array(keep, dtype=np.int64).reshape(len(keep), times.shape[1])


def join_frontiers(a: np.ndarray, b: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """The frontier of the times in advance of both frontiers ``a`` and ``b``: the minimal
    pairwise joins of their times (empty if either is).

    >>> join_frontiers(np.array([[0, 5], [3, 0]]), np.array([[2, 2]])).tolist()
    [[2, 5], [3, 2]]
    """
    joins = join(a[:, None, :], b[None, :, :], lex)
    return minimal_rows(joins.reshape(-1, a.shape[1]), lex)


def minimal_times(times: Sequence[Any], depth: int, lex: LexFlags = ()) -> list[Any]:
    """The minimal elements of distinct timestamps (an antichain), least row first.

    >>> minimal_times([Product(1, 2), Product(0, 3), Product(1, 1)], 1)
    [Product(outer=0, inner=3), Product(outer=1, inner=1)]
    """
    if len(times) <= 1:
        return list(times)
    if len(times) > 64:  # quadratic in Python: vectorized instead
        rows = minimal_rows(frontier_rows(times, depth), lex)
        return [time_of(r, lex) for r in rows]
    ordered = sorted(times, key=lambda t: time_row(t, depth))
    keep: list[Any] = []
    for t in ordered:  # lexicographic order: t is minimal unless an earlier one is <= t
        if not any(_le(k, t) for k in keep):
            keep.append(t)
    return keep


def greatest(times: np.ndarray, lex: LexFlags = ()) -> np.ndarray:
    """A one-row frontier at or after every row of ``times`` (their join; a lexicographic
    maximum suffices for ``Lex`` columns)."""
    if not len(times):
        return times[:0]
    if not any(_flags(lex, times.shape[1])):
        return times.max(axis=0)[None, :]
    order = np.lexsort(times.T[::-1])
    top = times[order[-1]][None, :]
    for row in times:
        top = join(top, row[None, :], lex)
    return top


def scope_lex(scope: Any) -> tuple[bool, ...]:
    """The ``lex`` flags of a scope: one per enclosing loop, outermost first (regions,
    which add no loop counter, add no flag)."""
    flags: list[bool] = []
    while scope.parent is not None:
        if scope.time_class is not None:
            flags.append(scope.time_class is Lex)
        scope = scope.parent
    return tuple(flags[::-1])
