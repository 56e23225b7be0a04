"""The TCP transport on loopback: exchange, authentication, bad input, timeouts, backpressure.

Several ``TcpTransport``\\ s run on one event loop, on pre-bound listening sockets on
127.0.0.1 (port 0). Each test runs its scenario on a fresh loop, uvloop (what naiad runs on)
and, where the code paths differ, the default asyncio loop too; any exception that reaches the
loop's exception handler fails the test. Strangers and malicious peers are raw asyncio streams;
``handshake`` performs the real challenge-response from such a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.transport import tcp
from naiad.transport.codec import (
    HEADER_SIZE,
    FrameError,
    Header,
    Kind,
    decode_changes,
    decode_message,
    encode_changes,
    encode_message,
    packb,
    unpackb,
)
from naiad.transport.tcp import (
    HANDSHAKE_MAGIC,
    HANDSHAKE_VERSION,
    HELLO,
    RESPONSE,
    TcpTransport,
    listen_socket,
    proof,
)

SECRET = b"a cluster secret for the tests"
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}
BOTH_LOOPS = pytest.mark.parametrize("loop", sorted(LOOPS))
LOGGER = "naiad.transport.tcp"


def run(coro: Awaitable[Any], loop: str = "uvloop", timeout: float = 30.0) -> Any:
    """Runs ``coro`` on a fresh loop; fails on anything the loop's exception handler sees."""
    errors: list[dict[str, Any]] = []
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.get_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        result = runner.run(asyncio.wait_for(coro, timeout))
    assert not errors, errors
    return result


class Member:
    """A transport and what it saw."""

    def __init__(self, transport: TcpTransport, keep: bool = True) -> None:
        self.t = transport
        self.keep = keep
        self.frames: list[tuple[int, Header, bytes]] = []
        self.count = 0
        self.lost: list[tuple[int, BaseException]] = []

    def on_frame(self, peer: int, header: Header, payload: memoryview) -> None:
        self.count += 1
        if self.keep:
            self.frames.append((peer, header, bytes(payload)))

    def on_lost(self, peer: int, error: BaseException) -> None:
        self.lost.append((peer, error))

    async def start(self) -> None:
        await self.t.start(self.on_frame, self.on_lost)


def bind(n: int) -> tuple[list[socket.socket], list[tuple[str, int]]]:
    socks = [listen_socket() for _ in range(n)]
    return socks, [s.getsockname()[:2] for s in socks]


async def cluster(n: int, secret: bytes = SECRET, **options: Any) -> list[Member]:
    socks, addresses = bind(n)
    members = [
        Member(TcpTransport(i, n, addresses, secret, listen_sock=socks[i], **options))
        for i in range(n)
    ]
    await asyncio.gather(*(m.start() for m in members))
    return members


async def close_all(members: list[Member]) -> None:
    await asyncio.gather(*(m.t.close() for m in members))


async def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a condition"
        await asyncio.sleep(0.002)


def nbytes(parts: list[Any]) -> int:
    return sum(memoryview(p).nbytes for p in parts)


def control(seq: int, source: int = 0, target: int = 0) -> tuple[Header, list[Any]]:
    parts = [packb({"seq": seq})]
    return Header(Kind.CONTROL, 0, 0, source, target, nbytes(parts), seq), parts


async def check_pair_works(a: Member, b: Member, frames: int = 50) -> None:
    """``a`` and ``b`` (already started) exchange frames both ways."""
    before_a, before_b = len(a.frames), len(b.frames)
    for seq in range(frames):
        a.t.send(b.t.process, *control(seq, a.t.process, b.t.process))
        b.t.send(a.t.process, *control(seq, b.t.process, a.t.process))
    await eventually(
        lambda: len(a.frames) == before_a + frames and len(b.frames) == before_b + frames
    )
    assert [unpackb(p)["seq"] for _, _, p in b.frames[before_b:]] == list(range(frames))
    assert [unpackb(p)["seq"] for _, _, p in a.frames[before_a:]] == list(range(frames))


async def fresh_pair_works() -> None:
    """A new cluster of two on other ports exchanges frames."""
    members = await cluster(2)
    await check_pair_works(*members)
    await close_all(members)


