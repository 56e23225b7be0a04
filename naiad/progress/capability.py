"""Capabilities: the right to send at a time, as explicit objects.

Why they exist (timely's refinement of Naiad's ``NotifyAt``): progress tracking can only
promise that no message at time ``t`` will appear at a port if it knows every party that
could still produce one. A capability is such a party. Holding one is a ``+1`` on the count
of pointstamp ``(output port, time)``; an operator may only send at a time it holds a
capability for, and the count comes back down only when the capability is dropped or
downgraded. Nothing here relies on garbage collection: Python's ``__del__`` runs too late,
or never, so every release is an explicit call. ``__del__`` only reports a leak: an owned
capability collected while still held (timely's ``session(&cap.delayed(&t))`` written as
``send(cap.delayed(t), batch)``, which Rust would drop at the end of the statement) can never
be dropped, so its dataflow can never complete; a warning naming the operator and the time
says so, instead of a silent hang.

Two kinds: *owned* capabilities (created by :meth:`retain`, :meth:`delayed`, ``notify_at``,
or the initial capability an operator asks for) live until :meth:`drop`; *borrowed* ones are
handed to a callback (the time of a received message, or of a delivered notification) and
stop being valid when that callback returns. Checked methods raise :class:`CapabilityError`;
the ``try_`` forms return ``None`` / ``False`` instead.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from naiad.progress.antichain import le
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.timestamp import as_time_like, same_shape

log = logging.getLogger(__name__)


class CapabilityError(RuntimeError):
    """Misuse of a capability: wrong time, wrong operator, used after release."""


class Capability:
    """The right of one operator to send at ``time`` (and later) on its outputs.

    >>> buffer = ChangeBatch()
    >>> class Op: name = "demo"
    >>> cap = Capability.acquire(2, Op(), (7,), buffer)
    >>> later = cap.delayed(5)
    >>> cap.drop()
    >>> later.downgrade(6)
    >>> sorted(buffer)
    [((7, 6), 1)]
    >>> later.delayed(3)
    Traceback (most recent call last):
    ...
    naiad.progress.capability.CapabilityError: operator 'demo': time 3 is not at or after 6, the capability's time (sending backwards in time)
    """

    __slots__ = ("_borrowed", "_buffer", "_locations", "_owner", "_valid", "time")

    def __init__(
        self,
        time: Any,
        owner: Any,
        locations: tuple[int, ...],
        buffer: ChangeBatch,
        borrowed: bool,
    ) -> None:
        self.time = time
        self._owner = owner
        self._locations = locations
        self._buffer = buffer
        self._valid = True
        self._borrowed = borrowed

    @classmethod
    def acquire(
        cls, time: Any, owner: Any, locations: tuple[int, ...], buffer: ChangeBatch
    ) -> Capability:
        """A new owned capability; records ``+1`` at each of ``locations``."""
        for loc in locations:
            buffer.update((loc, time), 1)
        return cls(time, owner, locations, buffer, borrowed=False)

    @property
    def valid(self) -> bool:
        return self._valid

    @property
    def owner(self) -> Any:
        return self._owner

    def _check(self) -> None:
        if not self._valid:
            kind = (
                "borrowed capability (retain() it to keep it)" if self._borrowed else "capability"
            )
            raise CapabilityError(
                f"operator {self._owner.name!r}: the {kind} for time {self.time} is no longer valid"
            )

    def _shaped(self, time: Any) -> Any:
        """``time`` as a time of this capability's shape (a ``TypeError`` if it is not one:
        an int inside a loop failed deep in the partial order instead)."""
        if same_shape(time, self.time):  # the message is formatted only when needed
            return time
        return as_time_like(time, self.time, f"operator {self._owner.name!r}: a time")

    def _check_time(self, time: Any) -> Any:
        time = self._shaped(time)
        if not le(self.time, time):
            raise CapabilityError(
                f"operator {self._owner.name!r}: time {time} is not at or after {self.time}, "
                f"the capability's time (sending backwards in time)"
            )
        return time

    def delayed(self, time: Any) -> Capability:
        """A new owned capability for ``time``, which must be at or after this one's and of
        the same shape (a ``TypeError`` otherwise; numpy integers count as ints). It holds
        ``time`` until :meth:`drop`: timely's ``session(&cap.delayed(&t))``, written as
        ``send(cap.delayed(t), batch)``, keeps the dataflow from ever completing; a callback
        sends at a later time with ``send(t, batch)``, without one."""
        self._check()
        time = self._check_time(time)
        return Capability.acquire(time, self._owner, self._locations, self._buffer)

    def try_delayed(self, time: Any) -> Capability | None:
        """:meth:`delayed`, or ``None`` where it would raise a :class:`CapabilityError` (a
        time of the wrong shape still raises its ``TypeError``)."""
        time = self._shaped(time)
        if not self._valid or not le(self.time, time):
            return None
        return Capability.acquire(time, self._owner, self._locations, self._buffer)

    def retain(self) -> Capability:
        """An owned capability for the same time (how a callback keeps a borrowed one)."""
        return self.delayed(self.time)

    def downgrade(self, time: Any) -> None:
        """Moves this owned capability forward to ``time`` (the new count goes up first)."""
        self._check()
        if self._borrowed:
            raise CapabilityError(
                f"operator {self._owner.name!r}: a borrowed capability cannot be downgraded; "
                f"retain() it first"
            )
        running = getattr(self._owner, "check_running", None)
        if running is not None:  # as an input's advance_to, once the dataflow has stopped
            running()
        time = self._check_time(time)
        buffer, old = self._buffer, self.time
        for loc in self._locations:
            buffer.update((loc, time), 1)
        for loc in self._locations:
            buffer.update((loc, old), -1)
        self.time = time
        self._submit_outside()

    def try_downgrade(self, time: Any) -> bool:
        """:meth:`downgrade`, returning ``False`` where it would raise a
        :class:`CapabilityError`."""
        time = self._shaped(time)
        if not self._valid or self._borrowed or not le(self.time, time):
            return False
        self.downgrade(time)
        return True

    def drop(self) -> None:
        """Gives the capability up; the count at its time comes down."""
        self._check()
        if self._borrowed:
            raise CapabilityError(
                f"operator {self._owner.name!r}: a borrowed capability is released when the "
                f"callback returns; it cannot be dropped"
            )
        self._release()
        self._submit_outside()

    def _release(self) -> None:
        """Drops an owned capability inside an activation; the worker submits its progress
        batch when the activation ends."""
        self._valid = False
        for loc in self._locations:
            self._buffer.update((loc, self.time), -1)

    def _submit_outside(self) -> None:
        """Outside every callback (a driver coroutine holding a retained capability) no
        activation follows to submit the worker's progress batch: submit it now."""
        worker = getattr(self._owner, "worker", None)
        if worker is not None:
            worker.flush_outside_activation()

    def _release_borrowed(self) -> None:
        self._valid = False

    def __del__(self) -> None:
        # A report, never a release (ARCHITECTURE.md: no drop relies on __del__): when it
        # runs the capability is unreachable, so nothing can drop it any more.
        if not self._valid or self._borrowed:
            return
        owner = self._owner
        # only an operator's shard of a dataflow still running (not a dataflow that failed
        # or was stopped: its capabilities are abandoned with it)
        if getattr(owner, "worker", None) is None or getattr(owner, "failure", None) is not None:
            return
        # at interpreter shutdown logging may be gone: nothing left to tell then
        with contextlib.suppress(Exception):
            log.warning(
                "operator %r: an owned capability for time %r was garbage-collected without "
                "drop(): the dataflow can never complete. drop() what retain() and delayed() "
                "return; a callback sends at a later time with send(time, batch), without one",
                owner.name,
                self.time,
            )

    def __repr__(self) -> str:
        state = "borrowed" if self._borrowed else "owned"
        if not self._valid:
            state = "released"
        return f"Capability({self.time!r}, {self._owner.name!r}, {state})"
