"""Vertices: the user's operator logic, and the shard actor that runs it on one worker.

A :class:`Vertex` is what an operator does (Naiad's ``OnRecv`` / ``OnNotify``, Figure 4); a
:class:`VertexShard` is the actor that owns one instance of it on one worker: its mailbox, its
pending notifications, its capabilities' progress accounting and its output ports.

Every capability handed to a callback is *borrowed*: valid until the callback returns.
``cap.retain()`` keeps one; ``notify_at`` and ``output.send`` accept a borrowed capability or
a time at or after the current callback's time.

Stateful vertices override :meth:`Vertex.checkpoint` and :meth:`Vertex.restore`; the
checkpoint layer calls them at epoch boundaries the frontier proves complete (Naiad §3.4).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sized
from typing import TYPE_CHECKING, Any, Protocol

from naiad.actors.actor import MAX_CUT_THROUGH_DEPTH, Actor
from naiad.actors.supervision import DataflowDropped, annotate, stopped
from naiad.progress.antichain import INDEX_ABOVE, MutableAntichain, TimeQueue, le
from naiad.progress.capability import Capability, CapabilityError
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.timestamp import as_time_like, same_shape

if TYPE_CHECKING:
    from naiad.actors.worker import Worker


class Pusher(Protocol):
    """One edge of the physical graph as seen by its sender; ``shares`` says whether the
    receiver gets the batch object itself (an exchange builds new lists instead); ``stages``
    whether a push may be refused (a record an exchange's key or check refuses, or the codec
    cannot send to another process), in which case ``stage`` does everything that may fail
    and returns the delivery."""

    shares: bool
    stages: bool

    def push(self, time: Any, batch: Any) -> None: ...

    def stage(self, time: Any, batch: Any) -> Callable[[], None]: ...


def fan_out(pushers: list[Pusher], time: Any, batch: Any) -> None:
    """Pushes ``batch`` to every consumer of an output. As timely's ``Tee`` clones the data
    for all consumers but one, a list goes itself to one consumer and as a copy to every
    other that would share it: a consumer may then modify the list it receives (pop records
    off it, sort it) without changing what the others receive. Other batches (numpy arrays)
    are shared, not copied: treat a received array as read-only. When a consumer may refuse
    the batch (an exchange, or a consumer in another process), every consumer's part is
    staged before any is delivered: a refused send (an input's, say) delivers nothing to any
    of them."""
    if len(pushers) > 1:
        copies = batch.__class__ is list
        last = len(pushers) - 1
        if any(p.stages for p in pushers):
            deliveries = [
                pusher.stage(time, batch.copy() if copies and i < last and pusher.shares else batch)
                for i, pusher in enumerate(pushers)
            ]
            for deliver in deliveries:
                deliver()
            return
        if copies:
            for i, pusher in enumerate(pushers):
                pusher.push(time, batch.copy() if i < last and pusher.shares else batch)
            return
    for pusher in pushers:
        pusher.push(time, batch)


class Vertex:
    """Operator logic; one instance per worker. Override the callbacks you need.

    * ``on_start(cap)`` (optional): called once before anything else with the operator's
      initial capability at the least time; overriding it is how an operator asks for one.
    * ``on_recv(port, cap, batch)``: a message arrived on input ``port`` at ``cap.time``.
    * ``on_notify(cap)``: no message at or before ``cap.time`` can arrive any more on any
      input, as requested by ``notify_at``.
    * ``on_frontier()`` (optional): an input frontier moved.

    >>> class Doubler(Vertex):
    ...     def on_recv(self, port, cap, batch):
    ...         self.send(cap, [2 * x for x in batch])
    """

    reentrancy: int = 0
    """How deep a message may re-enter this vertex on the sender's stack (Naiad §3.2)."""

    shard: VertexShard

    # --- callbacks -------------------------------------------------------------------------
    def on_start(self, cap: Capability) -> None:
        """Receives the initial capability; overriding this method requests one."""

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} receives messages but has no on_recv")

    def on_notify(self, cap: Capability) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} requested a notification but has no on_notify"
        )

    def on_frontier(self) -> None:
        """Called after an input frontier moved (only if overridden)."""

    def on_idle(self) -> None:
        """Called once per :meth:`activate_when_idle`, when its worker has had nothing else
        to run for a while (``IDLE_DELAY_S``): background work, such as the compaction a
        reader's release allows in an arrangement whose input went quiet."""

    # --- checkpoint / restore seams (Naiad §3.4) ----------------------------------------------
    def checkpoint(self) -> Any:
        """The vertex's state, for a consistent checkpoint; stateless vertices return None."""
        return None

    def restore(self, state: Any) -> None:
        """Reinstates a state returned by :meth:`checkpoint`."""

    def build_failed(self) -> None:
        """The build of this vertex's dataflow raised (on this worker or another one), so it
        never runs: undo what the constructor registered outside the dataflow (a stream on
        a shared probe handle, a reader's hold on an imported trace)."""

    def dropped(self, error: DataflowDropped) -> None:
        """Its dataflow was dropped while running (``Dataflow.drop``), so it never runs
        again: release what it holds outside the dataflow, and make its handles refuse
        with ``error``. By default, what :meth:`build_failed` undoes (a reader's hold on an
        imported trace) is undone."""
        self.build_failed()

    # --- services --------------------------------------------------------------------------
    def send(self, at: Capability | Any, batch: Any, port: int = 0) -> None:
        """Sends ``batch`` on output ``port`` at a capability's time, or at a time allowed by
        the current callback's capability. The dataflow owns the batch once sent (it may be
        delivered later): send a new list rather than clearing and refilling one."""
        outputs = self.shard.outputs
        if not 0 <= port < len(outputs):
            raise ValueError(
                f"operator {self.shard.name!r} has {len(outputs)} output(s); it cannot send on "
                f"output {port}"
            )
        outputs[port].send(at, batch)

    def notify_at(self, at: Capability | Any) -> None:
        """Requests ``on_notify`` once no message at or before that time can arrive."""
        self.shard.notify_at(at)

    def activate_when_idle(self) -> None:
        """Requests one ``on_idle`` call, once the worker has had no message, notification or
        frontier change to run for ``IDLE_DELAY_S`` (so a computation that keeps its worker
        busy never pays for it). Repeated requests before the call make one. Nothing
        happens for a vertex not placed on a worker yet (its build failed: it never runs)."""
        shard = getattr(self, "shard", None)
        if shard is not None:
            shard.worker.schedule_idle(shard)

    def frontier(self, port: int = 0) -> MutableAntichain:
        """The input frontier of ``port``: the times at which messages can still arrive."""
        return self.shard.frontiers[port]

    @property
    def name(self) -> str:
        return self.shard.name

    @property
    def index(self) -> int:
        """This worker's index among all workers."""
        return self.shard.worker.index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.shard.worker.peers


