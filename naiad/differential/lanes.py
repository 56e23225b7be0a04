"""Arrangements by whole record whose records may differ in shape: one spine per width.

``count``, ``distinct`` and ``threshold`` of a collection (and their ``*_total`` forms) read
records whole, so they need no key column, and any hashable records may meet in them: ints
beside pairs beside triples, in one batch or in different ones. An arrangement stores a
record's fields as columns, the same number for every record of a spine, so here each
*lane* (a record width, :func:`~naiad.differential.updates.fields_of`) has its own spine,
made on the first record of that width to reach the worker, and its own reader state: one
:class:`~naiad.differential.arrange.ArrangeVertex`, reduce or total vertex per lane,
driven by one operator (:class:`LanedVertex`). A record's lane is a function of the record
alone, and the records are routed to the workers by whole record, so each record's history
lives in one lane of one worker whatever the number of workers or processes, and the
answers are the same on every layout.

Records of one shape (the common case) make one lane: the cost over a single spine is one
dictionary lookup per message. A batch that mixes shapes (``Updates.mixed``) is split into
its widths once, on arrival (:meth:`~naiad.differential.updates.Updates.by_width`).

Invariant: every reader of the lanes gets its own vertex for a lane, with its trace handle,
as soon as the lane's spine exists (``Lanes.spine`` tells them synchronously, before any
batch is inserted), so a spine never compacts history a reader has not read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Exchange, Pipeline
from naiad.differential import lattice
from naiad.differential.arrange import ArrangeVertex, batch_updates, read_batches
from naiad.differential.reduce import Logic, reduce_vertex
from naiad.differential.total import Threshold, total_vertex
from naiad.differential.trace import Batch, Spine
from naiad.differential.updates import Updates, route_by_record
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.differential.collection import Collection


class Lanes:
    """The spines of one arrangement by whole record on one worker, one per record width,
    made on demand; ``listeners`` (the readers) hear of each new one before it holds data.

    >>> lanes = Lanes(depth=0, lex=(), name="count.arrange", worker=0)
    >>> heard = []
    >>> lanes.listeners.append(lambda width, spine: heard.append((width, spine.name)))
    >>> lanes.spine(2) is lanes.spine(2), heard
    (True, [(2, 'count.arrange')])
    """

    def __init__(self, depth: int, lex: tuple[bool, ...], name: str, worker: int) -> None:
        self.depth, self.lex, self.name, self.worker = depth, lex, name, worker
        self.spines: dict[int, Spine] = {}
        self.listeners: list[Callable[[int, Spine], None]] = []

    def spine(self, width: int) -> Spine:
        """The spine of records of ``width`` fields (new, and announced, the first time)."""
        spine = self.spines.get(width)
        if spine is None:
            spine = self.spines[width] = Spine(self.depth, self.lex, self.name, self.worker)
            spine.by_record = True  # routed by whole record: per-record readers only
            for listener in list(self.listeners):
                listener(width, spine)
        return spine


class LanedVertex(Vertex):
    """One inner vertex per lane, made by ``make(spine)`` and run inside this operator: a
    message goes to its lane's vertex, a frontier move to every lane's (in the order the
    lanes were made). The inner vertices send, read frontiers and hold capabilities as
    this operator (they share its shard)."""

    def __init__(self, lanes: Lanes, make: Callable[[Spine], Vertex]) -> None:
        self.lanes, self.make = lanes, make
        self.inner: dict[int, Vertex] = {}

    def lane(self, width: int) -> Vertex:
        """The vertex of the lane of ``width`` fields (made the first time)."""
        vertex = self.inner.get(width)
        if vertex is None:
            spine = self.lanes.spine(width)
            # a new spine is announced first, and a reader makes its vertex when it hears
            vertex = self.inner.get(width)
            if vertex is None:
                vertex = self.make(spine)
                vertex.shard = self.shard
                self.inner[width] = vertex
        return vertex

    def on_frontier(self) -> None:
        for vertex in list(self.inner.values()):
            vertex.on_frontier()

    def on_idle(self) -> None:  # (asked for by one lane or more: each finds its work done)
        for vertex in list(self.inner.values()):
            vertex.on_idle()

    def dataflow_stopped(self, failure: BaseException) -> None:
        for vertex in self.inner.values():
            stopped = getattr(vertex, "dataflow_stopped", None)
            if stopped is not None:
                stopped(failure)

    def followers(self) -> list[Vertex]:
        found: list[Vertex] = []
        for vertex in self.inner.values():
            found.extend(getattr(vertex, "followers", list)())
        return found

    def build_failed(self) -> None:
        for vertex in self.inner.values():
            vertex.build_failed()

    def checkpoint(self) -> Any:
        return {width: vertex.checkpoint() for width, vertex in self.inner.items()}

    def restore(self, state: Any) -> None:
        for width, inner in state.items():
            self.lane(width).restore(inner)


class ArrangeLanes(LanedVertex):
    """Splits arriving updates by record width and arranges each part in its lane."""

    def on_recv(self, port: int, cap: Capability, batch: Updates) -> None:
        if len(batch):
            for width, part in batch.by_width():
                self.lane(width).on_recv(port, cap, part)


class _ReadLanes(LanedVertex):
    """A reader of every lane (a reduce, a ``*_total``): its vertex for a lane is made when
    the lane's spine is (see the module's invariant); a batch goes to its width's."""

    def __init__(self, lanes: Lanes, make: Callable[[Spine], Vertex]) -> None:
        super().__init__(lanes, make)
        lanes.listeners.append(self._new_lane)

    def _new_lane(self, width: int, spine: Spine) -> None:
        self.lane(width)

    def on_recv(self, port: int, cap: Capability, batch: Batch) -> None:
        self.lane(1 + len(batch.vals)).on_recv(port, cap, batch)


