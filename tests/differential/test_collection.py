"""Collections against a from-scratch oracle: random change sequences with retractions over
several epochs, on 1, 2 and 4 workers and on two simulated processes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, InputSession

records = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "y", ("p", 1)]))
epochs = st.lists(st.lists(st.tuples(records, st.integers(-2, 2)), max_size=8), max_size=5)
layouts = st.sampled_from([(1, 1), (2, 1), (4, 1), (1, 2), (2, 2)])


def net_changes(per_epoch: list[list[tuple[Any, int]]], f: Any, keep: Any) -> Counter[Any]:
    """Per (record, epoch), the net change of ``f`` of the kept records: the oracle."""
    out: Counter[Any] = Counter()
    for epoch, changes in enumerate(per_epoch):
        for record, diff in changes:
            if keep(record):
                out[(f(record), epoch)] += diff
    return Counter({k: v for k, v in out.items() if v})


def gathered(results: list[list[tuple[Any, Any, int]]]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for part in results:
        for record, time, diff in part:
            assert diff != 0
            out[(record, time)] += diff
    return out


def describe(x: Any) -> str:
    return f"<{x}>"


def is_kept(x: Any) -> bool:
    return not isinstance(x, int) or x % 3 != 0


@settings(max_examples=40, deadline=None)
@given(epochs, layouts)
def test_map_filter_consolidate(per_epoch: list[Any], layout: tuple[int, int]) -> None:
    workers, processes = layout

    def build(scope: naiad.Scope) -> list[Any]:
        c = Collection.from_epochs(scope, per_epoch)
        return c.filter(is_kept).map(describe).consolidate().changes()

    results = naiad.run(build, workers, processes=processes, transport="inproc")
    assert gathered(results) == net_changes(per_epoch, describe, is_kept)
    # consolidated: one change per (record, time) in the whole cluster
    pairs = [(r, t) for part in results for r, t, _ in part]
    assert len(pairs) == len(set(pairs))


@settings(max_examples=30, deadline=None)
@given(epochs, epochs, layouts)
def test_concat_and_negate(a: list[Any], b: list[Any], layout: tuple[int, int]) -> None:
    workers, processes = layout

    def build(scope: naiad.Scope) -> list[Any]:
        ca, cb = Collection.from_epochs(scope, a), Collection.from_epochs(scope, b)
        return ca.concat(cb.negate()).consolidate().changes()

    results = naiad.run(build, workers, processes=processes, transport="inproc")
    want = net_changes(a, repr, lambda _: True)
    want.subtract(net_changes(b, repr, lambda _: True))
    got = Counter({(repr(r), t): d for (r, t), d in gathered(results).items()})
    assert got == Counter({k: v for k, v in want.items() if v})


@pytest.mark.parametrize("workers", [1, 3])
async def test_input_session_insert_remove_update(workers: int) -> None:
    async with naiad.Runtime(workers=workers) as rt:

        def build(scope: naiad.Scope) -> tuple[InputSession, list[Any]]:
            session, collection = Collection.new_input(scope)
            return session, collection.consolidate().changes()

        df = rt.dataflow(build)
        session = df.results[0][0]
        for other, _ in df.results[1:]:
            other.close()
        session.insert("a")
        session.insert("a")
        session.update("b", 3)
        session.advance_to(1)
        session.remove("a")
        session.insert("b")
        session.remove("b")  # cancels within the epoch
        session.advance_to(2)
        with pytest.raises(TypeError, match="integer"):
            session.update("c", 1.5)  # type: ignore[arg-type]
        session.close()
    got = sorted((r, t, d) for _, part in df.results for r, t, d in part)
    assert got == [("a", 0, 2), ("a", 1, -1), ("b", 0, 3)]
