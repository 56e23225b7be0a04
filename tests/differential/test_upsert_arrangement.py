"""``arrange_from_upsert`` / ``Collection.from_upserts``: the latest value per key, against a
from-scratch replay of the upserts at every epoch.

Hypothesis draws upsert histories (values, deletions of present and absent keys, repeated
values, several upserts of one key in one epoch, empty epochs) of int, string and tuple
keys, on 1 and 2 workers and 2 simulated processes, spread over the workers' inputs (so
ties arrive in any order); the arrangement is read as a collection, joined with an
arrangement by key, counted by its reduce, and imported into a second dataflow. Upserts
staged ahead at later times in one message are applied in time order. Misuse is refused
naming the operator: a Product loop when built, malformed or NaN records, and tied values
that cannot be ordered; a malformed record sent to an input raises at that send on every
layout, with nothing of the send delivered, and each record is checked once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, arrange_from_upsert, import_trace
from naiad.differential.updates import Updates, columns_of, route, stable_hash, time_matrix
from tests.differential import reference as ref

FAST = settings(max_examples=15, deadline=None)
LAYOUTS = st.sampled_from([(1, 1), (2, 1), (2, 2)])
KEYS = st.sampled_from([st.integers(0, 4), st.sampled_from(["a", "b", "c"]), ref.TUPLE_KEYS])
VALUES = st.sampled_from([st.integers(0, 3), st.sampled_from(["x", "y", "zz"])])

Upserts = list[list[tuple[Any, Any]]]


@st.composite
def upsert_histories(draw: Any) -> Upserts:
    keys, values = draw(KEYS), draw(VALUES)
    value_or_none = st.one_of(st.none(), values, values)
    epochs = draw(st.integers(1, 5))
    return [draw(st.lists(st.tuples(keys, value_or_none), max_size=7)) for _ in range(epochs)]


def winner(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def replayed(history: Upserts) -> list[Counter]:
    """Per epoch, the collection of ``(key, latest value)`` after its upserts."""
    state: dict[Any, Any] = {}
    out = []
    for upserts in history:
        at: dict[Any, list[Any]] = {}
        for key, value in upserts:
            at.setdefault(key, []).append(value)
        for key, values in at.items():
            state[key] = winner(values)
        out.append(Counter({(k, v): 1 for k, v in state.items() if v is not None}))
    return out


def other_side(history: Upserts) -> list[list[tuple[Any, int]]]:
    """A collection by the same keys: ``(key, "seen")`` once for every key ever upserted."""
    keys = sorted({k for upserts in history for k, _ in upserts}, key=repr)
    return [[((k, "seen"), 1) for k in keys]]


@FAST
@given(upsert_histories(), LAYOUTS)
def test_latest_value_per_key_at_every_epoch(history: Upserts, layout: Any) -> None:
    def build(scope: Any) -> Any:
        latest = arrange_from_upsert(scope.from_epochs(history))
        side = Collection.from_epochs(scope, other_side(history)).arrange_by_key()
        return (
            latest.as_collection().changes(),
            side.join(latest).changes(),
            latest.join(side).changes(),
            latest.count().changes(),
        )

    results = ref.run(build, layout)
    want = replayed(history)
    seen = [ref.accumulated(other_side(history), 0)] * len(history)
    ref.check([r[0] for r in results], want)
    ref.check([r[1] for r in results], [ref.join(s, w) for s, w in zip(seen, want, strict=True)])
    ref.check([r[2] for r in results], [ref.join(w, s) for s, w in zip(seen, want, strict=True)])
    ref.check([r[3] for r in results], [ref.count(w) for w in want])
    assert not ref.worker_consolidated([r[0] for r in results])


@FAST
@given(
    st.lists(
        st.tuples(ref.INT_KEYS, st.integers(0, 5), st.one_of(st.none(), st.integers(0, 2))),
        max_size=15,
    ),
    LAYOUTS,
)
def test_upserts_of_many_times_in_one_message_apply_in_time_order(
    upserts: Any, layout: Any
) -> None:
    """Records staged ahead at their times (an unordered input sends them all at once, the
    later times first): each key's upserts apply in time order, not arrival order."""

    async def main() -> list[Any]:
        workers, processes = layout
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

            def build(scope: Any) -> Any:
                handle, stream = scope.new_unordered_input()
                return handle, Collection.from_upserts(stream).as_collection().changes()

            df = rt.dataflow(build)
            for w, (handle, _) in enumerate(df.results):
                for time in sorted({t for _, t, _ in upserts}, reverse=True):
                    mine = [(k, v) for i, (k, t, v) in enumerate(upserts) if t == time]
                    mine = [r for i, r in enumerate(mine) if i % len(df.results) == w]
                    if mine:
                        handle.capability.send(mine, time=time)
                handle.capability.drop()
            await df.finished()
        return [r[1] for r in df.results]

    results = ref.watchdog(main())
    history: Upserts = [[(k, v) for k, t, v in upserts if t == time] for time in range(6)]
    ref.check(results, replayed(history))


