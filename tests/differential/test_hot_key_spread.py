"""count, distinct and threshold of a collection route records to the workers by whole
record, not by first field: a hot first field (a hub node's edges, one country's users)
spreads over every worker and process, as in differential dataflow, where these operators are
keyed by the whole record. They used to arrange by first field, so every record of a hot key
was arranged, read and counted on one worker.

The spread tests count the rows each worker's arrangement takes in and its reduce reads, and
the output records each worker holds (never time), and check the output against
recomputation. The oracle tests under random change sequences (hot keys, retractions, values
of mixed types, loops; 1, 2 and 4 workers, 2 simulated processes) are in
test_per_record_reduce.py; tests/cluster/test_configurations.py runs a hot key over TCP. An
arrangement routed by record is refused by the readers that need a key's records together
(join, import, per-key reduce).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection, import_trace
from naiad.differential.arrange import arrange
from naiad.differential.reduce import SumLogic
from naiad.differential.trace import Spine
from tests.differential import reference as ref

HOT = 600
OPS: dict[str, Any] = {
    "count": lambda c, total: c.count(total=total),
    "distinct": lambda c, total: c.distinct(total=total),
    "threshold": lambda c, total: c.threshold(ref.capped, total=total),
}


def hot_epochs() -> ref.Epochs:
    """``HOT`` records of first field 0, then more of them, then a fifth retracted."""
    return [
        [((0, v), 1) for v in range(HOT)],
        [((0, HOT + v), 2) for v in range(HOT // 4)],
        [((0, v), -1) for v in range(0, HOT, 5)],
    ]


class PerWorker:
    """Rows per worker: inserted into, and gathered from, the spines named ``name``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.inserted: Counter[int | None] = Counter()
        self.read: Counter[int | None] = Counter()
        insert, gather = Spine.insert_updates, Spine.gather

        def inserting(spine: Spine, keys: np.ndarray, *args: Any, **kwargs: Any) -> Any:
            if spine.name == name:
                self.inserted[spine.worker] += len(keys)
            return insert(spine, keys, *args, **kwargs)

        def gathering(spine: Spine, *args: Any, **kwargs: Any) -> Any:
            out = gather(spine, *args, **kwargs)
            if spine.name == name:
                self.read[spine.worker] += len(out[3])
            return out

        monkeypatch.setattr(Spine, "insert_updates", inserting)
        monkeypatch.setattr(Spine, "gather", gathering)


def assert_spread(per_worker: Counter[Any], workers: int, total: int) -> None:
    """Every worker has a fair share of ``total``: at least half of an even split."""
    assert sum(per_worker.values()) == total, per_worker
    assert len(per_worker) == workers and min(per_worker.values()) >= total / workers / 2, (
        per_worker
    )


