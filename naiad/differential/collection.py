"""Collections: streams of :class:`Updates` batches, and their input sessions.

A :class:`Collection` is a timely stream whose messages are ``Updates`` batches: the updates
of one message have times at or after the message's time (K-Pg's decoupling of logical times
from physical batches). The stateless operators here (``map``, ``filter``, ``negate``,
``concat``, ``inspect``) act on whole batches; ``consolidate`` routes updates by data, sums
equal ``(data, time)`` pairs once their time is complete, and emits only non-zero changes.

Records that are tuples of one length become one column per field; numbers stay numeric
columns, other values become ``object`` columns (dictionary-encoded when sorted or arranged:
one Python dict lookup per value). A numpy date or duration column (``from_columns``,
``send_columns``, ``map_columns``) becomes an ``object`` column of its ``np.datetime64`` /
``np.timedelta64`` scalars, the values given, as the same records inserted one by one.
Keyed operators take a tuple record's first field as its key, whatever the records' widths
(an arrangement by key that meets a second width packs each record's value fields into one
tuple: ``Spine.pack``); arrangements by whole records, such as a semijoin's keys, take any
shapes, and so do ``count``, ``distinct`` and ``threshold``
(:mod:`~naiad.differential.lanes`). A float field may not be NaN (nor a date NaT): NaN is
not equal to itself, so its changes could never cancel; input sessions refuse it, and an
operator that makes one fails when the record is consolidated.
Routing uses :func:`~naiad.differential.updates.stable_hash`, equal in every process
(Python's ``hash`` of a string is not), so a cluster agrees on where each record lives.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from functools import partial
from inspect import signature as signature_of
from typing import Any, Literal, overload

import numpy as np

from naiad.actors.vertex import StatelessVertex, Vertex
from naiad.dataflow.channels import Exchange, Pipeline
from naiad.differential import iterate as iterate_mod
from naiad.differential import lattice
from naiad.differential import reduce as reduce_mod
from naiad.differential.arrange import Arranged, arrange, check_side, encloses
from naiad.differential.lanes import arrange_by_record
from naiad.differential.updates import (
    NAN_MESSAGE,
    Updates,
    check_not_iterator,
    has_nan,
    merge_updates,
    record_column,
    records_of,
    reject_nan,
    route_by_record,
    time_matrix,
    updates_from_rows,
)
from naiad.differential.view import View, ViewVertex
from naiad.operators.aggregate import iterable_result
from naiad.operators.filter import verdicts
from naiad.operators.gather import GatheredElsewhere, to_worker_zero
from naiad.operators.input import InputError, InputHandle, check_ordered, check_reiterable
from naiad.operators.probe import ProbeHandle
from naiad.operators.stream import Stream
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time_like, depth, less_equal
from naiad.transport.codec import check_sendable


class _Apply(StatelessVertex):
    def __init__(self, fn: Callable[[Updates], Updates]) -> None:
        self.fn = fn

    def on_recv(self, port: int, cap: Capability, batch: Updates) -> None:
        out = self.fn(batch)
        if len(out):
            self.send(cap, out)


class _Consolidate(Vertex):
    """Buffers updates per update time (a message may carry updates at times after its
    own); sums them once that time is complete."""

    def __init__(self, lex: tuple[bool, ...] = ()) -> None:
        self.lex = lex
        self.pending: dict[Any, list[Updates]] = {}

    def on_recv(self, port: int, cap: Capability, batch: Updates) -> None:
        for time, part in batch.by_time(self.lex):
            bucket = self.pending.get(time)
            if bucket is None:
                bucket = self.pending[time] = []
                self.notify_at(cap if time == cap.time else cap.delayed(time))
            bucket.append(part)

    def on_notify(self, cap: Capability) -> None:
        batches = self.pending.pop(cap.time)
        merged = merge_updates(batches)
        if len(merged):
            self.send(cap, merged)

    def checkpoint(self) -> Any:
        return self.pending

    def restore(self, state: Any) -> None:
        self.pending = state


class _Changes(_Consolidate):
    """Consolidates per completed time into a list (a sink)."""

    def __init__(self, lex: tuple[bool, ...] = ()) -> None:
        super().__init__(lex)
        self.out: list[tuple[Any, Any, int]] = []

    def on_notify(self, cap: Capability) -> None:
        batches = self.pending.pop(cap.time)
        merged = merge_updates(batches)
        self.out.extend(sorted(merged.to_records(self.lex), key=lambda u: (u[1], repr(u[0]))))


class _AssertEmpty(_Consolidate):
    """Fails the dataflow at the first completed time at which changes (consolidated
    upstream) arrive (a sink). ``what`` words the message from the changes at that time."""

    def __init__(
        self, lex: tuple[bool, ...], what: Callable[[Any, list[tuple[Any, int]]], str]
    ) -> None:
        super().__init__(lex)
        self.what = what

    def on_notify(self, cap: Capability) -> None:
        batches = self.pending.pop(cap.time)
        merged = merge_updates(batches)
        if len(merged):
            changes = sorted(((r, d) for r, _, d in merged.to_records()), key=repr)
            raise AssertionError(
                f"{self.name}: at time {cap.time!r}, {self.what(cap.time, changes)}"
            )


def _listed(changes: list[tuple[Any, int]], shown: int = 5) -> str:
    """The first ``shown`` of ``(record, diff)`` changes as text."""
    text = ", ".join(f"{r!r}: {d:+d}" for r, d in changes[:shown])
    more = len(changes) - shown
    return "{" + text + (f", ... ({more} more)" if more > 0 else "") + "}"


class Collection:
    """A collection that changes over time: a stream of ``Updates`` batches.

    Records are rows: a tuple of a fixed length is one column per field, anything else one
    column. Keyed operators (``arrange_by_key``, ``join``, ``reduce``, ``min`` ...) take the
    first field as the key and the others as the value.

    >>> import naiad
    >>> from naiad.differential import Collection
    >>> def build(scope):
    ...     words = Collection.from_epochs(scope, [[("a", 1), ("b", 1)], [("a", -1)]])
    ...     return words.map(str.upper).consolidate().changes()
    >>> naiad.run(build)
    [[('A', 0, 1), ('B', 0, 1), ('A', 1, -1)]]
    """

    def __init__(self, stream: Stream, consolidated: bool = False) -> None:
        self.stream = stream
        # every (record, time) in at most one update of the stream, never zero: a reduction's
        # output (one batch per time evaluated, the new output minus the old)
        self.consolidated = consolidated

    @property
    def scope(self) -> Any:
        return self.stream.scope

    # --- sources -----------------------------------------------------------------------------
    @staticmethod
    def new_input(scope: Any, name: str = "input") -> tuple[InputSession, Collection]:
        """An input session for this worker, and the collection of every worker's updates."""
        handle, stream = scope.new_input(name)
        return InputSession(handle, scope.depth), Collection(stream)

    @staticmethod
    def from_epochs(
        scope: Any, epochs: Iterable[list[tuple[Any, int]]], name: str = "from_epochs"
    ) -> Collection:
        """Epoch ``i`` holds the ``(record, diff)`` changes of the ``i``-th list. Every worker
        gives the same lists and keeps its share of each (worker ``w`` of ``n`` the changes
        at positions ``w, w + n, ...``): changes given on one worker only are partly lost."""
        check_reiterable(epochs, scope.peers, name)
        batches = []
        for epoch, changes in enumerate(epochs):
            if changes is None:
                raise TypeError(f"from_epochs: epoch {epoch} is None: no changes is []")
            check_ordered(changes, epoch, name)
            rows = []
            for change in changes:
                if not (isinstance(change, tuple) and len(change) == 2):
                    raise TypeError(
                        f"from_epochs: epoch {epoch} must hold (record, diff) pairs, not {change!r}"
                    )
                check_record(change[0])
                rows.append((change[0], epoch, change[1]))
            batches.append(rows)
        stream = scope.from_epochs(batches, name)
        return Collection(stream.map_batch(updates_of_rows))

    @staticmethod
    def from_columns(
        scope: Any,
        epochs: Iterable[tuple[np.ndarray, ...]],
        diffs: Iterable[np.ndarray | None] | None = None,
        name: str = "from_columns",
    ) -> Collection:
        """Epoch ``i`` inserts the records whose fields are the columns of ``epochs[i]`` (or
        changes them by ``diffs[i]``), split among the workers: the bulk path, no per-record
        Python work.

        >>> import naiad, numpy as np
        >>> def build(scope):
        ...     c = Collection.from_columns(scope, [(np.array([1, 2]), np.array([5, 6]))])
        ...     return c.changes()
        >>> naiad.run(build)
        [[((1, 5), 0, 1), ((2, 6), 0, 1)]]
        """
        check_reiterable(epochs, scope.peers, name)
        batches = []
        diff_list = list(diffs) if diffs is not None else None
        for epoch, raw in enumerate(epochs):
            columns, n = checked_columns(raw, f"from_columns: epoch {epoch}")
            d = diff_list[epoch] if diff_list is not None else None
            times = np.full((n, 1), epoch, dtype=np.int64)
            batches.append(Updates(columns, times, integer_diffs(d, n)))
        return Collection(scope.from_epochs(batches, name))

    @staticmethod
    def from_upserts(stream: Stream, name: str = "arrange_from_upsert") -> Arranged:
        """The arrangement by key of each key's latest value, from a timely stream of
        ``(key, value)`` upserts (``None`` deletes the key): :func:`arrange_from_upsert`.

        >>> import naiad
        >>> def build(scope):
        ...     cdc = scope.from_epochs([[("k", "a"), ("k", "b")], [("k", None)]])
        ...     return Collection.from_upserts(cdc).as_collection().changes()
        >>> naiad.run(build)  # of two values at one time, the greatest wins
        [[(('k', 'b'), 0, 1), (('k', 'b'), 1, -1)]]
        """
        from naiad.differential.upsert import arrange_from_upsert

        return arrange_from_upsert(stream, name)

    # --- stateless operators -------------------------------------------------------------------
    def _apply(self, fn: Callable[[Updates], Updates], name: str) -> Collection:
        node = self.stream.scope.add_operator(name, _Apply(fn), [(self.stream, Pipeline())])
        return Collection(self.stream.derive(node))

    def map(self, f: Callable[[Any], Any], name: str = "map") -> Collection:
        """``f`` applied to every record (one Python call per record). ``f`` returns one
        record, equal by value to what it returns for an equal record: not an iterator
        (for several records, :meth:`flat_map`; for one of several fields, a tuple).

        >>> import naiad
        >>> naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)]])
        ...           .map(lambda x: (x for x in [x])).changes())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: map 'map': f(1) returned a generator, not a record: ...
        naiad: raised in operator 'map' on worker 0 receiving a message at time 0
        """
        check_function(f, 1, name, "f(record)")

        def apply(u: Updates) -> Updates:
            records = records_of(u.data)
            out = [f(x) for x in records]
            if out:
                check_not_iterator(
                    out[0],
                    lambda: f"map {name!r}: f({records[0]!r}) returned",
                    "; for several records, use flat_map",
                )
            return Updates.of_values(out, u.times, u.diffs)

        return self._apply(apply, name)

    def map_columns(self, f: Callable[..., Any], name: str = "map_columns") -> Collection:
        """``f(*columns)`` applied to the batch's columns as a whole (one call per batch); it
        returns a column or a tuple of columns of the same length. A batch of records of mixed
        shapes is one ``object`` column of whole records; an ``object`` column ``f`` returns
        from it holds whole records too (a pair in it is two fields, as in ``map``)."""
        check_function(f, None, name, "f(*columns)")

        def apply(u: Updates) -> Updates:
            out = f(*u.data)
            cols = (
                tuple(np.asarray(c) for c in out) if isinstance(out, tuple) else (np.asarray(out),)
            )
            if not cols or any(c.ndim != 1 or len(c) != len(u) for c in cols):
                raise ValueError(returned_columns(out, cols, len(u), name))
            whole = u.mixed and len(cols) == 1  # an object column of whole records
            for i, c in enumerate(cols):
                if c.dtype == object and len(c):  # its first value only (see check_not_iterator)
                    what = "map_columns {!r}: f(*columns) returned, at row 0 of column {},"
                    check_not_iterator(
                        c[0], partial(what.format, name, i), noun="record" if whole else "value"
                    )
            if whole and cols[0].dtype == object:
                # f got a mixed batch's one column of whole records (each tuple its fields):
                # what it returns in that form means records alike, not packed tuples, or a
                # pair would be keyed whole or by its first field by what shared its batch
                return Updates.of_values(cols[0].tolist(), u.times, u.diffs)
            return Updates(tuple(map(record_column, cols)), u.times, u.diffs)

        return self._apply(apply, name)

    def flat_map(self, f: Callable[[Any], Iterable[Any]], name: str = "flat_map") -> Collection:
        """Every record replaced by the records of ``f(record)`` (with the same time and diff)."""
        check_function(f, 1, name, "f(record)")

        def apply(u: Updates) -> Updates:
            out: list[Any] = []
            ends: list[int] = []  # len(out) after each input record's outputs
            extend, end = out.extend, ends.append
            records = records_of(u.data)
            for x in records:
                extend(f(x))  # the outputs in C; a Python step per input record only
                end(len(out))
            ends_at = np.array(ends, dtype=np.int64)
            rows = np.repeat(np.arange(len(u)), ends_at - np.r_[0, ends_at[:-1]])
            if out:
                check_not_iterator(
                    out[0], lambda: f"flat_map {name!r}: f({records[rows[0]]!r}) yielded"
                )
            return updates_from_rows(out, rows, u.times, u.diffs)

        return self._apply(apply, name)

    def explode(
        self, f: Callable[[Any], Iterable[tuple[Any, int]]], name: str = "explode"
    ) -> Collection:
        """Every record replaced by the records of ``f(record)``, an iterable of ``(output
        record, multiplier)`` pairs: each output changes by the input's diff times its
        multiplier (an integer; 0 drops the output, a negative one flips the sign). One
        Python call per record, at any loop depth.

        >>> import naiad
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[(("a", 3), 1)], [(("a", 3), -1)]])
        ...     return c.explode(lambda r: [(r[0], r[1]), ("total", 1)]).consolidate().changes()
        >>> naiad.run(build)
        [[('a', 0, 3), ('total', 0, 1), ('a', 1, -3), ('total', 1, -1)]]
        """
        check_function(f, 1, name, "f(record)")

        def apply(u: Updates) -> Updates:
            out: list[Any] = []
            index: list[int] = []
            multipliers: list[int] = []
            records = records_of(u.data)
            for i, x in enumerate(records):
                for pair in iterable_result(f(x), name, partial("f({!r})".format, x)):
                    y, m = exploded(pair, x, name)
                    if m:
                        out.append(y)
                        index.append(i)
                        multipliers.append(m)
            if out:
                check_not_iterator(
                    out[0], lambda: f"explode {name!r}: f({records[index[0]]!r}) yielded"
                )
            return updates_from_rows(out, index, u.times, u.diffs, multipliers)

        return self._apply(apply, name)

    def filter(self, predicate: Callable[[Any], bool], name: str = "filter") -> Collection:
        """The records ``predicate`` accepts."""
        check_function(predicate, 1, name, "predicate(record)")
        what = f"filter {name!r}: predicate(record)"

        def keep(u: Updates) -> Updates:
            return u.take(verdicts(predicate, records_of(u.data), len(u), what))

        return self._apply(keep, name)

    def filter_columns(
        self, predicate: Callable[..., Any], name: str = "filter_columns"
    ) -> Collection:
        """The records where ``predicate(*columns)`` (a boolean array, one call per batch) holds.
        An array of another dtype is refused, not read as truth values: integers there are
        more likely the indices of the records to keep (``np.flatnonzero``'s) than a mask.

        >>> import naiad, numpy as np
        >>> def build(scope):
        ...     c = Collection.from_columns(scope, [(np.array([1, 2, 3]), np.array([1, 0, 3]))])
        ...     return c.filter_columns(lambda a, b: a == b).changes()
        >>> naiad.run(build)
        [[((1, 1), 0, 1), ((3, 3), 0, 1)]]
        """
        check_function(predicate, None, name, "predicate(*columns)")

        def keep(u: Updates) -> Updates:
            mask = np.asarray(predicate(*u.data))
            if mask.shape != (len(u),):
                raise ValueError(
                    f"filter_columns: the predicate must return one boolean per record "
                    f"({len(u)}), not an array of shape {mask.shape}"
                )
            if mask.dtype.kind != "b" and len(u):
                raise TypeError(
                    f"filter_columns {name!r}: the predicate must return a boolean mask, not "
                    f"an array of {mask.dtype} values: integers would be read as truth values, "
                    "not as the indices of the records to keep; compare (a > 0, say), or "
                    "convert (.astype(bool)) if truth values are meant"
                )
            return u.take(mask.astype(bool, copy=False))

        return self._apply(keep, name)

    def delay(self, f: Callable[[Any], Any], name: str = "delay") -> Collection:
        """Every update at time ``f(time)`` instead of its own (differential dataflow's
        ``Collection::delay``): ``f`` maps a time of this scope to one at or after it (an
        earlier one, or one of another shape, fails the dataflow with an error naming this
        operator). One call of ``f`` per distinct time of a batch; the updates leave at once,
        in their message (an update may lie later than its message), and the operators
        downstream keep each at its new time. To round epochs up to a window's end, say:

        >>> import naiad
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[("a", 1)], [("b", 1)], [("a", -1)]])
        ...     return c.delay(lambda t: t - t % 2 + 1).consolidate().changes()
        >>> naiad.run(build)
        [[('a', 1, 1), ('b', 1, 1), ('a', 3, -1)]]
        """
        from naiad.operators.delay import delayed_time

        check_function(f, 1, name, "f(time)")
        lex, scope_depth = lattice.scope_lex(self.scope), self.scope.depth

        def retime(u: Updates) -> Updates:
            rows, where = np.unique(u.times, axis=0, return_inverse=True)
            olds = [lattice.time_of(row, lex) for row in rows]
            news = [delayed_time(f(t), t, f"delay {name!r}", "f(time)") for t in olds]
            return u.retimed(time_matrix(news, scope_depth)[where.reshape(-1)])

        return self._apply(retime, name)

    def negate(self, name: str = "negate") -> Collection:
        """Every change with its sign flipped."""
        return self._apply(Updates.negate, name)

    def concat(self, *others: Collection, name: str = "concat") -> Collection:
        """The sum of the collections."""
        for other in others:
            check_side(other, name, arranged=False)
        return Collection(self.stream.concat(*(o.stream for o in others), name=name))

    def inspect(
        self, f: Callable[[tuple[Any, Any, int]], None], name: str = "inspect"
    ) -> Collection:
        """Calls ``f((record, time, diff))`` for every update; passes them on."""
        lex = lattice.scope_lex(self.scope)

        def each(_time: Any, batch: Updates) -> None:
            for update in batch.to_records(lex):
                f(update)

        return Collection(self.stream.inspect_batch(each, name))

    def inspect_batch(
        self, f: Callable[[Any, list[tuple[Any, Any, int]]], None], name: str = "inspect_batch"
    ) -> Collection:
        """Calls ``f(time, updates)`` once per message, with the message's time and its
        ``(record, time, diff)`` updates (each at or after the message's time); passes
        them on.

        >>> import naiad
        >>> seen = []
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[("a", 1), ("b", 2)], [("a", -1)]])
        ...     return c.inspect_batch(lambda t, batch: seen.append((t, batch))).changes()
        >>> _ = naiad.run(build)
        >>> seen
        [(0, [('a', 0, 1), ('b', 0, 2)]), (1, [('a', 1, -1)])]
        """
        check_function(f, 2, name, "f(time, updates)")
        lex = lattice.scope_lex(self.scope)
        return Collection(
            self.stream.inspect_batch(lambda t, batch: f(t, batch.to_records(lex)), name)
        )

    def assert_empty(self, name: str = "assert_empty") -> None:
        """Fails the dataflow with an ``AssertionError`` at the first completed time at which
        this collection is not empty, naming the time and its first records (a test helper:
        it consolidates the collection, routing records by their data).

        >>> import naiad
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[], [("a", 1), ("a", -1)], [("b", 2)]])
        ...     c.assert_empty()
        >>> naiad.run(build)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        AssertionError: assert_empty: at time 2, the collection is not empty: ... {'b': +2}
        naiad: raised in operator 'assert_empty' on worker 0 being notified at time 2
        """
        self._assert_empty(
            lambda _t, changes: f"the collection is not empty: it changes by {_listed(changes)}",
            name,
        )

    def assert_eq(self, other: Collection, name: str = "assert_eq") -> None:
        """Fails the dataflow with an ``AssertionError`` at the first completed time at which
        this collection and ``other`` differ, naming the time and the first records that
        differ, with how many more of each this collection holds than ``other`` (a test
        helper: it consolidates the difference of the two).

        >>> import naiad
        >>> def build(scope):
        ...     a = Collection.from_epochs(scope, [[(1, 1), (2, 1)], [(3, 1)]])
        ...     b = Collection.from_epochs(scope, [[(2, 1), (1, 1)], [(3, 2)]])
        ...     a.assert_eq(b)
        >>> naiad.run(build)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        AssertionError: assert_eq: at time 1, the collections differ: ... {3: -1}
        naiad: raised in operator 'assert_eq' on worker 0 being notified at time 1
        """
        if not isinstance(other, Collection):
            raise TypeError(f"{name}: other must be a Collection, not {type(other).__name__}")
        self.concat(other.negate(name + ".negate"), name=name + ".concat")._assert_empty(
            lambda _t, changes: (
                "the collections differ: this one holds more (+) or fewer (-) of these records "
                f"than the other: {_listed(changes)}"
            ),
            name,
        )

    def _assert_empty(self, what: Callable[[Any, list[tuple[Any, int]]], str], name: str) -> None:
        # consolidated where the records live; what is left (nothing, while the check
        # passes) is gathered on worker 0, which sees the times in order: the error names
        # the first time that differs, not whichever a worker reached first
        changes = self.consolidate(name + ".consolidate").stream
        vertex = _AssertEmpty(lattice.scope_lex(self.scope), what)
        self.stream.scope.add_operator(name, vertex, [(changes, to_worker_zero())], outputs=0)

    # --- stateful ------------------------------------------------------------------------------
    def consolidate(self, name: str = "consolidate") -> Collection:
        """Equal records at equal times summed, zeros dropped, once each time is complete."""
        node = self.stream.scope.add_operator(
            name,
            _Consolidate(lattice.scope_lex(self.scope)),
            [(self.stream, Exchange(keys=route_by_record))],
        )
        return Collection(self.stream.derive(node))

    def arrange_by_key(self, name: str = "arrange") -> Arranged:
        """This collection indexed by its first field (the key), shareable by readers."""
        return arrange(self, name)

    def arrange_by_self(self, name: str = "arrange_by_self") -> Arranged:
        """This collection indexed by whole records: the keys a ``semijoin`` or ``antijoin``
        looks for. A record of several fields is one key, the tuple of its fields
        (:meth:`packed`), so that it meets the records whose first field is that tuple."""
        return arrange(self.packed(name + ".whole"), name, whole=True)

    def packed(self, name: str = "packed") -> Collection:
        """Records of several fields as records of one field, the tuple of them (an ``object``
        column, dictionary-encoded when arranged: one dict lookup per record). For tuples that
        are single values, such as composite keys or tuple node ids, rather than fields.

        >>> import naiad
        >>> naiad.run(lambda s: Collection.from_epochs(s, [[((1, "a"), 1)]])  # one column
        ...           .packed().map_columns(lambda t: np.array([repr(x) for x in t])).changes())
        [[("(1, 'a')", 0, 1)]]
        """
        return self._apply(Updates.as_one_column, name)

    def join(self, other: Collection | Arranged, name: str = "join") -> Collection:
        """``(key, *values, *other values)`` for every pair of records with equal keys.

        Scopes, for every join-like method (``join``, ``join_map``, ``join_core``,
        ``semijoin``, ``antijoin``, here and on :class:`Arranged`): inside a loop, an
        arrangement of an enclosing scope on either side enters the loop by itself and is
        read there without a second index; a collection never does, on either side (as in
        differential dataflow, where ``enter`` is explicit): ``.enter(loop)`` it, which
        re-times every update, or arrange it outside (``arrange_by_key()``, or
        ``arrange_by_self()`` for keys) and pass the arrangement. Anything else in another
        scope is refused when the dataflow is built, with both scopes named.

        >>> import naiad
        >>> def build(scope):
        ...     edges = Collection.from_epochs(scope, [[((1, 2), 1), ((2, 3), 1)]])
        ...     roots = Collection.from_epochs(scope, [[(1, 1)]])
        ...     index = edges.arrange_by_key()          # edges.join(...) in the loop is refused
        ...     step = lambda r: r.join(index).map(lambda t: t[1]).concat(r).distinct()
        ...     return roots.iterate(step).changes()
        >>> naiad.run(build)
        [[(1, 0, 1), (2, 0, 1), (3, 0, 1)]]
        """
        self._check_other_scope(other, name)
        return self.arrange_by_key(name + ".arrange").join(other, name)

    def join_map(
        self,
        other: Collection | Arranged,
        f: Callable[[Any, Any, Any], Any],
        name: str = "join_map",
    ) -> Collection:
        """``f(key, value, other value)`` for every pair of records with equal keys, one
        output record per pair, at the pair's time with the product of their diffs. A value
        is what ``reduce`` hands over: the one field after the key, a tuple of the fields
        after it if there are several, ``()`` for a record that is a key only. Unlike
        ``join`` (columnar), this costs one Python call per matched pair.

        >>> import naiad
        >>> def build(scope):
        ...     a = Collection.from_epochs(scope, [[((1, "x", 2), 1)]])
        ...     b = Collection.from_epochs(scope, [[(1, 1)]])  # a key alone: its value is ()
        ...     return a.join_map(b, lambda k, v, w: (k, v, w)).changes()
        >>> naiad.run(build)
        [[((1, ('x', 2), ()), 0, 1)]]
        """
        self._check_other_scope(other, name)
        return self.arrange_by_key(name + ".arrange").join_map(other, f, name)

    def join_core(
        self,
        other: Collection | Arranged,
        f: Callable[[Any, Any, Any], Iterable[Any]],
        name: str = "join_core",
    ) -> Collection:
        """The records of ``f(key, value, other value)`` (an iterable) for every pair of
        records with equal keys (as :meth:`Arranged.join_core`)."""
        self._check_other_scope(other, name)
        return self.arrange_by_key(name + ".arrange").join_core(other, f, name)

    def semijoin(self, keys: Collection | Arranged, name: str = "semijoin") -> Collection:
        """The records whose key is in ``keys`` (multiplicities multiply: pass a set); a
        collection of ``keys`` is arranged by whole records (:meth:`arrange_by_self`), so a
        tuple in it is one composite key. Of another scope, ``keys`` must be an arrangement
        (see :meth:`join`)."""
        self._check_other_scope(keys, name)
        if isinstance(keys, Collection):
            keys = keys.arrange_by_self(name + ".keys")
        return self.arrange_by_key(name + ".arrange").semijoin(keys, name)

    def antijoin(self, keys: Collection | Arranged, name: str = "antijoin") -> Collection:
        """The records whose key is not in ``keys`` (a set; as for :meth:`semijoin`)."""
        return self.concat(self.semijoin(keys, name).negate(name + ".negate"), name=name)

    def _check_other_scope(self, other: Collection | Arranged, name: str) -> None:
        """Refuses a join-like method between this collection and ``other`` when either is a
        collection of a scope the other side is not in (an enclosing scope's, on either
        side): only an arrangement enters a loop by itself. A collection is arranged in its
        own scope; entering it, which re-times every update, is the caller's choice, as in
        differential dataflow (an arrangement made outside and entered is read without a
        second index)."""
        check_side(other, name)
        if other.scope is self.scope:
            return
        if isinstance(other, Collection) or encloses(self.scope, other.scope):
            from naiad.differential.join import scope_error

            raise scope_error(self.scope, other.scope, name)

    def reduce(
        self,
        f: Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]],
        name: str = "reduce",
    ) -> Collection:
        """Per key, ``f(key, [(value, count), ...])`` -> ``[(output value, count), ...]``; the
        result holds ``(key, output value)`` records."""
        return self.arrange_by_key(name + ".arrange").reduce(f, name).as_collection()

    def _logic(self, logic: Any, name: str) -> Collection:
        return self.arrange_by_key(name + ".arrange").reduce(logic, name).as_collection()

    def _per_record(
        self,
        f: Callable[[np.ndarray], Any] | None,
        counting: bool,
        name: str,
        total: bool | None,
        instead: str,
    ) -> Collection:
        """``count`` (``counting``), ``distinct`` (``f`` None) or ``threshold(f)`` of this
        collection routed by whole records (the records of one key spread over the workers,
        see :meth:`count`), by the algorithm :func:`~naiad.differential.total.takes_total`
        picks for ``total``."""
        from naiad.differential.total import takes_total

        if takes_total(self.scope, total, name, instead):  # checked before anything is built
            return arrange_by_record(self, name + ".arrange").total(f, counting, name)
        logic = reduce_mod.CountLogic() if counting else reduce_mod.ThresholdLogic(f)
        return arrange_by_record(self, name + ".arrange").reduce(logic, name)

    def count(self, name: str = "count", *, total: bool | None = None) -> Collection:
        """``(*record, count)`` for every distinct record.

        Records are routed to the workers by their whole record, not by their first field
        (as in differential dataflow), so a hot first field (a hub node's edges) spreads over
        every worker; ``count``, ``distinct`` and ``threshold`` of an :class:`Arranged` read
        it as it is partitioned, by key. Records may differ in shape, in one batch or between
        batches: each width of record is arranged apart (:mod:`~naiad.differential.lanes`).

        Two algorithms give the same changes at every time. Where times are totally ordered
        (integer epochs, ``Lex`` loops outside ``Product`` loops) ``total=None`` picks the
        total-order one (:mod:`~naiad.differential.total`, differential dataflow's
        ``count_total``: each input batch read against the trace before it, no output
        arrangement, nothing waiting for the frontier; about twice as fast); inside a
        ``Product`` loop, the generic reduce (an output arrangement, each time evaluated once
        the frontier passes it). ``total=True`` demands the first (refused in a ``Product``
        loop, as :meth:`count_total` is), ``total=False`` the second.

        >>> import naiad
        >>> naiad.run(lambda s: Collection.from_epochs(s, [[((0, "a"), 2), ((0, "b"), 1)]])
        ...           .count().changes())
        [[((0, 'a', 2), 0, 1), ((0, 'b', 1), 0, 1)]]
        >>> naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1), ((1, 2), 1), ((1, 2, 3), 2)]])
        ...           .count(total=False).changes())
        [[((1, 1), 0, 1), ((1, 2, 1), 0, 1), ((1, 2, 3, 2), 0, 1)]]
        """
        return self._per_record(None, True, name, total, "count()")

    def distinct(self, name: str = "distinct", *, total: bool | None = None) -> Collection:
        """Every record with a positive count, once (routed by whole record, and ``total``
        choosing the algorithm, as for :meth:`count`)."""
        return self._per_record(None, False, name, total, "distinct()")

    def threshold(
        self, f: Callable[[np.ndarray], Any], name: str = "threshold", *, total: bool | None = None
    ) -> Collection:
        """Every record with multiplicity ``f(count)``; ``f`` maps a numpy array of non-zero
        counts to as many integers (routed by whole record, and ``total`` choosing the
        algorithm, as for :meth:`count`)."""
        check_function(f, 1, name, "f(counts)")
        return self._per_record(f, False, name, total, "threshold(f)")

    def count_total(self, name: str = "count_total") -> Collection:
        """:meth:`count` with ``total=True``, as differential dataflow's ``count_total``: for
        totally ordered times (integer epochs, ``Lex`` loops), the same changes at every time,
        computed from the input arrangement alone (each batch against the trace before it),
        with no output arrangement and nothing waiting for the frontier. Refused when built
        inside a ``Product`` loop (use :meth:`count`).

        >>> import naiad
        >>> naiad.run(lambda s: Collection.from_epochs(s, [[("a", 2)], [("a", 1), ("b", 1)]])
        ...           .count_total().changes())
        [[(('a', 2), 0, 1), (('a', 2), 1, -1), (('a', 3), 1, 1), (('b', 1), 1, 1)]]
        """
        return self.count(name, total=True)

    def distinct_total(self, name: str = "distinct_total") -> Collection:
        """:meth:`distinct` with ``total=True`` (as :meth:`count_total`)."""
        return self.distinct(name, total=True)

    def threshold_total(
        self, f: Callable[[np.ndarray], Any], name: str = "threshold_total"
    ) -> Collection:
        """:meth:`threshold` with ``total=True`` (as :meth:`count_total`): every record with
        multiplicity ``f(count)``, ``f`` called once per batch on the non-zero counts."""
        return self.threshold(f, name, total=True)

    def sum(self, name: str = "sum") -> Collection:
        """``(key, sum of value x multiplicity)`` for ``(key, number)`` records."""
        return self._logic(reduce_mod.SumLogic(), name)

    def min(self, name: str = "min") -> Collection:
        """``(key, least value)`` per key: ``(key, *fields)`` of the least value. A key's
        values of several widths compare as tuples of their fields, as one width's columns
        sort (``(1,)`` before ``(1, 0)`` before ``(2,)``).

        >>> import naiad
        >>> naiad.run(lambda s: Collection.from_epochs(s, [[((1, 2, 0), 1), ((1, 1), 1)]])
        ...           .min().changes())
        [[((1, 1), 0, 1)]]
        """
        return self._logic(reduce_mod.ExtremeLogic(largest=False), name)

    def max(self, name: str = "max") -> Collection:
        """``(key, greatest value)`` per key (values compared as for :meth:`min`)."""
        return self._logic(reduce_mod.ExtremeLogic(largest=True), name)

    # --- loops ---------------------------------------------------------------------------------
    def enter(self, loop: Any, name: str = "enter") -> Collection:
        """This collection inside loop context ``loop`` (constant across iterations), or inside
        a region (:meth:`Scope.region`: unchanged, with the same times), nested at any depth
        inside its scope; its own scope is refused (there it needs no ``enter``), as
        :meth:`Arranged.enter` refuses it.

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[(1, 1)]])
        ...     return c.enter(scope.iterative()).leave().changes()
        >>> naiad.run(build)
        [[(1, 0, 1)]]
        >>> naiad.run(lambda scope: Collection.from_epochs(scope, [[(1, 1)]]).enter(scope))
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: enter: 'dataflow' is the collection's own scope; a collection enters a ...
        """
        return iterate_mod.enter(self, loop, name)

    def enter_at(
        self, loop: Any, at: Callable[..., np.ndarray], name: str = "enter_at"
    ) -> Collection:
        """Inside ``loop``, each update entering at counter ``at(*columns)``: vectorized,
        one integer in ``[0, 2**62)`` per record, or one for all (integral floats count as
        their integers; other floats, other shapes and counters beyond that range, which
        would leave the loop no room to iterate, raise an error naming ``at``)."""
        counters = iterate_mod.entry_counters(at, f"{name}: at(*columns)")
        return iterate_mod.enter(self, loop, name, counters)

    def enter_prioritized(
        self, loop: Any, priority: Callable[..., np.ndarray], name: str = "enter_prioritized"
    ) -> Collection:
        """Inside a loop iterated with ``iterate(priority=...)``, each update entering at its
        priority (as ``iterate`` enters its starting collection): for collections the body
        brings in alongside the variable."""
        return iterate_mod.enter_prioritized(self, loop, priority, name)

    def leave(self, name: str = "leave") -> Collection:
        """This collection outside its loop context (its accumulation over all iterations)."""
        return iterate_mod.leave(self, name)

    def iterate(
        self,
        body: Callable[[Collection], Collection],
        priority: Callable[..., np.ndarray] | None = None,
        name: str = "iterate",
    ) -> Collection:
        """The fixed point of ``body`` starting from this collection (seed 002's FixedPoint):
        ``body`` gets the iteration variable (inside a new loop) and returns its next value.
        With ``priority`` (a vectorized map of the columns to integers in ``[0, 2**30)``,
        one per record or one for all; integral floats count as their integers, other floats
        are refused, never truncated) records enter in priority order, each priority
        iterated to its fixed point before the next: the loop counter is (priority,
        iteration) ordered lexicographically, in product with the epoch (seed 002 §5.1.2)."""
        return iterate_mod.iterate(self, body, priority, name)

    # --- outputs -------------------------------------------------------------------------------
    def probe(self, name: str = "probe") -> ProbeHandle:
        """A handle on the frontier of this collection's stream: ``await probe.wait(t)``
        returns once no change at or before time ``t`` can come any more (every change up
        to ``t`` has been computed), ``probe.less_than(t)`` tells whether some may."""
        return self.stream.probe(name)

    @overload
    def changes(
        self, name: str = "changes", *, gather: Literal[False] = False
    ) -> list[tuple[Any, Any, int]]: ...

    @overload
    def changes(
        self, name: str = "changes", *, gather: bool
    ) -> list[tuple[Any, Any, int]] | GatheredElsewhere: ...

    def changes(
        self, name: str = "changes", *, gather: bool = False
    ) -> list[tuple[Any, Any, int]] | GatheredElsewhere:
        """A list filling with this worker's ``(record, time, diff)`` changes, consolidated
        per time, in time order, as times complete. With ``gather``, every worker's changes
        go to worker 0, whose list holds the collection's changes consolidated across
        workers; the other workers' results refuse to be read
        (:class:`~naiad.operators.gather.GatheredElsewhere`).

        >>> import naiad
        >>> from naiad.differential import Collection
        >>> def build(scope):
        ...     c = Collection.from_epochs(scope, [[("a", 1), ("b", 1)], [("a", -1)]])
        ...     return c.map(str.upper).changes(gather=True)
        >>> naiad.run(build, workers=2)[0]
        [('A', 0, 1), ('B', 0, 1), ('A', 1, -1)]
        """
        if not isinstance(gather, bool):
            raise TypeError(f"changes {name!r}: gather must be True or False, not {gather!r}")
        vertex = _Changes(lattice.scope_lex(self.scope))
        pact = to_worker_zero() if gather else Pipeline()
        self.stream.scope.add_operator(name, vertex, [(self.stream, pact)], outputs=0)
        if gather and self.scope.index != 0:
            return GatheredElsewhere(f"changes {name!r}", self.scope.index, "changes(gather=True)")
        return vertex.out

    def view(self, gather: bool = True, name: str = "view", history: bool = True) -> View:
        """A materialized view: the collection's contents at completed times (``await
        view.wait(time)``, then ``view.at(time)``). With ``gather`` every worker's records
        are sent to worker 0's view, and the other workers' views refuse to be read
        (otherwise each worker's view holds its share).

        The view compacts the updates it holds to its compaction frontier (``view.since``),
        answering only at times in advance of it (until a frontier is set, nothing can be
        compacted, and it only appends what arrives). With
        ``history`` (the default) every completed time stays readable until
        ``view.set_logical_compaction(frontier)`` gives earlier times up; with
        ``history=False`` the frontier follows the view's input, keeping the latest complete
        epoch (and later times) readable: memory then follows the records alive, not the
        history. See :class:`~naiad.differential.view.View`."""
        if not isinstance(history, bool):
            raise TypeError(f"view {name!r}: history must be True or False, not {history!r}")
        view = View(lattice.scope_lex(self.scope), name, history, gathered=gather)
        pact = to_worker_zero() if gather else Pipeline()
        self.stream.scope.add_operator(name, ViewVertex(view), [(self.stream, pact)], outputs=0)
        return view


