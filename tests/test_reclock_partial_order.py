"""``reclock`` with loop times, where two ticks at or after a record's time can be
incomparable: the record leaves at the least of all such ticks in the tuple order (outer time
first), whatever the schedule. An unordered input inside the loop sends data and ticks at
chosen ``Product(epoch, iteration)`` times and completes them in a random order with random
pauses (so a tick such as ``(1, 0)`` may complete while ``(0, 5)`` is still open), on 1 and 2
workers and 2 simulated processes; compared with the tick chosen in plain Python."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad import Product

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
times = st.builds(Product, st.integers(0, 2), st.integers(0, 3))


def oracle(data: list[Any], ticks: list[Any]) -> Counter[tuple[Any, int]]:
    """Record ``i`` (at ``data[i]``) at the least tick in the tuple order at or after it."""
    want: Counter[tuple[Any, int]] = Counter()
    for i, t in enumerate(data):
        at = [c for c in ticks if c.outer >= t.outer and c.inner >= t.inner]
        if at:
            want[(min(at), i)] += 1
    return want


def build(scope: naiad.Scope) -> Any:
    seen: list[tuple[Any, int]] = []
    with scope.iterative() as loop:
        handle, records = loop.new_unordered_input()
        data = records.filter(lambda r: r[0] == "d").map(lambda r: r[1]).exchange(lambda i: i)
        clock = records.filter(lambda r: r[0] == "c")
        out = data.reclock(clock)
        out.inspect_batch(lambda t, b: seen.extend((t, i) for i in b))
        probe = out.leave().probe()
    return handle, probe, seen


async def fed(data: list[Any], ticks: list[Any], order: list[Any], pause: int, config: Any) -> Any:
    """Worker 0 opens every time, then sends what is at each and drops it, in ``order`` (of
    the distinct times), with ``pause`` yields to the event loop after each."""
    assert sorted(order) == sorted(set(data) | set(ticks))
    async with naiad.Runtime(**config) as rt:
        df = rt.dataflow(build)
        handle, probe, _ = df.results[0]
        for other, _, _ in df.results[1:]:
            other.close()
        await send_in_order(handle, data, ticks, order, pause)
        await asyncio.wait_for(probe.wait(), 30)
    return Counter(pair for _, _, seen in df.results for pair in seen)


async def send_in_order(
    handle: Any, data: list[Any], ticks: list[Any], order: list[Any], pause: int
) -> None:
    """Opens every time of ``order`` on the unordered input ``handle``, then sends what is at
    each (a clock tick ``("c", 0)`` per tick there, record ``("d", i)`` for each ``data[i]``
    there) and drops it, in ``order``, with ``pause`` yields to the event loop after each."""
    start = handle.capability
    caps = {t: start.delayed(t) for t in order}
    start.drop()
    for t in order:
        cap = caps.pop(t)
        batch = [("c", 0)] * ticks.count(t) + [("d", i) for i, u in enumerate(data) if u == t]
        if batch:
            cap.send(batch)
        cap.drop()
        for _ in range(pause):
            await asyncio.sleep(0)


@pytest.mark.parametrize("config", CONFIGS)
@settings(max_examples=25, deadline=None)
@given(
    data=st.lists(times, min_size=1, max_size=4),
    ticks=st.lists(times, min_size=1, max_size=4),
    by_counter=st.booleans(),
    shuffle=st.randoms(use_true_random=False),
    pause=st.integers(0, 20),
)
def test_a_record_leaves_at_the_least_tick_in_the_tuple_order(
    config: dict[str, int],
    data: list[Any],
    ticks: list[Any],
    by_counter: bool,
    shuffle: Any,
    pause: int,
) -> None:
    """Times complete in a random order, or counter by counter with later epochs first (so
    that ``(1, 0)`` completes before ``(0, 1)``: the schedule that misled the old reclock)."""
    order = sorted(set(data) | set(ticks))
    shuffle.shuffle(order)
    if by_counter:
        order.sort(key=lambda t: (t.inner, -t.outer))
    assert asyncio.run(fed(data, ticks, order, pause, config)) == oracle(data, ticks)


@pytest.mark.parametrize("config", CONFIGS)
def test_incomparable_ticks_whichever_completes_first(config: dict[str, int]) -> None:
    """A record at (0, 0); ticks at (1, 0) and (0, 5), either completed first: the record
    leaves at (0, 5), the least in the tuple order (timely's reclock takes the first
    notified)."""
    data, ticks = [Product(0, 0)], [Product(0, 5), Product(1, 0)]
    for later in ticks:  # (0, 0) first, then the other tick, then this one
        order = [Product(0, 0), *(t for t in ticks if t != later), later]
        got = asyncio.run(fed(data, ticks, order, 20, config))
        assert got == Counter({(Product(0, 5), 0): 1})
