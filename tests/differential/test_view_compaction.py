"""Views that compact (``Collection.view``, ``View.set_logical_compaction``, ``history=False``).

Oracle: the changes sent so far, accumulated from scratch at each time read. After every
epoch each view is read at every completed time: where the time is in advance of the view's
compaction frontier (checked here with the timestamps' own ``less_equal``, not the view's
numpy lattice) the contents must equal the oracle's; elsewhere the read must be refused.
Times are integers, ``Product`` or ``Lex`` loop times (records enter a loop at a counter of
their own), on 1 and 2 workers and 2 simulated processes, gathered or not.
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
from naiad.differential import Collection, View
from naiad.progress.antichain import MutableAntichain
from naiad.progress.timestamp import Lex, Product, join, less_equal

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 1, "processes": 2}]
KINDS = {"int": None, "product": Product, "lex": Lex}
COUNTERS = 3  # loop counters 0..2 at which records enter

# per epoch: (record, counter, diff) changes; records (r, counter) so that multi-column
# records are held, and the counter travels with its record
changes = st.lists(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, COUNTERS - 1), st.sampled_from([1, 1, -1])),
        max_size=6,
    ),
    min_size=1,
    max_size=5,
)
# per epoch: how to move the compaction frontier (None: not at all), as points (epoch step,
# counter) each joined with an element of the current frontier (so the move is forward)
moves = st.lists(
    st.none()
    | st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, COUNTERS), st.integers(0, 3)),
        min_size=1,
        max_size=2,
    ),
    min_size=5,
    max_size=5,
)


def time_of(kind: str, epoch: int, counter: int) -> Any:
    cls = KINDS[kind]
    return epoch if cls is None else cls(epoch, counter)


def minimal(times: list[Any]) -> list[Any]:
    distinct = list(dict.fromkeys(times))
    return [t for t in distinct if not any(s != t and less_equal(s, t) for s in distinct)]


def nonzero(counts: Counter[Any]) -> dict[Any, int]:
    return {k: n for k, n in counts.items() if n}


def build_views(kind: str, gather: bool, history: bool) -> Any:
    def build(scope: naiad.Scope) -> Any:
        session, collection = Collection.new_input(scope)
        if KINDS[kind] is not None:
            loop = scope.iterative("loop", time_class=KINDS[kind])
            collection = collection.enter_at(loop, lambda r, c: c)
        return session, collection.view(gather=gather, history=history)

    return build


async def check_views(
    config: dict[str, int],
    kind: str,
    gather: bool,
    history: bool,
    epochs: list[list[tuple[int, int, int]]],
    steps: list[Any],
) -> None:
    sent: list[tuple[Any, Any, int]] = []  # ((r, c), time, diff)
    since = [time_of(kind, 0, 0)]  # the frontier this test promised
    async with naiad.Runtime(**config) as rt:
        df = rt.dataflow(build_views(kind, gather, history))
        sessions = [s for s, _ in df.results]
        views = [v for _, v in df.results]
        readers = views[:1] if gather else views  # a gathered view is read at worker 0
        for e, batch in enumerate(epochs):
            for i, (r, c, d) in enumerate(batch):
                sessions[(r + i) % len(sessions)].update((r, c), d)
                sent.append(((r, c), time_of(kind, e, c), d))
            for s in sessions:
                s.advance_to(e + 1)
            for v in views:
                await asyncio.wait_for(v.wait(time_of(kind, e, COUNTERS)), 10)
            # what the view promises: in advance of this test's frontier and, for
            # history=False, of the latest complete epoch
            readable = since if history else minimal([join(s, time_of(kind, e, 0)) for s in since])
            for epoch in range(e + 1):
                for counter in range(COUNTERS + 1) if KINDS[kind] else [0]:
                    t = time_of(kind, epoch, counter)
                    if any(less_equal(s, t) for s in readable):
                        got: Counter[Any] = Counter()
                        for v in readers:
                            got.update(v.at(t))
                        want: Counter[Any] = Counter()
                        for rec, at, d in sent:
                            if less_equal(at, t):
                                want[rec] += d
                        assert nonzero(got) == nonzero(want), (t, views[0].since)
                    else:
                        for v in readers:
                            with pytest.raises(ValueError, match="not in advance of the view's"):
                                v.at(t)
            step = steps[e]
            if step is not None:
                since = minimal(
                    [join(time_of(kind, e + de, c), since[k % len(since)]) for de, c, k in step]
                )
                for v in views:
                    v.set_logical_compaction(since)
        for s in sessions:
            s.close()
        for v in views:
            await asyncio.wait_for(v.wait(), 10)


@settings(max_examples=40, deadline=None)
@given(
    changes,
    moves,
    st.sampled_from(CONFIGS),
    st.sampled_from(sorted(KINDS)),
    st.booleans(),
    st.booleans(),
)
def test_a_compacted_view_reads_like_recomputation_at_every_allowed_time(
    epochs: Any, steps: Any, config: dict[str, int], kind: str, gather: bool, history: bool
) -> None:
    asyncio.run(check_views(config, kind, gather, history, epochs, steps))


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("kind", ["product", "lex"])
def test_compaction_inside_a_loop_keeps_the_loop_order(config: dict[str, int], kind: str) -> None:
    """An update at counter 2 of epoch 0, the view compacted to (1, 0), then read at
    (1, 0): ``Lex`` counts the update there ((0, 2) comes before (1, 0)), ``Product`` does
    not (2 > 0) but does from (1, 2) on; compaction must advance the update by the loop's
    own order, or one of the two reads changes."""
    epochs = [[(0, 2, 1)], [(1, 0, 1)], []]
    steps = [[(1, 0, 0)], None, None, None, None]
    for gather, history in [(True, True), (False, True), (True, False)]:
        asyncio.run(check_views(config, kind, gather, history, epochs, steps))
    view, other = View((kind == "lex",)), (Product if kind == "lex" else Lex)(0, 0)
    with pytest.raises(TypeError, match="a view's time must have the shape of"):
        view.set_logical_compaction([other])  # equal as a tuple, but of the other order


def frontier(*times: Any) -> MutableAntichain:
    f = MutableAntichain()
    f.update_iter([(t, 1) for t in times])
    return f


def test_a_view_without_history_follows_its_frontier_to_the_start_of_the_last_epoch() -> None:
    """Inside a loop the input frontier may stand at a later iteration: the view keeps the
    whole previous epoch readable (its loop counters from 0), not only its later iterations."""
    view = View((False,), history=False)
    view._follow(frontier(Product(5, 3), Product(7, 1)))
    assert view.since == [Product(4, 0)]
    view._follow(frontier(Product(9, 2)))
    assert view.since == [Product(8, 0)]
    view.set_logical_compaction([Product(3, 6)])  # both apply: in advance of each
    assert view.since == [Product(8, 6)]


async def churn(
    history: bool, compact: bool, read: bool = True, epochs: int = 150, size: int = 20
) -> list[int]:
    """A live set of ``size`` records where each epoch removes a quarter and inserts as many
    new ones: the updates a view holds, epoch by epoch (``read``: the view is read at every
    epoch, which merges what it holds; otherwise only the merges as updates arrive compact
    it)."""
    step = size // 4
    held = []
    async with naiad.Runtime() as rt:
        ((session, view),) = rt.dataflow(
            lambda s: (lambda si, c: (si, c.view(history=history)))(*Collection.new_input(s))
        ).results
        live = list(range(size))
        fresh = size
        for r in live:
            session.insert(r)
        session.advance_to(1)
        for e in range(1, epochs):
            for r in live[:step]:
                session.remove(r)
            live = live[step:] + list(range(fresh, fresh + step))
            for r in live[-step:]:
                session.insert(r)
            fresh += step
            session.advance_to(e + 1)
            await asyncio.wait_for(view.wait(e), 10)
            if read:
                assert view.at(e) == dict.fromkeys(live, 1)
            if compact:
                view.set_logical_compaction([e])
            held.append(view.total())
        session.close()
        await asyncio.wait_for(view.wait(), 10)
        held.append(view.total())
    return held


@pytest.mark.parametrize(("read", "size"), [(True, 20), (False, 20), (False, 400)])
@pytest.mark.parametrize(("history", "compact"), [(False, False), (True, True), (False, True)])
async def test_a_compacting_view_holds_the_live_records_not_the_history(
    history: bool, compact: bool, read: bool, size: int
) -> None:
    """20 live records, 750 inserted and 730 removed over 150 epochs (or 400 live, messages
    larger than the small ones that wait to be merged together): merging as updates
    arrive keeps a bounded multiple of the live records, whatever the number of epochs."""
    held = await churn(history, compact, read, epochs=150 if size == 20 else 60, size=size)
    assert max(held) <= 6 * size, held
    assert max(held[-20:]) <= max(held[:20]), held  # not growing
    assert held[-1] == size  # the input complete: one merge to the contents


async def test_a_view_keeps_every_time_by_default() -> None:
    held = await churn(history=True, compact=False, epochs=60)
    assert held[-1] >= 60 * 10  # every insert and remove stays readable at its own epoch


async def test_reads_before_the_compaction_frontier_are_refused() -> None:
    async with naiad.Runtime() as rt:
        ((session, view, latest),) = rt.dataflow(
            lambda s: (lambda si, c: (si, c.view(name="V"), c.view(history=False, name="L")))(
                *Collection.new_input(s)
            )
        ).results
        for e in range(4):
            session.insert(e)
            session.advance_to(e + 1)
        await view.wait(3)
        await latest.wait(3)
        assert view.since == [0] and latest.since == [3]
        with pytest.raises(ValueError, match=r"view 'L': time 2 is not in advance of the .* \[3\]"):
            latest.at(2)
        view.set_logical_compaction([2])
        assert view.at(2) == {0: 1, 1: 1, 2: 1}
        with pytest.raises(ValueError) as info:
            view.at(1)
        assert "view 'V': time 1 is not in advance of the view's compaction frontier [2]" in str(
            info.value
        )
        assert "set_logical_compaction" in str(info.value)
        with pytest.raises(ValueError, match=r"cannot move the compaction frontier back from"):
            view.set_logical_compaction([1])
        with pytest.raises(TypeError, match="a view's time must be an integer"):
            view.set_logical_compaction([1.5])
        with pytest.raises(TypeError, match=r"view 'V': set_logical_compaction takes a frontier"):
            view.set_logical_compaction(3)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="beyond the int64 range"):
            view.set_logical_compaction([2**64])
        view.set_logical_compaction([])  # never read again: the contents go
        assert view.total() == 0 and view.since == []
        with pytest.raises(ValueError, match="released its contents"):
            view.at(3)
        session.close()


def test_history_must_be_a_bool() -> None:
    def build(s: naiad.Scope) -> Any:
        return Collection.from_epochs(s, [[(1, 1)]]).view(history="all", name="V")  # type: ignore[arg-type]

    with pytest.raises(TypeError, match=r"view 'V': history must be True or False, not 'all'"):
        naiad.run(build)


def test_views_agree_with_and_without_compaction_on_numpy_records() -> None:
    """Bulk columns (several fields, numeric) held and compacted as columns."""

    def build(s: naiad.Scope) -> Any:
        session, c = Collection.new_input(s)
        return session, c.view(), c.view(history=False)

    async def main() -> None:
        async with naiad.Runtime() as rt:
            ((session, full, latest),) = rt.dataflow(build).results
            rng = np.random.default_rng(5)
            for e in range(30):
                keys = rng.integers(0, 50, 40)
                session.send_columns((keys, keys % 7), rng.choice([1, -1], 40))
                session.advance_to(e + 1)
                await latest.wait(e)
                await full.wait(e)
                assert latest.at(e) == full.at(e)
            assert latest.total() <= 3 * 50 < full.total()
            session.close()

    asyncio.run(main())


async def test_a_read_before_the_least_time_names_that_not_a_compaction() -> None:
    """A negative time was refused as "not in advance of the compaction frontier [0]",
    blaming a set_logical_compaction the user never called."""
    async with naiad.Runtime() as rt:
        ((session, view, loop_view),) = rt.dataflow(
            lambda s: (lambda si, c: (si, c.view(name="V"), c.enter(s.iterative()).view()))(
                *Collection.new_input(s)
            )
        ).results
        session.insert(1)
        session.advance_to(1)
        await view.wait(0)
        await loop_view.wait(Product(0, 5))
        with pytest.raises(ValueError, match=r"view 'V': time -1 is before the least time 0"):
            view.at(-1)
        with pytest.raises(ValueError, match=r"is before the least time Product\(outer=0, inn"):
            loop_view.at(Product(0, -1))
        assert view.at(0) == {1: 1} and loop_view.at(Product(0, 0)) == {1: 1}
        session.close()


async def test_a_multiplicity_beyond_int64_is_reported_at_the_time_read() -> None:
    """The read summed its updates at time 0 whatever the time read, and the overflow error
    named time 0 for a read at 2."""
    async with naiad.Runtime() as rt:
        ((session, view),) = rt.dataflow(
            lambda s: (lambda si, c: (si, c.view(name="V")))(*Collection.new_input(s))
        ).results
        for e in range(3):
            session.update("r", 2**62)
            session.advance_to(e + 1)
        await view.wait(2)
        assert view.at(0) == {"r": 2**62}
        for t in (1, 2):
            with pytest.raises(
                OverflowError, match=rf"sum to {(t + 1) * 2**62} \(record 'r' at time {t}\)"
            ):
                view.at(t)
        session.close()
