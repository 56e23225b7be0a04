"""``probe``: watch a stream's frontier from outside the dataflow (awaitable)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.loop_thread import WAITS, check_loop_thread
from naiad.actors.supervision import DataflowDropped
from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.dataflow.scope import NEVER_RUNS, BuildError
from naiad.progress.antichain import Antichain, MutableAntichain, TimeQueue
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time, as_time_like, same_shape

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def input_frontier(vertex: Vertex, least: Any) -> Callable[[], MutableAntichain | Antichain]:
    """The frontier of ``vertex``'s first input, for a handle to read: ``least`` (nothing
    complete) while the vertex's dataflow is being built and it has no shard yet."""
    start = Antichain([least])

    def frontier() -> MutableAntichain | Antichain:
        try:
            return vertex.shard.frontiers[0]
        except AttributeError:  # (read from the build function)
            return start

    return frontier


class ProbeVertex(Vertex):
    """Consumes and discards; its input frontier is what the handle reports (with the
    frontiers of the other streams the handle probes).

    Once that frontier is empty it stays empty (no capability can come back), and the empty
    frontier adds nothing to a meet: the vertex then withdraws its source from the handle, so
    a handle shared by dataflows that come and go holds (and meets) only the live ones. A
    build that fails withdraws it too, and gives back the time shape the vertex gave the
    handle, so that a later build may probe streams of another shape with it; a handle of
    its own (``stream.probe()``'s) refuses to be read from then on: with no stream left, its
    frontier would be empty, every time complete, in a dataflow that never ran.
    """

    def __init__(self, handle: ProbeHandle, name: str = "probe", owns: bool = False) -> None:
        self.handle = handle
        self.label = name  # (its shard's name: unknown if the build fails first)
        self.owns = owns  # the handle is this vertex's alone (made by probe())
        self._source: Callable[[], MutableAntichain | Antichain] | None = None
        self._shaped = (False, False)  # whether attach set the handle's levels, its shape

    def attach(self, levels: int, least: Any) -> None:
        """Adds this vertex's input frontier to the handle's sources, and gives the handle
        the loop depth and time shape of the stream if it had none (once the vertex is part
        of a build: a build that fails takes both back with :meth:`build_failed`)."""
        handle = self.handle
        handle._thread = threading.get_ident()  # the build's: its runtime's event loop's
        if self.owns:
            handle._what = f"probe {self.label!r}"
        self._shaped = (handle._levels is None, handle._shape is None)
        if handle._levels is None:
            handle._levels = levels
        if handle._shape is None:
            handle._shape = least
        self._source = source = input_frontier(self, least)
        handle._sources.append(source)

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        pass

    def on_frontier(self) -> None:
        if self._source is not None and self._source().is_empty():
            self._withdraw()
        self.handle._check_waiters()

    def build_failed(self) -> None:
        # the dataflow never runs: a shard-less source would break every read of a handle
        # shared with other dataflows, and the shape it gave the handle would refuse the
        # streams of a later build (builds run one at a time: nothing else set it since)
        if self._source is not None:
            self._withdraw()
        levels, shape = self._shaped
        if levels:
            self.handle._levels = None
        if shape:
            self.handle._shape = None
        self._shaped = (False, False)
        if self.owns:
            self.handle._never_runs(f"probe {self.label!r}")

    def dropped(self, error: DataflowDropped) -> None:
        # a shared handle goes on probing the other dataflows' streams (its meet may have
        # moved: waits are checked again); a handle of its own refuses from now on
        if self._source is not None:
            self._withdraw()
        if self.owns:
            self.handle._drop(DataflowDropped(f"probe {self.label!r}: {error}"))
        else:
            self.handle._check_waiters()

    def _withdraw(self) -> None:
        """Removes this vertex's source from the handle: nothing of this dataflow stays
        reachable from it."""
        assert self._source is not None
        self.handle._sources.remove(self._source)
        self._source = None


