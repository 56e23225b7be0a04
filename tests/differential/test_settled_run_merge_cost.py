"""A reader that acknowledges many batches at once settles a run of batches that were never
merged (batches on either side of a reader's point are not merged). The spine must then merge
that run as it merges batches inserted one by one: each row O(log n) times, leaving O(log n)
batches. ``Spine._maintain`` only merged backwards from the run's end while the elder
neighbour was at most twice its size. Equal-size batches then merged the run right to left,
each merge taking the growing batch again: quadratic rows merged (1,637,600 for 400
acknowledged batches of 100 rows, 6,292,600 for 800). A run ending with a small batch (which
waits) or with one under half its elder's size was not merged at all: the spine held 501,
1,001, then 1,501 batches after acknowledgements of 500, for every insert to walk
(``_settled``, ``exert``: 196 batches per insert in a run of 8,000) and every reader to
search, until the idle effort merged them all, hundreds of inserts later."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from naiad.differential import trace as tr
from naiad.differential.trace import TAIL_BATCHES, Spine
from tests.counting import Work


def held_back(spine: Spine, every: int, batches: int, sizes: list[int]) -> list[int]:
    """Inserts ``batches`` batches of ``sizes`` rows (in turn) of distinct keys, a reader
    acknowledging them ``every`` at a time; the spine's batch count after each
    acknowledgement."""
    reader = spine.reader()
    after = []
    start = 0
    for e in range(batches):
        n = sizes[e % len(sizes)]
        keys = np.arange(start, start + n)
        start += n
        spine.insert_updates(
            keys, (), np.full((n, 1), e), np.ones(n, np.int64), upper=np.array([[e + 1]])
        )
        reader.follow_frontier([e])
        if e % every == every - 1:
            reader.set_physical_compaction(spine.next_seq - 1)
            after.append(len(spine.batches))
    return after


def test_an_acknowledged_run_of_equal_batches_merges_each_row_log_n_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = Work(monkeypatch)
    work.count(tr, "merge", "rows", weight=lambda batches, *_: sum(len(b) for b in batches))
    merged = {}
    for every in (100, 200):
        work.reset()
        spine = Spine(depth=0)
        held_back(spine, every, 4 * every, [100])
        rows = 4 * every * 100
        assert spine.total() == rows  # distinct keys: nothing cancels, nothing is lost
        merged[every] = work.total
        assert merged[every] <= 2 * rows * math.log2(4 * every), merged
    assert merged[200] <= 2.5 * merged[100], merged


@pytest.mark.parametrize("last", [30, 70])
def test_an_acknowledged_run_of_mixed_batches_leaves_few_batches(last: int) -> None:
    """The run ends with a small batch, which waits (30 rows: none of the run was merged), or
    with one under half its elder's size (70 after 190: the merging stopped at once)."""
    sizes = [int(n) for n in np.random.default_rng(0).integers(100, 200, 500)]
    sizes[-2:] = [190, last]
    spine = Spine(depth=0)
    after = held_back(spine, 500, 2000, sizes)
    bound = math.log2(spine.total()) + TAIL_BATCHES + 1
    assert max(after) <= bound, (after, bound)
    # the merges lost nothing: every key once, with its one insert
    got: Counter[int] = Counter()
    for b in spine.batches:
        for k, d in zip(b.keys.tolist(), b.diffs.tolist(), strict=True):
            got[k] += d
    assert got == Counter(range(4 * sum(sizes)))
