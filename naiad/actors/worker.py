"""Workers: schedulers of vertex shards, and the task that drives a process's workers.

Scheduling policy (Naiad §3.2): shards with messages in their mailbox run before shards that
only have notifications or frontier changes to consider, which keeps queued data small. After
every top-level activation the worker submits its progress batch (everything the activation
and the deliveries on its stack produced and consumed) to the process's progress actor, whole.

The workers of one process share one event loop, so they gain nothing from separate tasks and
would pay an event-loop wake-up every time one waits for another. One :class:`WorkerGroup`
task steps them in turn instead (each keeps its own queues, progress batches and index), and
yields to the event loop every few rounds so that transports and the user's coroutines share
the loop even while a cycle in the dataflow keeps the workers busy.

Idle work: a vertex may ask for a call when its worker has nothing else to do
(:meth:`~naiad.actors.vertex.Vertex.activate_when_idle`), for background work such as the
compaction an arrangement can do once a reader let history go. Those calls run only after
the group has run no activation for ``IDLE_DELAY_S``, one per vertex per pass, before the
group sleeps: a computation that keeps its workers busy, round after round, never pays for
them, and a process whose inputs went quiet does the work within ``IDLE_DELAY_S``.

Safe points: between two rounds no activation is under way on any worker of the event loop
(callbacks are synchronous, and every worker group of this thread is between activations
too), so work that must not overlap one, such as the interner's collection of codes nobody
holds (:meth:`naiad.differential.updates.Interner.collect`), runs from there
(:func:`on_safe_points`). A group running in another thread makes no moment safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from naiad.actors.vertex import VertexShard
from naiad.progress.change_batch import ChangeBatch

# Activations of one worker per round: a round-robin slice, so that one worker with a long
# queue cannot starve the others.
ACTIVATIONS_PER_ROUND = 64

# Messages run before notifications (a notification is then delivered once what was sent at
# its time has been taken in), but a notification waits at most this many message activations:
# a loop whose messages never stop (one that does not converge, or a long one) otherwise
# starved every notification on its worker, and with them every other dataflow there (no
# probe of theirs passed, none completed).
MESSAGES_BEFORE_A_NOTIFICATION = 64

# The longest the group keeps the event loop between two yields. A yield costs a few µs; 1 ms
# bounds the delay it adds to I/O and to the user's coroutines (probes, inputs).
YIELD_INTERVAL_S = 0.001

# How long the group must have run nothing before it runs idle work: long enough that the
# pauses of a running computation (a round waiting for another process's progress, a quick
# driver between epochs) do not count as idle, which would make idle work a per-round cost;
# short enough that a trace handle released while the input is quiet is acted on at once,
# for a person.
IDLE_DELAY_S = 0.05

Submit = Callable[[int, list[tuple[Any, int]]], None]

_SAFE_POINT_HOOKS: list[Callable[[], None]] = []
_RUNNING: dict[WorkerGroup, int] = {}  # running worker group -> the thread that runs it
# held while a group registers in _RUNNING, and by exclusive_safe_point's block: a group of
# another thread that starts then waits (it would pass at_safe_point's check unseen)
_REGISTRY = threading.Lock()


def on_safe_points(hook: Callable[[], None]) -> None:
    """Calls ``hook()`` after every round of every worker group, a safe point (see the
    module's documentation): it must be cheap when it has nothing to do."""
    _SAFE_POINT_HOOKS.append(hook)


def at_safe_point() -> bool:
    """Whether no activation is under way in this process: every running worker group is
    on this thread and none of their workers is inside a callback.

    >>> at_safe_point()
    True
    """
    me = threading.get_ident()
    for group, thread in list(_RUNNING.items()):
        if thread != me or any(w.stack_depth for w in group.workers):
            return False
    return True


@contextlib.contextmanager
def exclusive_safe_point() -> Iterator[bool]:
    """Whether this is a safe point (:func:`at_safe_point`), and it stays one while the block
    runs: no worker group can start meanwhile, on another thread either (it waits for the
    block's end). For work that must not overlap an activation anywhere in the process, such
    as the interner's collection; keep the block short."""
    with _REGISTRY:
        yield at_safe_point()


class Worker:
    """One worker: its run queues, its progress batches, and its task."""

    def __init__(self, index: int, peers: int, submit: Submit, group: WorkerGroup) -> None:
        self.index = index
        self.peers = peers
        self._submit = submit
        self.group = group
        self.msg_queue: deque[VertexShard] = deque()
        self.notify_queue: deque[VertexShard] = deque()
        self.idle_queue: deque[VertexShard] = deque()  # see the module's "Idle work"
        self.buffers: dict[int, ChangeBatch] = {}  # dataflow id -> progress batch
        self.stack_depth = 0
        self.activations = 0
        self.messages_ahead = 0  # message activations run while notifications waited
        self.transport: Any = None  # the process's transport, for producers that can wait

    def buffer_for(self, dataflow: int) -> ChangeBatch:
        buffer = self.buffers.get(dataflow)
        if buffer is None:
            buffer = self.buffers[dataflow] = ChangeBatch()
        return buffer

    def forget(self, dataflow: int) -> None:
        self.buffers.pop(dataflow, None)

    # --- run queues ----------------------------------------------------------------------------
    def schedule_messages(self, shard: VertexShard) -> None:
        if not shard.msg_queued:
            shard.msg_queued = True
            self.msg_queue.append(shard)
            self.group.wake()

    def schedule_notify(self, shard: VertexShard) -> None:
        if not shard.notify_queued:
            shard.notify_queued = True
            self.notify_queue.append(shard)
            self.group.wake()

    def schedule_idle(self, shard: VertexShard) -> None:
        if not shard.idle_queued:
            shard.idle_queued = True
            self.idle_queue.append(shard)
            self.group.wake()  # asleep, the group sets its idle timer

    def step_idle(self) -> int:
        """Runs the idle activations queued before this call (those requested meanwhile
        wait for the next pass); returns how many ran."""
        queue = self.idle_queue
        ran = len(queue)
        for _ in range(ran):
            shard = queue.popleft()
            shard.idle_queued = False
            shard.run_idle()
            self.flush()
        return ran

    # --- progress ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Submits every non-empty progress batch to the progress actor."""
        for dataflow, buffer in list(self.buffers.items()):
            if buffer._updates:
                changes = buffer.drain()
                if changes:
                    self._submit(dataflow, changes)

    def flush_outside_activation(self) -> None:
        """Submits the progress batches of a change made outside every callback (a driver's
        send, advance or drop). Inside one (an input fed, or a capability dropped, from an
        operator's callback) the activation under way submits them whole when it ends
        (invariant 1): its batch is half-built, and submitting it now would retire the message
        the callback consumes before what it sends next is counted."""
        if self.stack_depth == 0:
            self.flush()

    # --- running -------------------------------------------------------------------------------
    def step(self, budget: int = ACTIVATIONS_PER_ROUND, deadline: float = float("inf")) -> int:
        """Runs up to ``budget`` activations, messages first (a notification waits for at
        most ``MESSAGES_BEFORE_A_NOTIFICATION`` of them), stopping early once the clock
        passes ``deadline``; returns how many ran."""
        ran = 0
        msg_queue, notify_queue = self.msg_queue, self.notify_queue
        clock = time.perf_counter
        ahead = self.messages_ahead
        while ran < budget and (ran == 0 or clock() < deadline):
            if msg_queue and (not notify_queue or ahead < MESSAGES_BEFORE_A_NOTIFICATION):
                if notify_queue:
                    ahead += 1
                shard = msg_queue.popleft()
                shard.msg_queued = False
                shard.drain()
            elif notify_queue:
                ahead = 0
                shard = notify_queue.popleft()
                shard.notify_queued = False
                shard.deliver_notifications()
            else:
                break
            self.flush()
            ran += 1
        self.messages_ahead = ahead
        self.flush()
        self.activations += ran
        return ran


class WorkerGroup:
    """The task that steps the workers of one process in turn."""

    def __init__(self, after_round: Callable[[], None] = lambda: None) -> None:
        self.workers: list[Worker] = []
        self.after_round = after_round  # called after every round (completion checks)
        self._wakeup = asyncio.Event()
        self._sleeping = False
        self._stopped = False
        # since when the group has run no activation while idle work waited (None: it ran one)
        self._quiet_since: float | None = None

    def wake(self) -> None:
        if self._sleeping:
            self._sleeping = False
            self._wakeup.set()

    async def run(self) -> None:
        with _REGISTRY:  # (not while a collection runs in another thread)
            _RUNNING[self] = threading.get_ident()
        try:
            await self._run()
        finally:
            del _RUNNING[self]

    async def _run(self) -> None:
        workers = self.workers
        wakeup = self._wakeup
        clock = time.perf_counter
        hooks = _SAFE_POINT_HOOKS
        loop = asyncio.get_running_loop()
        while not self._stopped:
            deadline = clock() + YIELD_INTERVAL_S
            busy = True
            while busy and clock() < deadline:
                busy = False
                for worker in workers:
                    if worker.msg_queue or worker.notify_queue:
                        worker.step(ACTIVATIONS_PER_ROUND, deadline)
                        busy = True
                        self._quiet_since = None
                self.after_round()
                for hook in hooks:
                    hook()
                if self._stopped:
                    return
            if busy:
                await asyncio.sleep(0)
                continue
            timer = None
            if any(w.idle_queue for w in workers):
                now = clock()
                if self._quiet_since is None:
                    self._quiet_since = now
                wait = self._quiet_since + IDLE_DELAY_S - now
                if wait <= 0:
                    for worker in workers:
                        if worker.idle_queue:
                            worker.step_idle()
                    await asyncio.sleep(0)  # (I/O and the user's coroutines between steps)
                    continue
                timer = loop.call_later(wait, self.wake)
            self._sleeping = True
            wakeup.clear()
            await wakeup.wait()
            if timer is not None:
                timer.cancel()

    def stop(self) -> None:
        self._stopped = True
        self._sleeping = False
        self._wakeup.set()
