"""The TCP transport: one authenticated TCP connection between every pair of processes.

Connections
    Process ``i`` listens on ``addresses[i]`` (or on the already bound ``listen_sock`` a
    launcher hands over; the transport then owns it), connects to every process ``j < i`` and
    accepts a connection from every process ``j > i``: one connection per pair, so FIFO order
    per pair is TCP's own order. A connector retries refused connections with backoff until
    ``connect_timeout`` (except with ``peers_listening``: a local launcher bound every
    process's socket before starting any, so a refusal means that the peer has exited, and
    ``start`` fails at once); ``start`` fails with an error naming the peer that never answered (or,
    on the accepting side, every peer that never connected, and the last connection it
    rejected, such as a member with another secret) and its address. The listening
    socket stays open after ``start`` (it keeps rejecting strangers); nothing joins a running
    cluster.

Authentication (before any frame is read)
    A mutual HMAC-SHA256 challenge-response over a shared secret, on the raw socket, before
    the socket is given to the frame protocol::

        acceptor -> connector   HELLO     "NAIADTCP" | version u8 | acceptor u32 | processes u32
                                          | nonce_a (32 random bytes)
        connector -> acceptor   RESPONSE  "NAIADTCP" | version u8 | connector u32 | processes u32
                                          | nonce_c (32 random bytes) | proof("connector")
        acceptor -> connector   proof("acceptor")                                  (32 bytes)

    where ``proof(role) = HMAC(secret, "naiad-tcp-v1 " role | acceptor | connector | processes
    | nonce_a | nonce_c)``. Each side proves knowledge of the secret over a nonce the other side
    just drew (no replay), the two roles use different labels (no reflection), and the proof
    binds both indices and the cluster size. The acceptor checks the proof (``hmac.
    compare_digest``), then that the claimed index is one it expects (``i < j < processes``)
    and not already connected; anything else -- a wrong secret, garbage, silence for
    ``handshake_timeout`` seconds, an out-of-range or duplicate index -- is logged as a warning
    (logger ``naiad.transport.tcp``) and the socket is closed; the listener keeps accepting.
    So is a connection refused because ``MAX_PENDING_HANDSHAKES`` handshakes are pending. These
    warnings are rate-limited so that a flood of strangers cannot flood the log: at most
    ``REJECTION_WARNINGS`` per ``REJECTION_WINDOW`` seconds; the rejections beyond that are
    counted, and their number and the last of them are logged at the first rejection after
    the window, or at ``close()`` (see ``RateLimiter``). Only the logging is limited: every
    such connection is closed as before.
    A connector that sees its proof rejected (the acceptor closes), or an acceptor that cannot
    prove the secret, fails ``start`` with an error naming that peer. The handshake
    authenticates the members; it does not encrypt or sign the stream that follows, so bind to
    loopback (the default of every launcher) or a private network, or tunnel it.

Frames
    A frame is the 32-byte ``codec.Header`` followed by its payload parts. The receiving side
    is an ``asyncio.BufferedProtocol``: the socket is read 64 KiB at a time into a receive
    buffer, small frames are parsed out of it and copied once into their own ``bytes``; a
    frame of 64 KiB or more gets a buffer of its own (uninitialised memory) and the kernel
    writes the rest of it straight there, so a numpy batch decoded with ``np.frombuffer`` is a
    view of the bytes that came off the socket, with at most 64 KiB of it copied once.
    Payloads are handed over read-only. A header that ``codec.unpack_header`` rejects (bad
    magic, version or kind, a length above ``max_payload``), a connection closed in the middle
    of a frame, or an ``on_frame`` that raises: the error is logged naming the peer and the
    problem, the connection is aborted, ``on_lost(peer, error)`` is called once, and the
    process goes on. Sequence numbers are the caller's business; the transport delivers in
    the order received.

Flush policy (why small frames are batched without delaying the last one)
    ``send`` appends the frame's header and parts (not copied) to a per-peer list and, for the
    first frame of a loop iteration, schedules a flush with ``loop.call_soon``; the flush hands
    the whole list to the socket transport in one ``writelines`` call: one ``writev`` on
    uvloop (or one join and one ``send`` on the default loop). Every frame sent by the
    callbacks of one loop iteration (a worker's step typically sends data to several channels
    and a progress batch) therefore leaves in one system call per peer, and the last of them
    waits for nothing but the end of the current iteration: the flush is a ready callback, not
    a timer, so it runs right after a zero-timeout poll. The batching is done here because the
    loops do not do it: both uvloop (checked in 0.23) and asyncio call ``send`` at once on every
    ``write`` while nothing is queued, which would cost one system call per small frame. (When
    the kernel buffer is full, the transport queues what follows and writes it with one
    ``writev`` once the socket is writable, so under load the batches grow by themselves.)
    Once 64 KiB are pending the list is flushed at once, so large batches reach the kernel
    while the worker goes on computing. Frames never interleave: a frame's header and parts
    are appended together, and each list is written in order by a single call. Nagle is off
    (``TCP_NODELAY``) on every socket: a frame is never held back waiting for an ACK.

    ``send`` keeps references to the caller's buffers (numpy arrays are sent from their own
    memory) until the kernel has them: do not modify a batch after sending it.

Backpressure, and why it cannot deadlock a cyclic dataflow
    Each connection's write buffer is bounded by ``send_buffer_limit`` in one sense only:
    ``drain()`` waits while some peer's unsent bytes exceed it (until they fall below half).
    ``send`` itself never blocks and never fails for lack of space: it queues into unbounded
    buffers. The argument:

    1. Dataflow code never waits on the network. Vertex callbacks are synchronous and call
       ``send``, which returns at once; only producers outside the dataflow (input feeders)
       await ``drain()``. So while any process runs, its event loop keeps turning.
    2. Reading never waits on anything. The receive protocol never pauses reading, does not
       depend on any write of its own process making progress, and delivers each frame with a
       synchronous ``on_frame`` call (which cannot await). So, by 1, every byte a peer writes
       to a live process is eventually taken out of the kernel, whatever that process's
       dataflow is doing.
    3. Hence every byte queued by ``send`` is eventually written: the socket becomes writable
       again because the other end reads (2). A process waiting in ``drain()`` waits for its
       peer's reader, and that reader waits for nothing, so no cycle of processes each waiting
       for another's buffer to empty can form, whatever the shape of the dataflow.

    The price is memory: frames sent by vertices are buffered without bound (as in Naiad,
    whose channels are unbounded queues); only the data entering from outside is throttled.

Loss and shutdown
    After ``start``, a connection that closes or fails reports its peer once through
    ``on_lost(peer, error)`` (called soon after, not on the stack that detected it); later
    ``send``\\ s to that peer are dropped. ``close()`` stops accepting, hands every pending
    frame to the kernel and waits (at most ``close_timeout`` seconds) until the connections
    have flushed and closed; peers see that as a lost connection, which a runtime that has
    finished ignores. A loss is logged as a warning unless ``expect_close(peer)`` announced
    it: a runtime calls it when the peer says goodbye, which it may do while this process
    still waits for the goodbyes of others.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, cast

import numpy as np

from naiad.transport.base import FrameHandler, LossHandler, Parts, Transport
from naiad.transport.codec import (
    HEADER_SIZE,
    MAX_PAYLOAD,
    FrameError,
    Header,
    Kind,
    unpack_header,
)

__all__ = [
    "HANDSHAKE_MAGIC",
    "HANDSHAKE_VERSION",
    "HELLO",
    "REJECTION_WARNINGS",
    "REJECTION_WINDOW",
    "RESPONSE",
    "RateLimiter",
    "Suppressed",
    "TcpTransport",
    "listen_socket",
    "proof",
]

log = logging.getLogger("naiad.transport.tcp")

HANDSHAKE_MAGIC = b"NAIADTCP"
HANDSHAKE_VERSION = 1
NONCE_SIZE = 32
PROOF_SIZE = 32
# acceptor -> connector: magic, version, acceptor index, processes, acceptor nonce
HELLO = struct.Struct("<8sBII32s")
# connector -> acceptor: magic, version, connector index, processes, connector nonce, proof
RESPONSE = struct.Struct("<8sBII32s32s")
_BINDING = struct.Struct("<III")

RECV_BUFFER = 256 * 1024  # the receive buffer small frames are parsed from
LARGE_FRAME = 64 * 1024  # payloads this large are received into a buffer of their own
READ_SIZE = 64 * 1024  # the most read at once into the receive buffer
MIN_FREE = 64 * 1024  # the receive buffer is compacted when less than this is free
FLUSH_BYTES = 64 * 1024  # pending bytes that are handed to the kernel without waiting
MAX_PENDING_HANDSHAKES = 256  # unauthenticated connections held at once
CLOSE_TIMEOUT = 10.0
REJECTION_WARNINGS = 10  # rejected connections logged one by one per window and transport
REJECTION_WINDOW = 10.0  # seconds; the rejections beyond REJECTION_WARNINGS are counted


def proof(
    secret: bytes,
    role: bytes,
    acceptor: int,
    connector: int,
    processes: int,
    acceptor_nonce: bytes,
    connector_nonce: bytes,
) -> bytes:
    """The HMAC-SHA256 a side of the handshake sends to prove it knows ``secret``.

    >>> a, c = bytes(32), bytes(range(32))
    >>> proof(b"s", b"connector", 0, 1, 2, a, c) == proof(b"s", b"connector", 0, 1, 2, a, c)
    True
    >>> proof(b"s", b"connector", 0, 1, 2, a, c) == proof(b"s", b"acceptor", 0, 1, 2, a, c)
    False
    """
    message = b"".join(
        (
            b"naiad-tcp-v1 ",
            role,
            _BINDING.pack(acceptor, connector, processes),
            acceptor_nonce,
            connector_nonce,
        )
    )
    return hmac.new(secret, message, hashlib.sha256).digest()


def _family(host: str) -> socket.AddressFamily:
    """IPv6 for an IPv6 address (``::1``), IPv4 otherwise (names resolve to IPv4 here)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def listen_socket(host: str = "127.0.0.1", port: int = 0, backlog: int = 128) -> socket.socket:
    """A listening socket bound to ``(host, port)``: loopback and a free port by default.

    A launcher binds one per process before it starts them, reads the ports
    (``sock.getsockname()[1]``), builds the address list, and passes each socket as
    ``listen_sock``.
    """
    sock = socket.create_server((host, port), family=_family(host), backlog=backlog)
    sock.setblocking(False)
    return sock


