"""The transport interface: ordered, framed delivery between the processes of a cluster.

A transport moves frames (``codec.py``) from one process to another. Its contract:

* frames sent by process ``a`` to process ``b`` are delivered to ``b`` in the order ``a``
  sent them (FIFO per pair), each exactly once, or the peer is reported lost;
* delivery calls ``on_frame(peer, header, payload)`` on the receiver's event loop, with the
  payload as a buffer the receiver may keep (numpy batches are views of it);
* ``send`` never blocks, and refuses (``ValueError``, nothing sent) a frame whose payload
  exceeds ``max_message``; a payload above ``max_payload`` but within ``max_message`` is
  delivered whole (TCP sends it in parts); ``drain`` waits while the transport holds more
  unsent bytes than its bound (backpressure for producers that can wait, such as input
  feeders);
* a peer that disappears is reported once through ``on_lost(peer, error)``; after
  ``expect_close(peer)`` (the peer said it is leaving) its connection closing is its
  departure: still reported, but not warned about;
* ``on_frame`` may run before ``start`` returns, as soon as that peer's link is up; an
  ``on_frame`` that raises is bad input from that peer: its connection is closed and the
  peer reported lost;
* ``send`` may keep references to the parts until they are written, so a caller must not
  change a buffer (a numpy batch) after sending it (batches are immutable by convention).

Sequence numbers are chosen by the caller (the progress actor numbers its batches itself, so
that it can reorder and drop duplicates whatever the transport does).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from naiad.transport.codec import MAX_PAYLOAD, Header, Kind

FrameHandler = Callable[[int, Header, memoryview], None]
LossHandler = Callable[[int, BaseException], None]
Parts = Sequence[bytes | bytearray | memoryview]


@dataclass
class TransportStats:
    """Frames and bytes sent, per frame kind (headers included)."""

    frames: dict[int, int] = field(default_factory=lambda: {int(k): 0 for k in Kind})
    bytes: dict[int, int] = field(default_factory=lambda: {int(k): 0 for k in Kind})

    def count(self, kind: int, size: int) -> None:
        self.frames[kind] += 1
        self.bytes[kind] += size


class Transport(ABC):
    """One process's end of the connections to every other process."""

    def __init__(self, process: int, processes: int) -> None:
        if not 0 <= process < processes:
            raise ValueError(f"process index {process} is not in 0..{processes - 1}")
        self.process = process
        self.processes = processes
        self.stats = TransportStats()
        self.max_payload = MAX_PAYLOAD  # the largest frame payload a peer accepts
        self.max_message = MAX_PAYLOAD  # the largest payload ``send`` takes (>= max_payload)

    @abstractmethod
    async def start(self, on_frame: FrameHandler, on_lost: LossHandler | None) -> None:
        """Connects to every peer; returns once frames can flow both ways."""

    @abstractmethod
    def send(self, peer: int, header: Header, parts: Parts) -> None:
        """Queues one frame (``header.length`` must be the total size of ``parts``)."""

    async def drain(self) -> None:  # noqa: B027 - transports without a bound need not wait
        """Waits until the unsent data is below the transport's bound."""

    def expect_close(self, peer: int) -> None:  # noqa: B027 - only transports that warn care
        """``peer`` said it is leaving: its connection closing from now on is no loss to warn
        about (``on_lost`` still reports it)."""

    @abstractmethod
    async def close(self) -> None:
        """Flushes what was sent and closes every connection."""
