"""``count_total``, ``distinct_total`` and ``threshold_total``: per-record reductions for
totally ordered times (differential dataflow's ``count_total`` / ``threshold_total``).

When every two times compare (integer epochs, and ``Lex`` loops in scopes that are totally
ordered themselves), a record's output can change only at the times of its own input
changes, never at a least upper bound of two of them. Each arriving batch of the input
arrangement then holds all that is needed: for a record changed at ``t`` (its rows in the
batch are in time order), the count just before ``t`` is its count in the trace before the
batch plus its earlier rows in the batch, the count at ``t`` adds the row's own diff, and
the output changes by ``f(count at t) - f(count before t)``. Nothing is pending, no output
arrangement is kept, no time waits for the frontier: the changes leave with the batch's
own message.

The contract with the trace: ``Spine.batches_through(acknowledged)`` lists exactly the
batches that came before the one being read. The operator acknowledges each batch once
read (:meth:`~naiad.differential.trace.TraceHandle.set_physical_compaction`), so the spine
never merges a batch not yet read into those before it; it needs no times from the trace
(only each record's total diff there), so logical compaction may follow its input frontier.

Everything is vectorized per batch: one lookup of the batch's distinct records in each
earlier trace batch (:meth:`~naiad.differential.trace.Batch.record_ranges`, a few binary
searches per record, however many records share its key), cumulative sums per record, and
one call of ``f`` for the whole batch. A ``distinct`` of a batch of a few rows (an edge
changed in an incremental graph computation) runs the same steps in Python instead: the
vectorized path makes some twenty numpy calls per batch, most of them on arrays of one or
two elements: in incremental WCC its two ``distinct`` reads of a one-edge batch took 158 and
130 us, and take 83 and 64 us this way (sends included).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.differential import lattice
from naiad.differential.diff_arithmetic import (
    DiffOverflowError,
    checked_exact,
    describe_row,
    differences,
    magnitude,
)
from naiad.differential.reduce import recoded, thresholded
from naiad.differential.trace import Batch, Columns, TraceHandle, column_updates, expand_ranges
from naiad.differential.updates import Updates
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.differential.arrange import Arranged
    from naiad.differential.collection import Collection

Threshold = Callable[[np.ndarray], Any]


def takes_total(scope: Any, total: bool | None, name: str, instead: str) -> bool:
    """Whether ``count``, ``distinct`` or ``threshold`` (``name``) built in ``scope`` takes
    the total-order algorithm: with ``total=None`` when the scope's times are totally ordered
    (integer epochs, ``Lex`` loops outside ``Product`` ones), as ``total=True`` demands
    (refused for partially ordered times, naming ``instead``); never with ``total=False``.

    >>> import naiad
    >>> from naiad.progress import Lex
    >>> def build(scope):
    ...     lex, loop = scope.iterative("lex", time_class=Lex), scope.iterative("loop")
    ...     return [takes_total(s, t, "count", "count()") for s in (scope, lex, loop)
    ...             for t in (None, False)]
    >>> naiad.run(build)
    [[True, False, True, False, False, False]]
    """
    if total is not None and not isinstance(total, bool):
        raise TypeError(f"{name}: total must be True, False or None, not {total!r}")
    if total is None:
        return all(lattice.scope_lex(scope))
    if total:
        check_totally_ordered(scope, name, instead)
    return total


def check_totally_ordered(scope: Any, name: str, instead: str) -> None:
    """Raises ``ValueError`` naming ``name`` if the times of ``scope`` are only partially
    ordered: inside a ``Product`` loop (or a ``Lex`` loop nested in one), where the output
    may change at times no input changed at, which only ``instead`` finds.

    >>> import naiad
    >>> from naiad.progress import Lex
    >>> def build(scope):
    ...     check_totally_ordered(scope.iterative("lex", time_class=Lex), "count_total", "count()")
    ...     check_totally_ordered(scope.iterative("loop"), "count_total", "count()")
    >>> naiad.run(build)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: count_total: needs totally ordered times, but scope 'dataflow/loop' is a ...
    """
    lex = lattice.scope_lex(scope)
    if all(lex):
        return
    loops: list[Any] = []
    inner = scope
    while inner.parent is not None:
        if inner.time_class is not None:
            loops.append(inner)
        inner = inner.parent
    product = loops[::-1][lex.index(False)]
    raise ValueError(
        f"{name}: needs totally ordered times, but scope {product.path()!r} is a Product loop "
        "(its times are ordered componentwise: (epoch, iteration) pairs need not compare); "
        f"use {instead} (total=None or False), which handles partially ordered times"
    )


SMALL_BATCH = 16
"""Up to how many rows a ``distinct`` batch takes the Python path (see the module docstring)."""

_BEYOND = 2**63  # a count this large leaves int64: the vectorized path names its record


class TotalVertex(Vertex):
    """Reads each batch of the input arrangement against the trace before it and sends the
    output changes at once (see the module docstring). ``f`` maps an array of non-zero
    counts to multiplicities (``None``: ``distinct``); ``counting``: ``count_total``'s
    output instead, ``(*record, count)`` once for every non-zero count."""

    def __init__(self, handle: TraceHandle, f: Threshold | None, counting: bool, name: str) -> None:
        self.handle, self.f, self.counting, self.label = handle, f, counting, name

    def on_recv(self, port: int, cap: Capability, batch: Batch) -> None:
        if not len(batch):
            return
        handle = self.handle
        earlier = handle.spine.batches_through(handle.acknowledged)
        # written before the spine packed, perhaps: its records as the earlier batches hold them
        batch = handle.spine.conform(batch)
        out = None
        if len(batch) <= SMALL_BATCH and self.f is None and not self.counting:
            out = self._few_distinct(batch, earlier)
        if out is None:
            out = self._changes(batch, earlier)
        handle.set_physical_compaction(batch.seq_hi)
        if len(out):
            self.send(cap, out)

    def _few_distinct(self, batch: Batch, earlier: Sequence[Batch]) -> Updates | None:
        """:meth:`_changes` of ``distinct`` for a batch of a few rows, in Python (exact
        integers); None when a count leaves int64, for the vectorized path to name it."""
        records = (batch.keys, *batch.vals)
        rows = list(zip(*(c.tolist() for c in records), strict=True))
        starts = [i for i in range(len(rows)) if i == 0 or rows[i] != rows[i - 1]]
        at = np.array(starts, dtype=np.int64)
        query = tuple(c[at] for c in records)
        base = [0] * len(starts)  # each record's total diff in the earlier batches
        for tb, lo, hi in _ranges_in(batch, query, earlier):
            for j, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
                if b > a:
                    base[j] += sum(tb.diffs[a:b].tolist())
        changed: list[int] = []
        changes: list[int] = []
        diffs = batch.diffs.tolist()
        record = -1
        count = 0
        for i, d in enumerate(diffs):
            if record + 1 < len(starts) and starts[record + 1] == i:
                record += 1
                count = base[record]
                if not -_BEYOND <= count < _BEYOND:
                    return None
            before = count
            count += d
            if not -_BEYOND <= count < _BEYOND:
                return None
            change = (count > 0) - (before > 0)
            if change:
                changed.append(i)
                changes.append(change)
        picked = np.array(changed, dtype=np.int64)
        return column_updates(
            _decoded(batch, records, picked),
            batch.times[picked],
            np.array(changes, dtype=np.int64),
            batch.packed,
        )

    def _changes(self, batch: Batch, earlier: Sequence[Batch]) -> Updates:
        """The output changes of ``batch``, the trace before it being ``earlier``."""
        records = (batch.keys, *batch.vals)
        n = len(batch)
        first = np.zeros(n, dtype=bool)  # rows that begin a record (rows of one are adjacent)
        first[0] = True
        for col in records:
            first[1:] |= col[1:] != col[:-1]
        starts = np.flatnonzero(first)
        owner = np.cumsum(first) - 1  # the record of each row
        try:
            base = _trace_counts(batch, tuple(c[starts] for c in records), earlier)
        except DiffOverflowError as e:
            raise self._located(e, batch, records, int(starts[e.row or 0])) from None
        # the count of each row's record at the row's time: the trace's, plus the batch's rows
        # of the record up to this one (in time order within the record). int64 arithmetic
        # wraps modulo 2**64, so a count that fits is right whatever the running sum did;
        # whether every count fits is checked apart (exactly, past a bound).
        diffs = batch.diffs
        running = np.cumsum(diffs)
        offset = base - (running[starts] - diffs[starts])
        after = running + offset[owner]
        before = after - diffs
        if magnitude(base) + n * magnitude(diffs) >= 2**63:
            exact = np.cumsum(diffs.astype(object))
            exact += (base.astype(object) - (exact[starts] - diffs[starts].astype(object)))[owner]
            try:
                checked_exact(exact, "the count is")
            except DiffOverflowError as e:
                raise self._located(e, batch, records, e.row or 0) from None
        times = batch.times
        if self.counting:  # (record, count): +1 at the new count, -1 at the old one
            rows = np.concatenate([np.flatnonzero(after), np.flatnonzero(before)])
            counts = np.concatenate([after[after != 0], before[before != 0]])
            diffs = np.ones(len(rows), dtype=np.int64)
            diffs[int(np.count_nonzero(after)) :] = -1
            cols = (*_decoded(batch, records, rows), counts)
            return column_updates(cols, times[rows], diffs, batch.packed)
        multiplicity = self._multiplicities(np.concatenate([after, before]))
        try:
            change = differences(
                multiplicity[:n], multiplicity[n:], f"{self.label}: a change of multiplicity is"
            )
        except DiffOverflowError as e:
            raise self._located(e, batch, records, e.row or 0) from None
        rows = np.flatnonzero(change)
        return column_updates(
            _decoded(batch, records, rows), times[rows], change[rows], batch.packed
        )

    def _located(
        self, error: DiffOverflowError, batch: Batch, records: Columns, row: int
    ) -> DiffOverflowError:
        """``error`` with the record and time of ``batch``'s row ``row``."""
        cols = _decoded(batch, records, np.array([row]))
        return error.located(*describe_row(cols, batch.times[row : row + 1], 0))

    def _multiplicities(self, counts: np.ndarray) -> np.ndarray:
        """``f`` of the non-zero counts (one call), 0 for a zero count: a record with no
        count is absent, as for ``threshold``, which never shows ``f`` a zero."""
        out = np.zeros(len(counts), dtype=np.int64)
        live = counts != 0
        out[live] = thresholded(self.f, counts[live], self.label)
        return out

    def on_frontier(self) -> None:
        # the trace is read only for its records' total diffs, never at a time: compacting
        # it up to the input frontier changes nothing read here
        frontier = self.frontier(0).frontier
        if frontier:
            self.handle.follow_frontier(frontier)
        else:
            self.handle.close()

    def checkpoint(self) -> Any:
        return self.handle.acknowledged

    def build_failed(self) -> None:
        self.handle.close()  # the source may be another dataflow's (imported) trace