@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (2, 2)])
def test_an_upsert_arrangement_is_imported_by_another_dataflow(layout: Any) -> None:
    history: Upserts = [[(1, "a"), (2, "b")], [(1, "c"), (3, "d")], [(2, None)]]

    async def main() -> list[Any]:
        workers, processes = layout
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

            def first(scope: Any) -> Any:
                handle, stream = scope.new_input()
                return handle, arrange_from_upsert(stream).trace

            df1 = rt.dataflow(first)
            for epoch, upserts in enumerate(history[:2]):
                if upserts:
                    df1.results[0][0].send(upserts)
                for handle, _ in df1.results:
                    handle.advance_to(epoch + 1)

            def second(scope: Any) -> Any:
                imported = import_trace(df1.results[scope.index][1], scope)
                return imported.as_collection().changes()

            df2 = rt.dataflow(second)
            for _, trace in df1.results:
                trace.close()
            df1.results[0][0].send(history[2])
            df1.close_inputs()
            await asyncio.wait_for(df2.finished(), 30)
        return df2.results

    ref.check(ref.watchdog(main()), replayed(history))


def test_routing_agrees_with_arrange_by_key() -> None:
    """Upserts go to the worker ``arrange_by_key`` sends records of their key to (its
    vectorized route of the key column), so the two arrangements join."""
    keys = [1, 2.0, "a", (1, "b"), True, 2**70, -5, 0.5]
    column = columns_of([(k, None) for k in keys])[0]
    u = Updates((column,), time_matrix([0] * len(keys), 0), np.ones(len(keys), np.int64))
    assert route(u).tolist() == [stable_hash(k) for k in keys]


def test_refused_inside_a_product_loop() -> None:
    def build(scope: Any) -> Any:
        with scope.iterative() as loop:
            stream = scope.from_epochs([[(1, 2)]]).enter(loop)
            arrange_from_upsert(stream, name="cdc")

    with pytest.raises(ValueError, match=r"cdc: needs totally ordered times"):
        naiad.run(build)


def test_a_collection_is_refused() -> None:
    with pytest.raises(TypeError, match=r"from_upserts: expected a timely Stream"):
        naiad.run(
            lambda s: Collection.from_upserts(Collection.from_epochs(s, [[(1, 1)]]), "from_upserts")
        )


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("records", "error", "message"),
    [
        (
            [(1, 2, 3)],
            TypeError,
            r"cdc: an upsert is a \(key, value or None\) tuple, not \(1, 2, 3\)",
        ),
        ([5], TypeError, r"cdc: an upsert is a \(key, value or None\) tuple, not 5"),
        ([(1, [2])], TypeError, r"cdc: record \(1, \[2\]\) is not hashable"),
        ([(1, float("nan"))], ValueError, r"cdc: record \(1, nan\) has a NaN field"),
        ([(1, "a"), (1, 2)], TypeError, r"cdc: key 1 has several upserts at time 0 whose values"),
        # only partially ordered (by inclusion): max() picked whichever arrived first
        (
            [(1, frozenset({1})), (1, frozenset({2}))],
            TypeError,
            r"cdc: key 1 has several upserts at time 0 whose values cannot be ordered",
        ),
        (
            [(1, frozenset({2})), (1, frozenset({1}))],
            TypeError,
            r"cdc: key 1 has several upserts at time 0 whose values cannot be ordered",
        ),
    ],
)
def test_bad_upserts_fail_naming_the_operator(
    workers: int, records: list[Any], error: type, message: str
) -> None:
    def build(scope: Any) -> Any:
        stream = scope.from_epochs([records])  # every worker keeps its share
        return arrange_from_upsert(stream, name="cdc").as_collection().changes()

    with pytest.raises(error, match=message):
        naiad.run(build, workers=workers)


