"""Diffs given with columns (``send_columns``, ``from_columns``) are one per record: a
scalar (a multiplicity meant for all) is refused naming the counts and its shape, as an
array of the wrong length is, not as "len() of unsized object"; the session goes on and
loses nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection


@pytest.mark.parametrize("diffs", [3, np.int64(3), np.array(3)])
async def test_a_scalar_diff_for_columns_is_refused_and_nothing_is_lost(diffs: Any) -> None:
    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> Any:
            session, c = Collection.new_input(s, "cols")
            return session, c.consolidate().changes()

        session, out = rt.dataflow(build).results[0]
        session.insert(9)
        with pytest.raises(
            ValueError, match=r"^2 records need 2 diffs, not an array of shape \(\)"
        ):
            session.send_columns((np.array([1, 2]),), diffs)
        session.send_columns((np.array([1, 2]),), np.array([3, 3]))
        session.close()
    assert sorted(out) == [(1, 0, 3), (2, 0, 3), (9, 0, 1)]


def test_a_scalar_diff_of_a_static_source_is_refused() -> None:
    with pytest.raises(ValueError, match=r"2 records need 2 diffs, not an array of shape \(\)"):
        naiad.run(lambda s: Collection.from_columns(s, [(np.array([1, 2]),)], [np.int64(2)]))
    got = naiad.run(
        lambda s: Collection.from_columns(s, [(np.array([1, 2]),)], [np.array([2, -1])]).changes()
    )
    assert sorted(got[0]) == [(1, 0, 2), (2, 0, -1)]