class ArrangedByRecord:
    """A collection arranged by whole record in lanes (see the module docstring), for the
    per-record readers: :meth:`reduce` with a per-record logic, and :meth:`total`."""

    def __init__(self, stream: Any, lanes: Lanes) -> None:
        self.stream, self.lanes = stream, lanes

    def _read(self, name: str, make: Callable[[Spine], Vertex]) -> Any:
        node = self.stream.scope.add_operator(
            name, _ReadLanes(self.lanes, make), [(self.stream, Pipeline())]
        )
        return self.stream.derive(node)

    def reduce(self, logic: Logic, name: str) -> Collection:
        """The changes of ``logic`` (``count``, ``distinct``, ``threshold``) of every record."""
        assert logic.per_record, "a per-key logic needs an arrangement by key"
        out = self._read(name, lambda spine: reduce_vertex(spine, spine.reader(), logic, name))
        # each lane's records apart, each lane a reduction's: consolidated
        return read_batches(out, batch_updates, "as_collection", consolidated=True)

    def total(self, f: Threshold | None, counting: bool, name: str) -> Collection:
        """The changes of ``count_total`` (``counting``), ``distinct_total`` (``f`` None) or
        ``threshold_total(f)`` of every record (totally ordered times, checked by the caller)."""
        from naiad.differential.collection import Collection

        out = self._read(name, lambda spine: total_vertex(spine.reader(), f, counting, name))
        return Collection(out, consolidated=True)  # as a reduction's (see total_vertex)


def arrange_by_record(collection: Collection, name: str) -> ArrangedByRecord:
    """``collection`` routed to the workers by whole record
    (:func:`~naiad.differential.updates.route_by_record`: a hot first field spreads over
    them) and arranged in one lane per record width, any shapes mixed."""
    scope = collection.stream.scope
    lanes = Lanes(scope.depth, lattice.scope_lex(scope), name, scope.index)
    vertex = ArrangeLanes(lanes, ArrangeVertex)
    node = scope.add_operator(name, vertex, [(collection.stream, Exchange(keys=route_by_record))])
    return ArrangedByRecord(collection.stream.derive(node), lanes)