async def handshake(
    address: tuple[str, int],
    *,
    index: int,
    processes: int,
    secret: bytes = SECRET,
    flip: int | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
    """The connector's side of the real handshake, from a raw stream.

    Returns the stream and whether the acceptor proved the secret (False: it closed).
    ``flip`` flips that bit of the response before it is sent.
    """
    reader, writer = await asyncio.open_connection(*address)
    magic, version, acceptor, _, nonce_a = HELLO.unpack(await reader.readexactly(HELLO.size))
    assert (magic, version) == (HANDSHAKE_MAGIC, HANDSHAKE_VERSION)
    nonce_c = secrets.token_bytes(32)
    mine = proof(secret, b"connector", acceptor, index, processes, nonce_a, nonce_c)
    response = bytearray(
        RESPONSE.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, index, processes, nonce_c, mine)
    )
    if flip is not None:
        response[flip // 8] ^= 1 << (flip % 8)
    writer.write(response)
    try:
        ack = await reader.readexactly(32)
    except (asyncio.IncompleteReadError, ConnectionError):
        return reader, writer, False
    expected = proof(secret, b"acceptor", acceptor, index, processes, nonce_a, nonce_c)
    return reader, writer, ack == expected


async def closed_by_peer(reader: asyncio.StreamReader, timeout: float = 5.0) -> bool:
    """Whether the other end closes the stream (reading everything it sent until EOF)."""
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


def rejections(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and "rejected a connection" in r.getMessage()
    ]


SUMMARY = re.compile(
    r"process (\d+): (\d+) more connections were rejected without a warning each "
    r"\(at most (\d+) per (\S+) s\); the last from (.*)"
)


def summaries(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    """The rate limiter's summaries: how many rejections were not logged, and the last one."""
    found = []
    for r in caplog.records:
        match = SUMMARY.fullmatch(r.getMessage()) if r.name == LOGGER else None
        if match is not None:
            found.append((int(match[2]), match[5]))
    return found


def suppressed(caplog: pytest.LogCaptureFixture) -> int:
    return sum(count for count, _ in summaries(caplog))


def tcp_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == "ERROR"]


# -- exchange ------------------------------------------------------------------------------------


def random_frame(
    rng: random.Random, source: int, target: int, seq: int
) -> tuple[Header, list[Any], Any]:
    """A random DATA, PROGRESS or CONTROL frame and the value its payload decodes to."""
    roll = rng.random()
    if roll < 0.45:
        batch: Any = [rng.randrange(-(2**40), 2**40) for _ in range(rng.randrange(0, 40))]
        parts = encode_message(seq, batch)
        kind, value = Kind.DATA, (seq, batch)
    elif roll < 0.6:
        size = rng.choice([0, 1, 100, 5000, 70_000, 200_000])
        dtype = rng.choice([np.int64, np.float64, np.int32, np.uint8])
        batch = np.arange(size).astype(dtype)
        parts = encode_message((seq, source), batch)
        kind, value = Kind.DATA, ((seq, source), batch)
    elif roll < 0.8:
        changes = [((rng.randrange(10), rng.randrange(100)), rng.choice([-1, 1])) for _ in range(5)]
        parts = [encode_changes(changes)]
        kind, value = Kind.PROGRESS, changes
    else:
        value = {"seq": seq, "pad": b"x" * rng.randrange(0, 3000)}
        parts = [packb(value)]
        kind = Kind.CONTROL
    return Header(kind, 0, 7, source, target, nbytes(parts), seq), parts, value


def decode(header: Header, payload: bytes) -> Any:
    if header.kind == Kind.DATA:
        return decode_message(payload)
    if header.kind == Kind.PROGRESS:
        return decode_changes(payload)
    return unpackb(payload)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and np.array_equal(a, b)
        )
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


async def exchange(n: int, per_pair: int, seed: int) -> None:
    rng = random.Random(seed)
    members = await cluster(n)
    sent: dict[tuple[int, int], list[tuple[Header, Any]]] = {
        (i, j): [] for i in range(n) for j in range(n) if i != j
    }
    expected_frames = {int(k): 0 for k in Kind}
    expected_bytes = [{int(k): 0 for k in Kind} for _ in range(n)]
    order = [pair for pair in sent for _ in range(per_pair)]
    rng.shuffle(order)
    for step, (i, j) in enumerate(order):
        header, parts, value = random_frame(rng, i, j, len(sent[i, j]))
        members[i].t.send(j, header, parts)
        sent[i, j].append((header, value))
        expected_frames[header.kind] += 1
        expected_bytes[i][header.kind] += HEADER_SIZE + header.length
        if step % rng.randrange(1, 50) == 0:
            await asyncio.sleep(0)  # let the loop flush some of them
    await asyncio.gather(*(m.t.drain() for m in members))
    await eventually(lambda: all(len(m.frames) == (n - 1) * per_pair for m in members))
    for j, m in enumerate(members):
        for i in range(n):
            if i == j:
                continue
            got = [(h, p) for peer, h, p in m.frames if peer == i]
            assert [h for h, _ in got] == [h for h, _ in sent[i, j]]  # FIFO, headers intact
            for (_, payload), (header, value) in zip(got, sent[i, j], strict=True):
                assert same(decode(header, payload), value), (i, j, header)
    assert {
        k: sum(m.t.stats.frames[k] for m in members) for k in expected_frames
    } == expected_frames
    assert [m.t.stats.bytes for m in members] == expected_bytes
    assert all(not m.lost for m in members)
    await close_all(members)


