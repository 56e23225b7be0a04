"""``distinct_total`` of a batch of a few rows takes a Python path (``TotalVertex._few_distinct``):
the same output as the vectorized path (``_changes``) on random traces and batches, records
of ints, of strings (interned codes) and of two fields, several times of a record in one
batch, blind retractions that make counts negative; and a count beyond int64 is left to the
vectorized path, which names the record.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from naiad.differential import Spine
from naiad.differential.diff_arithmetic import DiffOverflowError
from naiad.differential.total import SMALL_BATCH, TotalVertex

KEYS = {
    "ints": st.integers(0, 5),
    "strings": st.sampled_from(["a", "b", "c", "dd"]),
    "pairs": st.tuples(st.integers(0, 3), st.integers(0, 2)),
}


def insert(spine: Spine, updates: list[tuple[Any, int, int]], epoch: int, pairs: bool) -> Any:
    """Inserts ``(record, time, diff)`` updates as one batch with upper ``epoch + 1``."""
    records = [u[0] for u in updates]
    times = np.array([[u[1]] for u in updates], dtype=np.int64).reshape(-1, 1)
    diffs = np.array([u[2] for u in updates], dtype=np.int64)
    upper = np.array([[epoch + 1]])
    if pairs:
        keys = np.array([r[0] for r in records], dtype=np.int64)
        vals = (np.array([r[1] for r in records], dtype=np.int64),)
        return spine.insert_updates(keys, vals, times, diffs, upper)
    kind = object if records and isinstance(records[0], str) else np.int64
    return spine.insert_updates(np.array(records, dtype=kind), (), times, diffs, upper)


def changes(out: Any) -> Counter:
    got: Counter = Counter()
    for record, time, diff in out.to_records():
        got[record, time] += diff
    return Counter({k: v for k, v in got.items() if v})


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(sorted(KEYS)),
    data=st.data(),
)
def test_the_python_path_gives_the_vectorized_changes(kind: str, data: Any) -> None:
    keys = KEYS[kind]
    spine = Spine(depth=0)
    handle = spine.reader()
    earlier = data.draw(st.lists(st.lists(st.tuples(keys, st.integers(-2, 3)), max_size=8)))
    for epoch, batch in enumerate(earlier):
        insert(spine, [(r, epoch, d) for r, d in batch if d], epoch, kind == "pairs")
    last = len(earlier)
    new = data.draw(
        st.lists(
            st.tuples(keys, st.integers(0, 2), st.integers(-3, 3).filter(bool)),
            min_size=1,
            max_size=SMALL_BATCH,
        )
    )
    batch = insert(spine, [(r, last + t, d) for r, t, d in new], last + 2, kind == "pairs")
    assume(len(batch))  # (an empty batch is never read: on_recv returns first)
    vertex = TotalVertex(handle, None, False, "distinct_total")
    before = spine.batches_through(batch.seq_lo - 1)
    few = vertex._few_distinct(batch, before)
    assert few is not None
    assert changes(few) == changes(vertex._changes(batch, before))


def test_a_count_beyond_int64_is_named_by_the_vectorized_path() -> None:
    spine = Spine(depth=0)
    handle = spine.reader()
    big = 2**62
    for epoch in range(2):
        insert(spine, [(7, epoch, big)], epoch, False)
    batch = insert(spine, [(7, 2, 1)], 2, False)
    vertex = TotalVertex(handle, None, False, "distinct_total")
    assert vertex._few_distinct(batch, spine.batches_through(batch.seq_lo - 1)) is None
    with pytest.raises(DiffOverflowError, match="7"):
        vertex._changes(batch, spine.batches_through(batch.seq_lo - 1))


def test_a_dataflow_reads_small_batches_on_the_python_path(monkeypatch: Any) -> None:
    """Batches of up to ``SMALL_BATCH`` rows of a ``distinct`` take the Python path, larger
    ones, and ``count_total``'s, the vectorized one; the answers are the same."""
    import naiad
    from naiad.differential import Collection

    calls: Counter = Counter()
    for method in ("_few_distinct", "_changes"):
        original = getattr(TotalVertex, method)

        def counted(self: Any, *args: Any, _f: Any = original, _m: str = method) -> Any:
            calls[self.counting, _m] += 1
            return _f(self, *args)

        monkeypatch.setattr(TotalVertex, method, counted)

    def build(scope: Any) -> Any:
        records = [[(i, 1) for i in range(40)]]  # 40 records in the first batch
        records += [[(e % 7, 1)] for e in range(10)] + [[(e % 7, -1)] for e in range(10)]
        c = Collection.from_epochs(scope, records)
        return c.distinct_total().view(), c.count_total().view()

    distinct, counts = naiad.run(build)[0]
    assert {r for r, n in distinct.at(20).items() if n} == set(range(40))
    assert {r for r, n in counts.at(20).items() if n} == {(i, 1) for i in range(40)}
    assert calls[False, "_changes"] == 1  # the 40 rows of the first batch
    assert calls[False, "_few_distinct"] >= 1  # the later ones, of one record
    assert calls[True, "_few_distinct"] == 0  # count_total: the vectorized path only