class Suppressed(NamedTuple):
    """Events a ``RateLimiter`` did not let through: how many, and the last one's detail."""

    events: int
    last: str


class RateLimiter:
    """Lets at most ``limit`` events through per ``window`` seconds of ``clock``; counts the rest.

    A window opens at the first event after the previous one ended. ``admit`` tells whether an
    event is let through and, at the first event after a window in which some were not, returns
    their ``Suppressed`` summary too (to be reported before the event); ``flush`` returns the
    summary still pending, whether or not its window is over (at shutdown). No timer runs:
    nothing is reported between events, but no suppressed event goes uncounted.

    >>> now = 0.0
    >>> limiter = RateLimiter(limit=2, window=10.0, clock=lambda: now)
    >>> [limiter.admit(f"event {i}") for i in range(4)]
    [(True, None), (True, None), (False, None), (False, None)]
    >>> limiter.suppressed
    2
    >>> now = 9.5  # the same window
    >>> limiter.admit("event 4")
    (False, None)
    >>> now = 10.0  # a new window: the next event is let through, with the summary
    >>> limiter.admit("event 5")
    (True, Suppressed(events=3, last='event 4'))
    >>> limiter.admit("event 6"), limiter.admit("event 7")
    ((True, None), (False, None))
    >>> limiter.flush(), limiter.flush()
    (Suppressed(events=1, last='event 7'), None)
    """

    def __init__(
        self,
        limit: int = REJECTION_WARNINGS,
        window: float = REJECTION_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError(f"a rate limit must let at least one event through, got {limit}")
        if not window > 0:
            raise ValueError(f"a rate-limiting window must be positive, got {window}")
        self.limit = limit
        self.window = window
        self.clock = clock
        self.opened: float | None = None  # when the current window opened
        self.admitted = 0  # events let through in the current window
        self.suppressed = 0  # events not let through, not reported yet
        self.last = ""  # the detail of the last of them

    def admit(self, detail: str) -> tuple[bool, Suppressed | None]:
        """Whether to report this event, and the summary of an ended window to report first."""
        now = self.clock()
        summary = None
        if self.opened is None or now - self.opened >= self.window:
            summary = self.flush()
            self.opened, self.admitted = now, 0
        if self.admitted < self.limit:
            self.admitted += 1
            return True, summary
        self.suppressed += 1
        self.last = detail
        return False, summary

    def flush(self) -> Suppressed | None:
        """The summary of the events not let through and not reported yet (then forgotten)."""
        if not self.suppressed:
            return None
        summary = Suppressed(self.suppressed, self.last)
        self.suppressed, self.last = 0, ""
        return summary


class _HandshakeEOF(ConnectionError):
    def __init__(self, received: int, expected: int) -> None:
        super().__init__(f"connection closed after {received} of {expected} bytes")
        self.received = received


async def _recv_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = await loop.sock_recv(sock, n - len(data))
        if not chunk:
            raise _HandshakeEOF(len(data), n)
        data += chunk
    return bytes(data)


def _pieces(parts: Parts, limit: int) -> list[memoryview]:
    """The bytes of ``parts`` cut into pieces of at most ``limit`` (views, not copies).

    >>> [bytes(p) for p in _pieces([b"abc", b"defgh"], 3)]
    [b'abc', b'def', b'gh']
    """
    pieces: list[memoryview] = []
    held: list[memoryview] = []  # the piece being filled, from one part or several
    room = limit
    for part in parts:
        view = memoryview(part).cast("B")
        while len(view):
            take = view[:room]
            held.append(take)
            view = view[len(take) :]
            room -= len(take)
            if not room:
                pieces.append(held[0] if len(held) == 1 else memoryview(b"".join(held)))
                held, room = [], limit
    if held:
        pieces.append(held[0] if len(held) == 1 else memoryview(b"".join(held)))
    return pieces


def _nbytes(part: bytes | bytearray | memoryview) -> int:
    return part.nbytes if type(part) is memoryview else len(part)


def _set_nodelay(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # not a TCP socket (e.g. in tests with socketpair)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Link(asyncio.BufferedProtocol):
    """The authenticated connection to one peer: frame reader and batching writer."""

    def __init__(self, owner: TcpTransport, peer: int, where: str) -> None:
        self.owner = owner
        self.peer = peer
        self.where = where
        self.loop = owner._running_loop()
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.closed: asyncio.Future[None] = self.loop.create_future()
        # sending
        self.out: list[bytes | bytearray | memoryview] = []
        self.out_bytes = 0
        self.flush_scheduled = False
        self.paused = False
        self.waiters: list[asyncio.Future[None]] = []
        # receiving
        self.buf = bytearray(RECV_BUFFER)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.header: Header | None = None
        self.big: memoryview | None = None
        self.big_got = 0
        self.pieces: list[memoryview] = []  # PART payloads of the next whole frame
        self.pieces_size = 0

    # -- connection events ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = transport = cast(asyncio.Transport, transport)
        if self.owner._closing:  # the transport was closed while this connection was set up
            self.lost = True
            transport.abort()
            return
        limit = self.owner._send_buffer_limit
        transport.set_write_buffer_limits(high=limit, low=limit // 2)
        # Registered now, not when create_connection returns: frames may arrive (and be
        # answered from on_frame) before that.
        self.owner._register(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self._wake()
        if self.lost:
            return
        self.lost = True
        self.out = []
        self.out_bytes = 0
        if self.owner._closing:
            return
        error: BaseException = exc or ConnectionResetError(
            f"process {self.peer} at {self.where} closed the connection"
        )
        if self.peer not in self.owner._leaving:
            log.warning(
                "process %d lost its connection to process %d at %s: %s",
                self.owner.process,
                self.peer,
                self.where,
                error,
            )
        self.owner._report_lost(self.peer, error)

    def eof_received(self) -> bool:
        if self.header is not None or self.end > self.start:
            if self.big is not None:
                assert self.header is not None
                got, want = self.big_got, self.header.length
            elif self.header is not None:
                got, want = self.end - self.start, self.header.length
            else:
                got, want = self.end - self.start, HEADER_SIZE
            what = "payload" if self.header is not None else "header"
            self.fail(
                FrameError(
                    f"connection closed in the middle of a frame ({got} of {want} {what} "
                    f"bytes received)"
                )
            )
        return False  # close the transport; connection_lost reports a clean close

    def fail(self, error: BaseException) -> None:
        """Rejects the connection: logs, aborts it, reports the peer lost."""
        if self.lost:
            return
        self.lost = True
        self.out = []
        self.out_bytes = 0
        self.big = None
        self.header = None
        log.error(
            "process %d: bad input from process %d at %s: %s; closing the connection",
            self.owner.process,
            self.peer,
            self.where,
            error,
        )
        if self.transport is not None:
            self.transport.abort()
        self._wake()
        if not self.owner._closing:
            self.owner._report_lost(self.peer, error)

    # -- receiving ---------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        big = self.big
        if big is not None:
            return big[self.big_got :]
        if len(self.buf) - self.end < MIN_FREE:
            # What is left is less than one small frame: move it to the front.
            rest = self.view[self.start : self.end].tobytes()
            self.buf[: len(rest)] = rest
            self.start, self.end = 0, len(rest)
        return self.view[self.end : self.end + READ_SIZE]

    def buffer_updated(self, nbytes: int) -> None:
        if self.lost:
            return
        big = self.big
        if big is not None:
            self.big_got += nbytes
            if self.big_got == len(big):
                header = self.header
                assert header is not None
                self.big = None
                self.header = None
                self.deliver(header, big.toreadonly())
            return
        self.end += nbytes
        self.parse()

    def parse(self) -> None:
        view = self.view
        start, end = self.start, self.end
        max_payload = self.owner._max_payload
        header = self.header
        while True:
            if header is None:
                if end - start < HEADER_SIZE:
                    break
                try:
                    header = unpack_header(view[start : start + HEADER_SIZE], max_payload)
                except FrameError as exc:
                    self.fail(exc)
                    return
                start += HEADER_SIZE
            length = header.length
            if end - start >= length:
                payload = view[start : start + length].tobytes()
                start += length
                self.start, self.end, self.header = start, end, None
                self.deliver(header, memoryview(payload))
                if self.lost:
                    return
                header = None
                continue
            if length >= LARGE_FRAME:
                big = np.empty(length, np.uint8).data  # not zeroed, unlike bytearray
                got = end - start
                big[:got] = view[start:end]
                self.big, self.big_got = big, got
                start = end
            break
        if start == end:
            start = end = 0
        self.start, self.end, self.header = start, end, header

    def deliver(self, header: Header, payload: memoryview) -> None:
        owner = self.owner
        if header.kind == Kind.PART or self.pieces:
            size = self.pieces_size + header.length
            if size > owner._max_message:
                self.fail(
                    FrameError(
                        f"a message in parts of more than {owner._max_message} bytes "
                        f"({size} so far)"
                    )
                )
                return
            self.pieces.append(payload)
            self.pieces_size = size
            if header.kind == Kind.PART:
                return
            payload = memoryview(b"".join(self.pieces))
            header = header._replace(length=size)
            self.pieces, self.pieces_size = [], 0
        if owner._closing or owner._on_frame is None:
            return
        try:
            owner._on_frame(self.peer, header, payload)
        except Exception as exc:
            log.exception(
                "process %d: handling a frame (kind %d, %d bytes) from process %d raised",
                owner.process,
                header.kind,
                header.length,
                self.peer,
            )
            self.fail(exc)

    # -- sending -----------------------------------------------------------------------------

    def queue(self, head: bytes, parts: Parts, size: int) -> None:
        out = self.out
        out.append(head)
        out.extend(parts)
        self.out_bytes += size
        if self.out_bytes >= FLUSH_BYTES:
            self.flush()
        elif not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self.scheduled_flush)

    def scheduled_flush(self) -> None:
        self.flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        if not self.out:
            return
        out = self.out
        self.out = []
        self.out_bytes = 0
        transport = self.transport
        if not self.lost and transport is not None and not transport.is_closing():
            transport.writelines(out)

    def unsent(self) -> int:
        if self.lost or self.transport is None:
            return 0
        return self.out_bytes + self.transport.get_write_buffer_size()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake()

    def _wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def writable(self) -> None:
        while self.paused and not self.lost:
            waiter = self.loop.create_future()
            self.waiters.append(waiter)
            try:
                await waiter
            finally:
                # a drain given up (a timeout) leaves now, not when the peer reads again
                if waiter in self.waiters:
                    self.waiters.remove(waiter)


class TcpTransport(Transport):
    """One process's end of a cluster connected by TCP (see the module documentation).

    ``addresses[j]`` is where process ``j`` listens; ``secret`` is shared by every member.
    ``listen_sock``, if given, is an already bound listening socket for ``addresses[process]``
    (the transport takes ownership). ``connect_timeout`` bounds ``start``;
    ``handshake_timeout`` bounds an incoming handshake; ``max_payload`` is the largest frame
    accepted; ``drain()`` waits while more than ``send_buffer_limit`` bytes are unsent to a
    peer. ``rejection_limiter`` rate-limits the warnings about rejected connections (by
    default ``REJECTION_WARNINGS`` per ``REJECTION_WINDOW`` seconds; give each transport its
    own). ``peers_listening``: every peer's socket was listening before this process started
    (a local launch), so a refused connection is final.
    """

    def __init__(
        self,
        process: int,
        processes: int,
        addresses: Sequence[tuple[str, int]],
        secret: bytes,
        *,
        listen_sock: socket.socket | None = None,
        connect_timeout: float = 30.0,
        max_payload: int = MAX_PAYLOAD,
        send_buffer_limit: int = 64 * 1024 * 1024,
        handshake_timeout: float = 5.0,
        close_timeout: float = CLOSE_TIMEOUT,
        rejection_limiter: RateLimiter | None = None,
        peers_listening: bool = False,
    ) -> None:
        super().__init__(process, processes)
        if len(addresses) != processes:
            raise ValueError(
                f"{len(addresses)} addresses given for a cluster of {processes} processes: "
                f"give one (host, port) per process"
            )
        if not isinstance(secret, bytes | bytearray) or not secret:
            raise ValueError("the cluster secret must be non-empty bytes shared by every process")
        if not 0 < max_payload < 2**32:
            raise ValueError(f"max_payload must be in 1..{2**32 - 1}, got {max_payload}")
        if send_buffer_limit < 1:
            raise ValueError(f"send_buffer_limit must be positive, got {send_buffer_limit}")
        self.addresses = [(str(host), int(port)) for host, port in addresses]
        self._secret = bytes(secret)
        self._listen_sock = listen_sock
        self._connect_timeout = connect_timeout
        self._handshake_timeout = handshake_timeout
        self._close_timeout = close_timeout
        self._max_payload = self.max_payload = max_payload
        # a progress or control message larger than a frame travels in parts, reassembled
        # up to this size
        self._max_message = self.max_message = max(max_payload, MAX_PAYLOAD)
        self._send_buffer_limit = send_buffer_limit
        self._peers_listening = peers_listening
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_frame: FrameHandler | None = None
        self._on_lost: LossHandler | None = None
        self._links: list[_Link | None] = [None] * processes
        self._claimed: set[int] = set()
        self._accepted = asyncio.Event()
        self._accept_task: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()
        self._rejections = rejection_limiter if rejection_limiter is not None else RateLimiter()
        self._last_rejection: str | None = None  # named if start times out: a likely cause
        self._started = False
        self._closing = False
        self._leaving: set[int] = set()  # peers whose connection closing is expected

    def _where(self, peer: int) -> str:
        host, port = self.addresses[peer]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    # -- start ---------------------------------------------------------------------------------

    async def start(self, on_frame: FrameHandler, on_lost: LossHandler | None) -> None:
        if self._started:
            raise RuntimeError(f"process {self.process}: the transport was already started")
        self._started = True
        self._loop = loop = asyncio.get_running_loop()
        self._on_frame = on_frame
        self._on_lost = on_lost
        if self.processes == 1:
            return
        deadline = loop.time() + self._connect_timeout
        connectors: list[asyncio.Task[None]] = []
        try:
            lsock = self._listen_sock
            if lsock is None:
                try:
                    lsock = self._listen_sock = listen_socket(*self.addresses[self.process])
                except OSError as exc:
                    raise OSError(
                        exc.errno,
                        f"process {self.process} cannot listen on "
                        f"{self._where(self.process)}: {exc.strerror or exc}",
                    ) from exc
            lsock.setblocking(False)
            if self.process == self.processes - 1:
                self._accepted.set()
            self._accept_task = loop.create_task(self._accept_loop(lsock))
            connectors = [loop.create_task(self._connect(j, deadline)) for j in range(self.process)]
            if connectors:
                await asyncio.wait(connectors, return_when=asyncio.FIRST_EXCEPTION)
                for task in connectors:  # the first failure in peer order
                    error = task.exception() if task.done() else None
                    if error is not None:
                        raise error
            try:
                async with asyncio.timeout(max(0.0, deadline - loop.time())):
                    await self._accepted.wait()
            except TimeoutError:
                missing = [
                    f"process {j} ({self._where(j)})"
                    for j in range(self.process + 1, self.processes)
                    if self._links[j] is None
                ]
                # a member with the wrong secret or cluster size is rejected, not missing
                rejected = self._last_rejection
                hint = f" (the last connection rejected: {rejected})" if rejected else ""
                raise TimeoutError(
                    f"process {self.process}: {', '.join(missing)} did not connect within "
                    f"{self._connect_timeout:g} s{hint}"
                ) from None
        except BaseException:
            for task in connectors:
                task.cancel()
            await asyncio.gather(*connectors, return_exceptions=True)
            await self._shutdown(abort=True)
            raise

    async def _connect(self, peer: int, deadline: float) -> None:
        loop = self._running_loop()
        host, port = self.addresses[peer]
        where = self._where(peer)
        delay = 0.01
        last_error: BaseException | None = None

        def timed_out() -> TimeoutError:
            detail = f" (last error: {_describe(last_error)})" if last_error is not None else ""
            return TimeoutError(
                f"process {self.process}: process {peer} at {where} did not answer within "
                f"{self._connect_timeout:g} s{detail}"
            )

        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise timed_out()
            sock: socket.socket | None = None
            try:
                async with asyncio.timeout(remaining):
                    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                    family, type_, proto, _, sockaddr = infos[0]
                    sock = socket.socket(family, type_, proto)
                    sock.setblocking(False)
                    await loop.sock_connect(sock, sockaddr)
                    _set_nodelay(sock)
                    hello = await _recv_exactly(loop, sock, HELLO.size)
            except OSError as exc:  # refused, reset, closed before the hello: retry
                if sock is not None:
                    sock.close()
                if self._peers_listening and isinstance(exc, ConnectionRefusedError):
                    # its socket listened before this process started: it has exited (waiting
                    # for it would only keep this process running for connect_timeout)
                    raise ConnectionError(
                        f"process {self.process}: process {peer} at {where} refused the "
                        f"connection: it is no longer running (its socket was listening "
                        f"before this process started)"
                    ) from None
                if loop.time() >= deadline:  # asyncio.timeout expired (or the kernel's)
                    raise timed_out() from None
                last_error = exc
                await asyncio.sleep(max(0.0, min(delay, deadline - loop.time())))
                delay = min(delay * 2, 0.5)
                continue
            break
        try:
            await self._authenticate(sock, peer, where, hello)
            await self._attach(peer, sock, where, accepted=False)
        except BaseException:
            sock.close()
            raise

    async def _authenticate(self, sock: socket.socket, peer: int, where: str, hello: bytes) -> None:
        loop = self._running_loop()
        magic, version, acceptor, processes, nonce_a = HELLO.unpack(hello)
        me = f"process {self.process}"
        if magic != HANDSHAKE_MAGIC or version != HANDSHAKE_VERSION:
            raise ConnectionError(
                f"{me}: {where}, the address of process {peer}, does not speak the naiad TCP "
                f"protocol (version {HANDSHAKE_VERSION})"
            )
        if acceptor != peer:
            raise ConnectionError(
                f"{me}: {where}, the address of process {peer}, answers as process {acceptor}: "
                f"the processes were given different address lists"
            )
        if processes != self.processes:
            raise ConnectionError(
                f"{me}: process {peer} at {where} belongs to a cluster of {processes} "
                f"processes, this one has {self.processes}"
            )
        nonce_c = secrets.token_bytes(NONCE_SIZE)
        mine = proof(
            self._secret, b"connector", peer, self.process, self.processes, nonce_a, nonce_c
        )
        try:
            async with asyncio.timeout(self._handshake_timeout):
                response = RESPONSE.pack(
                    HANDSHAKE_MAGIC, HANDSHAKE_VERSION, self.process, self.processes, nonce_c, mine
                )
                await loop.sock_sendall(sock, response)
                theirs = await _recv_exactly(loop, sock, PROOF_SIZE)
        except TimeoutError:
            raise TimeoutError(
                f"{me}: process {peer} at {where} did not finish the handshake within "
                f"{self._handshake_timeout:g} s"
            ) from None
        except OSError as exc:
            raise ConnectionError(
                f"{me}: process {peer} at {where} rejected its handshake ({exc}): the two do "
                f"not share the same secret, or another process {self.process} is connected"
            ) from None
        expected = proof(
            self._secret, b"acceptor", peer, self.process, self.processes, nonce_a, nonce_c
        )
        if not hmac.compare_digest(theirs, expected):
            raise ConnectionError(
                f"{me}: process {peer} at {where} failed to prove it knows the cluster secret "
                f"(a wrong secret, or not a member of this cluster)"
            )

    async def _accept_loop(self, lsock: socket.socket) -> None:
        loop = self._running_loop()
        while True:
            try:
                conn, addr = await loop.sock_accept(lsock)
            except OSError as exc:  # e.g. out of file descriptors: keep serving
                log.warning("process %d: accept failed: %s", self.process, exc)
                await asyncio.sleep(0.1)
                continue
            except Exception:
                log.exception("process %d: accept failed", self.process)
                await asyncio.sleep(0.1)
                continue
            where = _format_address(addr)
            if len(self._handshakes) >= MAX_PENDING_HANDSHAKES:
                self._reject(where, f"{len(self._handshakes)} handshakes already pending")
                conn.close()
                continue
            task = loop.create_task(self._accept_one(conn, where))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _accept_one(self, conn: socket.socket, where: str) -> None:
        loop = self._running_loop()
        index: int | None = None
        attached = False
        try:
            conn.setblocking(False)
            _set_nodelay(conn)
            nonce_a = secrets.token_bytes(NONCE_SIZE)
            async with asyncio.timeout(self._handshake_timeout):
                hello = HELLO.pack(
                    HANDSHAKE_MAGIC, HANDSHAKE_VERSION, self.process, self.processes, nonce_a
                )
                await loop.sock_sendall(conn, hello)
                data = await _recv_exactly(loop, conn, RESPONSE.size)
                magic, version, claimed, processes, nonce_c, theirs = RESPONSE.unpack(data)
                reason = self._check_response(
                    magic, version, claimed, processes, nonce_a, nonce_c, theirs
                )
                if reason is not None:
                    self._reject(where, reason)
                    return
                index = claimed
                self._claimed.add(claimed)
                mine = proof(
                    self._secret, b"acceptor", self.process, claimed, processes, nonce_a, nonce_c
                )
                await loop.sock_sendall(conn, mine)
            await self._attach(claimed, conn, self._where(claimed), accepted=True)
            attached = True
        except TimeoutError:
            self._reject(where, f"no handshake within {self._handshake_timeout:g} s")
        except _HandshakeEOF as exc:
            self._reject(where, f"closed during the handshake ({exc})")
        except OSError as exc:
            self._reject(where, f"failed during the handshake ({exc})")
        except Exception:  # a bug here must not stop the listener or escape unseen
            log.exception("process %d: handshake with %s failed", self.process, where)
        finally:
            if not attached:
                conn.close()
                if index is not None:
                    self._claimed.discard(index)

    def _check_response(
        self,
        magic: bytes,
        version: int,
        claimed: int,
        processes: int,
        nonce_a: bytes,
        nonce_c: bytes,
        theirs: bytes,
    ) -> str | None:
        """Why a handshake response is refused, or None if it is accepted."""
        if magic != HANDSHAKE_MAGIC or version != HANDSHAKE_VERSION:
            return "not a naiad handshake"
        expected = proof(
            self._secret, b"connector", self.process, claimed, processes, nonce_a, nonce_c
        )
        if not hmac.compare_digest(theirs, expected):
            return "authentication failed (a wrong secret, or not a member of this cluster)"
        if processes != self.processes:
            return f"it belongs to a cluster of {processes} processes, not {self.processes}"
        if not self.process < claimed < self.processes:
            return (
                f"it claims process index {claimed}; process {self.process} accepts only "
                f"processes {self.process + 1}..{self.processes - 1}"
            )
        if claimed in self._claimed:
            return f"it claims process index {claimed}, which is already connected"
        return None

    def _reject(self, where: str, reason: str) -> None:
        """Logs a rejected connection, or counts it if too many were logged lately."""
        if self._closing:
            return
        self._last_rejection = f"from {where}: {reason}"
        logged, summary = self._rejections.admit(f"{where}: {reason}")
        if summary is not None:
            self._log_suppressed(summary)
        if logged:
            log.warning(
                "process %d: rejected a connection from %s: %s", self.process, where, reason
            )

    def _log_suppressed(self, summary: Suppressed) -> None:
        limiter = self._rejections
        log.warning(
            "process %d: %d more connections were rejected without a warning each (at most %d "
            "per %g s); the last from %s",
            self.process,
            summary.events,
            limiter.limit,
            limiter.window,
            summary.last,
        )

    async def _attach(self, peer: int, sock: socket.socket, where: str, *, accepted: bool) -> None:
        loop = self._running_loop()
        link = _Link(self, peer, where)
        if accepted:
            await loop.connect_accepted_socket(lambda: link, sock)
        else:
            await loop.create_connection(lambda: link, sock=sock)

    def _register(self, link: _Link) -> None:
        self._links[link.peer] = link
        if all(self._links[j] is not None for j in range(self.process + 1, self.processes)):
            self._accepted.set()

    # -- sending -------------------------------------------------------------------------------

    def send(self, peer: int, header: Header, parts: Parts) -> None:
        if self._closing:
            return
        link = self._links[peer] if 0 <= peer < self.processes else None
        if link is None:
            if not 0 <= peer < self.processes or peer == self.process:
                raise ValueError(
                    f"process {self.process} cannot send to process {peer}: peers are "
                    f"0..{self.processes - 1} other than itself"
                )
            raise RuntimeError(
                f"process {self.process} sent to process {peer} before start() connected it"
            )
        if link.lost:
            return
        size = 0
        for part in parts:
            size += _nbytes(part)
        if size != header.length:
            raise ValueError(f"frame length {header.length} does not match payload {size}")
        limit = self._max_payload
        if size > limit:
            if size > self._max_message:
                raise ValueError(
                    f"a message of {size} bytes to process {peer} exceeds the limit of "
                    f"{self._max_message} bytes"
                )
            pieces = _pieces(parts, limit)
            for piece in pieces[:-1]:  # every piece but the last travels as a PART frame
                self._queue(link, header._replace(kind=Kind.PART, length=_nbytes(piece)), [piece])
            parts = pieces[-1:]
            header = header._replace(length=_nbytes(parts[0]))
        self._queue(link, header, parts)

    def _queue(self, link: _Link, header: Header, parts: Parts) -> None:
        size = header.length + HEADER_SIZE
        self.stats.count(header.kind, size)
        link.queue(header.pack(), parts, size)

    def unsent(self, peer: int | None = None) -> int:
        """Bytes queued for ``peer`` (or for all peers) that the kernel has not taken yet."""
        links = self._links if peer is None else [self._links[peer]]
        return sum(link.unsent() for link in links if link is not None)

    async def drain(self) -> None:
        links = [link for link in self._links if link is not None and not link.lost]
        for link in links:
            link.flush()
        for link in links:
            await link.writable()

    def expect_close(self, peer: int) -> None:
        self._leaving.add(peer)

    def _report_lost(self, peer: int, error: BaseException) -> None:
        self._running_loop().call_soon(self._call_on_lost, peer, error)

    def _call_on_lost(self, peer: int, error: BaseException) -> None:
        if self._closing or self._on_lost is None:
            return
        try:
            self._on_lost(peer, error)
        except Exception:
            log.exception("process %d: on_lost(%d) raised", self.process, peer)

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None:
        await self._shutdown(abort=False)

    async def _shutdown(self, *, abort: bool) -> None:
        if self._closing:
            return
        self._closing = True
        tasks = list(self._handshakes)
        if self._accept_task is not None:
            tasks.append(self._accept_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        summary = self._rejections.flush()  # nothing is rejected any more: report the rest
        if summary is not None:
            self._log_suppressed(summary)
        if self._listen_sock is not None:
            self._listen_sock.close()
        links = [link for link in self._links if link is not None]
        for link in links:
            if link.transport is None:
                continue
            if abort:
                link.transport.abort()
            else:
                link.flush()
                link.transport.close()
        waiting = [link.closed for link in links if not link.closed.done()]
        if waiting:
            _, pending = await asyncio.wait(waiting, timeout=self._close_timeout)
            if pending:
                log.warning(
                    "process %d: %d connections did not flush within %g s; aborting them",
                    self.process,
                    len(pending),
                    self._close_timeout,
                )
                for link in links:
                    if not link.closed.done() and link.transport is not None:
                        link.transport.abort()


def _format_address(addr: object) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host, port = addr[0], addr[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(addr)


def _describe(error: BaseException) -> str:
    """An OS error as "Connection refused" rather than the loop's wording of it."""
    if isinstance(error, socket.gaierror):  # its errno is getaddrinfo's, not an OS errno
        return f"cannot resolve the host: {error.strerror or error}"
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno)
    return str(error) or type(error).__name__