@BOTH_LOOPS
@pytest.mark.parametrize("n", [2, 3])
def test_frames_flow_in_fifo_order_and_decode_to_what_was_sent(loop: str, n: int) -> None:
    run(exchange(n, per_pair=1500 // n, seed=n), loop)


@BOTH_LOOPS
def test_frames_can_be_answered_as_soon_as_they_arrive(loop: str) -> None:
    """A connector may receive frames before its own start() returns, and answer them.

    (The race this guards against, frames read between ``connection_made`` and the return of
    ``create_connection``, shows between OS processes: see the SIGKILL test.)
    """

    async def scenario() -> None:
        socks, addresses = bind(2)
        ts = [TcpTransport(i, 2, addresses, SECRET, listen_sock=socks[i]) for i in range(2)]
        echoed: list[int] = []

        def echo(peer: int, header: Header, payload: memoryview) -> None:
            ts[1].send(peer, header._replace(source=1, target=0), [payload])

        second = asyncio.create_task(ts[1].start(echo, None))
        await ts[0].start(lambda p, h, b: echoed.append(h.seq), None)
        for seq in range(20):  # at once, before process 1's start() has returned
            ts[0].send(1, *control(seq, 0, 1))
        await second
        await eventually(lambda: len(echoed) == 20)
        assert echoed == list(range(20))
        await asyncio.gather(*(t.close() for t in ts))

    run(scenario(), loop)


def test_single_process_starts_at_once_and_refuses_to_send_to_itself() -> None:
    async def scenario() -> None:
        t = TcpTransport(0, 1, [("127.0.0.1", 9)], SECRET)
        await asyncio.wait_for(t.start(lambda *a: None, lambda *a: None), 0.5)
        with pytest.raises(ValueError, match="cannot send to process 0"):
            t.send(0, *control(0))
        await t.close()

    run(scenario())


def test_misconfiguration_is_named() -> None:
    with pytest.raises(ValueError, match="1 addresses given for a cluster of 2"):
        TcpTransport(0, 2, [("127.0.0.1", 1)], SECRET)
    with pytest.raises(ValueError, match="secret must be non-empty bytes"):
        TcpTransport(0, 2, [("127.0.0.1", 1)] * 2, b"")
    with pytest.raises(ValueError, match=r"process index 2 is not in 0\.\.1"):
        TcpTransport(2, 2, [("127.0.0.1", 1)] * 2, SECRET)

    async def scenario() -> None:
        members = await cluster(2)
        with pytest.raises(ValueError, match="process 0 cannot send to process 5"):
            members[0].t.send(5, *control(0))
        header, parts = control(0)
        with pytest.raises(ValueError, match="does not match payload"):
            members[0].t.send(1, header._replace(length=header.length + 1), parts)
        unstarted = TcpTransport(0, 2, [("127.0.0.1", 1)] * 2, SECRET)
        with pytest.raises(RuntimeError, match="before start"):
            unstarted.send(1, *control(0))
        await close_all(members)

    run(scenario())


def test_binds_the_listed_address_without_a_listening_socket() -> None:
    async def scenario() -> None:
        socks, addresses = bind(3)
        for s in socks:  # free ports, released for the transports to bind themselves
            s.close()
        members = [Member(TcpTransport(i, 3, addresses, SECRET)) for i in range(3)]
        await asyncio.gather(*(m.start() for m in members))
        await check_pair_works(members[0], members[2])
        await check_pair_works(members[2], members[1])
        await close_all(members)

    run(scenario())


def test_small_frames_of_one_iteration_leave_in_one_write() -> None:
    async def scenario() -> None:
        a, b = await cluster(2)
        link = a.t._links[1]
        assert link is not None
        flushes = []
        flush = link.flush
        link.flush = lambda: (flushes.append(link.out_bytes), flush())[1]
        for seq in range(1000):  # 1000 small frames in one callback
            a.t.send(1, *control(seq, 0, 1))
        assert a.t.unsent(1) > 0 and not flushes  # nothing written yet: batched
        await eventually(lambda: len(b.frames) == 1000)
        assert len([f for f in flushes if f]) == 1  # one write for all of them
        assert [unpackb(p)["seq"] for _, _, p in b.frames] == list(range(1000))
        await close_all([a, b])

    run(scenario())


def test_large_payloads_arrive_read_only_and_decode_without_copies() -> None:
    async def scenario() -> None:
        socks, addresses = bind(2)
        got: list[tuple[Header, memoryview]] = []
        ts = [TcpTransport(i, 2, addresses, SECRET, listen_sock=socks[i]) for i in range(2)]
        await asyncio.gather(
            ts[0].start(lambda *a: None, None),
            ts[1].start(lambda p, h, b: got.append((h, b)), None),
        )
        array = np.arange(300_000, dtype=np.int64)
        for seq in range(3):
            parts = encode_message(seq, array)
            ts[0].send(1, Header(Kind.DATA, 0, 0, 0, 1, nbytes(parts), seq), parts)
        await eventually(lambda: len(got) == 3)
        for seq, (_, payload) in enumerate(got):
            assert payload.readonly
            time_, batch = decode_message(payload)
            assert time_ == seq and np.array_equal(batch, array)
            assert not batch.flags.writeable and not batch.flags.owndata
        await asyncio.gather(*(t.close() for t in ts))

    run(scenario())


# -- the frame parser, fed in arbitrary pieces ---------------------------------------------------


def parser_link(max_payload: int = 1 << 24) -> tuple[tcp._Link, list[tuple[Header, bytes]]]:
    transport = TcpTransport(0, 2, [("127.0.0.1", 1)] * 2, SECRET, max_payload=max_payload)
    transport._loop = asyncio.new_event_loop()
    got: list[tuple[Header, bytes]] = []
    transport._on_frame = lambda peer, header, payload: got.append((header, bytes(payload)))
    return tcp._Link(transport, 1, "test"), got


def test_drains_given_up_while_a_peer_stalls_are_not_kept() -> None:
    """Regression: every drain cancelled (a timeout) while the peer did not read stayed in
    the link's waiter list until the peer read again."""
    link, _ = parser_link()
    loop = link.loop

    async def poll() -> None:
        link.paused = True  # the peer stopped reading
        for _ in range(50):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(link.writable(), 0.001)
        assert link.waiters == []
        waiting = loop.create_task(link.writable())
        await asyncio.sleep(0)
        assert len(link.waiters) == 1
        link.resume_writing()
        await waiting
        assert link.waiters == []

    try:
        loop.run_until_complete(poll())
    finally:
        loop.close()


def feed(link: tcp._Link, stream: bytes, cuts: list[int]) -> None:
    position, cut = 0, 0
    while position < len(stream) and not link.lost:
        buffer = link.get_buffer(-1)
        size = cuts[cut % len(cuts)] if cuts else len(stream)
        cut += 1
        n = min(len(buffer), size, len(stream) - position)
        buffer[:n] = stream[position : position + n]
        link.buffer_updated(n)
        position += n


SIZES = st.one_of(
    st.integers(0, 100),
    st.integers(tcp.LARGE_FRAME - 40, tcp.LARGE_FRAME + 40),
    st.integers(0, 3 * tcp.RECV_BUFFER),
)


@settings(max_examples=60, deadline=None, database=None)
@given(
    sizes=st.lists(SIZES, max_size=10),
    cuts=st.lists(st.integers(1, 300_000), max_size=20),
    seed=st.integers(0, 2**32),
    eof_at=st.none() | st.floats(0, 1),
)
def test_parser_delivers_every_frame_whatever_the_read_sizes(
    sizes: list[int], cuts: list[int], seed: int, eof_at: float | None
) -> None:
    rng = random.Random(seed)
    frames = []
    for seq, size in enumerate(sizes):
        kind = rng.choice([Kind.DATA, Kind.PROGRESS, Kind.CONTROL])
        frames.append((Header(kind, 1, 2, 3, 4, size, seq), rng.randbytes(size)))
    stream = b"".join(h.pack() + p for h, p in frames)
    boundaries = {0}
    for h, _ in frames:
        boundaries.add(max(boundaries) + HEADER_SIZE + h.length)
    end = len(stream) if eof_at is None else int(eof_at * len(stream))
    link, got = parser_link()
    try:
        feed(link, stream[:end], cuts)
        complete = [f for f, b in zip(frames, sorted(boundaries)[1:], strict=True) if b <= end]
        assert got == complete
        link.eof_received()
        assert link.lost == (end not in boundaries)  # EOF mid-frame is an error
    finally:
        link.owner._running_loop().close()


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (b"XX" + Header(Kind.DATA, 0, 0, 0, 0, 0, 0).pack()[2:], "bad frame magic b'XX'"),
        (b"NA\x09" + Header(Kind.DATA, 0, 0, 0, 0, 0, 0).pack()[3:], "unsupported frame version 9"),
        (Header(9, 0, 0, 0, 0, 0, 0).pack(), "unknown frame kind 9"),
        (Header(Kind.DATA, 0, 0, 0, 0, 5000, 0).pack(), "exceeds the limit of 4096"),
    ],
)
def test_parser_rejects_bad_headers(bad: bytes, problem: str) -> None:
    link, got = parser_link(max_payload=4096)
    good = Header(Kind.CONTROL, 0, 0, 0, 0, 3, 0).pack() + b"abc"
    try:
        feed(link, good + bad + good, [7])
        assert link.lost and len(got) == 1
    finally:
        link.owner._running_loop().close()


