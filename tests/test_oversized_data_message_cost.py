"""A data message too large for one frame is sent as several messages: every record arrives
once, in order, every frame within the limit, and the batch is encoded about twice, not once
per halving (two simulated processes, a frame limit of 2 KiB; work counted in bytes encoded)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
import naiad.runtime.process as process_module
from naiad.transport.codec import encode_message

LIMIT = 2048


def size(parts: list[Any]) -> int:
    return sum(len(bytes(p)) for p in parts)


async def sent_over(batch: list[Any], monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int]:
    """What worker 1 (process 1) received of ``batch`` sent by worker 0, and the bytes
    encoded on the way; every data frame is checked against the limit."""
    encoded = [0]

    def counting(time: Any, part: Any) -> Any:
        parts = encode_message(time, part)
        encoded[0] += size(parts)
        return parts

    monkeypatch.setattr(process_module, "encode_message", counting)
    got: list[Any] = []
    async with naiad.Runtime(workers=1, processes=2, transport="inproc") as rt:
        for p in rt.processes:
            assert p.transport is not None
            p.transport.max_payload = LIMIT
            send = p.transport.send

            def checked(peer: int, header: Any, parts: Any, send: Any = send) -> None:
                assert size(parts) <= LIMIT
                send(peer, header, parts)

            p.transport.send = checked  # type: ignore[method-assign]

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            stream.exchange(lambda r: 1).inspect_batch(lambda t, b: got.extend(b))
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        first.send(batch)
        first.close()
        await df.finished()
    return got, encoded[0]


async def test_a_batch_64_frames_long_is_encoded_about_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: the batch was halved until each half fitted, and encoded again at every
    level: 869,270 bytes encoded for this batch of 124,010 (7 times), 127 encodings; now 249,230."""
    batch = ["x" * 60] * 2000
    once = size(encode_message(0, batch))
    got, encoded = await sent_over(batch, monkeypatch)
    assert got == batch
    assert encoded <= 2.2 * once, (encoded, once)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.text(max_size=400), min_size=2, max_size=300))
def test_records_of_any_size_below_the_limit_arrive_once_in_order(records: list[str]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        got, _ = asyncio.run(sent_over(records, monkeypatch))
    assert got == records
