"""Reading ``UnorderedInputHandle.frontier`` costs the capabilities held, not their square:
it built an :class:`~naiad.progress.antichain.Antichain` by inserting each held time, and an
insert compares the time with every element kept, so n capabilities held at incomparable
times (a staircase in a loop) cost about n**2 comparisons per read (49,700 for a read of 200
and one of 100 held; 300 times passed to one pass of ``_minimal`` each now).
``Antichain.minimal_of`` gives the elements that inserting gives, in the same order (checked
on random times of every shape)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
import naiad.progress.antichain as antichain
from naiad import Lex, Product
from naiad.operators.unordered_input import UnorderedInputHandle
from naiad.progress.antichain import Antichain
from tests.counting import Work


async def read_staircase(n: int) -> tuple[list[Any], list[Any]]:
    """Holds ``Product(i, n - i)`` for i < n in a loop (its start dropped) and reads the
    frontier; then drops every other one and reads it again."""
    async with naiad.Runtime(1) as rt:

        def build(s: naiad.Scope) -> Any:
            with s.iterative() as loop:
                handle, stream = loop.new_unordered_input()
                return handle, stream.leave().probe()

        ((handle, probe),) = rt.dataflow(build).results
        start = handle.capability
        caps = [start.delayed(Product(i, n - i)) for i in range(n)]
        start.drop()
        full = handle.frontier.elements
        for cap in caps[::2]:
            cap.drop()
        half = handle.frontier.elements
        handle.close()
        await asyncio.wait_for(probe.wait(), 30)
    return full, half


@pytest.mark.timeout(60)
def test_reading_the_frontier_costs_the_capabilities_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counts the times compared one by one (``le``) and the times passed to ``_minimal``."""
    work = Work(monkeypatch)
    getter = SimpleNamespace(read=UnorderedInputHandle.frontier.fget)  # a property
    work.within(getter, "read", "frontier")
    monkeypatch.setattr(UnorderedInputHandle, "frontier", property(lambda h: getter.read(h)))
    work.count(antichain, "le")
    work.count(antichain, "_minimal", weight=len)
    cost = {}
    for n in (200, 400):
        work.reset()
        full, half = asyncio.run(read_staircase(n))
        assert full == [Product(i, n - i) for i in range(n)]
        assert half == [Product(i, n - i) for i in range(1, n, 2)]
        cost[n] = work.total
    # the old inserts: about n**2 + (n / 2)**2 comparisons (49,700 at n = 200, 199,400 at
    # 400); now the times held, 300 and 600
    assert cost[200] <= 1_000 and cost[400] <= 2.5 * cost[200], cost
    assert cost[200] > 0, cost  # the counting reached the handle


ints = st.integers(0, 6)
shapes = st.sampled_from(
    [
        ints,
        st.builds(Product, ints, ints),
        st.builds(Lex, ints, ints),
        st.builds(Product, st.builds(Product, ints, ints), ints),
        st.builds(Lex, st.builds(Product, ints, ints), ints),
    ]
)


@settings(max_examples=300, deadline=None)
@given(times=shapes.flatmap(lambda shape: st.lists(shape, max_size=12)))
def test_minimal_of_is_inserting_one_by_one(times: list[Any]) -> None:
    assert Antichain.minimal_of(times).elements == Antichain(times).elements
