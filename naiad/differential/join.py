"""Join of two arrangements (K-Pg §4.2): each new batch of one side meets the batches of the
other side acknowledged so far, so every pair of batches meets exactly once
(``d(A ⋈ B) = dA ⋈ B + A' ⋈ dB``, where ``A'`` already includes ``dA``).

Matching is a sort-merge on the key columns: the smaller side's keys are looked up in the
larger with ``searchsorted``, so a small batch against a large trace costs O(small x log
large), which keeps installing a small query against a big shared index proportional to the
small side. The output record is ``(key, *left values, *right values)``, at the join (least
upper bound) of the two times, with the product of the diffs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.differential import lattice
from naiad.differential.arrange import check_keyed, handed_values
from naiad.differential.collection import iterable_result
from naiad.differential.diff_arithmetic import DiffOverflowError, describe_row, products
from naiad.differential.trace import (
    SMALL_KEYS,
    Batch,
    Spine,
    TraceHandle,
    expand_ranges,
)
from naiad.differential.updates import (
    INTERNER,
    Updates,
    check_not_iterator,
    handed,
    record_of,
    take_rows,
    updates_from_rows,
)
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.differential.arrange import Arranged
    from naiad.differential.collection import Collection


_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_ROWS.flags.writeable = False  # shared by every empty match


def match(left: Batch, right: Batch) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs ``(i, j)`` with ``left.keys[i] == right.keys[j]`` (both sorted by key)."""
    if not len(left) or not len(right):
        return _NO_ROWS, _NO_ROWS
    if len(left) <= len(right):
        query = exact_query(left.keys, right.keys.dtype)
        if query is None:
            lo, hi = right.lookup(left.keys)
        else:  # integer and float keys: the smaller side's, as the larger side stores keys
            keys, possible = query
            lo, hi = right.lookup(keys)
            hi = np.where(possible, hi, lo)
        if len(left) <= SMALL_KEYS:  # a few rows: their matches as lists (no numpy calls)
            pairs = [
                (i, j)
                for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True))
                for j in range(a, b)
            ]
            if not pairs:  # (most batches of a trace hold none of a round's few keys)
                return _NO_ROWS, _NO_ROWS
            if len(pairs) <= 4 * SMALL_KEYS:
                return np.array([p[0] for p in pairs], np.int64), np.array(
                    [p[1] for p in pairs], np.int64
                )
        counts = hi - lo
        return np.repeat(np.arange(len(left)), counts), expand_ranges(lo, counts)
    j, i = match(right, left)
    return i, j


_TWO_63 = float(2**63)


