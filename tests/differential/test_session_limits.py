"""An input session refuses, where they are given, the epochs and diffs that a collection's
int64 columns cannot hold: the session goes on, and what it staged before is not lost."""

from __future__ import annotations

from typing import Any

import numpy as np
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


ONE = (np.array([1]),)


@pytest.mark.parametrize(
    "misuse",
    [
        lambda s: s.update("x", 2**63),  # was staged, then wrapped around to -2**63
        lambda s: s.update("x", np.uint64(2**64 - 1)),  # staged, then flush failed for ever
        lambda s: s.update("x", -(2**63) - 1),
        lambda s: s.send_columns(ONE, diffs=[2**63]),  # numpy made it a uint64: wrapped
        lambda s: s.send_columns(ONE, diffs=np.array([2**64 - 1], np.uint64)),  # became -1
    ],
)
def test_a_diff_beyond_int64_is_refused_where_it_is_given(misuse: Any) -> None:
    """Regression: a diff from 2**63 up was accepted and wrapped around to a negative one
    (the record removed instead of inserted), or staged and then failed every flush."""

    def refused(session: Any) -> None:
        with pytest.raises(OverflowError, match=r"beyond int64"):
            misuse(session)

    assert ref.watchdog(session_run(refused)) == [("after", 2, 1), ("kept", 2, 1)]


def test_static_sources_refuse_a_diff_beyond_int64() -> None:
    diffs = [np.array([2**63], np.uint64)]
    with pytest.raises(OverflowError, match=r"diff 9223372036854775808 is beyond int64"):
        naiad.run(lambda s: Collection.from_columns(s, [ONE], diffs).changes())
    with pytest.raises(OverflowError, match=r"diff 9223372036854775808 is beyond int64"):
        naiad.run(lambda s: Collection.from_epochs(s, [[("x", 2**63)]]).changes())
