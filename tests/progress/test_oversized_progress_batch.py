"""A progress batch larger than the transport carries: it stops the runtime with an error
naming the batch, and uses no sequence number (a peer would wait for that number forever)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
import naiad.transport.base
from naiad.progress.progress_actor import ProgressActor
from tests.progress.test_early_progress_batches import graph

HANG = 10.0  # bounds a hang only


def test_a_broadcast_that_raises_uses_no_sequence_number() -> None:
    r, src = graph()
    sent: list[tuple[int, int]] = []

    def broadcast(peer: int, dataflow: int, seq: int, changes: Any) -> None:
        if len(changes) > 2:
            raise ValueError("too large")
        sent.append((peer, seq))

    actor = ProgressActor(0, 2, broadcast, accumulate=False)
    actor.register(0, r, [((src, 0), 2)], lambda _: None, [((src, 0), 1)])
    with pytest.raises(ValueError, match="too large"):
        actor.submit(0, [((src, t), 1) for t in range(1, 4)])
    actor.submit(0, [((src, 5), 1)])
    assert sent == [(1, 0)]  # the batch that went out first is number 0


def build(s: naiad.Scope) -> tuple[naiad.InputHandle, list[Any]]:
    handle, stream = s.new_input()
    return handle, stream.exchange(lambda x: x).collect()


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_progress_batch_over_the_message_limit_stops_the_runtime_naming_it(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Regression: the transport refused it after the progress actor had numbered it, with
    an error that named neither progress nor the dataflow ("a message of 5826 bytes to
    process 0 exceeds the limit of 4096 bytes")."""
    monkeypatch.setattr(naiad.transport.base, "MAX_PAYLOAD", 4096)
    with pytest.raises(ValueError, match="a progress batch of dataflow 0") as raised:
        async with naiad.Runtime(workers, processes=2, transport="inproc") as rt:
            df = rt.dataflow(build)
            for epoch in range(3000):  # thousands of epochs in flight at once
                for handle, _ in df.results:
                    handle.send([epoch])
                    handle.advance_to(epoch + 1)
            for handle, _ in df.results:
                handle.close()
            with pytest.raises(ValueError) as failed:
                await asyncio.wait_for(df.finished(), HANG)
            assert failed.value is rt._failure
    message = str(raised.value)
    assert "more than the 4096 bytes a message between processes may carry" in message
    assert "'dataflow'" in message


async def test_a_progress_batch_within_the_limit_goes_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same dataflow with fewer epochs in flight than the limit allows completes, with
    every record (the limit is on the message, not on the run)."""
    monkeypatch.setattr(naiad.transport.base, "MAX_PAYLOAD", 4096)
    async with naiad.Runtime(1, processes=2, transport="inproc") as rt:
        df = rt.dataflow(build)
        for epoch in range(3000):
            for handle, _ in df.results:
                handle.send([epoch])
                handle.advance_to(epoch + 1)
            if epoch % 100 == 99:
                await asyncio.sleep(0)  # the workers run, and flush their progress
        for handle, _ in df.results:
            handle.close()
        await asyncio.wait_for(df.finished(), HANG)
    got = sorted(x for _, out in df.results for _, x in out)
    assert got == sorted([*range(3000), *range(3000)])
