"""Collections: streams of :class:`Updates` batches, and their input sessions.

A :class:`Collection` is a timely stream whose messages are ``Updates`` batches: the updates
of one message have times at or after the message's time (K-Pg's decoupling of logical times
from physical batches). The stateless operators here (``map``, ``filter``, ``negate``,
``concat``, ``inspect``) act on whole batches; ``consolidate`` routes updates by data, sums
equal ``(data, time)`` pairs once their time is complete, and emits only non-zero changes.

Records are one field; records that are numbers stay numeric columns, others become
``object`` columns (dictionary-encoded when sorted: one Python call per distinct value).
Routing uses :func:`stable_hash`, equal in every process (Python's ``hash`` of a string is
not), so a cluster agrees on where each record lives.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from naiad.actors.vertex import StatelessVertex, Vertex
from naiad.dataflow.channels import Exchange, Pipeline
from naiad.differential.updates import Updates, _column
from naiad.operators.input import InputHandle
from naiad.operators.probe import ProbeHandle
from naiad.operators.stream import Stream
from naiad.progress.capability import Capability
from naiad.progress.timestamp import depth


def stable_hash(value: Any) -> int:
    """A hash equal in every process (for routing records by value).

    >>> stable_hash("word") == stable_hash("word"), stable_hash(7)
    (True, 7)
    """
    if isinstance(value, bool | int):
        return int(value) & 0x7FFFFFFFFFFFFFFF
    if isinstance(value, str):
        return zlib.crc32(value.encode())
    if isinstance(value, bytes):
        return zlib.crc32(value)
    if isinstance(value, tuple):
        h = 0x345678
        for item in value:
            h = (h * 1000003) ^ stable_hash(item)
        return h & 0x7FFFFFFFFFFFFFFF
    return zlib.crc32(repr(value).encode())


def route(updates: Updates) -> np.ndarray:
    """Per update, a routing key computed from its data (vectorized for integer data)."""
    column = updates.data[0]
    if column.dtype.kind in "iub":
        return column.astype(np.int64) & 0x7FFFFFFFFFFFFFFF
    return np.fromiter((stable_hash(v) for v in column), np.int64, len(column))


class _Apply(StatelessVertex):
    def __init__(self, fn: Callable[[Updates], Updates]) -> None:
        self.fn = fn

    def on_recv(self, port: int, cap: Capability, batch: Updates) -> None:
        out = self.fn(batch)
        if len(out):
            self.send(cap, out)


class _Consolidate(Vertex):
    """Buffers updates per message time; sums them once the time is complete."""

    def __init__(self) -> None:
        self.pending: dict[Any, list[Updates]] = {}

    def on_recv(self, port: int, cap: Capability, batch: Updates) -> None:
        if cap.time not in self.pending:
            self.pending[cap.time] = []
            self.notify_at(cap)
        self.pending[cap.time].append(batch)

    def on_notify(self, cap: Capability) -> None:
        batches = self.pending.pop(cap.time)
        merged = batches[0].concat(*batches[1:]).consolidate()
        if len(merged):
            self.send(cap, merged)

    def checkpoint(self) -> Any:
        return self.pending

    def restore(self, state: Any) -> None:
        self.pending = state


class _Changes(_Consolidate):
    """Consolidates per completed time into a list (a sink)."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[tuple[Any, Any, int]] = []

    def on_notify(self, cap: Capability) -> None:
        batches = self.pending.pop(cap.time)
        merged = batches[0].concat(*batches[1:]).consolidate()
        self.out.extend(sorted(merged.to_records(), key=lambda u: (u[1], repr(u[0]))))