def integer_diffs(diffs: Any, n: int) -> np.ndarray:
    """``n`` diffs as int64 (``None``: 1 each); a diff must be an integer, never rounded.

    >>> integer_diffs([1.5], 1)
    Traceback (most recent call last):
    ...
    TypeError: diffs are integers, not float64 values
    """
    if diffs is None:
        return np.ones(n, np.int64)
    d = np.asarray(diffs)
    if d.ndim != 1:  # (a scalar has no len(), and is not one diff per record)
        raise ValueError(f"{n} records need {n} diffs, not an array of shape {d.shape}")
    if len(d) and d.dtype.kind not in "iu":
        kind = "integers beyond int64" if d.dtype.kind == "O" else f"{d.dtype} values"
        raise TypeError(f"diffs are integers, not {kind}")
    if len(d) and d.dtype.kind == "u" and int(d.max()) >= 2**63:
        # the cast below would wrap it around to a negative diff
        raise OverflowError(f"diff {int(d.max())} is beyond int64, the type of every multiplicity")
    if d.shape != (n,):
        raise ValueError(f"{n} records need {n} diffs, not an array of shape {d.shape}")
    return d.astype(np.int64)


def returned_columns(out: Any, cols: tuple[np.ndarray, ...], n: int, name: str) -> str:
    """The error for what ``map_columns``'s function returned for a batch of ``n`` records,
    ``out`` (read as the columns ``cols``), when it is not one or more columns of ``n``
    values each.

    >>> returned_columns([1, 2], (np.array([[1], [2]]),), 2, "m")  # doctest: +ELLIPSIS
    "map_columns 'm': f(*columns) must return a column, or a tuple of columns, ... (a list is..."
    """
    got = (
        "an empty tuple"
        if not cols
        else ", ".join(
            "None" if c is None else f"{type(c).__name__} of shape {a.shape}"
            for c, a in zip(out if isinstance(out, tuple) else (out,), cols, strict=True)
        )
    )
    hint = " (a list is one column: return a tuple of columns)" if isinstance(out, list) else ""
    return (
        f"map_columns {name!r}: f(*columns) must return a column, or a tuple of columns, "
        f"of one value per record ({n}, one-dimensional), not {got}{hint}"
    )


