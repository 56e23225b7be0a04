"""``new_unordered_input``: an input driven by capabilities the user holds (timely's
``UnorderedInput``).

An :class:`~naiad.InputHandle` sends at one epoch that only moves forward. Here each worker's
handle gives its user a capability at the scope's least time instead, and the user manages
capabilities as an operator would: ``delayed(t)`` makes one for a later time, ``downgrade(t)``
moves one forward, ``drop()`` gives one up, and ``send(batch, time)`` sends at any time at or
after a held capability's. Several times can be open at once and batches can be sent in any
order (late data for an earlier, still held, time).

The invariant: every :class:`InputCapability` wraps one owned
:class:`~naiad.progress.capability.Capability` of the input's vertex, so the stream's frontier
is exactly the meet of the times of the capabilities that the users of every worker still
hold; when every one is dropped (or every handle closed) the stream ends. A misused capability
raises :class:`~naiad.InputError` naming the input before anything is counted or sent, and
stays usable.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from naiad.actors.loop_thread import check_loop_thread
from naiad.actors.supervision import DataflowDropped, stopped
from naiad.actors.vertex import Vertex
from naiad.dataflow.scope import NEVER_RUNS
from naiad.operators.input import InputError, prepared_batch
from naiad.progress.antichain import Antichain, le
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time_like, same_shape

if TYPE_CHECKING:
    from naiad.dataflow.scope import ScopeCore
    from naiad.operators.stream import Stream


class UnorderedInputVertex(Vertex):
    """Holds the user's capabilities (through its handle); receives nothing."""

    def __init__(self, name: str) -> None:
        self.started = False
        self.close_on_start = False  # closed while the dataflow was being built
        self.build_raised = False  # it never starts: its handle says so
        self.handle = UnorderedInputHandle(self, name)

    def on_start(self, cap: Capability) -> None:
        self.started = True
        if not self.close_on_start:
            self.handle._hold(cap.retain())

    def build_failed(self) -> None:
        self.build_raised = True

    def dropped(self, error: DataflowDropped) -> None:
        self.handle._fail(error)  # its capabilities' sends refuse, naming the drop


class InputCapability:
    """The right to send on an unordered input at :attr:`time` and later; a context manager
    that drops it on exit (``with cap.delayed(5) as late: late.send([...])``)."""

    __slots__ = ("_cap", "_handle")

    def __init__(self, handle: UnorderedInputHandle, cap: Capability) -> None:
        self._handle = handle
        self._cap = cap

    @property
    def time(self) -> Any:
        return self._cap.time

    @property
    def valid(self) -> bool:
        """Whether the capability is still held (not dropped, its handle not closed)."""
        return self._cap.valid

    def _live(self, doing: str) -> Capability:
        handle = self._handle
        handle._check_running()
        cap = self._cap
        if not cap.valid:
            raise InputError(
                f"unordered input {handle.name!r}: cannot {doing} with the capability for time "
                f"{cap.time!r}: it was dropped"
                + (" (the input is closed)" if handle.closed else "")
            )
        return cap

    def _at_or_after(self, cap: Capability, time: Any, doing: str) -> Any:
        name = self._handle.name
        if not same_shape(time, cap.time):
            time = as_time_like(time, cap.time, f"unordered input {name!r}: a time to {doing}")
        if not le(cap.time, time):
            raise InputError(
                f"unordered input {name!r}: cannot {doing} {time!r} with the capability for "
                f"time {cap.time!r}: {time!r} is not at or after it (backwards in time)"
            )
        return time

    def delayed(self, time: Any) -> InputCapability:
        """A new capability for ``time``, at or after this one's; held until dropped."""
        cap = self._live("delay")
        return self._handle._hold(cap.delayed(self._at_or_after(cap, time, "delay to")))

    def downgrade(self, time: Any) -> None:
        """Moves this capability forward to ``time``: nothing more can be sent with it
        before ``time``."""
        cap = self._live("downgrade")
        cap.downgrade(self._at_or_after(cap, time, "downgrade to"))

    def drop(self) -> None:
        """Gives the capability up (once every worker's user has given up every capability at
        or before a time, that time can complete)."""
        self._live("drop").drop()
        self._handle._forget(self)

    def send(self, batch: Any, time: Any = None) -> None:
        """Sends ``batch`` (a list, or a numpy array the dataflow then owns) at ``time``
        (by default this capability's time), which must be at or after this capability's."""
        cap = self._live("send")
        if time is not None:
            time = self._at_or_after(cap, time, "send at")
        batch = prepared_batch(batch, f"unordered input {self._handle.name!r}")
        if time is None or time == cap.time:
            self._handle._vertex.shard.outputs[0].send(cap, batch)
        else:  # held only for this send: the message's own count keeps the time open
            at = cap.delayed(time)
            try:
                self._handle._vertex.shard.outputs[0].send(at, batch)
            finally:  # a batch another process refuses (a set) must not leave it held
                at._release()
        self._handle._flush()

    def __enter__(self) -> InputCapability:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cap.valid:
            self.drop()

    def __repr__(self) -> str:
        state = "held" if self._cap.valid else "dropped"
        return f"InputCapability({self._cap.time!r}, {self._handle.name!r}, {state})"