class Collection:
    """A collection that changes over time: a stream of ``Updates`` batches.

    >>> import naiad
    >>> from naiad.differential import Collection
    >>> def build(scope):
    ...     words = Collection.from_epochs(scope, [[("a", 1), ("b", 1)], [("a", -1)]])
    ...     return words.map(str.upper).consolidate().changes()
    >>> naiad.run(build)
    [[('A', 0, 1), ('B', 0, 1), ('A', 1, -1)]]
    """

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

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
        """Epoch ``i`` holds the ``(record, diff)`` changes of the ``i``-th list."""
        batches = []
        for epoch, changes in enumerate(epochs):
            batches.append([(record, epoch, diff) for record, diff in changes])
        stream = scope.from_epochs(batches, name)
        return Collection(stream.map_batch(lambda rows: Updates.from_records(rows)))

    # --- stateless operators -------------------------------------------------------------------
    def _apply(self, fn: Callable[[Updates], Updates], name: str) -> Collection:
        node = self.stream.scope.add_operator(name, _Apply(fn), [(self.stream, Pipeline())])
        return Collection(self.stream.derive(node))

    def map(self, f: Callable[[Any], Any], name: str = "map") -> Collection:
        """``f`` applied to every record (one Python call per record)."""
        return self._apply(
            lambda u: Updates((_column([f(x) for x in u.data[0].tolist()]),), u.times, u.diffs),
            name,
        )

    def map_columns(
        self, f: Callable[[np.ndarray], np.ndarray], name: str = "map_columns"
    ) -> Collection:
        """``f`` applied to the data column as a whole (one call per batch)."""
        return self._apply(lambda u: Updates((np.asarray(f(u.data[0])),), u.times, u.diffs), name)

    def filter(self, predicate: Callable[[Any], bool], name: str = "filter") -> Collection:
        """The records ``predicate`` accepts."""

        def keep(u: Updates) -> Updates:
            mask = np.fromiter((bool(predicate(x)) for x in u.data[0].tolist()), bool, len(u))
            return u.take(mask)

        return self._apply(keep, name)

    def negate(self, name: str = "negate") -> Collection:
        """Every change with its sign flipped."""
        return self._apply(Updates.negate, name)

    def concat(self, *others: Collection, name: str = "concat") -> Collection:
        """The sum of the collections."""
        return Collection(self.stream.concat(*(o.stream for o in others), name=name))

    def inspect(
        self, f: Callable[[tuple[Any, Any, int]], None], name: str = "inspect"
    ) -> Collection:
        """Calls ``f((record, time, diff))`` for every update; passes them on."""

        def each(_time: Any, batch: Updates) -> None:
            for update in batch.to_records():
                f(update)

        return Collection(self.stream.inspect_batch(each, name))

    # --- stateful ------------------------------------------------------------------------------
    def consolidate(self, name: str = "consolidate") -> Collection:
        """Equal records at equal times summed, zeros dropped, once each time is complete."""
        node = self.stream.scope.add_operator(
            name, _Consolidate(), [(self.stream, Exchange(keys=route))]
        )
        return Collection(self.stream.derive(node))

    # --- outputs -------------------------------------------------------------------------------
    def probe(self, name: str = "probe") -> ProbeHandle:
        return self.stream.probe(name)

    def changes(self, name: str = "changes") -> list[tuple[Any, Any, int]]:
        """A list filling with this worker's ``(record, time, diff)`` changes, consolidated
        per time, in time order, as times complete."""
        vertex = _Changes()
        self.stream.scope.add_operator(name, vertex, [(self.stream, Pipeline())], outputs=0)
        return vertex.out


class InputSession:
    """Buffers this worker's changes and sends them as one batch per flush.

    ``insert``, ``remove`` and ``update`` stage changes at the current epoch; ``flush`` sends
    what is staged; ``advance_to`` flushes and moves to a later epoch; ``close`` ends input.
    """

    def __init__(self, handle: InputHandle, scope_depth: int) -> None:
        self.handle = handle
        self._depth = scope_depth
        self._staged: list[tuple[Any, Any, int]] = []

    @property
    def epoch(self) -> Any:
        return self.handle.epoch

    def update(self, record: Any, diff: int) -> None:
        if not isinstance(diff, int | np.integer) or isinstance(diff, bool):
            raise TypeError(f"a diff is an integer, not {diff!r}")
        self._staged.append((record, self.handle.epoch, int(diff)))

    def insert(self, record: Any) -> None:
        self.update(record, 1)

    def remove(self, record: Any) -> None:
        self.update(record, -1)

    def flush(self) -> None:
        if self._staged:
            depth_ = depth(self._staged[0][1])
            self.handle.send(Updates.from_records(self._staged, depth=depth_))
            self._staged = []

    def advance_to(self, epoch: Any) -> None:
        self.flush()
        self.handle.advance_to(epoch)

    def close(self) -> None:
        self.flush()
        self.handle.close()