class ProbeHandle:
    """A frontier seen from outside the dataflow, and waits on it.

    ``less_equal(t)``: records at ``t`` may still appear; ``less_than(t)``: records at some
    time before ``t`` may still appear (timely's usual step-while condition). A probe tracks
    the frontier only: sinks on the same stream may run after ``wait`` returns (a
    ``subscribe`` handle waits for its own callbacks instead).

    ``ProbeHandle()`` makes a handle that probes nothing yet (its frontier is empty, as
    timely's ``ProbeHandle::new()``); ``stream.probe_with(handle)`` adds a stream to it, and
    a handle on several streams reports their meet: the times at which a record may still
    appear on any of them. Each worker's build makes its own handle, as it does its own
    probes. The streams of one handle have times of one order (a ``Product`` loop and a
    ``Lex`` loop are refused by ``probe_with``), and a stream whose frontier is empty for
    good (its dataflow ended) leaves the handle: one handle shared by dataflows that come
    and go keeps only the live ones.
    """

    def __init__(
        self,
        frontier: Callable[[], MutableAntichain | Antichain] | None = None,
        levels: int | None = None,
        least: Any = None,
    ) -> None:
        # the frontiers of the streams probed (several after probe_with) whose frontier is
        # not yet empty for good: a probe that completes withdraws its own
        self._sources: list[Callable[[], MutableAntichain | Antichain]] = (
            [] if frontier is None else [frontier]
        )
        self._levels = levels  # the scope's loop depth: times given are checked against it
        # the least time of the stream given (``least``) or of those probed through
        # probe_with: they all have its shape (Product or Lex at every level), and so must
        # the times given to the handle (equal as tuples, a time of the other kind would
        # be answered by the stream's order, and share its waits)
        self._shape: Any = least
        # pending waits, per time waited for (dicts: a wait given up leaves at once, in O(1),
        # not at the next frontier move, which an idle input may put off); the times are
        # indexed, so a frontier move costs the waits it completes, not a test of every wait
        # (a driver awaiting one task per epoch would pay n**2 / 2 tests). Waits for every
        # time (``wait()``) sit apart: they complete only when the frontier empties.
        self._waiters: dict[Any, dict[asyncio.Future[None], None]] = {}
        self._times = TimeQueue()  # the keys of ``_waiters``
        self._at_end: dict[asyncio.Future[None], None] = {}
        self._failure: BaseException | None = None
        self._refusal: str | None = None  # why it has no frontier (its build raised)
        self._dropped: DataflowDropped | None = None  # its stream's dataflow was dropped
        # the thread of the event loop that wakes its waits (see naiad.actors.loop_thread):
        # the one it was made on (in a build) if it probes a stream from the start, else the
        # one that builds what it probes (None: any, while it probes nothing)
        self._thread = None if frontier is None else threading.get_ident()
        self._what = "probe handle"  # what a wait from another thread names

    @property
    def frontier(self) -> MutableAntichain | Antichain:
        """The frontier of the stream probed; of several, their meet (the least elements of
        all of their frontiers). Either way it iterates over its elements, lists them as
        ``elements``, and answers ``less_equal``, ``less_than`` and ``is_empty``."""
        self._check_runs()
        sources = self._sources
        if len(sources) == 1:
            return sources[0]()
        meet = Antichain()
        for source in sources:
            f = source()
            for t in f.frontier if isinstance(f, MutableAntichain) else f:
                meet.insert(t)
        return meet

    def _time(self, time: Any) -> Any:
        if self._shape is not None:
            return as_time_like(time, self._shape, "a probe's time")
        return time if self._levels is None else as_time(time, self._levels, "a probe's time")

    def less_equal(self, time: Any) -> bool:
        return self.frontier.less_equal(self._time(time))

    def less_than(self, time: Any) -> bool:
        return self.frontier.less_than(self._time(time))

    def done(self) -> bool:
        """Whether no record can ever appear again."""
        return self.frontier.is_empty()

    async def wait(self, time: Any = None) -> None:
        """Returns once time ``time`` is complete (every time, if ``time`` is None). Refused
        (``RuntimeError``) on another thread than the runtime's event loop, whose thread
        wakes the wait: run it there (``asyncio.run_coroutine_threadsafe``)."""
        check_loop_thread(
            self._thread,
            self._what,
            "asyncio.run_coroutine_threadsafe(handle.wait(time), loop)",
            why=WAITS,
        )
        if time is not None:
            time = self._time(time)
        if self._ready(time):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if time is None:
            futures = self._at_end
        elif time in self._waiters:
            futures = self._waiters[time]
        else:
            futures = self._waiters[time] = {}
            self._times.add(time)
        futures[future] = None
        try:
            await future
        finally:
            futures.pop(future, None)  # given up (a timeout, say), or already gone
            if not futures and time is not None and self._waiters.get(time) is futures:
                del self._waiters[time]
                self._times.discard(time)

    def _ready(self, time: Any) -> bool:
        if self._failure is not None:
            raise self._failure
        return self.done() if time is None else not self.less_equal(time)

    def _check_waiters(self) -> None:
        """Completes the waits whose time the frontier has passed (least time first)."""
        if not self._waiters and not self._at_end:
            return  # (no frontier to compute: with several streams, a meet)
        frontier = self.frontier  # once: with several streams it is a meet to compute
        done = [self._waiters.pop(t) for t in self._times.pop_ready([frontier])]
        if frontier.is_empty():
            done.append(self._at_end)
            self._at_end = {}
        for futures in done:
            for future in futures:
                if not future.done():
                    future.set_result(None)

    def _check_runs(self) -> None:
        """Raises ``BuildError`` if the build that made this handle raised (see
        :meth:`_never_runs`), ``DataflowDropped`` if its dataflow was dropped (see
        :meth:`_drop`)."""
        if self._refusal is not None:
            raise BuildError(self._refusal)
        if self._dropped is not None:
            raise DataflowDropped(str(self._dropped))

    def _never_runs(self, what: str) -> None:
        """The build that made this handle (for its own stream: ``what``, a probe, a
        subscription, a view) raised: every read refuses, naming ``what``, rather than report
        a frontier of a dataflow that never runs (empty: all complete; or never moving)."""
        self._refusal = f"{what}: {NEVER_RUNS}"

    def _drop(self, error: DataflowDropped) -> None:
        """The dataflow of the stream this handle (a probe's, a subscription's, a view's)
        probes alone was dropped: its frontier will never move, so every read and wait
        raises ``error`` rather than report it or wait for ever."""
        self._dropped = error
        self._fail(error)

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:  # the first failure, not a peer's echo of it
            self._failure = exc
        self._end_waits(exc)

    def _end_waits(self, exc: BaseException | None = None) -> None:
        """Ends every pending wait: raising ``exc``, or (None) returning as if its time had
        completed, for a reader that checks again why it woke (the waits of a trace handle
        closed while waiting: see ``TraceHandle.close``)."""
        for futures in [*self._waiters.values(), self._at_end]:
            for future in futures:
                if future.done():
                    continue
                if exc is None:
                    future.set_result(None)
                else:
                    future.set_exception(exc)
        self._waiters, self._times, self._at_end = {}, TimeQueue(), {}