class StatelessVertex(Vertex):
    """A built-in that computes a batch and then sends it, keeping no state between calls.

    Re-entering it is harmless (its function has returned before it sends), so it allows
    re-entrancy up to the worker's cut-through stack cap: on a cycle, only the user's own
    vertices' limits decide whether a message comes around on the sender's stack.
    """

    reentrancy = MAX_CUT_THROUGH_DEPTH


def overrides(logic: Vertex, method: str) -> bool:
    """Whether ``logic``'s class overrides ``Vertex.method``."""
    return getattr(type(logic), method) is not getattr(Vertex, method)


def waits_on_nothing(logic: Vertex) -> bool:
    """Whether ``logic`` never waits on its input frontiers: a stateless built-in that
    neither is notified nor observes its frontier. Nothing needs its inputs' frontiers kept
    up to date then (the progress tracker works them out when read)."""
    return (
        isinstance(logic, StatelessVertex)
        and not overrides(logic, "on_notify")
        and not overrides(logic, "on_frontier")
    )


class OutputPort:
    """An output of a shard: checks the sender's right to send, then pushes to every edge."""

    __slots__ = ("port", "pushers", "shard")

    def __init__(self, shard: VertexShard, port: int) -> None:
        self.shard = shard
        self.port = port
        self.pushers: list[Pusher] = []

    def send(self, at: Capability | Any, batch: Any) -> None:
        shard = self.shard
        if at.__class__ is Capability:
            if not at._valid or at._owner is not shard:
                _bad_capability(shard, at)
            if shard.failure is not None:  # a driver's send: it would go nowhere
                shard.check_running()
            time = at.time
        else:
            current = shard.current
            if current is None:
                raise CapabilityError(
                    f"operator {shard.name!r}: sending at time {at!r} outside a callback "
                    f"needs a capability; pass one retained from a callback"
                )
            time = at
            if not same_shape(at, current.time):
                time = as_time_like(at, current.time, f"operator {shard.name!r}: a time to send at")
            if time != current.time and not le(current.time, time):
                raise CapabilityError(
                    f"operator {shard.name!r}: cannot send at time {time!r} while handling "
                    f"time {current.time!r} (sending backwards in time)"
                )
        if not isinstance(batch, Sized):
            raise TypeError(
                f"operator {shard.name!r} sent {type(batch).__name__} {batch!r:.80}: a batch is "
                f"a list, a numpy array or another sized collection of records"
            )
        try:
            if len(batch) == 0:
                return
        except TypeError:  # sized by its class but not itself: a 0-d numpy array
            raise TypeError(
                f"operator {shard.name!r} sent {type(batch).__name__} {batch!r:.80}, which has "
                f"no length (a 0-d array is one value): send a batch of records, such as "
                f"[value] or numpy.atleast_1d(value)"
            ) from None
        fan_out(self.pushers, time, batch)


