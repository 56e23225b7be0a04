"""The worker: a scheduler that runs vertex shards on one asyncio task.

Scheduling policy (Naiad §3.2): shards with messages in their mailbox run before shards that
only have notifications or frontier changes to consider, which keeps queued data small. After
every top-level activation the worker submits its progress batch (everything the activation
and the deliveries on its stack produced and consumed) to the process's progress actor, whole.

The worker yields to the event loop after a bounded number of activations, so that other
workers, transports and the user's own coroutines share the loop even while a loop in the
dataflow keeps this worker busy.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from naiad.actors.vertex import VertexShard
from naiad.progress.change_batch import ChangeBatch

# Activations between two yields to the event loop: large enough that the yield (a few µs)
# is amortized, small enough that another worker on the loop waits at most a few ms.
ACTIVATIONS_PER_YIELD = 256

Submit = Callable[[int, list[tuple[Any, int]]], None]


class Worker:
    """One worker: its run queues, its progress batches, and its task."""

    def __init__(self, index: int, peers: int, submit: Submit) -> None:
        self.index = index
        self.peers = peers
        self._submit = submit
        self.msg_queue: deque[VertexShard] = deque()
        self.notify_queue: deque[VertexShard] = deque()
        self.buffers: dict[int, ChangeBatch] = {}  # dataflow id -> progress batch
        self.stack_depth = 0
        self._wakeup = asyncio.Event()
        self._stopped = False
        self.activations = 0

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
            self._wakeup.set()

    def schedule_notify(self, shard: VertexShard) -> None:
        if not shard.notify_queued:
            shard.notify_queued = True
            self.notify_queue.append(shard)
            self._wakeup.set()

    def wake(self) -> None:
        self._wakeup.set()

    # --- progress ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Submits every non-empty progress batch to the progress actor."""
        for dataflow, buffer in list(self.buffers.items()):
            if buffer._updates:
                changes = buffer.drain()
                if changes:
                    self._submit(dataflow, changes)

    # --- running -------------------------------------------------------------------------------
    def step(self, budget: int = ACTIVATIONS_PER_YIELD) -> int:
        """Runs up to ``budget`` activations, messages first; returns how many ran."""
        ran = 0
        msg_queue, notify_queue = self.msg_queue, self.notify_queue
        while ran < budget:
            if msg_queue:
                shard = msg_queue.popleft()
                shard.msg_queued = False
                shard.drain()
            elif notify_queue:
                shard = notify_queue.popleft()
                shard.notify_queued = False
                shard.deliver_notifications()
            else:
                break
            self.flush()
            ran += 1
        self.flush()
        self.activations += ran
        return ran

    def has_work(self) -> bool:
        return bool(self.msg_queue or self.notify_queue)

    async def run(self) -> None:
        """The worker's task: step while there is work, sleep until woken otherwise."""
        wakeup = self._wakeup
        while not self._stopped:
            if self.msg_queue or self.notify_queue:
                self.step()
                await asyncio.sleep(0)
            else:
                wakeup.clear()
                await wakeup.wait()

    def stop(self) -> None:
        self._stopped = True
        self._wakeup.set()
