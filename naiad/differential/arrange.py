"""The arrange operator and :class:`Arranged`: a collection indexed by key, shared by readers.

``arrange`` routes updates by key to their worker, holds them until their times complete,
then seals them into one immutable :class:`~naiad.differential.trace.Batch` per held
capability, inserts it into this worker's :class:`~naiad.differential.trace.Spine`, and sends
the same batch object downstream (readers are on the same worker: ``Pipeline``). Every
reader of the arrangement (join, reduce, an import into another dataflow) holds a
:class:`~naiad.differential.trace.TraceHandle` on the one spine: K-Pg's shared arrangement.

Records are rows of columns: the first column is the key, the others the value. Records of
several widths (``1`` beside ``(1, "a")`` beside ``(1, "a", "b")``, in one batch or in
different ones) are all accepted on every layout, as no worker knows the widths the others
met: the spine packs their values into one column of tuples when it meets a second width
(:meth:`~naiad.differential.trace.Spine.insert_records`), and its readers unpack them per
record where they build output records. One width stays columnar, at the cost of a flag test
per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.actors.supervision import DataflowDropped, DataflowStopped
from naiad.actors.vertex import StatelessVertex, Vertex
from naiad.dataflow.channels import Exchange, Pipeline
from naiad.differential import lattice
from naiad.differential.spine_views import AdvancedSpine
from naiad.differential.trace import Batch, Spine, TraceHandle, column_updates
from naiad.differential.updates import (
    Updates,
    check_not_iterator,
    handed,
    records_of,
    route,
    route_by_record,
    updates_from_rows,
)
from naiad.operators.filter import truth_mask
from naiad.operators.input import ImportVertex
from naiad.progress.antichain import TimeQueue
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time, less_equal

if TYPE_CHECKING:
    from naiad.differential.collection import Collection


class HeldTimes:
    """Capabilities held for the minimal times of pending updates (one per antichain element).

    Compares the capabilities' own timestamps (a few Python comparisons), not time rows: it
    runs once per message and per sealed time, where numpy's per-call cost would dominate.
    """

    def __init__(self, lex: tuple[bool, ...], depth: int) -> None:
        self.lex, self.depth = lex, depth
        self.caps: list[Capability] = []

    def add(self, cap: Capability) -> None:
        t = cap.time
        if not any(less_equal(c.time, t) for c in self.caps):
            self.caps.append(cap.retain())

    def at(self, t: Any) -> Capability:
        """A new capability for the timestamp ``t``, delayed from a held one."""
        for c in self.caps:
            if less_equal(c.time, t):
                return c.delayed(t)
        raise AssertionError(f"no held capability at or before {t}")  # pragma: no cover

    def reset_times(self, minimal: list[Any]) -> None:
        """Holds exactly the timestamps ``minimal`` (each at or after a held time)."""
        fresh = [self.at(t) for t in minimal]
        for c in self.caps:
            c.drop()
        self.caps = fresh


def keyed_routing(by_record: bool = False) -> Exchange:
    """The exchange of an arrangement: by key (:func:`route`, a ``mixed`` batch's records by
    their first fields) or by whole record (:func:`route_by_record`)."""
    return Exchange(keys=route_by_record if by_record else route)


class ArrangeVertex(Vertex):
    """Buffers updates until their times complete; seals them into the spine.

    Pending updates are kept per update time (split once, on arrival), so a frontier move
    takes the completed times without copying the updates still waiting: in a prioritized
    loop most of them wait for later priorities over many rounds.
    """

    def __init__(self, spine: Spine, whole: bool = False) -> None:
        self.spine = spine
        self.whole = whole  # keyed by whole records (arrange_by_self): any shapes may mix
        self.pending: dict[Any, list[Updates]] = {}  # update time -> its updates
        self.held = HeldTimes(spine.lex, spine.depth)
        # the pending times indexed, so that a frontier step costs the times it completes:
        # scanning every pending time at each step made n epochs in flight cost n**2, and so
        # did n priorities in flight in a prioritized loop
        self.times = TimeQueue()
        # a reader's release while the input is quiet compacts in idle activations
        spine.activator = self.activate_when_idle

    def on_idle(self) -> None:
        self.spine.compact_released()

    def dataflow_stopped(self, failure: BaseException) -> None:
        self.spine.stop(failure)  # imports of this arrangement must not wait for more

    def followers(self) -> list[Vertex]:
        """The imports of this arrangement still following it."""
        return list(self.spine.importers)

    def on_recv(self, port: int, cap: Capability, batch: Updates) -> None:
        if len(batch):
            for t, part in batch.by_time(self.spine.lex):
                self.stash(t, part)
            self.held.add(cap)

    def stash(self, t: Any, part: Any) -> None:
        """Keeps ``part`` (of what arrived) until time ``t`` completes."""
        parts = self.pending.get(t)
        if parts is None:
            parts = self.pending[t] = []
            self.times.add(t)
        parts.append(part)

    def on_frontier(self) -> None:
        spine = self.spine
        incomplete = self.frontier(0)
        frontier = lattice.frontier_rows(incomplete.frontier, spine.depth)
        if np.array_equal(frontier, spine.upper):
            return
        sealed = False
        if self.pending:
            ready = self.times.pop_ready([incomplete.frontier])  # least first
            if ready:
                # one batch per held capability: a time goes to the first held time (in row
                # order) at or before it. Every one of them covers [lower, frontier) (a
                # later batch described from the frontier would claim, as its lower and
                # since, a frontier its own times are not at or after: a recoding re-sorts
                # a batch compacted to its since, which then moved those updates to later
                # times), and the spine's upper moves with the last: all are inserted
                # before any is sent, so a reader on the stack of a send (a cut-through
                # inspect) finds every time the upper calls complete in the spine
                lower = spine.upper
                caps = sorted(self.held.caps, key=lambda c: lattice.time_row(c.time, spine.depth))
                groups: dict[int, list[Any]] = {}
                for t in ready:
                    i = next(i for i, c in enumerate(caps) if less_equal(c.time, t))
                    groups.setdefault(i, []).append(t)
                order = sorted(groups)
                batches = [
                    self.seal(groups[i], frontier, lower, last=i == order[-1]) for i in order
                ]
                sealed = True
                for i, batch in zip(order, batches, strict=True):
                    if len(batch):
                        self.send(caps[i], batch)
            # hold exactly the least times still pending: a capability taken for a message
            # whose updates all lie later must not stay behind (it would block the frontier)
            self.held.reset_times(self.times.minimal())
        if not sealed:  # no updates, but the upper moves: readers (imports) must hear of it
            spine.advance_upper(frontier)
        if not len(frontier):
            spine.idle_merge()

    def seal(self, times: list[Any], upper: np.ndarray, lower: np.ndarray, last: bool) -> Batch:
        """Inserts the updates pending at ``times`` (complete, least first) into the spine as
        one batch with frontiers ``lower`` and ``upper``, and returns it; ``last``: the last
        batch of this frontier step (the spine's upper moves with it: see
        :meth:`Spine.insert <naiad.differential.trace.Spine.insert>`)."""
        parts = [part for t in times for part in self.pending.pop(t)]
        part = parts[0].concat(*parts[1:]) if len(parts) > 1 else parts[0]
        if not self.whole:  # keyed: records of any widths (Spine.insert_records)
            return self.spine.insert_records(part, upper, lower, last)
        return self.spine.insert_updates(
            part.data[0], part.data[1:], part.times, part.diffs, upper, lower, last
        )

    def checkpoint(self) -> Any:
        return self.pending

    def restore(self, state: Any) -> None:
        self.pending = state
        self.times = TimeQueue(state)


class _ReadBatches(StatelessVertex):
    """Sends ``read(batch)`` (an ``Updates``) for every arranged batch that arrives: the
    arrangement's batches read as a collection, nothing re-arranged."""

    def __init__(self, read: Callable[[Batch], Updates]) -> None:
        self.read = read

    def on_recv(self, port: int, cap: Capability, batch: Batch) -> None:
        if len(batch):
            out = self.read(batch)
            if len(out):
                self.send(cap, out)