def check_function(f: Any, arity: int | None, name: str, call: str) -> None:
    """Refuses, while the dataflow is built, a function argument that is not callable or
    cannot take ``arity`` positional arguments (a builtin whose signature is unknown passes;
    ``None``: any number, one per column, unknown while building).

    >>> check_function(len, 1, "explode", "f(record)")
    >>> check_function(lambda k, v: v, 3, "join_map", "f(key, left, right)")
    Traceback (most recent call last):
    ...
    TypeError: join_map: f(key, left, right) is called with 3 arguments, but <lambda> takes (k, v)
    """
    if not callable(f):
        raise TypeError(f"{name}: {call.partition('(')[0]} must be a function, not {f!r}")
    if arity is None:
        return
    try:
        signature = signature_of(f)
    except (TypeError, ValueError):  # some builtins and extension types have none
        return
    try:
        signature.bind(*range(arity))
    except TypeError:
        label = getattr(f, "__name__", type(f).__name__)
        raise TypeError(
            f"{name}: {call} is called with {arity} argument{'s' if arity > 1 else ''}, but "
            f"{label} takes {signature}"
        ) from None


def exploded(pair: Any, record: Any, name: str) -> tuple[Any, int]:
    """An ``(output record, multiplier)`` pair of ``explode``, checked: the multiplier is an
    integer within int64 (a bool or a float is refused rather than counted).

    >>> exploded(("a", 2), "x", "explode")
    ('a', 2)
    >>> exploded(("a", 0.5), "x", "explode")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: explode: f('x') must yield (record, multiplier) pairs with integer ...
    """
    if type(pair) is tuple and len(pair) == 2:
        y, m = pair
        if type(m) is int or (isinstance(m, numbers.Integral) and not isinstance(m, bool)):
            m = int(m)
            if -(2**63) <= m < 2**63:
                return y, m
            raise OverflowError(f"{name}: multiplier {m} for {y!r} is beyond int64")
    raise TypeError(
        f"{name}: f({record!r}) must yield (record, multiplier) pairs with integer "
        f"multipliers, not {pair!r}"
    )


