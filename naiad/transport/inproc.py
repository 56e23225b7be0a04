"""The in-process transport: several naiad processes inside one OS process and event loop.

Every frame is encoded to bytes and delivered to the peer by ``loop.call_soon``, which keeps
FIFO order per pair and never runs the receiver on the sender's stack: the same code paths as
TCP (codec, sequence numbers, buffering of frames for dataflows not built yet), without
sockets. It is how the distributed protocol is tested on one machine without processes.

It keeps the transport contract as TCP does: an ``on_frame`` that raises is bad input from
that peer, so the link between the two is cut (nothing more is delivered either way, as
after TCP's abort) and each end is told soon after, through ``on_lost``, that it lost the
other; and ``close()`` is a loss to every peer, reported after the frames sent before it have
been delivered, as when a TCP connection closes.
"""

from __future__ import annotations

import asyncio
import logging

from naiad.transport.base import FrameHandler, LossHandler, Parts, Transport
from naiad.transport.codec import Header

log = logging.getLogger(__name__)


class InProcNetwork:
    """The links between ``processes`` in-process transports.

    >>> import asyncio
    >>> from naiad.transport.codec import Header, Kind
    >>> async def main():
    ...     net = InProcNetwork(2)
    ...     got = []
    ...     await net.endpoints[1].start(lambda p, h, b: got.append((p, h.seq, bytes(b))), None)
    ...     await net.endpoints[0].start(lambda p, h, b: None, None)
    ...     net.endpoints[0].send(1, Header(Kind.CONTROL, 0, 0, 0, 0, 2, 5), [b"hi"])
    ...     await asyncio.sleep(0)
    ...     return got
    >>> asyncio.run(main())
    [(0, 5, b'hi')]
    """

    def __init__(self, processes: int) -> None:
        self.endpoints = [InProcTransport(self, i, processes) for i in range(processes)]


class InProcTransport(Transport):
    def __init__(self, network: InProcNetwork, process: int, processes: int) -> None:
        super().__init__(process, processes)
        self._network = network
        self._on_frame: FrameHandler | None = None
        self._on_lost: LossHandler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._cut: set[int] = set()  # peers whose link is cut: nothing flows either way
        self._leaving: set[int] = set()  # peers whose loss is no surprise

    async def start(self, on_frame: FrameHandler, on_lost: LossHandler | None) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._loop = asyncio.get_running_loop()

    def send(self, peer: int, header: Header, parts: Parts) -> None:
        if self._closed or peer in self._cut:
            return
        payload = b"".join(parts)
        if len(payload) != header.length:
            raise ValueError(f"frame length {header.length} does not match payload {len(payload)}")
        if len(payload) > self.max_message:  # refused as TCP refuses it
            raise ValueError(
                f"a message of {len(payload)} bytes to process {peer} exceeds the limit of "
                f"{self.max_message} bytes"
            )
        self.stats.count(header.kind, len(payload) + 32)
        receiver = self._network.endpoints[peer]
        assert self._loop is not None
        self._loop.call_soon(receiver._deliver, self.process, header, memoryview(payload))

    def _deliver(self, sender: int, header: Header, payload: memoryview) -> None:
        if self._closed or self._on_frame is None or sender in self._cut:
            return
        try:
            self._on_frame(sender, header, payload)
        except Exception as exc:
            log.exception(
                "process %d: handling a frame (kind %d, %d bytes) from process %d raised; "
                "cutting the link",
                self.process,
                header.kind,
                header.length,
                sender,
            )
            self._cut_link(sender, exc)

    def _cut_link(self, peer: int, error: BaseException) -> None:
        """Cuts the link with ``peer`` at both ends; each end hears of it soon after."""
        other = self._network.endpoints[peer]
        self._cut.add(peer)
        other._cut.add(self.process)
        assert self._loop is not None
        self._loop.call_soon(self._report_lost, peer, error)
        reset = ConnectionResetError(f"process {self.process} cut the link")
        self._loop.call_soon(other._report_lost, self.process, reset)

    def _report_lost(self, peer: int, error: BaseException) -> None:
        if self._closed or self._on_lost is None:
            return
        if peer not in self._leaving:
            log.warning("process %d lost its link to process %d: %s", self.process, peer, error)
        try:
            self._on_lost(peer, error)
        except Exception:
            log.exception("process %d: on_lost(%d) raised", self.process, peer)

    def expect_close(self, peer: int) -> None:
        self._leaving.add(peer)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        for peer, other in enumerate(self._network.endpoints):
            if peer != self.process and peer not in self._cut:
                self._cut.add(peer)
                # queued behind the frames already on their way, which still arrive (the
                # peer's end stays open until then)
                loop.call_soon(other._peer_closed, self.process)

    def _peer_closed(self, peer: int) -> None:
        if peer in self._cut:  # (already cut, or this end closed too: nothing to report)
            return
        self._cut.add(peer)
        self._report_lost(peer, ConnectionResetError(f"process {peer} closed the connection"))