def handed_values(columns: Sequence[np.ndarray], n: int) -> list[Any]:
    """The values of ``n`` records whose value columns are ``columns``, as ``reduce`` hands
    them over: the one column's values, tuples of several columns' fields, ``()`` for
    records that are keys only.

    >>> handed_values([np.array([1, 2])], 2), handed_values([], 2)
    ([1, 2], [(), ()])
    """
    return records_of(columns) if len(columns) else [()] * n


def batch_updates(batch: Batch) -> Updates:
    """A batch's updates as an ``Updates`` (values decoded as the batch was written; a
    packed batch's records unpacked, one Python record each: ``mixed`` if widths differ)."""
    return column_updates(batch.decoded(), batch.times, batch.diffs, batch.packed)


def keyed_values(batch: Batch) -> list[tuple[Any, Any]]:
    """``(key, value)`` of each row of ``batch``, values as ``reduce`` hands them over (see
    :func:`handed_values`), whether the batch is packed or not."""
    keys = batch.decode(0, batch.keys).tolist()
    values = map(handed, batch.value_fields(slice(None)))
    return list(zip(keys, values, strict=True))


class Arranged:
    """A collection arranged by key on every worker: a stream of sealed batches plus the
    spine they accumulate in. Join, reduce, count and distinct read it without copying."""

    def __init__(self, stream: Any, spine: Spine, reduced: bool = False) -> None:
        self.stream = stream
        self.spine = spine
        self.reduced = reduced  # a reduction's output: read as a consolidated collection
        self._trace: TraceHandle | None = None

    @property
    def scope(self) -> Any:
        return self.stream.scope

    @property
    def trace(self) -> TraceHandle:
        """A handle for reading this arrangement later, or importing it into another dataflow.
        Holding it keeps history uncompacted: advance it or ``close()`` it when done. Taken
        while the dataflow runs, it holds only what is left: its ``logical`` frontier starts
        where the trace was compacted to then (take it when building to keep every time).
        Once it is closed, the next ``trace`` is a new handle, holding what is left then.
        Taken while building a dataflow whose build then fails, it is closed: that
        arrangement never runs (and an imported one's handle would hold its source's history
        for as long as the exception, whose traceback refers to it, is kept)."""
        if self._trace is None or self._trace.closed:
            self._trace = self.spine.reader()
            build = self.scope.build
            if not build.built:
                build.undo.append(self._trace.close)
        return self._trace

    def handle(self) -> TraceHandle:
        """A new reader's handle (used by the operators built on this arrangement)."""
        return self.spine.reader()

    def enter(self, loop: Any, name: str = "enter") -> Arranged:
        """This arrangement inside ``loop`` (a loop context nested, at any depth, inside its
        scope), without a second index: join, semijoin, antijoin, reduce, count and distinct
        in the loop read the outer spine, each outer time ``t`` seen as ``t`` at loop counter
        0 (as :meth:`Collection.enter` re-times records); readers there hold the outer trace
        back only in outer terms. ``Product`` and ``Lex`` loops alike; :meth:`enter_at`
        gives each update its own counter. Entered into a region (:meth:`Scope.region`,
        the same times), it is the same arrangement: its spine itself.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     edges = Collection.from_epochs(scope, [[((1, 2), 1), ((2, 3), 1)]])
        ...     index = edges.arrange_by_key()                 # built once, outside the loop
        ...     roots = Collection.from_epochs(scope, [[(1, 1)]])
        ...     def step(reach):
        ...         inner = index.enter(reach.scope)           # no second arrangement
        ...         hops = reach.join(inner).map(lambda r: r[1])
        ...         return reach.concat(hops).distinct()
        ...     return roots.iterate(step).changes()
        >>> naiad.run(build)
        [[(1, 0, 1), (2, 0, 1), (3, 0, 1)]]
        """
        from naiad.differential.entered import enter_arranged

        return enter_arranged(self, loop, name)

    def enter_at(self, loop: Any, at: Callable[..., Any], name: str = "enter_at") -> Arranged:
        """:meth:`enter`, each update at the innermost loop's counter ``at(*columns)`` (as
        :meth:`Collection.enter_at`: vectorized over the arranged records' decoded columns,
        key first). Nothing is stored: the counters are computed for the rows a reader
        takes, at every read (a join calls ``at`` on its matches each time), so ``at`` must
        be cheap and pure. Its errors reach the caller from the reading operator.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     pairs = Collection.from_epochs(scope, [[((1, 10), 1), ((2, 20), 1)]])
        ...     loop = scope.iterative()
        ...     entered = pairs.arrange_by_key().enter_at(loop, lambda k, v: k)
        ...     return entered.as_collection().changes()
        >>> naiad.run(build)
        [[((1, 10), Product(outer=0, inner=1), 1), ((2, 20), Product(outer=0, inner=2), 1)]]
        """
        from naiad.differential import iterate
        from naiad.differential.entered import enter_arranged

        return enter_arranged(self, loop, name, iterate.entry_counters(at, f"{name}: at(*columns)"))

    def enter_prioritized(
        self, loop: Any, priority: Callable[..., Any], name: str = "enter_prioritized"
    ) -> Arranged:
        """:meth:`enter` into a loop iterated with ``iterate(priority=...)``, each update at
        its priority's first iteration (as :meth:`Collection.enter_prioritized`; counters
        computed at every read, as for :meth:`enter_at`)."""
        from naiad.differential import iterate
        from naiad.differential.entered import enter_arranged

        counters = iterate.entry_counters(
            priority, f"{name}: priority(*columns)", iterate.PRIORITY_BITS, iterate.PRIORITY_SHIFT
        )
        return enter_arranged(self, loop, name, counters)

    def as_collection(self, name: str = "as_collection") -> Collection:
        """The records this arrangement holds, as a collection: each batch's updates, as
        they were arranged (a reduction's output is consolidated already).

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[((1, "a"), 1), ((1, "a"), 1)]])
        ...     return c.arrange_by_key().as_collection().changes()
        >>> naiad.run(build)
        [[((1, 'a'), 0, 2)]]
        """
        return read_batches(self.stream, batch_updates, name, self.reduced)

    def _read(self, read: Callable[[Batch], Updates], name: str) -> Collection:
        """The collection of ``read(batch)`` for every batch of this arrangement."""
        return read_batches(self.stream, read, name)

    def filter(self, predicate: Callable[[Any, Any], Any], name: str = "filter") -> Collection:
        """The records for which ``predicate(key, value)`` holds, read from this arrangement's
        batches as they arrive (nothing re-arranged; differential dataflow's
        ``Arranged::filter``, out as a collection). A value is what ``reduce`` hands over (as
        for :meth:`join_map`): the one field after the key, a tuple of the fields after it
        if there are several, ``()`` for a record that is a key only. One Python call per
        update.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     epochs = [[((1, "a"), 1), ((2, "b"), 1)], [((1, "a"), -1)]]
        ...     c = Collection.from_epochs(scope, epochs)
        ...     return c.arrange_by_key().filter(lambda k, v: k == 1).changes()
        >>> naiad.run(build)
        [[((1, 'a'), 0, 1), ((1, 'a'), 1, -1)]]
        """
        from naiad.differential.collection import check_function

        check_function(predicate, 2, name, "predicate(key, value)")
        what = f"filter {name!r}: predicate(key, value)"

        def keep(batch: Batch) -> Updates:
            u = batch_updates(batch)
            pairs = keyed_values(batch)
            return u.take(truth_mask([predicate(k, v) for k, v in pairs], pairs, what))

        return self._read(keep, name)

    def flat_map(
        self, f: Callable[[Any, Any], Iterable[Any]], name: str = "flat_map"
    ) -> Collection:
        """The records of ``f(key, value)`` (an iterable: none, one or several) for every
        update of this arrangement, each at the update's time with its diff, read from the
        batches as they arrive (differential dataflow's ``flat_map_ref``; values as for
        :meth:`filter`). One Python call per update.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[((1, "ab"), 1)], [((1, "ab"), -1)]])
        ...     return c.arrange_by_key().flat_map(lambda k, v: [(k, ch) for ch in v]).changes()
        >>> naiad.run(build)
        [[((1, 'a'), 0, 1), ((1, 'b'), 0, 1), ((1, 'a'), 1, -1), ((1, 'b'), 1, -1)]]
        """
        from naiad.differential.collection import check_function, iterable_result

        check_function(f, 2, name, "f(key, value)")

        def apply(batch: Batch) -> Updates:
            out: list[Any] = []
            rows: list[int] = []
            pairs = keyed_values(batch)
            for row, (k, v) in enumerate(pairs):
                for y in iterable_result(f(k, v), name, partial("f({!r}, {!r})".format, k, v)):
                    out.append(y)
                    rows.append(row)
            if out:  # one test per batch (see check_not_iterator)
                k, v = pairs[rows[0]]
                check_not_iterator(out[0], lambda: f"flat_map {name!r}: f({k!r}, {v!r}) yielded")
            return updates_from_rows(out, rows, batch.times, batch.diffs)

        return self._read(apply, name)

    def join(self, other: Arranged | Collection, name: str = "join") -> Collection:
        """``(key, *values, *other values)`` for every pair of records with equal keys.
        Inside a loop one side may be an arrangement of an enclosing scope: it enters the
        other side's loop (:meth:`enter`), whichever side it is, and the output keeps this
        side's fields first; a collection ``other`` must be in the loop (this arrangement's
        scope or one inside it: see :meth:`Collection.join`).

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     names = Collection.from_epochs(scope, [[((1, "one"), 1), ((2, "two"), 1)]])
        ...     index = names.arrange_by_key()               # outside the loop
        ...     nums = Collection.from_epochs(scope, [[(1, 1)]])
        ...     def step(x):                                 # index on the left, loop on the right
        ...         named = index.join(x).map(lambda r: r[0] + 1)
        ...         return nums.enter(x.scope).concat(named).filter(lambda n: n < 3).distinct()
        ...     return nums.iterate(step).changes()
        >>> naiad.run(build)
        [[(1, 0, 1), (2, 0, 1)]]
        """
        from naiad.differential.join import join_arranged

        left = self._toward(other, name)
        return join_arranged(left, _arranged(other, left.scope, name), name)

    def join_core(
        self,
        other: Arranged | Collection,
        f: Callable[[Any, Any, Any], Iterable[Any]],
        name: str = "join_core",
    ) -> Collection:
        """For every pair of records with equal keys, the records of ``f(key, value,
        other value)`` (an iterable: none, one or several), each at the pair's time with the
        product of their diffs (``other``, an arrangement of an enclosing scope, enters this
        one's loop, as for :meth:`join`). A value is what ``reduce`` hands over: the one field
        after the key, a tuple of the fields after it if there are several, ``()`` for a record
        that is a key only. Unlike ``join`` (columnar), this costs one Python call per matched pair.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     a = Collection.from_epochs(scope, [[((1, "x"), 1), ((2, "y"), 1)]])
        ...     b = Collection.from_epochs(scope, [[((1, 10), 1), ((1, 20), 1), ((2, 5), 1)]])
        ...     big = lambda k, s, n: [(k, s * (n // 10))] if n >= 10 else []
        ...     return a.arrange_by_key().join_core(b, big).changes()
        >>> naiad.run(build)
        [[((1, 'x'), 0, 1), ((1, 'xx'), 0, 1)]]
        """
        return self._join_with(other, f, True, name)

    def join_map(
        self,
        other: Arranged | Collection,
        f: Callable[[Any, Any, Any], Any],
        name: str = "join_map",
    ) -> Collection:
        """``f(key, value, other value)`` for every pair of records with equal keys: one
        output record per pair (see :meth:`join_core` for the values and the cost)."""
        return self._join_with(other, f, False, name)

    def _join_with(
        self, other: Arranged | Collection, f: Callable[..., Any], many: bool, name: str
    ) -> Collection:
        from naiad.differential.collection import check_function
        from naiad.differential.join import PairFunction, join_arranged

        check_function(f, 3, name, "f(key, value, other value)")
        left = self._toward(other, name)
        other = _arranged(other, left.scope, name)
        return join_arranged(left, other, name, pairs=PairFunction(f, many, name))

    def semijoin(self, other: Arranged | Collection, name: str = "semijoin") -> Collection:
        """The records whose key is in ``other`` (a collection is arranged by whole records;
        of this arrangement and an arrangement ``other``, one of an enclosing scope enters the
        other's loop; a collection ``other`` must be in this one's scope or in a loop inside
        it, as for :meth:`join`)."""
        from naiad.differential.join import join_arranged

        left = self._toward(other, name)
        keys = _arranged(other, left.scope, name, keys=True)
        return join_arranged(left, keys, name, right_values=False)

    def antijoin(self, other: Arranged | Collection, name: str = "antijoin") -> Collection:
        """The records whose key is not in ``other`` (a set; as for :meth:`semijoin`, and
        as :meth:`Collection.antijoin`), in the scope of the inner of the two sides.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     index = Collection.from_epochs(scope, [[((1, "a"), 1), ((2, "b"), 1)]])
        ...     gone = Collection.from_epochs(scope, [[(2, 1)]])
        ...     return index.arrange_by_key().antijoin(gone).changes()
        >>> naiad.run(build)
        [[((1, 'a'), 0, 1)]]
        """
        left = self._toward(other, name)
        kept = left.semijoin(other, name)
        return left.as_collection(name + ".all").concat(kept.negate(name + ".negate"), name=name)

    def _toward(self, other: Arranged | Collection, name: str) -> Arranged:
        """This arrangement entered into ``other``'s loop when this one's scope encloses it
        (the left side of a join inside a loop); otherwise this arrangement itself."""
        check_side(other, name)
        scope = other.scope
        if scope is not self.scope and encloses(self.scope, scope):
            return self.enter(scope, name + ".enter")
        return self

    def reduce(self, logic: Any, name: str = "reduce") -> Arranged:
        """Per key, ``logic(key, [(value, count), ...])`` -> ``[(output value, count), ...]``
        (as :meth:`Collection.reduce`), reading this arrangement as it is: the result is an
        arrangement of ``(key, output value)`` by key, which other operators may share.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[((1, 5), 1), ((1, 7), 1), ((2, 4), 1)]])
        ...     total = lambda key, values: [(sum(v * n for v, n in values), 1)]
        ...     return c.arrange_by_key().reduce(total).as_collection().changes()
        >>> sorted(naiad.run(build)[0])
        [((1, 12), 0, 1), ((2, 4), 0, 1)]
        """
        from naiad.differential.reduce import reduce_arranged

        return reduce_arranged(self, logic, name)

    def count(self, name: str = "count", *, total: bool | None = None) -> Collection:
        """``(*record, count)`` for every distinct record, read from this arrangement as it
        is partitioned: by key (a hot key stays on one worker; :meth:`Collection.count`
        spreads its records over the workers instead). ``total`` chooses the algorithm as
        for :meth:`Collection.count`: with ``None``, the total-order one where times are
        totally ordered (:meth:`count_total`), the generic reduce inside ``Product`` loops;
        ``True`` (refused in a ``Product`` loop) or ``False`` (the generic reduce) force it."""
        from naiad.differential.total import per_record_arranged

        return per_record_arranged(self, None, True, name, total, "count()")

    def distinct(self, name: str = "distinct", *, total: bool | None = None) -> Collection:
        """Every record with a positive count, once, read from this arrangement as it is
        partitioned: by key (``total`` as for :meth:`count`)."""
        from naiad.differential.total import per_record_arranged

        return per_record_arranged(self, None, False, name, total, "distinct()")

    def threshold(
        self, f: Callable[[np.ndarray], Any], name: str = "threshold", *, total: bool | None = None
    ) -> Collection:
        """Every record with multiplicity ``f(count)`` (``f`` maps a numpy array of non-zero
        counts to as many integers), read from this arrangement as it is partitioned: by key
        (as :meth:`count`, ``total`` too; :meth:`Collection.threshold` routes by whole record
        instead).

        >>> import naiad, numpy as np
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[("a", 3), ("b", 1)], [("b", 2)]])
        ...     return c.arrange_by_key().threshold(lambda n: np.minimum(n, 2)).changes()
        >>> naiad.run(build)
        [[('a', 0, 2), ('b', 0, 1), ('b', 1, 1)]]
        """
        from naiad.differential.collection import check_function
        from naiad.differential.total import per_record_arranged

        check_function(f, 1, name, "f(counts)")
        return per_record_arranged(self, f, False, name, total, "threshold(f)")

    def count_total(self, name: str = "count_total") -> Collection:
        """:meth:`count` with ``total=True``, for totally ordered times (integer epochs,
        ``Lex`` loops): each batch of this arrangement is read against the trace before it,
        and ``(*record, count)`` changes only at the times its record changed; no output
        arrangement, nothing pending (differential dataflow's ``count_total``; see
        :mod:`~naiad.differential.total`). The same changes as the generic reduce at every
        time. Inside a ``Product`` loop it is refused when built: use :meth:`count` there.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[("a", 2), ("b", 1)], [("a", -1)]])
        ...     return c.arrange_by_key().count_total().changes()
        >>> naiad.run(build)
        [[(('a', 2), 0, 1), (('b', 1), 0, 1), (('a', 1), 1, 1), (('a', 2), 1, -1)]]
        """
        return self.count(name, total=True)

    def distinct_total(self, name: str = "distinct_total") -> Collection:
        """:meth:`distinct` with ``total=True`` (as :meth:`count_total`)."""
        return self.distinct(name, total=True)

    def threshold_total(
        self, f: Callable[[np.ndarray], Any], name: str = "threshold_total"
    ) -> Collection:
        """Every record with multiplicity ``f(count)`` (``f`` maps a numpy array of non-zero
        counts to as many integers, one call per batch): :meth:`threshold` with
        ``total=True``, for totally ordered times (as :meth:`count_total`)."""
        return self.threshold(f, name, total=True)


