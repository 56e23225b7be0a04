"""The actor: a mailbox, a single thread of control and a re-entrancy limit (Naiad §3.2).

An actor lives on one worker (one asyncio task). It never runs two callbacks at once,
except by *re-entrancy*: while a callback of actor A is on the stack, a message it sends that
reaches A again (through a cycle on the same worker) may be delivered on the sender's stack
only while A's current depth is within ``reentrancy``; otherwise it waits in the mailbox. The
default limit 0 means "never re-entered": a message for a busy actor is queued. An idle actor
on the same worker can receive a message immediately on the sender's stack ("cut-through"),
which keeps queues short without any concurrency inside the actor.

The worker's scheduler (``worker.py``) runs actors whose mailbox is non-empty before actors
that only have notifications to consider.
"""

from __future__ import annotations

from collections import deque
from typing import Any

# A cap on the worker's cut-through stack: past it, a message is queued even for an idle
# actor. Python frames are expensive and the interpreter's recursion limit is finite; 32 nested
# deliveries cover long pipelines while leaving the default limit (1000) far away.
MAX_CUT_THROUGH_DEPTH = 32


class Actor:
    """Mailbox, single thread of control and re-entrancy bookkeeping for one vertex shard."""

    __slots__ = ("depth", "mailbox", "msg_queued", "name", "notify_queued", "reentrancy")

    def __init__(self, name: str, reentrancy: int = 0) -> None:
        if reentrancy < 0:
            raise ValueError(f"operator {name!r}: the re-entrancy limit must be >= 0")
        self.name = name
        self.reentrancy = reentrancy
        self.mailbox: deque[tuple[int, Any, Any]] = deque()
        self.depth = 0  # callbacks of this actor currently on the stack
        self.msg_queued = False
        self.notify_queued = False

    def accepts_on_stack(self, stack_depth: int) -> bool:
        """Whether a message may be delivered now, on the sender's stack.

        Only inside a callback on the same worker (``stack_depth > 0``): a message sent from
        outside the worker (an input handle, a start hook) always waits for the scheduler.
        """
        return self.depth <= self.reentrancy and 0 < stack_depth < MAX_CUT_THROUGH_DEPTH