def probe(stream: Stream, name: str = "probe") -> ProbeHandle:
    """A handle on the frontier of ``stream``.

    >>> import asyncio, naiad
    >>> async def main():
    ...     async with naiad.Runtime() as rt:
    ...         handle, probe = rt.dataflow(lambda s: (lambda h, st: (h, st.probe()))(
    ...             *s.new_input())).results[0]
    ...         handle.send([1]); handle.advance_to(3)
    ...         await probe.wait(2)
    ...         return probe.less_equal(2), probe.less_equal(3)
    >>> asyncio.run(main())
    (False, True)
    """
    handle = ProbeHandle(levels=stream.scope.depth)
    _probe_with(stream, handle, name, owns=True)
    return handle


def probe_with(stream: Stream, handle: ProbeHandle, name: str = "probe") -> Stream:
    """Adds ``stream`` to the streams ``handle`` probes (timely's ``probe_with``); returns
    ``stream``. The handle's frontier becomes the meet of its streams' frontiers: ``wait(t)``
    returns once ``t`` is complete on all of them.

    >>> import asyncio, naiad
    >>> async def main():
    ...     async with naiad.Runtime() as rt:
    ...         def build(s):
    ...             probe = naiad.ProbeHandle()
    ...             (a, x), (b, y) = s.new_input(), s.new_input()
    ...             x.map(str).probe_with(probe); y.probe_with(probe)
    ...             return a, b, probe
    ...         a, b, probe = rt.dataflow(build).results[0]
    ...         a.advance_to(5); b.advance_to(2)
    ...         await probe.wait(1)
    ...         return probe.frontier.elements, probe.less_than(3)
    >>> asyncio.run(main())
    ([2], True)
    """
    return _probe_with(stream, handle, name, owns=False)


def _probe_with(stream: Stream, handle: ProbeHandle, name: str, owns: bool) -> Stream:
    """:func:`probe_with`; ``owns``: ``handle`` is the new probe's alone (see ProbeVertex)."""
    if not isinstance(handle, ProbeHandle):
        raise TypeError(
            f"probe_with {name!r}: the handle must be a naiad.ProbeHandle, not "
            f"{type(handle).__name__}"
        )
    depth, least = stream.scope.depth, stream.scope.minimum()
    if handle._levels is not None and handle._levels != depth:
        raise BuildError(
            f"probe_with {name!r}: the handle probes streams of times {handle._levels} loop(s) "
            f"deep, and {stream!r} has times {depth} loop(s) deep; one handle's frontier is "
            f"a meet of times of one shape"
        )
    if handle._shape is not None and not same_shape(least, handle._shape):
        # Product(3, 0) == Lex(3, 0) as tuples, yet they are ordered differently: a meet of
        # both kinds would compare times of one loop by the other's order
        raise BuildError(
            f"probe_with {name!r}: the handle probes streams of times shaped like "
            f"{handle._shape!r}, and {stream!r} has times shaped like {least!r}; one "
            f"handle's frontier is a meet of times of one order (Product and Lex loops "
            f"need a handle each)"
        )
    vertex = ProbeVertex(handle, name, owns)
    stream.scope.add_operator(name, vertex, [(stream, Pipeline())], outputs=0)
    vertex.attach(depth, least)  # only once it is part of the build: add_operator may refuse
    return stream
