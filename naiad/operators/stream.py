"""``Stream``: the user-facing stream, with one method per operator.

Each method is a thin wrapper over the operator's own module (one operator per file, as in
timely's ``dataflow/operators/``), so the runtime surface stays small.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pact
from naiad.dataflow.scope import StreamCore
from naiad.operators import accumulate as accumulate_op
from naiad.operators import aggregate as aggregate_op
from naiad.operators import branch as branch_op
from naiad.operators import broadcast as broadcast_op
from naiad.operators import capture as capture_op
from naiad.operators import concat as concat_op
from naiad.operators import delay as delay_op
from naiad.operators import exchange as exchange_op
from naiad.operators import filter as filter_op
from naiad.operators import flat_map as flat_map_op
from naiad.operators import generic as generic_op
from naiad.operators import inspect as inspect_op
from naiad.operators import loops as loops_op
from naiad.operators import map as map_op
from naiad.operators import ok_err as ok_err_op
from naiad.operators import partition as partition_op
from naiad.operators import probe as probe_op
from naiad.operators import reclock as reclock_op
from naiad.operators import state_machine as state_machine_op
from naiad.operators import subscribe as subscribe_op
from naiad.operators.gather import GatheredElsewhere

if TYPE_CHECKING:
    from naiad.operators.scope import Scope

Key = Callable[[Any], int] | Pact | None


class Stream(StreamCore):
    """A stream of timestamped batches, built identically on every worker."""

    scope: Scope

    def map(self, f: Callable[[Any], Any], name: str = "map") -> Stream:
        """``f`` applied to every record."""
        return map_op.map_records(self, f, name)

    def map_batch(self, f: Callable[[Any], Any], name: str = "map_batch") -> Stream:
        """``f`` applied to every batch, one call per batch (numpy-friendly)."""
        return map_op.map_batch(self, f, name)

    def flat_map(self, f: Callable[[Any], Iterable[Any]], name: str = "flat_map") -> Stream:
        """Every record replaced by the records of ``f(record)``."""
        return flat_map_op.flat_map(self, f, name)

    def filter(self, predicate: Callable[[Any], bool], name: str = "filter") -> Stream:
        """The records ``predicate`` accepts."""
        return filter_op.filter_records(self, predicate, name)

    def exchange(
        self,
        key: Callable[[Any], int] | None = None,
        *,
        keys: Callable[[Any], Any] | None = None,
        name: str = "exchange",
    ) -> Stream:
        """Records routed to worker ``key(record) % peers`` (or ``keys(batch)`` per batch)."""
        return exchange_op.exchange(self, key, keys=keys, name=name)

    def broadcast(self, name: str = "broadcast") -> Stream:
        """Every record on every worker (each worker receives every batch)."""
        return broadcast_op.broadcast(self, name)

    def concat(self, *others: Stream, name: str = "concat") -> Stream:
        """The records of this stream and of ``others``."""
        return concat_op.concat(self, *others, name=name)

    def branch(
        self, predicate: Callable[[Any], bool], name: str = "branch"
    ) -> tuple[Stream, Stream]:
        """``(records where predicate holds, the others)``."""
        return branch_op.branch(self, predicate, name)

    def branch_when(
        self, predicate: Callable[[Any], bool], name: str = "branch_when"
    ) -> tuple[Stream, Stream]:
        """``(batches at times where predicate(time) holds, the others)``, one call per
        batch."""
        return branch_op.branch_when(self, predicate, name)

    def ok_err(
        self, f: Callable[[Any], tuple[str, Any]], name: str = "ok_err"
    ) -> tuple[Stream, Stream]:
        """``(values, errors)``: ``f(record)`` returns ``("ok", value)`` or
        ``("err", error)``."""
        return ok_err_op.ok_err(self, f, name)

    def partition(
        self, parts: int, route: Callable[[Any], int], name: str = "partition"
    ) -> list[Stream]:
        """``parts`` streams: record ``r`` goes to stream ``route(r)``, an int in
        ``range(parts)``."""
        return partition_op.partition(self, parts, route, name)

    def partition_batch(
        self, parts: int, routes: Callable[[Any], Any], name: str = "partition_batch"
    ) -> list[Stream]:
        """``parts`` streams split by ``routes(batch)``: one part index per record, one call
        per batch (numpy batches stay arrays)."""
        return partition_op.partition_batch(self, parts, routes, name)

    def delay(self, f: Callable[[Any, Any], Any], name: str = "delay") -> Stream:
        """Each record re-timed to ``f(record, time)`` (at or after ``time``), delivered once
        the input has passed its new time."""
        return delay_op.delay(self, f, name)

    def delay_batch(self, f: Callable[[Any], Any], name: str = "delay_batch") -> Stream:
        """Each batch re-timed, whole, to ``f(time)`` (at or after ``time``)."""
        return delay_op.delay_batch(self, f, name)

    def reclock(self, clock: Stream, name: str = "reclock") -> Stream:
        """Each record at the least time of ``clock`` (any worker's) at or after its own,
        once both streams have passed that time."""
        return reclock_op.reclock(self, clock, name)

    def inspect(self, f: Callable[[Any], None], name: str = "inspect") -> Stream:
        """Calls ``f(record)`` for every record; passes records on."""
        return inspect_op.inspect(self, f, name)

    def inspect_batch(self, f: Callable[[Any, Any], None], name: str = "inspect_batch") -> Stream:
        """Calls ``f(time, batch)`` for every batch; passes batches on."""
        return inspect_op.inspect_batch(self, f, name)

    def probe(self, name: str = "probe") -> probe_op.ProbeHandle:
        """A handle on this stream's frontier (awaitable)."""
        return probe_op.probe(self, name)

    def probe_with(self, handle: probe_op.ProbeHandle, name: str = "probe") -> Stream:
        """This stream, probed by ``handle`` too: the handle's frontier is the meet of those
        of every stream it probes (make one with ``naiad.ProbeHandle()``)."""
        return probe_op.probe_with(self, handle, name)

    def subscribe(
        self,
        callback: Callable[[Any, list[Any]], None],
        name: str = "subscribe",
        *,
        gather: bool = False,
    ) -> probe_op.ProbeHandle:
        """``callback(time, records)`` once per completed time, in time order; the handle's
        ``wait(t)`` returns once the callbacks up to ``t`` have run on this worker. With
        ``gather``, the callback runs at worker 0 only, with every worker's records."""
        return subscribe_op.subscribe(self, callback, name, gather)

    @overload
    def collect(
        self, name: str = "collect", *, gather: Literal[False] = False
    ) -> list[tuple[Any, Any]]: ...

    @overload
    def collect(
        self, name: str = "collect", *, gather: bool
    ) -> list[tuple[Any, Any]] | GatheredElsewhere: ...

    def collect(
        self, name: str = "collect", *, gather: bool = False
    ) -> list[tuple[Any, Any]] | GatheredElsewhere:
        """A list filling with ``(time, record)`` pairs as times complete, in time order.
        With ``gather``, worker 0's list holds every worker's records, and the other workers'
        results refuse to be read (:class:`~naiad.operators.gather.GatheredElsewhere`)."""
        return subscribe_op.collect(self, name, gather)

    @overload
    def capture(
        self, name: str = "capture", *, gather: Literal[False] = False
    ) -> capture_op.CaptureLog: ...

    @overload
    def capture(
        self, name: str = "capture", *, gather: bool
    ) -> capture_op.CaptureLog | GatheredElsewhere: ...

    def capture(
        self, name: str = "capture", *, gather: bool = False
    ) -> capture_op.CaptureLog | GatheredElsewhere:
        """This worker's share of the stream as an event log (its messages and frontier
        moves), growing while the dataflow runs; ``scope.replay(logs)`` plays logs back.
        With ``gather``, worker 0's log holds every worker's messages, and the other
        workers' results refuse to be read."""
        return capture_op.capture(self, name, gather)

    def aggregate(
        self,
        fold: Callable[[Any, Any, Any], Any],
        emit: Callable[[Any, Any], Any],
        key: Callable[[Any], int],
        init: Callable[[], Any] = lambda: None,
        name: str = "aggregate",
    ) -> Stream:
        """Per time and key of ``(key, value)`` records, ``emit(k, aggregate)`` once the time
        completes, the aggregate folded from ``init()`` by ``fold(k, value, aggregate)``."""
        return aggregate_op.aggregate(self, fold, emit, key, init, name)

    def accumulate(
        self, default: Any, f: Callable[[Any, Any], Any], name: str = "accumulate"
    ) -> Stream:
        """Per time and worker, once the time completes: ``default`` (a copy) folded with
        ``f(accumulator, batch)`` over that worker's batches at that time, as one record."""
        return accumulate_op.accumulate(self, default, f, name)

    def count(self, name: str = "count") -> Stream:
        """Per time and worker, once the time completes: the number of records seen."""
        return accumulate_op.count(self, name)

    def state_machine(
        self,
        f: state_machine_op.Transition,
        key: Callable[[Any], int],
        init: Callable[[], Any] = lambda: None,
        name: str = "state_machine",
    ) -> Stream:
        """Per ``(key, value)`` record, in time order per key: ``f(k, value, state)`` returns
        ``(new_state, outputs)``; outputs go at the record's time; a ``None`` state forgets
        the key."""
        return state_machine_op.state_machine(self, f, key, init, name)

    def unary(
        self, logic: Vertex, name: str | None = None, exchange: Key = None, outputs: int = 1
    ) -> Any:
        """A user :class:`~naiad.Vertex` applied to this stream."""
        return generic_op.unary(self, logic, name, exchange, outputs)

    def binary(
        self,
        other: Stream,
        logic: Vertex,
        name: str | None = None,
        exchange: tuple[Key, Key] = (None, None),
        outputs: int = 1,
    ) -> Any:
        """A user :class:`~naiad.Vertex` applied to this stream (port 0) and ``other`` (1)."""
        return generic_op.binary(self, other, logic, name, exchange, outputs)

    def enter(self, loop: Scope, name: str = "ingress") -> Stream:
        """This stream inside loop context ``loop`` (or region: the same times)."""
        return loops_op.enter(self, loop, name)

    def leave(self, name: str = "egress") -> Stream:
        """This stream outside its loop context (or region)."""
        return loops_op.leave(self, name)

    def connect_loop(self, handle: loops_op.FeedbackHandle) -> None:
        """Feeds this stream back through ``handle``'s feedback vertex."""
        loops_op.connect_loop(self, handle)