def read_batches(
    stream: Any, read: Callable[[Batch], Updates], name: str, consolidated: bool = False
) -> Collection:
    """The collection of ``read(batch)`` for every batch of a stream of arranged batches
    (``consolidated``: a reduction's, see :attr:`Collection.consolidated`)."""
    from naiad.differential.collection import Collection

    node = stream.scope.add_operator(name, _ReadBatches(read), [(stream, Pipeline())])
    return Collection(stream.derive(node), consolidated)


def _into(other: Arranged, scope: Any, name: str) -> Arranged:
    """``other`` entered into ``scope`` when it is arranged in a scope enclosing it (same
    dataflow): read there without a second index. Otherwise ``other`` as it is (a join of
    unrelated scopes reports them)."""
    if other.scope is not scope and encloses(other.scope, scope):
        return other.enter(scope, name + ".enter")
    return other


def check_side(other: Any, name: str, arranged: bool = True) -> None:
    """Refuses, while the dataflow is built, what ``name`` (a join-like method, or a
    ``concat`` when not ``arranged``) got as its other side when it is no collection of
    updates (rather than fail on an attribute of it).

    >>> check_side([1], "join")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: join: the other side must be a Collection or an Arranged of this ..., not list
    """
    from naiad.differential.collection import Collection

    if isinstance(other, Collection) or (arranged and isinstance(other, Arranged)):
        return
    from naiad.operators.stream import Stream

    takes = "a Collection or an Arranged" if arranged else "a Collection"
    if isinstance(other, Arranged):
        hint = " (an arrangement: pass its .as_collection())"
    elif isinstance(other, Stream):
        hint = " (a timely stream of records, not a collection of (record, time, diff) updates)"
    elif isinstance(other, list | tuple) and any(isinstance(o, Collection) for o in other):
        hint = " (collections are passed one argument each: concat(*collections))"
    else:
        hint = ""
    shown = "None" if other is None else type(other).__name__
    raise TypeError(f"{name}: the other side must be {takes} of this dataflow, not {shown}{hint}")


