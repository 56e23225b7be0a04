"""A dataflow dropped from a callback that another operator's send reached on its stack
(cut-through): the operator whose send it was goes on with its callback, and its next send
or capability change meets the drop. That must end the callback quietly (the dataflow is
gone, as ``Dataflow.drop`` promises, and the runtime goes on): it raised
``DataflowDropped`` out of the callback, which stopped the whole runtime and every other
dataflow with it. Found with a ``reduce`` that emits at two times in one frontier step."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad.differential import Collection
from tests.test_drop_dataflow import expected_squares, feed_squares, squares


class Dropper(naiad.Vertex):
    """Drops ``dataflow[0]`` when its first message arrives; counts what arrives."""

    def __init__(self, dataflow: list[naiad.Dataflow], seen: list[Any]) -> None:
        self.dataflow, self.seen = dataflow, seen

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.seen.append(len(batch))
        if not self.dataflow[0].dropped:
            self.dataflow[0].drop()


class SendsTwice(naiad.Vertex):
    """Sends each batch on in two messages, from one callback."""

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, batch[:1])
        self.send(cap, batch[1:])


def twice(holder: list[naiad.Dataflow], seen: list[Any]) -> Any:
    def build(s: naiad.Scope) -> Any:
        handle, stream = s.new_input()
        stream.unary(SendsTwice(), name="twice").unary(Dropper(holder, seen), name="dropper")
        return handle

    return build


def reduced(holder: list[naiad.Dataflow], seen: list[Any]) -> Any:
    """A reduce whose one frontier step evaluates two times of one key (epochs 0 and 1
    are complete at once), each sending a batch."""

    def build(s: naiad.Scope) -> Any:
        session, c = Collection.new_input(s)
        out = c.map(lambda x: (0, x)).reduce(lambda k, vals: [(len(vals), 1)])
        out.stream.unary(Dropper(holder, seen), name="dropper")
        return session

    return build


@pytest.mark.parametrize("kind", ["sends twice", "reduce"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_drop_reached_by_a_send_ends_the_sending_callback_quietly(
    workers: int, kind: str
) -> None:
    async def main() -> tuple[list[Any], list[Any]]:
        async with naiad.Runtime(workers) as rt:
            other = rt.dataflow(squares, name="squares")
            holder: list[naiad.Dataflow] = []
            seen: list[Any] = []
            build = twice if kind == "sends twice" else reduced
            holder.append(rt.dataflow(build(holder, seen), name="dropped"))
            inputs = holder[0].results
            if kind == "sends twice":
                inputs[0].send([1, 2])
                inputs[0].advance_to(1)
                for handle in inputs[1:]:
                    handle.advance_to(1)
            else:
                for epoch in range(2):  # two times for the reduce to evaluate at once
                    inputs[0].update(epoch, 1)
                    for handle in inputs:
                        handle.advance_to(epoch + 1)
            with pytest.raises(naiad.DataflowDropped, match="'dropped' was dropped"):
                await asyncio.wait_for(holder[0].finished(), 10)
            answers = await feed_squares(other, range(3))
            return seen, answers

    # before the fix: DataflowDropped "operator 'twice' ('reduce'): dataflow 'dropped' was
    # dropped" raised out of the callback, and the runtime stopped with it
    seen, answers = asyncio.run(main())
    assert len(seen) == 1  # the first message, which dropped it; nothing after
    assert answers == expected_squares(3, workers)
