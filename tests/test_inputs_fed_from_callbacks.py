"""An input handle used inside another operator's callback (an inspect of one dataflow that
feeds, advances or closes an input of another on the same worker) must not submit the
worker's progress batch in the middle of that callback: the batch then holds the -1 of the
message being consumed but not yet the +1 of what the callback sends next, so a downstream
input frontier moved past (or emptied before) a message still to be delivered, and in a TCP
cluster a dataflow could complete and drop the records in flight. The same for a dataflow
built inside a callback (building submits the new shards' progress). Checked with an oracle:
every message arrives at a time its receiver's frontier still allows, and nothing is lost;
on 1 worker, 2 workers and 2 simulated processes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]


class Checker(naiad.Vertex):
    """Records, for every message, its time and whether its input frontier allowed it."""

    def __init__(self, seen: list[tuple[Any, bool, int]]) -> None:
        self.seen = seen

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.seen.append((cap.time, self.frontier(0).less_equal(cap.time), len(batch)))
        self.send(cap, batch)


async def idle_for_peers() -> None:
    """Lets the closes reach every (simulated) process: a peer's capability at the first
    epoch would otherwise hold its time back too."""
    for _ in range(20):
        await asyncio.sleep(0)


async def feed_from_worker_zero(df: naiad.Dataflow) -> None:
    """Worker 0 alone sends records ``(epoch, i)``, 5 an epoch for 3 epochs: the message its
    inspect consumes is then the only thing that holds its time back. Waits for the end."""
    (first, _), *others = df.results
    for handle, _ in others:
        handle.close()
    await idle_for_peers()
    for epoch in range(3):
        first.send([(epoch, i) for i in range(5)])
        first.advance_to(epoch + 1)
    first.close()
    await df.finished()


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("operation", ["send", "advance_to", "close"])
async def test_an_input_used_inside_a_callback_keeps_the_frontiers_safe(
    config: dict[str, int], operation: str
) -> None:
    seen: list[tuple[Any, bool, int]] = []
    async with naiad.Runtime(**config) as rt:
        fed = rt.dataflow(lambda s: (lambda h, st: (h, st.collect()))(*s.new_input()), "fed")
        handles = [h for h, _ in fed.results]

        def build(s: naiad.Scope) -> tuple[naiad.InputHandle, list[Any]]:
            other = handles[s.index]

            def use(time: Any, batch: Any) -> None:
                if operation == "send":
                    other.send([len(batch)])
                elif operation == "advance_to":
                    other.advance_to(other.epoch + 1)
                else:
                    other.close()

            handle, stream = s.new_input()
            # every record to worker 0, the one that feeds: delivered on the inspect's stack
            checked = stream.inspect_batch(use).exchange(lambda x: 0).unary(Checker(seen))
            return handle, checked.collect()

        df = rt.dataflow(build, "feeding")
        await feed_from_worker_zero(df)
        for handle in handles:
            handle.close()
    assert [t for t, allowed, _ in seen if not allowed] == []
    records = sorted(r for _, out in df.results for _, r in out)
    assert records == [(e, i) for e in range(3) for i in range(5)]
    if operation == "send":
        # the other dataflow got one record per batch inspected: their sizes add up
        assert sum(r for _, out in fed.results for _, r in out) == 3 * 5


@pytest.mark.parametrize("config", CONFIGS)
async def test_a_dataflow_built_inside_a_callback_keeps_the_frontiers_safe(
    config: dict[str, int],
) -> None:
    # building starts the new dataflow's shards and submits their progress: not the
    # half-built batch of the dataflow whose callback builds it
    seen: list[tuple[Any, bool, int]] = []
    async with naiad.Runtime(**config) as rt:
        built: list[naiad.Dataflow] = []

        def build_one(time: Any, batch: Any) -> None:
            built.append(rt.dataflow(lambda s: s.from_epochs([[len(batch)]]).collect(), "inner"))

        def build(s: naiad.Scope) -> tuple[naiad.InputHandle, list[Any]]:
            handle, stream = s.new_input()
            checked = stream.inspect_batch(build_one).exchange(lambda x: 0).unary(Checker(seen))
            return handle, checked.collect()

        df = rt.dataflow(build, "building")
        await feed_from_worker_zero(df)
        for inner in built:
            await inner.finished()
    assert [t for t, allowed, _ in seen if not allowed] == []
    assert sorted(r for _, out in df.results for _, r in out) == [
        (e, i) for e in range(3) for i in range(5)
    ]
    assert sum(r for inner in built for out in inner.results for _, r in out) == 3 * 5


class StartSender(naiad.Vertex):
    """A source that sends its records from ``on_start``, at its initial capability."""

    def on_start(self, cap: naiad.Capability) -> None:
        self.send(cap, [self.index])


class Labeller(naiad.Vertex):
    """Labels records with what its ``on_start`` set up; logs its callbacks in order."""

    def __init__(self, log: list[tuple[int, str]]) -> None:
        self.log = log

    def on_start(self, cap: naiad.Capability) -> None:
        self.log.append((self.index, "start"))
        self.label = "ready"

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.log.append((self.index, "recv"))
        self.send(cap, [(self.label, x) for x in batch])


@pytest.mark.parametrize("config", CONFIGS)
async def test_a_dataflow_built_inside_a_callback_starts_every_operator_before_it_receives(
    config: dict[str, int],
) -> None:
    # the new dataflow starts on the callback's stack: what an on_start sends was delivered
    # there at once (cut-through) to a downstream operator not started yet, whose on_recv
    # then ran before its on_start (AttributeError: no 'label'), failing the runtime
    log: list[tuple[int, str]] = []
    async with naiad.Runtime(**config) as rt:
        built: list[naiad.Dataflow] = []

        def build_inner(s: naiad.Scope) -> list[Any]:
            node = s.add_operator("start_sender", StartSender(), [])
            return s.stream(node).unary(Labeller(log), name="labeller").collect()

        def build_one(time: Any, batch: Any) -> None:
            if not built:
                built.append(rt.dataflow(build_inner, "inner"))

        df = rt.dataflow(lambda s: s.from_epochs([[1]]).inspect_batch(build_one), "building")
        await df.finished()
        (inner,) = built
        await inner.finished()
    workers = config["workers"] * config.get("processes", 1)
    for w in range(workers):  # on every worker, its start first, then its one message
        assert [event for index, event in log if index == w] == ["start", "recv"], log
    got = sorted(r for out in inner.results for _, r in out)
    assert got == [("ready", w) for w in range(workers)]