def check_record(record: Any) -> None:
    """Refuses a record no collection can hold, before it is staged: an unhashable one (it
    could not be routed, sorted into an arrangement or consolidated: the dataflow would fail
    later, far from the call), an iterator (hashable, but equal only to itself: no
    retraction could cancel it; see :func:`check_not_iterator`) or one with a NaN field.

    >>> check_record((1, [2]))
    Traceback (most recent call last):
    ...
    TypeError: record (1, [2]) is not hashable (unhashable type: 'list'): records must be hashable
    """
    try:
        hash(record)
    except TypeError as e:
        raise TypeError(
            f"record {record!r} is not hashable ({e}): records must be hashable"
        ) from None
    check_not_iterator(record, lambda: f"record {record!r} is")
    if has_nan(record):
        raise ValueError(f"record {record!r} has a NaN field: {NAN_MESSAGE}")


def checked_columns(
    raw: Iterable[Any], what: str, sendable: bool = False
) -> tuple[tuple[np.ndarray, ...], int]:
    """Record columns as arrays, and their length; refuses none, and columns that are not
    one-dimensional arrays of one length holding hashable values without NaN (what
    :func:`check_record` asks of a record, checked per column), and that the codec can
    send to another process if ``sendable``."""
    # numbers stay numeric columns; strings, bytes and dates become object columns (a numpy
    # string column beside integers would turn them into strings when merged)
    columns = tuple(record_column(np.asarray(c)) for c in raw)
    if not columns:
        raise ValueError(f"{what}: a record needs at least one column")
    n = len(columns[0]) if columns[0].ndim else -1
    for i, c in enumerate(columns):
        if c.ndim != 1 or len(c) != n:
            raise ValueError(
                f"column {i} has shape {c.shape}: every column must be one-dimensional, of "
                f"the same length ({n})"
            )
        if c.dtype == object:
            values = c.tolist()
            checks = [check_record]
            if sendable:
                try:  # one encoding of the whole column; value by value only to name the row
                    check_sendable(values)
                except TypeError:
                    checks.append(check_sendable)
            for row, value in enumerate(values):
                try:
                    for check in checks:
                        check(value)
                except (TypeError, ValueError) as e:
                    raise type(e)(f"row {row} of column {i}: {e}") from None
    reject_nan(columns)
    return columns, n


