"""The ``Transport`` contract (``naiad/transport/base.py``) checked the same way on every
transport: what a transport promises, the in-process one keeps as TCP does, so that a
cluster simulated in one process behaves as a real one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from naiad.transport.base import Transport
from naiad.transport.codec import Header, Kind, packb
from naiad.transport.inproc import InProcNetwork
from naiad.transport.tcp import TcpTransport, listen_socket

TRANSPORTS = ["inproc", "tcp"]
HANG = 10.0  # bounds a hang only


class Recorder:
    """One end's frames and losses; its ``on_frame`` raises on the frame numbered ``bad``."""

    def __init__(self, bad: int | None = None) -> None:
        self.bad = bad
        self.seqs: list[tuple[int, int]] = []  # (peer, seq) of every frame handled
        self.lost: list[tuple[int, BaseException]] = []

    def on_frame(self, peer: int, header: Header, payload: memoryview) -> None:
        if header.seq == self.bad:
            raise ValueError(f"frame {header.seq} cannot be handled")
        self.seqs.append((peer, header.seq))

    def on_lost(self, peer: int, error: BaseException) -> None:
        self.lost.append((peer, error))


@asynccontextmanager
async def pair(kind: str, recorders: list[Recorder]) -> AsyncIterator[list[Transport]]:
    """Two started transports of ``kind``, reporting to ``recorders``; closed on exit."""
    transports: list[Transport]
    if kind == "inproc":
        transports = list(InProcNetwork(2).endpoints)
    else:
        socks = [listen_socket() for _ in range(2)]
        addresses = [s.getsockname()[:2] for s in socks]
        transports = [
            TcpTransport(i, 2, addresses, b"secret", listen_sock=socks[i]) for i in range(2)
        ]
    await asyncio.gather(
        *(t.start(r.on_frame, r.on_lost) for t, r in zip(transports, recorders, strict=True))
    )
    try:
        yield transports
    finally:
        await asyncio.gather(*(t.close() for t in transports))


def frame(seq: int, source: int, target: int) -> tuple[Header, list[bytes]]:
    payload = packb({"seq": seq})
    return Header(Kind.CONTROL, 0, 0, source, target, len(payload), seq), [payload]


async def eventually(condition: Callable[[], Any]) -> None:
    async with asyncio.timeout(HANG):
        while not condition():
            await asyncio.sleep(0.005)


async def settle() -> None:
    """Time for anything still on its way to arrive (it must not)."""
    await asyncio.sleep(0.1)


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_an_on_frame_that_raises_loses_that_peer(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (inproc): the error went to the event loop's exception handler, the next
    frames of that peer were still delivered, and neither end heard of a loss."""
    caplog.set_level(logging.ERROR)
    zero, one = Recorder(bad=1), Recorder()
    async with pair(kind, [zero, one]) as (t0, t1):
        for seq in range(3):
            t1.send(0, *frame(seq, 1, 0))
        await eventually(lambda: zero.lost and one.lost)
        # the frame after the bad one is not delivered, nor anything sent later, either way
        t1.send(0, *frame(3, 1, 0))
        t0.send(1, *frame(0, 0, 1))
        await settle()
        assert zero.seqs == [(1, 0)]
        assert one.seqs == []
    # each end heard once that it lost the other; the receiver, why
    assert [peer for peer, _ in zero.lost] == [1]
    assert str(zero.lost[0][1]) == "frame 1 cannot be handled"
    assert [peer for peer, _ in one.lost] == [0]
    assert any("from process 1" in r.getMessage() for r in caplog.records), caplog.text


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_frames_arrive_in_order_once_and_a_close_loses_nothing_sent(kind: str) -> None:
    zero, one = Recorder(), Recorder()
    async with pair(kind, [zero, one]) as (t0, t1):
        for seq in range(100):
            t0.send(1, *frame(seq, 0, 1))
            t1.send(0, *frame(seq, 1, 0))
        await eventually(lambda: len(zero.seqs) == len(one.seqs) == 100)
    assert zero.seqs == [(1, s) for s in range(100)]
    assert one.seqs == [(0, s) for s in range(100)]
    assert zero.lost == one.lost == []


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_a_message_over_max_message_is_refused_and_nothing_is_sent(kind: str) -> None:
    zero, one = Recorder(), Recorder()
    async with pair(kind, [zero, one]) as (t0, _):
        t0.max_payload, t0.max_message = 32, 64
        if isinstance(t0, TcpTransport):  # (it reads its own copies)
            t0._max_payload, t0._max_message = 32, 64
        payload = b"x" * 65
        header = Header(Kind.CONTROL, 0, 0, 0, 1, len(payload), 0)
        with pytest.raises(ValueError, match="exceeds the limit of 64 bytes"):
            t0.send(1, header, [payload])
        t0.send(1, *frame(1, 0, 1))
        await eventually(lambda: one.seqs)
        await settle()
    assert one.seqs == [(0, 1)]


@pytest.mark.parametrize("expected", [False, True])
@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_a_close_is_a_loss_to_the_peer_after_what_was_sent(
    kind: str, expected: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (inproc): a peer that closed was never reported lost, where TCP's peers see
    its connections close."""
    caplog.set_level(logging.WARNING)
    zero, one = Recorder(), Recorder()
    async with pair(kind, [zero, one]) as (t0, t1):
        if expected:
            t1.expect_close(0)
        for seq in range(3):
            t0.send(1, *frame(seq, 0, 1))
        await t0.close()
        await eventually(lambda: one.lost)
        # what was sent before the close arrived first; nothing flows after it, either way
        assert one.seqs == [(0, s) for s in range(3)]
        t1.send(0, *frame(0, 1, 0))
        await settle()
    assert [peer for peer, _ in one.lost] == [0]
    assert zero.lost == [] and zero.seqs == []  # the end that closed hears of nothing
    warned = [r for r in caplog.records if "lost its" in r.getMessage()]
    assert len(warned) == (0 if expected else 1), caplog.text