class UnorderedInputHandle:
    """One worker's side of an unordered input: its capabilities.

    >>> import asyncio, naiad
    >>> async def main():
    ...     async with naiad.Runtime(workers=1) as rt:
    ...         build = lambda s: (lambda h, st: (h, st.collect()))(*s.new_unordered_input())
    ...         handle, out = rt.dataflow(build).results[0]
    ...         start = handle.capability                  # at time 0
    ...         late = start.delayed(5)
    ...         late.send(["e"]); start.send(["c"], time=3); start.send(["a"])
    ...         start.downgrade(2)                         # times 0 and 1 complete
    ...         start.send(["d"], time=4); late.send(["f"], time=6)
    ...         handle.close()                             # drops both
    ...     return sorted(out)
    >>> asyncio.run(main())
    [(0, 'a'), (3, 'c'), (4, 'd'), (5, 'e'), (6, 'f')]
    """

    def __init__(self, vertex: UnorderedInputVertex, name: str) -> None:
        self._vertex = vertex
        self.name = name
        self._held: dict[InputCapability, None] = {}  # an ordered set: oldest first
        self._first: InputCapability | None = None
        self._failure: BaseException | None = None
        # the thread of the runtime's event loop (where dataflows are built): see
        # naiad.actors.loop_thread
        self._thread = threading.get_ident()

    @property
    def capability(self) -> InputCapability:
        """The capability this worker's input started with, at the scope's least time (it
        may have been downgraded or dropped since)."""
        self._check_running()
        if self._first is None:
            raise InputError(
                f"unordered input {self.name!r}: "
                + (
                    NEVER_RUNS
                    if self._vertex.build_raised
                    else "it was closed while the dataflow was being built"
                    if self._vertex.close_on_start
                    else "the dataflow is still being built; take the capability once "
                    "rt.dataflow(...) has returned"
                )
            )
        return self._first

    @property
    def capabilities(self) -> list[InputCapability]:
        """The capabilities held now, oldest first."""
        return list(self._held)

    @property
    def frontier(self) -> Antichain:
        """The least times this worker's user can still send at: the minimal times of the
        capabilities held (empty once all are dropped)."""
        return Antichain.minimal_of(cap.time for cap in self._held)

    @property
    def closed(self) -> bool:
        """Whether no capability is held any more (all dropped, or the handle closed)."""
        return self._vertex.close_on_start or (self._vertex.started and not self._held)

    def close(self) -> None:
        """Drops every capability still held (idempotent; during the build, from the start)."""
        self._check_thread()
        if not self._vertex.started:
            self._vertex.close_on_start = True
            return
        held, self._held = list(self._held), {}
        for cap in held:
            cap._cap._release()
        if held:
            self._flush()

    def _hold(self, cap: Capability) -> InputCapability:
        held = InputCapability(self, cap)
        self._held[held] = None
        if self._first is None:
            self._first = held
        return held

    def _forget(self, cap: InputCapability) -> None:
        del self._held[cap]

    def _check_thread(self) -> None:
        check_loop_thread(
            self._thread,
            lambda: f"unordered input {self.name!r}",
            "loop.call_soon_threadsafe(capability.downgrade, time)",
            InputError,
        )

    def _check_running(self) -> None:
        self._check_thread()
        if self._failure is not None:  # what is sent now would go nowhere
            raise stopped(f"unordered input {self.name!r}", self._failure)

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc

    def _flush(self) -> None:
        self._vertex.shard.worker.flush_outside_activation()


def new_unordered_input(
    scope: ScopeCore, name: str = "unordered_input"
) -> tuple[UnorderedInputHandle, Stream]:
    """An unordered input's handle for this worker and the stream of what every worker's
    user sends."""
    vertex = UnorderedInputVertex(name)
    node = scope.add_operator(name, vertex, [])
    return vertex.handle, scope.stream(node)