# -- authentication ------------------------------------------------------------------------------


def test_a_wrong_secret_cannot_join_and_the_rightful_members_still_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def scenario() -> None:
        socks, addresses = bind(2)
        first = Member(TcpTransport(0, 2, addresses, SECRET, listen_sock=socks[0]))
        waiting = asyncio.create_task(first.start())
        impostor = Member(TcpTransport(1, 2, addresses, b"guess", listen_sock=listen_socket()))
        where = f"127.0.0.1:{addresses[0][1]}"
        with pytest.raises(ConnectionError, match=f"process 0 at {where} rejected its handshake"):
            await impostor.start()
        assert any("authentication failed" in m for m in rejections(caplog))
        assert not waiting.done()
        rightful = Member(TcpTransport(1, 2, addresses, SECRET, listen_sock=socks[1]))
        await asyncio.gather(waiting, rightful.start())
        await check_pair_works(first, rightful)
        assert not first.lost and not rightful.lost
        await close_all([first, rightful, impostor])

    run(scenario())


def test_an_acceptor_with_a_wrong_secret_is_refused_by_the_connector() -> None:
    async def scenario() -> None:
        socks, addresses = bind(2)
        wrong = Member(
            TcpTransport(0, 2, addresses, b"other", listen_sock=socks[0], connect_timeout=0.5)
        )
        right = Member(TcpTransport(1, 2, addresses, SECRET, listen_sock=socks[1]))
        results = await asyncio.gather(wrong.start(), right.start(), return_exceptions=True)
        assert isinstance(results[0], TimeoutError)
        assert "process 1 (127.0.0.1:" in str(results[0]) and "did not connect" in str(results[0])
        assert isinstance(results[1], ConnectionError) and "rejected" in str(results[1])
        await close_all([wrong, right])

    run(scenario())