def updates_of_rows(rows: list[tuple[Any, Any, int]]) -> Updates:
    """``(record, time, diff)`` triples as a batch (records split into columns)."""
    if not rows:
        return staged_updates([], [], [], 0)
    records, times, diffs = map(list, zip(*rows, strict=True))
    return staged_updates(records, times, diffs, depth(times[0]))


def staged_updates(records: list[Any], times: list[Any], diffs: list[Any], depth: int) -> Updates:
    """Records, their times (of ``depth`` loop levels) and diffs, three lists of one length,
    as a batch; the time matrix is one row repeated when every time is one (a session's
    epoch: no conversion per record).

    >>> staged_updates(["a", "b"], [3, 3], [1, -1], 0).to_records()
    [('a', 3, 1), ('b', 3, -1)]
    """
    n = len(records)
    if n and times.count(times[0]) == n:  # C-speed: one epoch's times are one object
        matrix = time_matrix(times[:1], depth).repeat(n, axis=0)
    else:
        matrix = time_matrix(times, depth)
    return Updates.of_values(records, matrix, integer_diffs(diffs, n))


_DIFF_MIN, _DIFF_MAX = -(2**63), 2**63 - 1
# record (and tuple field) types that pass check_record and check_sendable without a look:
# hashable, never NaN, sendable (an int at any size, any str: a lone surrogate crosses too)
_TRUSTED: frozenset[type] = frozenset({int, str})