MALFORMED = st.sampled_from(
    [
        (["k", 1], TypeError, r"an upsert is a \(key, value or None\) tuple, not \['k', 1\]"),
        ((1, 2, 3), TypeError, r"an upsert is a \(key, value or None\) tuple, not \(1, 2, 3\)"),
        (("k", [1]), TypeError, r"record \('k', \[1\]\) is not hashable"),
        (("k", float("nan")), ValueError, r"record \('k', nan\) has a NaN field"),
    ]
)


@FAST
@given(upsert_histories(), LAYOUTS, st.data())
def test_a_malformed_upsert_is_refused_at_send_on_every_layout(
    history: Upserts, layout: Any, data: Any
) -> None:
    """A send holding a malformed upsert raises at ``send`` naming the record, on 1 worker
    as on several (where the records are routed) and across processes; nothing of that send
    reaches the arrangement or the input's other consumer, and the dataflow goes on: later
    sends apply and it finishes with the upserts of the accepted sends."""
    epochs = len(history)
    bad_epoch = data.draw(st.integers(0, epochs - 1), label="bad epoch")
    bad, error, message = data.draw(MALFORMED, label="malformed record")
    position = data.draw(st.integers(0, len(history[bad_epoch])), label="position")
    accepted = list(history)

    async def main() -> tuple[list[Any], list[Any]]:
        workers, processes = layout
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

            def build(scope: Any) -> Any:
                handle, stream = scope.new_input()
                raw = stream.collect()  # the first consumer: refused before it is reached
                latest = arrange_from_upsert(stream, name="cdc").as_collection()
                return handle, latest.changes(), raw

            df = rt.dataflow(build)
            handles = [r[0] for r in df.results]
            bad_sender = bad_epoch % len(handles)
            for epoch, upserts in enumerate(history):
                for w, handle in enumerate(handles):
                    mine = upserts[w :: len(handles)]
                    if epoch == bad_epoch and w == bad_sender:
                        refused = [*mine[:position], bad, *mine[position:]]
                        with pytest.raises(error, match=f"cdc: {message}") as info:
                            handle.send(refused)
                        assert "naiad: while routing records to operator 'cdc'" in (
                            info.value.__notes__
                        )
                        n = len(handles)
                        accepted[epoch] = [r for i, r in enumerate(upserts) if i % n != w]
                    elif mine:
                        handle.send(mine)
                    handle.advance_to(epoch + 1)
            df.close_inputs()
            await df.finished()
        return [r[1] for r in df.results], [r[2] for r in df.results]

    changes, raw = ref.watchdog(main())
    ref.check(changes, replayed(accepted))
    sent = Counter((epoch, r) for epoch, upserts in enumerate(accepted) for r in upserts)
    assert Counter((t, r) for out in raw for t, r in out) == sent


@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (2, 2)])
def test_each_upsert_is_checked_once(layout: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The channel's check is the only one: not again when routed, nor in the operator."""
    import naiad.differential.upsert as upsert_module

    calls: list[Any] = []
    original = upsert_module.check_upsert

    def counted(record: Any, name: str) -> None:
        calls.append(record)
        original(record, name)

    monkeypatch.setattr(upsert_module, "check_upsert", counted)
    history: Upserts = [[(k, e) for k in range(10)] for e in range(3)]
    ref.check(
        ref.run(
            lambda s: arrange_from_upsert(s.from_epochs(history)).as_collection().changes(), layout
        ),
        replayed(history),
    )
    assert sorted(calls) == sorted(r for upserts in history for r in upserts)