def encloses(outer: Any, inner: Any) -> bool:
    """Whether scope ``outer`` is ``inner`` or one of the scopes ``inner`` is nested in."""
    while inner is not None and inner is not outer:
        inner = inner.parent
    return inner is outer


def _arranged(c: Arranged | Collection, scope: Any, name: str, keys: bool = False) -> Arranged:
    """The other side of a join whose left side is in ``scope``: an arrangement (entered when
    it is of an enclosing scope, :func:`_into`), or a collection of ``scope`` arranged by key
    (by whole records for ``keys``, a semijoin's). A collection of another scope is refused:
    only an arrangement enters a loop by itself (see :meth:`Collection.join`)."""
    if isinstance(c, Arranged):
        return _into(c, scope, name)
    if c.scope is not scope:
        from naiad.differential.join import scope_error

        raise scope_error(scope, c.scope, name)
    # named after the join, as its left side's arrangement is: an error there names it
    return c.arrange_by_self(name + ".keys") if keys else c.arrange_by_key(name + ".arrange_right")


def arrange(
    collection: Collection, name: str = "arrange", whole: bool = False, by_record: bool = False
) -> Arranged:
    """``collection`` arranged by its first column (``whole``: records are whole keys).

    ``by_record``: records are routed to their workers by whole record
    (:func:`~naiad.differential.updates.route_by_record`), not by key, and still sorted by key
    then values on each worker: a hot key spreads over the workers, but only a per-record
    reader (``count``, ``distinct``, ``threshold``) may read the result (``Spine.by_record``).
    """
    scope = collection.stream.scope
    spine = Spine(scope.depth, lattice.scope_lex(scope), name, scope.index)
    spine.whole, spine.by_record = whole, by_record
    routing = keyed_routing(by_record) if not whole else Exchange(keys=route)
    node = scope.add_operator(name, ArrangeVertex(spine, whole), [(collection.stream, routing)])
    return Arranged(collection.stream.derive(node), spine)