def test_the_connector_checks_the_acceptors_proof() -> None:
    """An impostor acceptor that cannot compute the proof is refused (mutual authentication)."""

    async def scenario() -> None:
        async def impostor(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(HELLO.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 0, 2, bytes(32)))
            await reader.readexactly(RESPONSE.size)
            writer.write(secrets.token_bytes(32))  # not the proof
            await reader.read()
            writer.close()

        server = await asyncio.start_server(impostor, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        addresses = [("127.0.0.1", port), ("127.0.0.1", 1)]
        t = TcpTransport(1, 2, addresses, SECRET, listen_sock=listen_socket())
        with pytest.raises(ConnectionError, match="failed to prove it knows the cluster secret"):
            await t.start(lambda *a: None, lambda *a: None)
        server.close()
        await server.wait_closed()

    run(scenario())


def test_strangers_are_rejected_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def scenario() -> None:
        members = await cluster(3, handshake_timeout=0.3)
        address = members[0].t.addresses[0]
        header = Header(Kind.DATA, 0, 0, 1, 0, 8, 0).pack() + b"12345678"

        async def stranger(data: bytes, eof: bool = False) -> bool:
            reader, writer = await asyncio.open_connection(*address)
            writer.write(data)
            if eof:
                writer.write_eof()
            closed = await closed_by_peer(reader)
            writer.close()
            return closed

        cases: list[tuple[Callable[[], Awaitable[bool]], str]] = [
            (lambda: stranger(secrets.token_bytes(200)), "not a naiad handshake"),
            (lambda: stranger(secrets.token_bytes(20), eof=True), "closed during the handshake"),
            (lambda: stranger(header), "no handshake within 0.3 s"),
            (lambda: stranger(b""), "no handshake within 0.3 s"),
        ]
        for index, processes, reason in [
            (7, 3, "claims process index 7"),
            (0, 3, "claims process index 0"),
            (1, 3, "process index 1, which is already connected"),
            (2, 4, "belongs to a cluster of 4 processes, not 3"),
        ]:

            async def authenticated(index: int = index, processes: int = processes) -> bool:
                reader, writer, ok = await handshake(address, index=index, processes=processes)
                assert not ok
                closed = await closed_by_peer(reader)
                writer.close()
                return closed

            cases.append((authenticated, reason))
        for attempt, reason in cases:
            before = len(rejections(caplog))
            assert await attempt(), reason  # the member closed the connection
            await eventually(lambda before=before: len(rejections(caplog)) == before + 1)
            assert reason in rejections(caplog)[-1]
            assert "from 127.0.0.1:" in rejections(caplog)[-1]
        await check_pair_works(members[0], members[1])
        await check_pair_works(members[2], members[0])
        assert all(not m.lost for m in members)
        assert all(p in (0, 1, 2) for m in members for p, _, _ in m.frames)
        await close_all(members)

    run(scenario())


def test_the_rate_limiter_lets_the_limit_through_and_counts_the_rest() -> None:
    now = 0.0
    limiter = tcp.RateLimiter(limit=10, window=10.0, clock=lambda: now)
    assert [limiter.admit(f"{i}") for i in range(10)] == [(True, None)] * 10
    assert [limiter.admit(f"{i}") for i in range(10, 25)] == [(False, None)] * 15
    now = 9.999  # still the first window
    assert limiter.admit("25") == (False, None)
    assert limiter.suppressed == 16
    now = 10.0  # the window is over: the next event is let through with the summary
    assert limiter.admit("26") == (True, tcp.Suppressed(16, "25"))
    assert limiter.suppressed == 0
    assert [limiter.admit(f"{i}") for i in range(27, 40)] == [(True, None)] * 9 + [
        (False, None)
    ] * 4
    now = 100.0  # a quiet window: nothing to report, everything let through
    assert limiter.admit("40") == (True, tcp.Suppressed(4, "39"))
    assert [limiter.admit(f"{i}") for i in range(41, 50)] == [(True, None)] * 9
    assert limiter.flush() is None
    assert limiter.admit("50") == (False, None)
    assert limiter.flush() == tcp.Suppressed(1, "50")  # at shutdown, before the window ends
    assert limiter.flush() is None  # reported once
    now = 110.0
    assert limiter.admit("51") == (True, None)
    with pytest.raises(ValueError, match="at least one"):
        tcp.RateLimiter(limit=0)
    with pytest.raises(ValueError, match="must be positive"):
        tcp.RateLimiter(window=0.0)


async def limited_pair(limiter: tcp.RateLimiter) -> tuple[list[Member], list[tuple[str, int]]]:
    """Two started members; member 0 logs its rejections through ``limiter``."""
    socks, addresses = bind(2)
    members = [
        Member(
            TcpTransport(0, 2, addresses, SECRET, listen_sock=socks[0], rejection_limiter=limiter)
        ),
        Member(TcpTransport(1, 2, addresses, SECRET, listen_sock=socks[1])),
    ]
    await asyncio.gather(*(m.start() for m in members))
    return members, addresses


@BOTH_LOOPS
def test_a_flood_of_strangers_is_logged_at_a_limited_rate(
    loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    now = 0.0
    limiter = tcp.RateLimiter(limit=10, window=10.0, clock=lambda: now)
    last = re.compile(
        r"127\.0\.0\.1:\d+: (not a naiad handshake|authentication failed \(a wrong secret.*)"
    )

    async def scenario() -> None:
        nonlocal now
        members, addresses = await limited_pair(limiter)

        async def stranger(i: int) -> None:
            if i % 2:  # the real handshake with a wrong secret
                reader, writer, ok = await handshake(
                    addresses[0], index=1, processes=2, secret=b"wrong"
                )
                assert not ok
            else:  # garbage the size of a handshake response
                reader, writer = await asyncio.open_connection(*addresses[0])
                writer.write(secrets.token_bytes(RESPONSE.size))
            assert await closed_by_peer(reader)  # rejected (and logged or counted) before that
            writer.close()

        async def flood(count: int) -> None:
            for start in range(0, count, 50):
                await asyncio.gather(*(stranger(i) for i in range(start, min(start + 50, count))))

        await flood(200)
        assert len(rejections(caplog)) == 10 and not summaries(caplog)
        assert limiter.suppressed == 190
        await check_pair_works(*members)  # the members are not disturbed

        now = 10.0  # the next rejection, after the window, reports the 190 first
        await flood(1)
        assert len(rejections(caplog)) == 11
        [(count, detail)] = summaries(caplog)
        assert count == 190 and last.fullmatch(detail), detail
        messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        assert SUMMARY.fullmatch(messages[-2]) and "rejected a connection" in messages[-1]

        await flood(15)  # 9 more logged in this window, 6 counted
        assert len(rejections(caplog)) == 20 and limiter.suppressed == 6
        await check_pair_works(*members)
        await close_all(members)  # close reports the 6 counted since
        assert [count for count, _ in summaries(caplog)] == [190, 6]
        assert len(rejections(caplog)) + suppressed(caplog) == 216  # every rejection accounted
        logged = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        assert all(m.startswith("process 0: ") for m in logged if "rejected" in m)
        assert not members[0].lost and not members[1].lost
        assert all(p == 1 for p, _, _ in members[0].frames)

    run(scenario(), loop)


def test_refusals_for_too_many_pending_handshakes_are_rate_limited(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    monkeypatch.setattr(tcp, "MAX_PENDING_HANDSHAKES", 3)
    limiter = tcp.RateLimiter(limit=10, window=10.0, clock=lambda: 0.0)

    async def scenario() -> None:
        members, addresses = await limited_pair(limiter)
        silent = [await asyncio.open_connection(*addresses[0]) for _ in range(3)]
        await eventually(lambda: len(members[0].t._handshakes) == 3)

        async def refused() -> None:
            reader, writer = await asyncio.open_connection(*addresses[0])
            assert await closed_by_peer(reader)
            writer.close()

        await asyncio.gather(*(refused() for _ in range(25)))
        assert rejections(caplog) == [
            m for m in rejections(caplog) if m.endswith(": 3 handshakes already pending")
        ]
        assert len(rejections(caplog)) == 10 and limiter.suppressed == 15
        await check_pair_works(*members)
        await close_all(members)  # the silent handshakes are cancelled, not rejected
        [(count, detail)] = summaries(caplog)
        assert count == 15 and detail.endswith(": 3 handshakes already pending")
        for _, writer in silent:
            writer.close()

    run(scenario())


# -- malformed frames from an authenticated peer ------------------------------------------------


def valid_frame(seq: int) -> bytes:
    header, parts = control(seq, 1, 0)
    return header.pack() + b"".join(bytes(p) for p in parts)


MALFORMED = {
    "bad magic": (b"ZZ" + valid_frame(1)[2:], "bad frame magic b'ZZ'"),
    "bad version": (b"NA\x02" + valid_frame(1)[3:], "unsupported frame version 2"),
    "unknown kind": (Header(77, 0, 0, 1, 0, 0, 1).pack(), "unknown frame kind 77"),
    "oversized": (Header(Kind.DATA, 0, 0, 1, 0, 5000, 1).pack(), "exceeds the limit of 4096"),
    "truncated payload": (
        Header(Kind.DATA, 0, 0, 1, 0, 1000, 1).pack() + b"x" * 300,
        "in the middle of a frame (300 of 1000 payload bytes received)",
    ),
    "truncated header": (valid_frame(1)[:20], "(20 of 32 header bytes received)"),
}


@BOTH_LOOPS
def test_malformed_frames_close_the_connection_and_report_the_peer(
    loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def one(name: str, data: bytes, problem: str) -> None:
        socks, addresses = bind(2)
        member = Member(
            TcpTransport(0, 2, addresses, SECRET, listen_sock=socks[0], max_payload=4096)
        )
        starting = asyncio.create_task(member.start())
        reader, writer, ok = await handshake(addresses[0], index=1, processes=2)
        assert ok, "the real handshake authenticates"
        await starting
        writer.write(valid_frame(0))
        await eventually(lambda: len(member.frames) == 1)
        writer.write(data)
        if name.startswith("truncated"):
            writer.close()  # end of stream in the middle of the frame
        await eventually(lambda: bool(member.lost))
        await asyncio.sleep(0.02)
        assert len(member.lost) == 1, member.lost
        peer, error = member.lost[0]
        assert peer == 1 and isinstance(error, FrameError) and problem in str(error), error
        assert [h.seq for _, h, _ in member.frames] == [0]  # nothing of the bad frame delivered
        errors = tcp_errors(caplog)
        assert problem in errors[-1] and "from process 1 at" in errors[-1]
        if not name.startswith("truncated"):
            assert await closed_by_peer(reader)
        member.t.send(1, *control(5, 0, 1))  # dropped silently: the peer is gone
        writer.close()
        await member.t.close()

    async def scenario() -> None:
        for name, (data, problem) in MALFORMED.items():
            await one(name, data, problem)
        await fresh_pair_works()

    run(scenario(), loop)


def test_a_frame_handler_that_raises_loses_the_peer_not_the_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def scenario() -> None:
        socks, addresses = bind(2)
        lost: list[tuple[int, BaseException]] = []

        def on_frame(peer: int, header: Header, payload: memoryview) -> None:
            decode_message(payload)  # a CONTROL payload is not a data message

        ts = [TcpTransport(i, 2, addresses, SECRET, listen_sock=socks[i]) for i in range(2)]
        await asyncio.gather(
            ts[0].start(on_frame, lambda p, e: lost.append((p, e))), ts[1].start(on_frame, None)
        )
        ts[1].send(0, *control(0, 1, 0))
        await eventually(lambda: bool(lost))
        assert lost[0][0] == 1 and isinstance(lost[0][1], FrameError)
        assert any("from process 1" in m for m in tcp_errors(caplog))
        await asyncio.gather(*(t.close() for t in ts))
        await fresh_pair_works()

    run(scenario())


# -- fuzzing -------------------------------------------------------------------------------------


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        roll = rng.random()
        if roll < 0.6 and out:
            i = rng.randrange(len(out) * 8)
            out[i // 8] ^= 1 << (i % 8)
        elif roll < 0.8:
            out = out[: rng.randrange(len(out) + 1)]
        else:
            i = rng.randrange(len(out) + 1)
            out[i:i] = rng.randbytes(rng.randrange(1, 40))
    return bytes(out)


def test_fuzzed_strangers_never_get_a_frame_delivered(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    rng = random.Random(2024)
    attempts = 2000

    async def scenario() -> None:
        members = await cluster(2, handshake_timeout=1.0)
        address = members[0].t.addresses[0]
        frames = [valid_frame(seq) for seq in range(5)]
        frames.append(b"".join(frames))
        authenticated = 0

        async def attack(i: int) -> None:
            nonlocal authenticated
            kind = i % 4
            try:
                if kind == 3:  # a real handshake response with bits flipped
                    reader, writer, ok = await handshake(
                        address, index=1, processes=2, flip=rng.randrange(RESPONSE.size * 8)
                    )
                    authenticated += ok
                    writer.write(rng.choice(frames))
                else:
                    reader, writer = await asyncio.open_connection(*address)
                    if kind == 0:
                        data = rng.randbytes(rng.randrange(0, 400))
                    elif kind == 1:
                        data = mutate(rng, rng.choice(frames))
                    else:  # a mutated handshake response followed by frames
                        response = RESPONSE.pack(
                            HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 1, 2, bytes(32), bytes(32)
                        )
                        data = mutate(rng, response + rng.choice(frames))
                    writer.write(data)
                    await writer.drain()
                    writer.write_eof()
                await closed_by_peer(reader)
                writer.close()
            except ConnectionError:
                pass  # the member may close before everything was written

        for start in range(0, attempts, 50):
            await asyncio.gather(*(attack(i) for i in range(start, start + 50)))
        # each attempt is rejected once: logged, summarised, or counted for the next summary
        limiter = members[0].t._rejections
        await eventually(
            lambda: len(rejections(caplog)) + suppressed(caplog) + limiter.suppressed >= attempts
        )
        assert authenticated == 0
        assert not members[0].frames and not members[1].frames  # nothing was delivered
        assert not members[0].lost and not members[1].lost
        await check_pair_works(*members)
        await close_all(members)

    run(scenario(), timeout=60)
    assert len(rejections(caplog)) + suppressed(caplog) == attempts  # close logs the rest


def test_fuzzed_frames_from_an_authenticated_peer_never_crash_the_member() -> None:
    rng = random.Random(7)

    async def scenario() -> None:
        for _ in range(40):
            socks, addresses = bind(2)
            member = Member(
                TcpTransport(0, 2, addresses, SECRET, listen_sock=socks[0], max_payload=4096)
            )
            starting = asyncio.create_task(member.start())
            _, writer, ok = await handshake(addresses[0], index=1, processes=2)
            assert ok
            await starting
            stream = b"".join(valid_frame(seq) for seq in range(rng.randrange(1, 30)))
            writer.write(mutate(rng, stream))
            writer.close()
            await eventually(lambda member=member: bool(member.lost))
            await asyncio.sleep(0.005)
            assert len(member.lost) == 1 and member.lost[0][0] == 1
            for _, header, payload in member.frames:  # whatever got through is well framed
                assert header.kind in set(Kind) and header.length == len(payload) <= 4096
            await member.t.close()
        await fresh_pair_works()

    run(scenario())


# -- timeouts ------------------------------------------------------------------------------------


def test_a_peer_that_never_starts_is_named_within_the_timeout() -> None:
    async def scenario() -> None:
        # process 0's socket is bound and listening, but process 0 never starts
        socks, addresses = bind(2)
        late = TcpTransport(1, 2, addresses, SECRET, listen_sock=socks[1], connect_timeout=0.5)
        with pytest.raises(TimeoutError) as info:  # the configured 0.5 s, named below
            await late.start(lambda *a: None, lambda *a: None)
        where = f"127.0.0.1:{addresses[0][1]}"
        assert f"process 0 at {where} did not answer within 0.5 s" in str(info.value)
        socks[0].close()

        # nothing listens at all: the refusals are retried until the deadline
        socks, addresses = bind(2)
        socks[0].close()
        lonely = TcpTransport(1, 2, addresses, SECRET, listen_sock=socks[1], connect_timeout=0.5)
        with pytest.raises(TimeoutError) as info:
            await lonely.start(lambda *a: None, lambda *a: None)
        message = str(info.value)
        assert f"process 0 at 127.0.0.1:{addresses[0][1]} did not answer within 0.5 s" in message
        assert "(last error: Connection refused)" in message

        # the acceptor's view: nobody connects
        socks, addresses = bind(3)
        first = TcpTransport(0, 3, addresses, SECRET, listen_sock=socks[0], connect_timeout=0.3)
        with pytest.raises(TimeoutError) as info:
            await first.start(lambda *a: None, lambda *a: None)
        assert str(info.value) == (
            f"process 0: process 1 (127.0.0.1:{addresses[1][1]}), process 2 "
            f"(127.0.0.1:{addresses[2][1]}) did not connect within 0.3 s"
        )
        assert socks[0].fileno() == -1  # a failed start releases the port
        for s in socks[1:]:
            s.close()

    run(scenario())


# -- backpressure, loss, close -------------------------------------------------------------------


def big_frames(count: int, records: int = 65536) -> list[tuple[Header, list[Any]]]:
    out = []
    for seq in range(count):
        parts = encode_message(seq, np.full(records, seq, dtype=np.int64))
        out.append((Header(Kind.DATA, 0, 0, 0, 1, nbytes(parts), seq), parts))
    return out


@BOTH_LOOPS
def test_send_never_blocks_and_drain_waits_for_the_buffers(loop: str) -> None:
    limit = 256 * 1024

    async def scenario() -> None:
        a, b = await cluster(2, send_buffer_limit=limit)
        b.keep = False
        frames = big_frames(64)  # 32 MiB
        for header, parts in frames:  # synchronous: send cannot block
            a.t.send(1, header, parts)
        assert a.t.unsent(1) > limit
        await a.t.drain()
        assert a.t.unsent(1) <= limit
        await eventually(lambda: b.count == 64)
        assert a.t.unsent() == 0
        await close_all([a, b])

    run(scenario(), loop)


def test_drain_waits_for_a_peer_that_does_not_read_while_reading_goes_on() -> None:
    limit = 256 * 1024

    async def scenario() -> None:
        socks, addresses = bind(2)
        member = Member(
            TcpTransport(0, 2, addresses, SECRET, listen_sock=socks[0], send_buffer_limit=limit)
        )
        starting = asyncio.create_task(member.start())
        reader, writer, ok = await handshake(addresses[0], index=1, processes=2)
        assert ok
        await starting
        frames = big_frames(32)  # 16 MiB that the peer does not read yet
        for header, parts in frames:
            member.t.send(1, header, parts)
        draining = asyncio.create_task(member.t.drain())
        await asyncio.sleep(0.3)
        assert not draining.done() and member.t.unsent(1) > limit
        # while this process waits to write, it still reads what the peer sends
        writer.write(valid_frame(0))
        await eventually(lambda: len(member.frames) == 1)
        assert not draining.done()
        # the peer reads: drain returns, and everything arrives intact and in order
        expected = b"".join(h.pack() + b"".join(bytes(p) for p in parts) for h, parts in frames)
        received = await reader.readexactly(len(expected))
        await draining
        assert received == expected
        writer.close()
        await member.t.close()

    run(scenario())


@BOTH_LOOPS
def test_close_flushes_and_peers_see_the_loss_once(loop: str) -> None:
    async def scenario() -> None:
        a, b, c = await cluster(3)
        b.keep = False
        for header, parts in big_frames(24):
            a.t.send(1, header, parts)
        a.t.send(2, *control(0, 0, 2))
        await a.t.close()  # returns once the kernel has everything
        await eventually(lambda: b.count == 24 and len(b.lost) == 1 and len(c.lost) == 1)
        assert [p for p, _ in b.lost] == [0] and [p for p, _ in c.lost] == [0]
        assert isinstance(b.lost[0][1], ConnectionError) and "closed" in str(b.lost[0][1])
        assert len(c.frames) == 1
        b.t.send(0, *control(1, 1, 0))  # dropped silently
        b.keep = True
        await check_pair_works(b, c)  # the others go on
        await asyncio.sleep(0.02)
        assert len(b.lost) == 1 and not a.lost
        await close_all([b, c])
        await a.t.close()  # closing twice is harmless

    run(scenario(), loop)


ECHO_PEER = """
import asyncio, socket, sys, uvloop
from naiad.transport.tcp import TcpTransport

fd, port0, port1 = map(int, sys.argv[1:4])
secret = sys.argv[4].encode()
listener = socket.socket(fileno=fd)

async def main():
    addresses = [("127.0.0.1", port0), ("127.0.0.1", port1)]
    t = TcpTransport(1, 2, addresses, secret, listen_sock=listener)

    def echo(peer, header, payload):
        t.send(peer, header._replace(source=1, target=0), [payload])

    await t.start(echo, lambda peer, error: None)
    await asyncio.Event().wait()

uvloop.run(main())
"""


def test_a_peer_process_killed_with_sigkill_is_reported_once() -> None:
    """Two OS processes (the launcher pattern: sockets bound before the child starts)."""

    async def scenario() -> None:
        socks, addresses = bind(2)
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        child = subprocess.Popen(
            [sys.executable, "-c", ECHO_PEER, str(socks[1].fileno())]
            + [str(port) for _, port in addresses]
            + [SECRET.decode()],
            pass_fds=[socks[1].fileno()],
            cwd=root,
            env=env,
        )
        socks[1].close()  # the child has its own copy
        try:
            member = Member(TcpTransport(0, 2, addresses, SECRET, listen_sock=socks[0]))
            await member.start()
            for header, parts in [*big_frames(8, records=1000), control(1, 0, 1)]:
                member.t.send(1, header, parts)
            await eventually(lambda: len(member.frames) == 9)
            assert [h.seq for _, h, _ in member.frames] == [*range(8), 1]
            _, batch = decode_message(member.frames[3][2])
            assert np.array_equal(batch, np.full(1000, 3, dtype=np.int64))
            child.send_signal(signal.SIGKILL)
            await eventually(lambda: bool(member.lost))
            await asyncio.sleep(0.05)
            assert [peer for peer, _ in member.lost] == [1]
            member.t.send(1, *control(2, 0, 1))  # dropped silently
            await member.t.close()
            await fresh_pair_works()
        finally:
            child.kill()
            child.wait(10)

    run(scenario())


def test_a_message_in_parts_is_delivered_whole() -> None:
    """A payload larger than the frame limit travels as PART frames and one of its own kind
    (a progress batch is applied whole, so it cannot be split into batches)."""
    link, got = parser_link(max_payload=1024)
    payload = bytes(range(256)) * 10
    pieces = tcp._pieces([payload[:100], memoryview(payload[100:])], 1024)
    assert [len(p) for p in pieces] == [1024, 1024, 512]
    header = Header(Kind.PROGRESS, 7, 0, 1, 0, len(payload), 3)
    stream = b"".join(
        header._replace(kind=Kind.PART if i < 2 else Kind.PROGRESS, length=len(p)).pack() + bytes(p)
        for i, p in enumerate(pieces)
    )
    small = Header(Kind.CONTROL, 0, 0, 1, 0, 3, 0)
    try:
        feed(link, stream + small.pack() + b"abc", [700])
        assert got == [(header, payload), (small, b"abc")]
    finally:
        link.owner._running_loop().close()


def test_parts_beyond_the_message_limit_are_refused() -> None:
    link, got = parser_link(max_payload=1024)
    link.owner._max_message = 2048
    part = Header(Kind.PART, 0, 0, 1, 0, 1000, 0)
    try:
        feed(link, (part.pack() + bytes(1000)) * 3, [])
        assert got == [] and link.lost
    finally:
        link.owner._running_loop().close()


def test_a_peer_whose_host_does_not_resolve_is_named_with_the_resolver_error() -> None:
    # the last error read "Unknown error -2": getaddrinfo's code taken for an OS errno
    host = "no-such-host.invalid"  # .invalid never resolves (RFC 2606)
    try:
        socket.getaddrinfo(host, 1, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        expected = exc.strerror
    else:  # pragma: no cover - a resolver that answers for .invalid
        pytest.skip(f"{host} resolves here")

    async def scenario() -> None:
        socks, addresses = bind(2)
        socks[0].close()
        addresses[0] = (host, addresses[0][1])
        member = TcpTransport(1, 2, addresses, SECRET, listen_sock=socks[1], connect_timeout=0.5)
        with pytest.raises(TimeoutError) as info:
            await member.start(lambda *a: None, lambda *a: None)
        assert str(info.value) == (
            f"process 1: process 0 at {host}:{addresses[0][1]} did not answer within 0.5 s "
            f"(last error: cannot resolve the host: {expected})"
        )

    run(scenario())


def test_an_acceptor_that_times_out_names_the_connection_it_rejected() -> None:
    # it said only that process 1 did not connect, though process 1 had tried with
    # another secret (the rejection was logged, but not in the error that stops it)
    async def scenario() -> None:
        socks, addresses = bind(2)
        first = TcpTransport(0, 2, addresses, SECRET, listen_sock=socks[0], connect_timeout=2)
        other = TcpTransport(1, 2, addresses, b"another secret", listen_sock=socks[1])
        accepting = asyncio.ensure_future(first.start(lambda *a: None, lambda *a: None))
        with pytest.raises(ConnectionError, match="rejected its handshake"):
            await other.start(lambda *a: None, lambda *a: None)
        with pytest.raises(TimeoutError) as info:
            await accepting
        assert str(info.value).startswith(
            f"process 0: process 1 (127.0.0.1:{addresses[1][1]}) did not connect within 2 s "
            f"(the last connection rejected: from 127.0.0.1:"
        ), info.value
        assert str(info.value).endswith(
            ": authentication failed (a wrong secret, or not a member of this cluster))"
        )

    run(scenario())