def _decoded(batch: Batch, records: Columns, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """The records of ``batch``'s rows ``rows`` as values (interned columns decoded)."""
    return tuple(batch.decode(i, col[rows]) for i, col in enumerate(records))


def _trace_counts(batch: Batch, records: Columns, earlier: Sequence[Batch]) -> np.ndarray:
    """Per record of ``records`` (distinct, as ``batch`` stores them), its total diff
    in the batches ``earlier``: each searched for the records' row ranges, and only those
    rows summed (a small batch against a large trace costs its records' history).

    The total is a count (the record's, before ``batch``), so only it must fit in int64: a
    trace batch's rows of a record span several times, and their sum (a change between two
    counts) may not fit while every count does. int64 sums wrap modulo ``2**64``, so the
    wrapped total is right whenever the exact one fits; that is checked exactly (Python
    ints over the rows read) only past a bound (rows x the largest ``|diff|``)."""
    total = np.zeros(len(records[0]), dtype=np.int64)
    read: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (found, diffs, segments)
    bound = 0
    for tb, lo, hi in _ranges_in(batch, records, earlier):
        lengths = hi - lo
        found = np.flatnonzero(lengths)
        if not len(found):
            continue
        rows = expand_ranges(lo[found], lengths[found])
        segments = np.cumsum(lengths[found]) - lengths[found]
        diffs = tb.diffs[rows]
        with np.errstate(over="ignore"):
            total[found] += np.add.reduceat(diffs, segments)
        bound += len(diffs) * magnitude(diffs)
        read.append((found, diffs, segments))
    if bound >= 2**63:
        exact = np.zeros(len(total), dtype=object)  # Python ints
        for found, diffs, segments in read:
            exact[found] += np.add.reduceat(diffs.astype(object), segments)
        checked_exact(exact, "the record's count in the trace is")  # (row: the record)
    return total


def _ranges_in(
    batch: Batch, records: Columns, earlier: Sequence[Batch]
) -> Iterator[tuple[Batch, np.ndarray, np.ndarray]]:
    """Per non-empty batch of ``earlier``, the row range ``lo:hi`` of each of ``records``
    (distinct, as ``batch`` stores them) there. Each is searched as that batch stores it:
    the spine may have switched a column to codes since ``batch`` was written
    (``record_ranges`` searches each record on its own, so recoded ones need no sorting)."""
    for tb in earlier:
        if len(tb):
            query = tuple(
                recoded(c, batch.is_encoded(i), tb.is_encoded(i)) for i, c in enumerate(records)
            )
            yield (tb, *tb.record_ranges(query[0], query[1:]))


def per_record_arranged(
    arranged: Arranged,
    f: Threshold | None,
    counting: bool,
    name: str,
    total: bool | None,
    instead: str,
) -> Collection:
    """The body of ``Arranged.count`` (``counting``), ``distinct`` (``f`` None) and
    ``threshold(f)``: the total-order algorithm or the generic reduce, as
    :func:`takes_total` chooses (``instead``: the call the error for partially ordered times
    names)."""
    from naiad.differential.collection import Collection
    from naiad.differential.reduce import CountLogic, ThresholdLogic

    if not takes_total(arranged.scope, total, name, instead):
        logic = CountLogic() if counting else ThresholdLogic(f)
        return arranged.reduce(logic, name).as_collection()
    vertex = total_vertex(arranged.handle(), f, counting, name)
    node = arranged.scope.add_operator(name, vertex, [(arranged.stream, Pipeline())])
    return Collection(arranged.stream.derive(node), consolidated=True)


def total_vertex(
    handle: TraceHandle, f: Threshold | None, counting: bool, name: str
) -> TotalVertex:
    """The vertex of a ``*_total`` operator reading a spine through ``handle``, a new one.

    Its output is consolidated (:attr:`Collection.consolidated`), as a reduction's: within
    a batch each record has one row per time, and a count's two changes at a time differ
    in their count; the batches of an arrangement hold disjoint times, and a record (so
    its output records, which begin with it or are it) lives on one worker, in one lane."""
    handle.set_physical_compaction(-1)  # nothing read yet: the spine keeps new batches apart
    return TotalVertex(handle, f, counting, name)