def check_keyed(spine: Spine, name: str, reading: str) -> None:
    """Raises ``ValueError`` naming ``name`` if ``spine`` was routed by whole record
    (``Spine.by_record``): ``reading`` (a join, an import, a per-key reduce) needs every
    record of a key on one worker."""
    if spine.by_record:
        raise ValueError(
            f"{name}: {spine.name!r} is spread over the workers by whole records "
            f"(as count, distinct and threshold of a collection arrange it), so the records "
            f"of one key may lie on several workers; {reading} needs an arrangement by key "
            "(arrange_by_key())"
        )


def _source_stopped(name: str, spine: Spine, failure: BaseException) -> DataflowStopped:
    """The error of an import of ``spine``, whose dataflow stopped before completing
    (failed, or dropped: a :class:`DataflowDropped` then, as its handles' refusals are)."""
    kind = DataflowDropped if isinstance(failure, DataflowDropped) else DataflowStopped
    error = kind(
        f"{name!r} imports {spine.name!r}, whose dataflow stopped before completing "
        f"({type(failure).__name__}: {failure}); the import cannot complete"
    )
    error.__cause__ = failure
    return error


class _ImportVertex(ImportVertex):
    """Replays a spine of another dataflow: its current batches first, then new ones, until
    the source ends or ``close`` stops it."""

    def __init__(self, spine: Spine, handle: TraceHandle, view: AdvancedSpine | None) -> None:
        self.spine = spine
        self.handle = handle
        self.view = view  # the spine as presented, its times advanced to a frontier (or None)
        self.cap: Capability | None = None
        self.queue: list[Batch] = []
        self.closed = False
        self.failure: BaseException | None = None  # what stopped the source dataflow

    def on_start(self, cap: Capability) -> None:
        self.handle.close()  # the readers built on the import hold their own handles now
        if self.spine.stopped is not None:
            raise _source_stopped(self.shard.name, self.spine, self.spine.stopped)
        self.cap = cap.retain()
        if self.view is not None:  # nothing is presented before the frontier
            self.cap.downgrade(int(self.view.frontier[:, 0].min()))
        # the imported history, compacted to what the source allows
        self.queue = list(self.spine.batches)
        self.spine.listeners.append(self._arrived)
        self.spine.importers.append(self)
        self._drain()

    def build_failed(self) -> None:
        self.handle.close()  # it would hold the source's trace uncompacted for ever

    def dropped(self, error: DataflowDropped) -> None:
        self._unfollow()  # the source goes on without this reader
        self.handle.close()
        # its progress is forgotten: a drain under way (on the source's stack, whose send
        # reached the callback that dropped this dataflow) stops rather than downgrade it,
        # which would raise in the source's operator and stop the runtime
        self.cap = None

    def source_stopped(self, failure: BaseException) -> None:
        """The source dataflow stopped before completing: its upper frontier will never
        move, so this dataflow could never complete either; it fails (in its own worker,
        at the notification asked for here) rather than wait for ever."""
        self.failure = failure
        if self.cap is not None and self.cap.valid:
            self.notify_at(self.cap)  # the capability moves into the notification

    def on_notify(self, cap: Capability) -> None:
        if self.failure is not None:
            raise _source_stopped(self.shard.name, self.spine, self.failure)

    def close(self) -> None:
        """Stops following the source, releasing the capability that keeps the importing
        dataflow from completing (the batches sent so far stand)."""
        self.closed = True
        self._drain()

    def _arrived(self, batch: Batch) -> None:
        self.queue.append(batch)
        self._drain()

    def _drain(self) -> None:
        cap = self.cap
        if cap is None or not cap.valid:
            return
        view = self.view
        queue, self.queue = self.queue, []
        for batch in queue:
            if len(batch):  # sent at its least epoch: no update of a message precedes its time
                if view is not None:
                    batch = view.view(batch)
                at = cap.delayed(max(int(batch.times[:, 0].min()), cap.time))
                self.send(at, batch)
                at.drop()  # an owned capability: held on, it would stop the frontier here
                if self.cap is not cap or not cap.valid:
                    # what the send reached (on this stack) dropped this dataflow, or closed
                    # the import: the drain that did so has finished with the capability
                    return
        upper = self.spine.upper
        if not len(upper) or self.closed:
            cap.drop()
            self._unfollow()
        elif int(upper[0, 0]) > cap.time:
            cap.downgrade(int(upper[0, 0]))
        # (called from the source's callbacks too, and from close_inputs in anyone's)
        self.shard.worker.flush_outside_activation()

    def _unfollow(self) -> None:
        """Stops hearing of the source's batches (once; it may never have started)."""
        if self in self.spine.importers:
            self.spine.listeners.remove(self._arrived)
            self.spine.importers.remove(self)


