"""A record too large for one frame on its own is refused naming the record, its place in the
batch, the message size and the limit, and the operator it was routed to; nothing of the batch
is delivered, and the dataflow keeps running (two simulated processes, a 2 KiB frame limit)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import naiad

LIMIT = 2048


@pytest.mark.parametrize("route", ["exchange", "broadcast"])
async def test_a_record_over_the_frame_limit_is_named(route: str) -> None:
    """Regression: refused as '... cannot be split (a batch of 1 records)' for a batch of 101
    records, after splitting it down to the record, without saying which record or the limit."""
    got: list[Any] = []
    async with naiad.Runtime(workers=1, processes=2, transport="inproc") as rt:
        for p in rt.processes:
            assert p.transport is not None
            p.transport.max_payload = LIMIT

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            routed = stream.exchange(lambda r: 1) if route == "exchange" else stream.broadcast()
            routed.inspect_batch(lambda t, b: got.extend(b))
            return handle

        df = rt.dataflow(build)
        first, second = df.results
        second.close()
        batch = [f"small {i}" for i in range(50)] + ["big" + "x" * 5000]
        batch += [f"small {i}" for i in range(50, 100)]
        with pytest.raises(ValueError) as refused:
            first.send(batch)
        message = str(refused.value)
        assert "a batch of 1 records" not in message
        assert re.search(r"record 50 of the 101 bound for worker 1 at time 0, 'bigx", message)
        size = re.search(r"needs a message of (\d+) bytes", message)
        assert size is not None and 5000 < int(size.group(1)) < 5100
        assert f"frame limit of {LIMIT} bytes (NAIAD_MAX_PAYLOAD)" in message
        assert any(route in note for note in refused.value.__notes__)
        # nothing of the refused batch went anywhere; the dataflow still works
        first.send(["after"])
        first.close()
        await df.finished()
    assert got == ["after"] * (2 if route == "broadcast" else 1)


async def test_an_update_over_the_frame_limit_is_named() -> None:
    """A differential batch (columnar ``Updates``): indexing it gives no record, so the error
    fell back to '... cannot be split (a Updates batch of 2 records)'."""
    from naiad.differential import Collection

    with pytest.raises(ValueError) as refused:  # raised by the map, sending to count
        async with naiad.Runtime(workers=1, processes=2, transport="inproc") as rt:
            for p in rt.processes:
                assert p.transport is not None
                p.transport.max_payload = LIMIT

            def build(scope: naiad.Scope) -> Any:
                session, words = Collection.new_input(scope)
                words.map(lambda w: w, name="to_worker").count().probe()
                return session

            df = rt.dataflow(build)
            first, second = df.results
            second.close()
            first.insert("small")
            for i in range(8):  # some of them go to worker 1, in the other process
                first.insert(f"{i}" + "b" * 3000)
            first.close()
            await df.finished()
    assert re.match(
        r"record \d of the \d bound for worker 1 at time 0, \('\dbbb.*', 0, 1\) \(tuple\), "
        r"needs a message of 30\d\d bytes, over the frame limit of 2048 bytes",
        str(refused.value),
    ), str(refused.value)
    assert any("count" in note for note in refused.value.__notes__)
