"""A trace handle read from inside the dataflow, while its arrangement seals a frontier step,
never calls a time complete before the step's updates at that time are all in the spine.

An arrangement seals one batch per capability it holds, and in a loop (``Product`` times)
it may hold several incomparable ones: one frontier step then inserts several batches.
Regression: the spine's upper frontier moved with the first insert, and the arrangement
sent each batch as soon as it was sealed. A callback run on the stack of that send (an
``inspect_batch`` of the arranged stream, cut-through on the same worker) or a listener of
the spine then found ``complete(t)`` true and ``cursor(at=t)`` short of the updates still to
be inserted: with ``("a", 1)`` at ``(0, 3)`` and ``("b", 2)`` at ``(1, 0)`` sealed in one
step, the inspect of the first batch read ``{}`` at ``(1, 0)``, which holds ``("b", 2)``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, example, given, settings

import naiad
from naiad.differential import Collection
from naiad.differential.trace import TraceHandle
from naiad.differential.updates import Updates
from naiad.progress.timestamp import Product
from tests.differential.reference import watchdog

GRID = [Product(e, i) for e in range(3) for i in range(4)]  # the times updates are at

# (key, value, time, diff): one message per update, at the update's time
updates = st.lists(
    st.tuples(
        st.integers(0, 2), st.integers(0, 1), st.sampled_from(GRID), st.sampled_from([-1, 1])
    ),
    min_size=1,
    max_size=8,
)


def truth(sent: list[tuple[int, int, Product, int]], at: Product) -> Counter:
    """The accumulation at ``at``: every update at a time at or before it (product order)."""
    out: Counter = Counter()
    for key, value, t, diff in sent:
        if t.outer <= at.outer and t.inner <= at.inner:
            out[(key, value)] += diff
    return Counter({r: n for r, n in out.items() if n})


def contents(trace: TraceHandle, at: Product) -> Counter:
    out: Counter = Counter()
    cursor = trace.cursor(at=at)
    for _ in cursor:
        for value, history in cursor.values():
            out[(int(cursor.key()), int(value))] += sum(d for _, d in history)
    return Counter({r: n for r, n in out.items() if n})


async def run(
    sent: list[tuple[int, int, Product, int]], order: list[int], pause: list[bool]
) -> int:
    """Sends ``sent`` into an arrangement in a loop, holding a capability at each update's
    time and one at the least time; drops them in ``order`` (indices into those, the least
    time's first), yielding to the dataflow after a drop where ``pause`` says so, then the
    rest at once. Every read
    made while the dataflow runs (by an inspect of the arranged stream and by a listener of
    its spine, at each time of the grid) that finds the time complete must read its
    accumulation. Returns how many such reads there were."""
    reads: list[tuple[Product, Counter]] = []
    async with naiad.Runtime(workers=1) as rt:

        def build(s: naiad.Scope) -> Any:
            loop = s.iterative("loop")
            handle, stream = loop.new_unordered_input()
            arranged = Collection(stream).arrange_by_key()
            trace = arranged.trace

            def look(*_: Any) -> None:
                for q in GRID:
                    if trace.complete(q):
                        reads.append((q, contents(trace, q)))

            arranged.stream.inspect_batch(look)
            arranged.spine.listeners.append(look)
            return handle, trace

        handle, trace = rt.dataflow(build).results[0]
        least = handle.capability
        caps = []
        for key, value, t, diff in sent:
            cap = least.delayed(t)
            cap.send(Updates.from_records([((key, value), t, diff)], fields=2, depth=1), t)
            caps.append(cap)
        held = [least, *caps]
        for i, wait in zip(order, pause, strict=False):
            if held[i % len(held)].valid:
                held[i % len(held)].drop()
            if wait:
                await asyncio.sleep(0)
                await asyncio.sleep(0)
        for cap in held:
            if cap.valid:
                cap.drop()
        await trace.wait()
        for q in GRID:  # after the wait, as before: every time complete and whole
            assert contents(trace, q) == truth(sent, q), q
        trace.close()
    for q, got in reads:
        assert got == truth(sent, q), (q, got, truth(sent, q), sent)
    return len(reads)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(sent=[(0, 1, Product(0, 3), 1), (1, 1, Product(1, 0), 1)], order=[], pause=[])
@given(
    sent=updates,
    order=st.lists(st.integers(0, 8), max_size=9),
    pause=st.lists(st.booleans(), max_size=9),
)
def test_reads_inside_the_dataflow_never_find_a_time_complete_early(
    sent: list[Any], order: list[int], pause: list[bool]
) -> None:
    watchdog(run(sent, order, pause))


def test_one_step_sealing_two_batches_reads_whole_from_an_inspect_and_a_listener() -> None:
    """The case of the module docstring: both batches sealed in one step (every capability
    dropped at once), read from the inspect of each batch and the listener of each."""
    sent = [("a", 1, Product(0, 3), 1), ("b", 2, Product(1, 0), 1)]
    seen: list[tuple[str, int, bool, Counter | None]] = []

    async def main() -> None:
        async with naiad.Runtime(workers=1) as rt:

            def build(s: naiad.Scope) -> Any:
                handle, stream = s.iterative("loop").new_unordered_input()
                arranged = Collection(stream).arrange_by_key()
                trace = arranged.trace

                def look(where: str, size: int) -> None:
                    q = Product(1, 0)
                    done = trace.complete(q)
                    got = None
                    if done:
                        got = Counter()
                        cursor = trace.cursor(at=q)
                        for _ in cursor:
                            for value, history in cursor.values():
                                got[(cursor.key(), value)] += sum(d for _, d in history)
                    seen.append((where, size, done, got))

                arranged.stream.inspect_batch(lambda t, b: look("inspect", len(b)))
                arranged.spine.listeners.append(lambda b: look("listener", len(b)))
                return handle, trace

            handle, trace = rt.dataflow(build).results[0]
            least = handle.capability
            caps = [least.delayed(t) for _, _, t, _ in sent]
            for cap, (key, value, t, diff) in zip(caps, sent, strict=True):
                cap.send(Updates.from_records([((key, value), t, diff)], fields=2, depth=1), t)
            await asyncio.sleep(0.05)  # both sent and stashed: the step below seals both
            assert trace.upper == [Product(0, 0)]
            for cap in [least, *caps]:
                cap.drop()
            await trace.wait()
            trace.close()

    watchdog(main())
    # before the fix: [('listener', 1, True, Counter()), ('inspect', 1, True, Counter()),
    # then both again with ("b", 2)]: the first batch's readers found (1, 0) complete, empty
    assert all(got == Counter({("b", 2): 1}) for *_, done, got in seen if done)
    # the first listener runs with the second batch still to come, so (1, 0) is not complete
    # yet; the inspects run once both are in
    assert [s[:3] for s in seen] == [
        ("listener", 1, False),
        ("listener", 1, True),
        ("inspect", 1, True),
        ("inspect", 1, True),
    ]