def import_trace(
    handle: TraceHandle, scope: Any, name: str = "import", *, frontier: Iterable[Any] | None = None
) -> Arranged:
    """The arrangement behind ``handle`` as an arrangement of ``scope``'s dataflow (same workers,
    root scope, integer epochs): the present contents first, then every batch sealed later,
    until the source dataflow ends or the importing one's ``close_inputs()`` stops it.

    With ``frontier`` (epochs, such as ``[5]``: differential dataflow's ``import_frontier``),
    the arrangement is presented as of that frontier: every update's time is advanced to it,
    so the history before it reads as one snapshot at the frontier, the import's output
    starts there (a new dataflow can start at a later epoch without seeing older times),
    and the readers of the import let the source compact its history up to the frontier.
    The frontier must be at or after ``handle``'s logical compaction frontier (the trace may
    be compacted that far already, so earlier times are not there to present).

    >>> import asyncio, naiad
    >>> from naiad.differential import Collection
    >>> async def main():
    ...     async with naiad.Runtime() as rt:
    ...         def source(scope):
    ...             session, c = Collection.new_input(scope)
    ...             return session, c.arrange_by_key().trace
    ...         df = rt.dataflow(source)
    ...         session, trace = df.results[0]
    ...         for epoch, word in enumerate(["a", "b", "c"]):
    ...             session.insert(word)
    ...             session.advance_to(epoch + 1)
    ...         session.remove("a")
    ...         session.close()
    ...         await df.finished()
    ...         later = rt.dataflow(lambda s: import_trace(trace, s, frontier=[2])
    ...                                       .as_collection().changes())
    ...         await later.finished()
    ...         trace.close()
    ...     return later.results[0]
    >>> sorted(asyncio.run(main()))
    [('a', 2, 1), ('a', 3, -1), ('b', 2, 1), ('c', 2, 1)]
    """
    spine = handle.spine
    if scope.depth != 0 or spine.depth != 0:
        raise ValueError(
            "import: only arrangements of root scopes (integer epochs) can be imported"
        )
    if spine.worker is not None and spine.worker != scope.index:
        # a spine holds the keys routed to its worker: read by another worker, that part of
        # the collection would be read twice and the other worker's part not at all
        raise ValueError(
            f"{name}: worker {scope.index} imports the trace of {spine.name!r} on worker "
            f"{spine.worker}; each worker imports its own worker's handle (the one its "
            "build of the source dataflow returned: source.result(scope.index))"
        )
    check_keyed(spine, name, "an import into another dataflow")
    handle.check_open(name)
    if spine.stopped is not None:
        # refused while building (nothing built, the runtime goes on): from on_start, after
        # the build, the refusal would stop the runtime, as any on_start that raises does
        raise _source_stopped(name, spine, spine.stopped)
    if handle.logical is not None and not len(handle.logical):
        # it holds nothing back, as a closed handle (see Spine.since): what is left to
        # present may be compacted past every time
        raise ValueError(
            f"{name}: the trace handle of {spine.name!r} is at the empty logical compaction "
            "frontier (set_logical_compaction([])): it reads no time any more, so the trace "
            "may be compacted past every time; import through a handle whose frontier is "
            "not empty"
        )
    rows = None if frontier is None else _import_frontier(handle, frontier, name)
    if isinstance(spine, AdvancedSpine):  # the trace of an import as of a frontier
        rows = spine.frontier if rows is None else spine.outer_rows(rows)
        spine = spine.outer
    view = None if rows is None else AdvancedSpine(spine, rows, f"{spine.name}@{name}")
    logical = handle.logical if view is None else view.outer_rows(handle.logical)
    reader = TraceHandle(spine, logical=logical)
    try:
        node = scope.add_operator(name, _ImportVertex(spine, reader, view), [])
    except BaseException:  # refused (a dataflow already running): the reader is no one's
        reader.close()
        raise
    return Arranged(scope.stream(node), spine if view is None else view)


def _import_frontier(handle: TraceHandle, frontier: Iterable[Any], name: str) -> np.ndarray:
    """The frontier of an import as of a frontier, checked: epochs (integers), not empty, and
    each at or after ``handle``'s logical compaction frontier."""
    if isinstance(frontier, int | str | bytes) or not isinstance(frontier, Iterable):
        raise TypeError(f"{name}: frontier must be a list of epochs, such as [5], not {frontier!r}")
    times = [as_time(t, 0, f"{name}: an epoch of the frontier") for t in frontier]
    if not times:
        raise ValueError(
            f"{name}: the frontier is empty (every time complete): nothing could be presented"
        )
    rows = lattice.frontier_rows([min(times)], 0)
    logical = handle.logical
    if logical is not None and not lattice.beyond(rows, logical).all():
        raise ValueError(
            f"{name}: frontier {sorted(times)} is before the trace's logical compaction "
            f"frontier {[int(r[0]) for r in logical]}: its history may be compacted that far "
            "already; import as of a frontier at or after it"
        )
    return rows
