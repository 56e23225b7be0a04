"""Supervision: an error in user code stops the dataflow and reaches the caller intact.

The exception raised by the user's callback is re-raised to whoever awaits the dataflow
(``run``, ``Runtime.__aexit__``, a probe, an input), as the same object: same type, and the
traceback still ends at the user's own line. A note added on the way names the operator, the
worker and the time, so the message says where in the dataflow it happened.
"""

from __future__ import annotations

import contextlib
from typing import Any

_NOTED = "_naiad_noted"


def annotate(exc: BaseException, operator: str, worker: int, doing: str, time: Any) -> None:
    """Adds one note naming where in the dataflow ``exc`` was raised (only the innermost)."""
    if getattr(exc, _NOTED, False):
        return
    with contextlib.suppress(AttributeError):  # an exception with __slots__ is noted anyway
        setattr(exc, _NOTED, True)
    exc.add_note(
        f"naiad: raised in operator {operator!r} on worker {worker} {doing} at time {time!r}"
    )


class DataflowStopped(RuntimeError):
    """The runtime stopped because another part of the dataflow failed."""