@pytest.mark.parametrize("total", [None, False], ids=["total order", "generic"])
@pytest.mark.parametrize("layout", [(2, 1), (4, 1), (2, 2)], ids=["2 workers", "4", "2x2"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_a_hot_first_field_spreads_over_every_worker(
    op: str, layout: tuple[int, int], total: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of both algorithms (``total=None`` takes the total-order one here, which reads no
    history through ``gather``)."""
    epochs = hot_epochs()
    work = PerWorker(monkeypatch, f"{op}.arrange")
    results = ref.run(lambda s: OPS[op](Collection.from_epochs(s, epochs), total).changes(), layout)
    workers = layout[0] * layout[1]
    inserted = sum(len(changes) for changes in epochs)
    assert_spread(work.inserted, workers, inserted)
    if total is False:  # the generic reduce gathers each record's history
        assert sum(work.read.values()) >= HOT + HOT // 4  # each record read at least once
        assert_spread(work.read, workers, sum(work.read.values()))
    outputs = Counter({w: len(part) for w, part in enumerate(results)})
    assert_spread(outputs, workers, sum(outputs.values()))
    expected = {"count": ref.count, "distinct": ref.distinct}.get(op, ref.capped_threshold)
    ref.check(results, ref.expect_unary(epochs, expected))


@pytest.mark.parametrize("op", ["count", "distinct"])
def test_an_arrangement_by_key_keeps_a_hot_key_on_one_worker(op: str) -> None:
    """``Arranged.count`` and ``distinct`` read a user's arrangement as it is partitioned."""
    epochs = hot_epochs()
    results = ref.run(
        lambda s: getattr(Collection.from_epochs(s, epochs).arrange_by_key(), op)().changes(),
        (2, 1),
    )
    assert sorted(len(part) > 0 for part in results) == [False, True]
    expected = ref.count if op == "count" else ref.distinct
    ref.check(results, ref.expect_unary(epochs, expected))


def by_record(scope: Any, name: str = "spread") -> Any:
    """An arrangement routed by whole records, as ``count`` makes one."""
    return arrange(Collection.from_epochs(scope, [[((0, 1), 1)]]), name, by_record=True)


@pytest.mark.parametrize(
    "read",
    [
        lambda a, s: a.join(Collection.from_epochs(s, [[((0, 2), 1)]])),
        lambda a, s: Collection.from_epochs(s, [[((0, 2), 1)]]).join(a),
        lambda a, s: Collection.from_epochs(s, [[((0, 2), 1)]]).arrange_by_key().semijoin(a),
        lambda a, s: a.join_map(Collection.from_epochs(s, [[((0, 2), 1)]]), lambda k, v, w: v),
        lambda a, s: a.reduce(lambda k, vs: [(len(vs), 1)]),
        lambda a, s: a.reduce(SumLogic()),
    ],
    ids=["join", "joined", "semijoin", "join_map", "reduce", "sum"],
)
def test_keyed_readers_refuse_an_arrangement_routed_by_record(read: Any) -> None:
    def build(scope: Any) -> Any:
        return read(by_record(scope), scope)

    with pytest.raises(ValueError, match=r"'spread' is spread over the workers by whole records"):
        naiad.run(build, workers=2)


def test_an_entered_arrangement_routed_by_record_is_refused_by_a_join_in_the_loop() -> None:
    def build(scope: Any) -> Any:
        arranged = by_record(scope)
        start = Collection.from_epochs(scope, [[((0, 2), 1)]])
        return start.iterate(lambda v: v.join(arranged.enter(v.scope)).map(lambda r: r[:2]))

    with pytest.raises(ValueError, match=r"join: 'spread@enter' is spread over the workers"):
        naiad.run(build)


def test_an_import_of_an_arrangement_routed_by_record_is_refused() -> None:
    async def main() -> None:
        async with naiad.Runtime(2) as rt:
            source = rt.dataflow(lambda s: by_record(s).trace)
            with pytest.raises(ValueError, match=r"import: 'spread' is spread over the workers"):
                rt.dataflow(lambda s: import_trace(source.results[s.index], s))
            for handle in source.results:
                handle.close()
            source.close_inputs()
            await source.finished()

    ref.watchdog(main())


def test_count_of_a_count_stays_per_record() -> None:
    """A per-record logic may read an arrangement routed by record (the output of count is
    one, inside the operator); the counts of counts match recomputation on 4 workers."""
    epochs = hot_epochs()

    def build(scope: Any) -> Any:
        spread = arrange(Collection.from_epochs(scope, epochs), "spread", by_record=True)
        return spread.count().changes(), spread.distinct().changes()

    results = ref.run(build, (4, 1))
    ref.check([r[0] for r in results], ref.expect_unary(epochs, ref.count))
    ref.check([r[1] for r in results], ref.expect_unary(epochs, ref.distinct))


@pytest.mark.parametrize("workers", [2, 4])
def test_consolidate_spreads_records_whose_fields_share_their_low_bits(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """consolidate routes by the mixed hash of whole records too: records ``(x, x)`` met on
    one of two workers through the unmixed one, whose low bits cancel for equal fields."""
    from naiad.differential import collection

    received: Counter[int] = Counter()
    on_recv = collection._Consolidate.on_recv

    def counting(vertex: Any, port: int, cap: Any, batch: Any) -> None:
        if type(vertex) is collection._Consolidate:  # not changes(), a subclass
            received[vertex.index] += len(batch)
        on_recv(vertex, port, cap, batch)

    monkeypatch.setattr(collection._Consolidate, "on_recv", counting)
    epochs = [[((x, x), 1) for x in range(1000)]]
    out = naiad.run(
        lambda s: Collection.from_epochs(s, epochs).consolidate().changes(), workers=workers
    )
    assert sorted(r for changes in out for r, _, _ in changes) == [(x, x) for x in range(1000)]
    assert_spread(received, workers, 1000)
