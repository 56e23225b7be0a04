"""Supervision: an error in user code stops the dataflow and reaches the caller intact.

The exception raised by the user's callback is re-raised to whoever awaits the dataflow
(``run``, ``Runtime.__aexit__``, a probe, an input), as the same object: same type, and the
traceback still ends at the user's own line. A note added on the way names the operator, the
worker and the time, so the message says where in the dataflow it happened.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

_NOTED = "_naiad_noted"
# what a callback may raise but no coroutine can pass on as itself (see annotate)
_CANNOT_PASS = (StopIteration, asyncio.CancelledError, GeneratorExit)


def annotate(
    exc: BaseException, operator: str, worker: int, doing: str, time: Any
) -> BaseException:
    """Adds one note naming where in the dataflow ``exc`` was raised (only the innermost);
    returns the exception to raise: ``exc`` itself, except for one that no coroutine can
    pass on as itself: a ``StopIteration`` (Python turns it into "coroutine raised
    StopIteration", PEP 479), a ``CancelledError`` (it would end the workers' task as if
    cancelled, silently: every wait on the runtime would hang) or a ``GeneratorExit``; for
    those, a ``RuntimeError`` that says so, caused by it."""
    if not getattr(exc, _NOTED, False):
        with contextlib.suppress(AttributeError):  # an exception with __slots__ is noted anyway
            setattr(exc, _NOTED, True)
        at = "" if time is None else f" at time {time!r}"  # frontier callbacks have no time
        exc.add_note(f"naiad: raised in operator {operator!r} on worker {worker} {doing}{at}")
    if isinstance(exc, _CANNOT_PASS):
        kind = type(exc).__name__
        error = RuntimeError(
            f"operator {operator!r} raised {kind}{f': {exc}' if str(exc) else ''} "
            f"(it is this error's __cause__; a {kind} cannot leave the runtime's "
            f"coroutines as itself)"
        )
        error.__cause__ = exc
        for note in getattr(exc, "__notes__", ()):
            error.add_note(note)
        with contextlib.suppress(AttributeError):
            setattr(error, _NOTED, True)
        return error
    return exc


class DataflowStopped(RuntimeError):
    """The runtime stopped because another part of the dataflow failed."""


class DataflowDropped(DataflowStopped):
    """The dataflow was dropped (``Dataflow.drop``) while it ran: its handles refuse with
    this error, and the rest of the runtime goes on."""


def interrupted(exc: BaseException) -> BaseException:
    """The failure to record when ``exc`` stops the runtime from outside its callbacks: an
    ``Exception`` as itself; a ``CancelledError`` (a timeout, say), ``KeyboardInterrupt`` or
    ``SystemExit`` as a :class:`DataflowStopped` caused by it, so that handles awaited later
    (in other tasks, too) do not raise a bare ``CancelledError`` as if they had been
    cancelled themselves, and the peers hear what happened. One raised in a callback (a
    ``sys.exit()`` in a map, say) keeps its notes, which name the operator."""
    if isinstance(exc, Exception):
        return exc
    error = DataflowStopped(
        f"the runtime was stopped by {type(exc).__name__}{f': {exc}' if str(exc) else ''} "
        f"(the task running it was cancelled, or the program interrupted or exited)"
    )
    error.__cause__ = exc
    for note in getattr(exc, "__notes__", ()):
        error.add_note(note)
    return error


def stopped(what: str, failure: BaseException) -> DataflowStopped:
    """The error for a call that the runtime can no longer serve since ``failure`` stopped
    it: it names the failure and is caused by it (the original traceback follows). A
    dropped dataflow's handles say that it was dropped: the runtime itself goes on."""
    if isinstance(failure, DataflowDropped):
        dropped = DataflowDropped(f"{what}: {failure}")
        dropped.__cause__ = failure
        return dropped
    error = DataflowStopped(
        f"{what}: the runtime has stopped after an error: {type(failure).__name__}: {failure}"
    )
    error.__cause__ = failure
    return error
