"""An input session refuses, where they are given, the epochs and diffs that a collection's
int64 columns cannot hold: the session goes on, and what it staged before is not lost."""

from __future__ import annotations

from typing import Any

import pytest

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref


async def session_run(misuse: Any) -> list[Any]:
    """Inserts "kept", calls ``misuse(session)`` (which must raise), inserts "after",
    closes; returns the changes."""

    def build(scope: Any) -> Any:
        session, c = Collection.new_input(scope)
        return session, c.changes()

    async with naiad.Runtime(1) as rt:
        session, changes = rt.dataflow(build).results[0]
        session.advance_to(2)
        session.insert("kept")
        misuse(session)
        session.insert("after")
        session.close()
    return changes


def test_an_epoch_beyond_int64_is_refused_and_the_session_goes_on() -> None:
    """Regression: advance_to(2**63) was accepted, and every later flush (and so close, and
    the runtime's exit) failed with numpy's bare 'Python int too large to convert to C
    long': the input could never be closed, and what was staged at that epoch was lost."""

    def misuse(session: Any) -> None:
        with pytest.raises(ValueError, match=r"an epoch 9223372036854775808 is beyond the int64"):
            session.advance_to(2**63)
        assert session.epoch == 2

    assert ref.watchdog(session_run(misuse)) == [("after", 2, 1), ("kept", 2, 1)]
