"""An input handle (or a differential input session) used from another thread than its
runtime's event loop is refused, naming the input: the call would change the workers'
state without a lock and would not wake the loop (an advance_to made there left a probe
waiting until something else woke the loop, 5 s later in the case found). What the thread
staged in a session is not lost: the loop's thread sends it on its next flush."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import naiad
from naiad import InputError
from naiad.differential import Collection
from tests.test_handles_from_another_thread import in_thread

CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "session.advance_to": lambda session, handle: (session.insert("t"), session.advance_to(1)),
    "session.flush": lambda session, handle: (session.insert("t"), session.flush()),
    "session.close": lambda session, handle: (session.insert("t"), session.close()),
    "session.send_columns": lambda session, handle: session.send_columns((np.array([5]),)),
    "handle.send": lambda session, handle: handle.send([]),
    "handle.advance_to": lambda session, handle: handle.advance_to(1),
    "handle.close": lambda session, handle: handle.close(),
}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("workers", [1, 2])
async def test_a_handle_used_from_another_thread_is_refused_and_loses_nothing(
    call: str, workers: int
) -> None:
    def build(s: naiad.Scope) -> Any:
        session, c = Collection.new_input(s, "events")
        return session, c.changes(gather=True), c.probe()

    async with naiad.Runtime(workers) as rt:
        df = rt.dataflow(build)
        sessions = [r[0] for r in df.results]
        session, out, probe = df.results[0]
        session.insert("before")
        errors = in_thread(lambda: CALLS[call](session, session.handle))
        assert len(errors) == 1 and isinstance(errors[0], InputError)
        assert "input 'events' is used from another thread than its runtime's event loop" in (
            str(errors[0])
        )
        # the session works on from the loop's thread: it sends what the thread staged
        for s in sessions:
            s.advance_to(2)
        await asyncio.wait_for(probe.wait(1), 30)
        session.insert("after")
        for s in sessions:
            s.close()
    staged = (
        [("t", 0, 1)] if call in ("session.advance_to", "session.flush", "session.close") else []
    )
    assert sorted(out) == sorted([("before", 0, 1), ("after", 2, 1), *staged])
