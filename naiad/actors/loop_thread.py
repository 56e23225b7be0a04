"""The one thread that may use a runtime: its event loop's.

A runtime's workers, their vertices and every handle on them (inputs, probes, trace
handles, the ``Dataflow`` object) are plain Python state, touched without a lock by the
event loop's thread; what they wake (an ``asyncio`` future or event) wakes that loop only
when it is set from that loop's thread. A call from another thread would change the state
unlocked and leave the loop asleep (a wait woken by it waits on, until something else wakes
the loop), and a wait run on another thread's loop is never woken at all. So each handle
keeps the thread it was made on (in a build: the loop's) and refuses any other with
:func:`check_loop_thread`: one ``threading.get_ident()`` per call, nothing per record.

The loop may run in any thread (``naiad.run`` called from a worker thread, a runtime under
``asyncio.run`` there): the thread kept is the one the handle was made on, not the main one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

CHANGES = (
    "a runtime and its handles are not thread-safe (the call would change the workers' "
    "state unlocked, and not wake the loop)"
)
WAITS = (
    "its waits are woken on the loop's thread, which cannot wake a wait on another "
    "thread's event loop"
)


def off_loop_error(
    what: str, example: str, error: type[Exception] = RuntimeError, why: str = CHANGES
) -> Exception:
    """The ``error`` to raise when ``what`` is used from another thread than its event loop's
    (the caller compares ``threading.get_ident()`` with the thread it kept); ``example``
    shows how to pass the call to that loop instead.

    >>> off_loop_error("input 'x'", "loop.call_soon_threadsafe(f)")  # doctest: +ELLIPSIS
    RuntimeError("input 'x' is used from another thread than its runtime's event loop: ...")
    """
    return error(
        f"{what} is used from another thread than its runtime's event loop: {why}; from "
        f"another thread, pass the call to the loop, e.g. {example}"
    )


def check_loop_thread(
    thread: int | None,
    what: str | Callable[[], str],
    example: str,
    error: type[Exception] = RuntimeError,
    why: str = CHANGES,
) -> None:
    """Raises :func:`off_loop_error` unless called on ``thread`` (the one a handle kept;
    None: any). ``what`` may be a function making the name, called only to refuse.

    >>> check_loop_thread(threading.get_ident(), "input 'x'", "...")  # the loop's: nothing
    >>> check_loop_thread(-1, lambda: "input 'x'", "f()")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: input 'x' is used from another thread than its runtime's event loop: ...
    """
    if thread is not None and threading.get_ident() != thread:
        raise off_loop_error(what() if callable(what) else what, example, error, why)