def checked_diff(diff: Any) -> int:
    """A diff as an int, refused unless it is an integer (not a bool) within int64: flush
    would fail on it, and keep failing.

    >>> checked_diff(True)
    Traceback (most recent call last):
    ...
    TypeError: a diff is an integer, not True
    """
    if not isinstance(diff, int | np.integer) or isinstance(diff, bool):
        raise TypeError(f"a diff is an integer, not {diff!r}")
    if not _DIFF_MIN <= diff <= _DIFF_MAX:
        raise OverflowError(f"diff {diff} is beyond int64, the type of every multiplicity")
    return int(diff)


class InputSession:
    """Buffers this worker's changes and sends them as one batch per flush.

    ``insert``, ``remove`` and ``update`` stage changes at the current epoch, ``update_at``
    at a later time; ``flush`` sends what is staged; ``advance_to`` flushes and moves to a
    later epoch; ``close`` ends input.
    """

    def __init__(self, handle: InputHandle, scope_depth: int) -> None:
        self.handle = handle
        self._depth = scope_depth
        # staged updates, one entry each in three lists (no tuple per update)
        self._records: list[Any] = []
        self._times: list[Any] = []
        self._diffs: list[int] = []
        handle.before_close.append(self.flush)  # closed by the runtime at its end, say

    @property
    def epoch(self) -> Any:
        return self.handle.epoch

    def update(self, record: Any, diff: int) -> None:
        """Stages a change of ``record``'s multiplicity by ``diff`` at the current epoch."""
        # the hot path of per-record input: checks inline, one Python call when the record
        # is an int (or a str) and the diff an int within int64
        epoch = self.handle.epoch
        if diff.__class__ is not int or not _DIFF_MIN <= diff <= _DIFF_MAX:
            diff = checked_diff(diff)
        if record.__class__ not in _TRUSTED:
            self._check(record)
        self._records.append(record)
        self._times.append(epoch)
        self._diffs.append(diff)

    def update_at(self, record: Any, time: Any, diff: int) -> None:
        """Stages a change of ``record``'s multiplicity by ``diff`` at ``time``, which must
        not be earlier than the current epoch. It is sent with the next ``flush`` (or
        ``advance_to``) in a message at the current epoch, holding its own time: the
        capability of the session's epoch covers every later time, and downstream operators
        keep each update at its time. The session may then advance past ``time``.

        >>> import asyncio, naiad
        >>> async def main():
        ...     async with naiad.Runtime() as rt:
        ...         def build(scope):
        ...             session, collection = Collection.new_input(scope)
        ...             return session, collection.changes()
        ...         session, out = rt.dataflow(build).results[0]
        ...         session.update_at("later", 3, 1)
        ...         session.insert("now")
        ...         session.advance_to(5)
        ...     return out
        >>> asyncio.run(main())
        [('now', 0, 1), ('later', 3, 1)]
        """
        epoch = self.handle.epoch
        at = self._time(time, "update_at's time")
        if not less_equal(epoch, at):
            raise InputError(
                f"input {self.handle.name!r}: update_at at time {at!r}, before the session's "
                f"epoch {epoch!r} (times before it may already be complete)"
            )
        self._stage(record, at, diff)

    def _time(self, time: Any, what: str) -> Any:
        """``time`` as a time of this session's scope, refused (``ValueError``) beyond the
        int64 range of a collection's times: no update could be sent at it."""
        # of the scope's own time class at every level: a Lex time in a Product loop (or the
        # reverse) is refused, as advance_to refuses it, not converted
        at = as_time_like(time, self.handle.epoch, f"input {self.handle.name!r}: {what}")
        try:
            time_matrix([at], self._depth)
        except OverflowError:
            raise ValueError(
                f"input {self.handle.name!r}: {what} {at!r} is beyond the int64 range of a "
                "collection's times"
            ) from None
        return at

    def _stage(self, record: Any, time: Any, diff: Any) -> None:
        diff = checked_diff(diff)
        self._check(record)
        self._records.append(record)
        self._times.append(time)
        self._diffs.append(diff)

    def _check(self, record: Any) -> None:
        if record.__class__ is tuple and _TRUSTED.issuperset(map(type, record)):
            return  # fields of trusted types (in C): hashable, never NaN, sendable
        check_record(record)
        if self.handle.spans_processes:
            check_sendable(record)  # flush would fail on it, after staging what came before

    def insert(self, record: Any) -> None:
        """Stages one more ``record`` at the current epoch (``update(record, 1)``)."""
        self.update(record, 1)

    def remove(self, record: Any) -> None:
        """Stages one less ``record`` at the current epoch (``update(record, -1)``)."""
        self.update(record, -1)

    def flush(self) -> None:
        if self._records:
            self.handle.send(staged_updates(self._records, self._times, self._diffs, self._depth))
            self._records, self._times, self._diffs = [], [], []

    def send_columns(
        self, columns: tuple[np.ndarray, ...], diffs: np.ndarray | None = None
    ) -> None:
        """Sends records given as columns (one array per field) at the current epoch, with
        multiplicities ``diffs`` (1 each by default): the bulk path, no per-record work for
        numeric columns (an ``object`` column's values are checked one by one)."""
        columns, n = checked_columns(columns, "send_columns", self.handle.spans_processes)
        d = integer_diffs(diffs, n)
        self.flush()
        times = time_matrix([self.handle.epoch], self._depth).repeat(n, axis=0)
        self.handle.send(Updates(columns, times, d))

    def advance_to(self, epoch: Any) -> None:
        # checked first: at an epoch beyond int64 no update could ever be flushed (nor the
        # session closed with one staged)
        self._time(epoch, "an epoch")
        self.flush()
        self.handle.advance_to(epoch)

    def close(self) -> None:
        self.flush()
        self.handle.close()