def exact_query(keys: np.ndarray, stored: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """Integer ``keys`` to look up among float keys ``stored``, or the reverse: the keys in
    the ``stored`` dtype, and which of them can equal a stored key exactly (as Python
    compares an int with a float); None when the kinds do not differ so.

    Numpy would compare the two in float64, rounding integers beyond 2**53 (2**53 + 1
    would equal 2.0**53), and would convert the whole stored column to search it: a small
    batch against a large trace must cost its own keys, so the query is converted instead.
    An integer can equal only the float it converts to, and only if that converts back to
    it; a float only the integer it is, if it is integral and within int64.

    >>> [c.tolist() for c in exact_query(np.array([3, 2**53 + 1]), np.dtype(np.float64))]
    [[3.0, 9007199254740992.0], [True, False]]
    >>> [c.tolist() for c in exact_query(np.array([2.0, 2.5, 1e300]), np.dtype(np.int64))]
    [[2, 0, 0], [True, False, False]]
    """
    kinds = keys.dtype.kind + stored.kind
    if kinds in ("if", "uf"):  # integers looked up among floats
        as_float = keys.astype(np.float64)
        in_range = (as_float >= -_TWO_63) & (as_float < _TWO_63)
        back = np.where(in_range, as_float, 0.0).astype(np.int64)
        if keys.dtype.kind == "u":  # beyond int64 no float converts back exactly here
            possible = in_range & (keys <= np.iinfo(np.int64).max)
            possible &= back.astype(np.uint64) == keys
        else:
            possible = in_range & (back == keys)
        return as_float, possible
    if kinds in ("fi", "fu"):  # floats looked up among integers
        with np.errstate(invalid="ignore"):
            possible = (keys >= -_TWO_63) & (keys < _TWO_63) & (np.floor(keys) == keys)
        if stored.kind == "u":
            possible &= keys >= 0
        as_int = np.where(possible, keys, 0.0).astype(stored)
        return as_int, possible
    return None


class JoinVertex(Vertex):
    """Port 0: batches of the left arrangement; port 1: of the right."""

    def __init__(
        self,
        spines: tuple[Spine, Spine],
        handles: tuple[TraceHandle, TraceHandle],
        right_values: bool,
        pairs: PairFunction | None = None,
    ) -> None:
        self.spines = spines
        self.handles = handles
        self.right_values = right_values
        self.pairs = pairs
        self.lex = spines[0].lex

    def on_recv(self, port: int, cap: Capability, batch: Batch) -> None:
        other = 1 - port
        parts = []
        for theirs in self.spines[other].batches_through(self.handles[other].acknowledged):
            left, right = (batch, theirs) if port == 0 else (theirs, batch)
            out = self._join(left, right)
            if out is not None:
                parts.append(out)
        self.handles[port].set_physical_compaction(batch.seq_hi)
        if parts:
            self.send(cap, parts[0].concat(*parts[1:]) if len(parts) > 1 else parts[0])

    def _join(self, left: Batch, right: Batch) -> Updates | None:
        # each batch is read with its own encoding (a spine may have switched a column to
        # codes since a batch in flight was written)
        recoded = left.is_encoded(0) != right.is_encoded(0)
        if recoded:
            left, right = self._recode(left), self._recode(right)
        i, j = match(left, right)
        if not len(i):
            return None
        # recoded keys are interned codes whatever the left batch stores
        key = INTERNER.decode(left.keys[i]) if recoded else left.decode(0, left.keys[i])
        times = lattice.join(left.take_times(i), right.take_times(j), self.lex)
        try:
            diffs = products(left.diffs[i], right.diffs[j])
        except DiffOverflowError as e:
            raise e.located(*describe_row([key], times, e.row or 0), noun="key") from None
        if left.packed or (self.right_values and right.packed):
            return self._records(key, left.value_fields(i), right, j, times, diffs)
        cols = [key, *(left.decode(k + 1, v[i]) for k, v in enumerate(left.vals))]
        if self.right_values:
            cols += [right.decode(k + 1, v[j]) for k, v in enumerate(right.vals)]
        if self.pairs is not None:
            n = 1 + len(left.vals)
            out = self.pairs(cols[0], cols[1:n], cols[n:], times, diffs)
            return out if len(out) else None
        return Updates(tuple(cols), times, diffs)

    def _records(
        self,
        keys: np.ndarray,
        left: list[tuple[Any, ...]],
        right: Batch,
        j: np.ndarray,
        times: np.ndarray,
        diffs: np.ndarray,
    ) -> Updates | None:
        """The output of matched rows when a side is packed (its records' widths differ):
        built record by record, ``(key, *left fields, *right fields)``."""
        theirs = right.value_fields(j) if self.right_values else [()] * len(j)
        if self.pairs is not None:
            lv, rv = list(map(handed, left)), list(map(handed, theirs))
            out = self.pairs.apply(keys.tolist(), lv, rv, times, diffs)
            return out if len(out) else None
        records = [
            record_of((k, *a, *b)) for k, a, b in zip(keys.tolist(), left, theirs, strict=True)
        ]
        return Updates.of_values(records, times, diffs)

    def _recode(self, batch: Batch) -> Batch:
        """A batch's keys as interned codes when the other side's are (mixed key types)."""
        if batch.is_encoded(0):
            return batch
        codes = INTERNER.encode(batch.keys.astype(object))
        order = np.argsort(codes, kind="stable")
        out = Batch(
            codes[order],
            tuple(v[order] for v in batch.vals),
            take_rows(batch.times, order),
            batch.diffs[order],
            batch.lower,
            batch.upper,
            batch.since,
        )
        out.encoded, out.packed = (True, *batch.encoded[1:]), batch.packed
        return out

    def on_frontier(self) -> None:
        # a side's trace is read only when the other side's batches arrive, at times in
        # advance of that input's frontier: compacting it up to there changes no answer
        for side in (0, 1):
            frontier = self.frontier(1 - side).frontier
            if frontier:
                self.handles[side].follow_frontier(frontier)
            else:
                self.handles[side].close()

    def checkpoint(self) -> Any:
        return [h.acknowledged for h in self.handles]

    def build_failed(self) -> None:
        for handle in self.handles:  # a side may be another dataflow's (imported) trace
            handle.close()


class PairFunction:
    """The user's function of ``join_map`` (``many``: ``join_core``), applied to the matched
    pairs of a batch: ``f(key, left value, right value)``, one Python call per pair. A value
    is what ``reduce`` hands over: the one field after the key, a tuple of the fields after
    it if several, ``()`` for a record that is a key only."""

    def __init__(self, f: Callable[[Any, Any, Any], Any], many: bool, name: str) -> None:
        self.f, self.many, self.name = f, many, name

    def __call__(
        self,
        keys: np.ndarray,
        left: Sequence[np.ndarray],
        right: Sequence[np.ndarray],
        times: np.ndarray,
        diffs: np.ndarray,
    ) -> Updates:
        n = len(keys)
        return self.apply(
            keys.tolist(), handed_values(left, n), handed_values(right, n), times, diffs
        )

    def apply(
        self,
        keys: list[Any],
        left: list[Any],
        right: list[Any],
        times: np.ndarray,
        diffs: np.ndarray,
    ) -> Updates:
        """The function applied to the pairs of ``keys`` and values (as handed over)."""
        f = self.f
        triples = zip(keys, left, right, strict=True)
        if not self.many:
            made = [f(k, a, b) for k, a, b in triples]
            if made:  # one test per batch (see check_not_iterator)
                check_not_iterator(
                    made[0],
                    lambda: f"join_map {self.name!r}: f{(keys[0], left[0], right[0])!r} returned",
                    "; for several records, use join_core",
                )
            return Updates.of_values(made, times, diffs)
        out: list[Any] = []
        rows: list[int] = []
        for row, (k, a, b) in enumerate(triples):
            result = f(k, a, b)
            if isinstance(result, list):  # the usual case, checked for free
                out += result
                rows += [row] * len(result)
            else:
                call = partial("f{!r}".format, (k, a, b))  # shown only to refuse
                for y in iterable_result(result, self.name, call):
                    out.append(y)
                    rows.append(row)
        if out:
            first = (keys[rows[0]], left[rows[0]], right[rows[0]])
            check_not_iterator(out[0], lambda: f"join_core {self.name!r}: f{first!r} yielded")
        return updates_from_rows(out, rows, times, diffs)


def join_arranged(
    left: Arranged,
    right: Arranged,
    name: str,
    right_values: bool = True,
    pairs: PairFunction | None = None,
) -> Collection:
    from naiad.differential.collection import Collection

    if left.scope is not right.scope:
        raise scope_error(left.scope, right.scope, name)
    for side in (left, right):
        check_keyed(side.spine, name, "a join")
    handles = (left.handle(), right.handle())
    for h in handles:
        h.set_physical_compaction(-1)  # nothing read yet: the spines keep new batches apart
    vertex = JoinVertex((left.spine, right.spine), handles, right_values, pairs)
    node = left.scope.add_operator(
        name, vertex, [(left.stream, Pipeline()), (right.stream, Pipeline())]
    )
    return Collection(left.stream.derive(node))


def scope_error(left: Any, right: Any, name: str) -> ValueError:
    """The error of a join whose sides are in the scopes ``left`` and ``right`` (different,
    and neither an arrangement of an enclosing scope, which would have entered the other's)."""
    if left.build is not right.build:
        return ValueError(
            f"{name}: the two sides belong to different dataflows; share an arrangement "
            "with another dataflow through import_trace"
        )
    return ValueError(
        f"{name}: the left side is in scope {left.path()!r}, the right side in "
        f"{right.path()!r}; a collection enters a loop only with .enter(loop), while an "
        "arrangement of an enclosing scope (arrange_by_key(), or arrange_by_self() for the "
        "keys of a semijoin or antijoin) enters by itself and is read there without a "
        "second index"
    )