def _bad_capability(shard: VertexShard, cap: Capability) -> None:
    if not cap._valid:
        cap._check()
    raise CapabilityError(
        f"operator {shard.name!r}: the capability for time {cap.time!r} belongs to "
        f"operator {cap._owner.name!r}"
    )


class VertexShard(Actor):
    """The actor that runs one worker's instance of one operator."""

    __slots__ = (
        "buffer",
        "current",
        "failure",
        "fresh",
        "frontiers",
        "idle_queued",
        "logic",
        "notifiable",
        "outputs",
        "pending",
        "resident",
        "sources",
        "targets",
        "waiting",
        "wants_frontier",
        "worker",
    )

    def __init__(
        self,
        worker: Worker,
        name: str,
        logic: Vertex,
        targets: list[int],
        sources: list[int],
        frontiers: list[MutableAntichain],
        buffer: ChangeBatch,
    ) -> None:
        super().__init__(name, logic.reentrancy)
        self.worker = worker
        self.logic = logic
        self.targets = targets  # location of each input port
        self.sources = tuple(sources)  # location of each output port
        self.frontiers = frontiers
        self.buffer = buffer  # the worker's progress batch for this dataflow
        self.outputs = [OutputPort(self, p) for p in range(len(sources))]
        self.pending: dict[Any, Capability] = {}  # notification time -> owned capability
        # the pending times indexed, once there are many (see deliver_notifications)
        self.waiting: TimeQueue | None = None
        self.current: Capability | None = None  # the capability of the running callback
        self.fresh: list[Any] | None = None  # times requested while notifications are delivered
        self.wants_frontier = overrides(logic, "on_frontier")
        self.notifiable = overrides(logic, "on_notify")
        self.idle_queued = False  # in its worker's idle queue (see Vertex.activate_when_idle)
        # The process's count of messages waiting in mailboxes, per target location and time
        # (the progress actor holds updates by it), or None if it does not need one.
        self.resident: list[dict[Any, int]] | None = None
        # what stopped the dataflow: a capability its driver holds can no longer be used
        self.failure: BaseException | None = None
        logic.shard = self

    def check_running(self) -> None:
        """Raises once the dataflow has stopped after an error: a capability that a driver
        holds outside the callbacks would send or advance into nothing."""
        if self.failure is not None:
            raise stopped(f"operator {self.name!r}", self.failure)

    # --- starting ------------------------------------------------------------------------------
    def start(self, initial_time: Any) -> None:
        """Hands the pre-counted initial capability to ``on_start`` and releases it."""
        cap = Capability(initial_time, self, self.sources, self.buffer, borrowed=True)
        # Not on the worker's stack: what on_start sends is queued, never delivered to a
        # shard that has not started yet. A dataflow built inside a callback starts on that
        # callback's stack, so cut-through is barred by a full stack (not an empty one: the
        # worker's progress batch is half-built and must still not be flushed from here).
        worker = self.worker
        depth = worker.stack_depth
        if depth:
            worker.stack_depth = max(depth, MAX_CUT_THROUGH_DEPTH)
        self.current = cap
        try:
            self.logic.on_start(cap)
        except BaseException as exc:
            error = annotate(exc, self.name, worker.index, "starting", initial_time)
            if error is exc:
                raise
            raise error from exc
        finally:
            self.current = None
            worker.stack_depth = depth
        cap._valid = False
        for loc in self.sources:
            self.buffer.update((loc, initial_time), -1)

    # --- messages ------------------------------------------------------------------------------
    def drain(self) -> None:
        """Delivers the messages in the mailbox, in arrival order: at most as many as it
        held when called. One that arrives meanwhile and is not delivered on the stack was
        scheduled by ``receive``: without the bound, a cycle of operators on one worker
        (a loop that keeps iterating) ran inside one activation for ever, its callbacks
        refilling the mailbox this loop empties, so the worker never yielded (no timeout,
        cancellation or Ctrl-C took effect) and never flushed its progress."""
        mailbox = self.mailbox
        if not mailbox or self.failure is not None:  # (a dropped dataflow's: never runs)
            return
        budget = len(mailbox)
        worker = self.worker
        buffer = self.buffer
        targets = self.targets
        on_recv = self.logic.on_recv
        resident = self.resident
        outer = self.current
        self.depth += 1
        worker.stack_depth += 1
        try:
            while budget and mailbox:
                budget -= 1
                port, time, batch = mailbox.popleft()
                buffer.update((targets[port], time), -1)
                if resident is not None:
                    waiting = resident[targets[port]]
                    left = waiting[time] - 1
                    if left:
                        waiting[time] = left
                    else:
                        del waiting[time]
                cap = Capability(time, self, self.sources, buffer, True)
                self.current = cap
                try:
                    on_recv(port, cap, batch)
                except BaseException as exc:
                    if self._met_its_drop(exc):
                        return
                    error = annotate(exc, self.name, worker.index, "receiving a message", time)
                    if error is exc:
                        raise
                    raise error from exc
                cap._valid = False
        finally:
            self.current = outer
            self.depth -= 1
            worker.stack_depth -= 1

    def receive(self, port: int, time: Any, batch: Any, cut_through: bool) -> None:
        """Accepts a message (already counted at its target by the sender); discards it
        once the dataflow has stopped (dropped, its progress forgotten)."""
        if self.failure is not None:
            return
        self.mailbox.append((port, time, batch))
        resident = self.resident
        if resident is not None:
            waiting = resident[self.targets[port]]
            waiting[time] = waiting.get(time, 0) + 1
        if cut_through and self.accepts_on_stack(self.worker.stack_depth):
            self.drain()
        else:
            self.worker.schedule_messages(self)

    # --- notifications -------------------------------------------------------------------------
    def notify_at(self, at: Capability | Any) -> None:
        if not self.notifiable:
            # refused at the request, not at a delivery that may never come: the frontier of
            # an input no vertex watches is not tracked (see waits_on_nothing)
            raise NotImplementedError(
                f"operator {self.name!r} ({type(self.logic).__name__}) requested a "
                f"notification but has no on_notify"
            )
        if at.__class__ is Capability:
            if not at._valid or at._owner is not self:
                _bad_capability(self, at)
            cap = at.retain()
            if not at._borrowed:
                at.drop()  # moved into the notification
        else:
            current = self.current
            if current is None:
                raise CapabilityError(
                    f"operator {self.name!r}: notify_at({at!r}) outside a callback "
                    f"needs a capability"
                )
            cap = current.delayed(at)
        if cap.time in self.pending:
            cap.drop()  # one notification per distinct time
        else:
            self.pending[cap.time] = cap
            if self.waiting is not None:
                self.waiting.add(cap.time)
            if self.fresh is not None:
                self.fresh.append(cap.time)
        self.worker.schedule_notify(self)

    def deliver_notifications(self) -> None:
        """Delivers requested notifications no input can still precede, least time first;
        then tells the logic about frontier movement if it asked to hear of it.

        One at a time: a request made inside ``on_notify`` (say at 1, while 2 is also ready)
        is an active pointstamp that precedes the later ones, so it is delivered first. But
        only up to the greatest time ready when the activation began: later requests wait for
        the next activation, so that queued messages run first (a source without inputs
        would otherwise emit all its epochs in one activation).
        """
        if self.failure is not None:  # stopped (dropped): nothing of it runs any more
            return
        pending = self.pending
        if pending:
            # The ready times, then a heap: a vertex holding n pending times delivers all that
            # are ready in O(n log n), not O(n) per delivery. Many pending times are indexed
            # (a TimeQueue): an activation then costs the times it delivers, not a test of
            # every pending time (a prioritized loop waits on one time per priority).
            waiting = self.waiting
            if waiting is None and len(pending) > INDEX_ABOVE:
                waiting = self.waiting = TimeQueue(pending)
            if waiting is None:
                ready = [t for t in pending if not self._blocked(t)]
            else:
                ready = waiting.pop_ready([f.frontier for f in self.frontiers])
            if ready:
                heapq.heapify(ready)
                limit = max(ready)
                fresh: list[Any] = []
                self.fresh = fresh
                try:
                    while ready:
                        t = heapq.heappop(ready)
                        cap = pending.pop(t)
                        if waiting is not None:
                            waiting.discard(t)  # a fresh one (those taken are gone already)
                        cap._borrowed = True
                        self._call(self.logic.on_notify, cap, "being notified", cap)
                        cap._borrowed = False
                        cap._release()  # the worker submits the batch after the activation
                        if self.failure is not None:  # on_notify dropped its own dataflow
                            return
                        if fresh:  # requested by on_notify: ready ones up to limit go first
                            for t in fresh:
                                if t in pending and not t > limit and not self._blocked(t):
                                    heapq.heappush(ready, t)
                            fresh.clear()
                finally:
                    self.fresh = None
                    if waiting is not None:
                        for t in ready:  # not delivered (on_notify raised): pending still
                            if t in pending:
                                waiting.add(t)
            if waiting is not None and not pending:
                self.waiting = None  # few again: the plain scan is cheaper
        if self.wants_frontier:
            self._call(self.logic.on_frontier, None, "observing its frontier", None)

    def run_idle(self) -> None:
        """Calls the logic's ``on_idle`` (requested with ``activate_when_idle``), unless the
        dataflow stopped."""
        if self.failure is None:
            self._call(self.logic.on_idle, None, "working while idle", None)

    def _blocked(self, t: Any) -> bool:
        for f in self.frontiers:
            if f.less_equal(t):
                return True
        return False

    def _met_its_drop(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by a callback, is this shard's dataflow refusing a send
        or a capability change because it was dropped while the callback ran (by a callback
        that one of its sends reached on the stack): the callback ends there, quietly, as
        the dropped dataflow does; it is no error of the runtime's."""
        failure = self.failure
        return (
            isinstance(failure, DataflowDropped)
            and isinstance(exc, DataflowDropped)
            and (exc is failure or exc.__cause__ is failure)
        )

    def _call(self, fn: Any, arg: Any, doing: str, cap: Capability | None) -> None:
        worker = self.worker
        outer = self.current
        self.current = cap
        self.depth += 1
        worker.stack_depth += 1
        try:
            if arg is None:
                fn()
            else:
                fn(arg)
        except BaseException as exc:
            if self._met_its_drop(exc):
                return
            error = annotate(exc, self.name, worker.index, doing, cap.time if cap else None)
            if error is exc:
                raise
            raise error from exc
        finally:
            self.current = outer
            self.depth -= 1
            worker.stack_depth -= 1
