"""``min``/``max`` pick the rows of a few keys in Python (``ExtremeLogic._few``): the same
rows as the numpy path on random keys, values of one or two columns, counts of any sign;
and a dataflow takes that path for its small batches, with answers equal to recomputation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.differential import reduce as reduce_module
from naiad.differential.reduce import SMALL_EXTREMES, ExtremeLogic

rows = st.lists(
    st.tuples(st.integers(0, 4), st.integers(-3, 3), st.integers(0, 2), st.integers(-2, 2)),
    max_size=SMALL_EXTREMES,
)


def picked(out: Any) -> list[tuple[Any, ...]]:
    keys, vals, counts = out
    return list(zip(keys.tolist(), *(v.tolist() for v in vals), counts.tolist(), strict=True))


@settings(max_examples=200, deadline=None)
@given(rows=rows, largest=st.booleans(), width=st.sampled_from([1, 2]))
def test_the_python_picks_are_the_numpy_picks(
    rows: list[tuple[int, int, int, int]], largest: bool, width: int
) -> None:
    distinct = sorted({r[:3] for r in rows})  # (key, value, second value): sorted, distinct
    counts = {r[:3]: r[3] for r in rows}
    keys = np.array([r[0] for r in distinct], dtype=np.int64)
    vals = tuple(np.array([r[1 + i] for r in distinct], dtype=np.int64) for i in range(width))
    diffs = np.array([counts[r] for r in distinct], dtype=np.int64)
    logic = ExtremeLogic(largest)
    few = picked(logic(keys, vals, diffs, lambda c: c))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(reduce_module, "SMALL_EXTREMES", -1)  # the numpy path
        assert picked(logic(keys, vals, diffs, lambda c: c)) == few


@pytest.mark.parametrize("workers", [1, 2])
def test_a_dataflow_picks_its_small_batches_in_python(workers: int, monkeypatch: Any) -> None:
    calls = {"few": 0}
    original = ExtremeLogic._few

    def counted(self: ExtremeLogic, *args: Any) -> list[int]:
        calls["few"] += 1
        return original(self, *args)

    monkeypatch.setattr(ExtremeLogic, "_few", counted)
    epochs = [[((k % 3, k), 1) for k in range(6)], [((0, 0), -1)], [((1, 7), 1), ((1, 1), -1)]]

    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs)
        return c.min().view(), c.max().view()

    low, high = naiad.run(build, workers)[0]  # (gathered at worker 0)
    lows = {r: n for r, n in low.at(2).items() if n}
    highs = {r: n for r, n in high.at(2).items() if n}
    assert lows == {(0, 3): 1, (1, 4): 1, (2, 2): 1}
    assert highs == {(0, 3): 1, (1, 7): 1, (2, 5): 1}
    assert calls["few"] > 0
