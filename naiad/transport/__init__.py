"""Transports: one interface, in-process and TCP implementations, and the wire codec."""

from naiad.transport.base import Transport, TransportStats
from naiad.transport.codec import FrameError, Header, Kind
from naiad.transport.inproc import InProcNetwork, InProcTransport

__all__ = [
    "FrameError",
    "Header",
    "InProcNetwork",
    "InProcTransport",
    "Kind",
    "Transport",
    "TransportStats",
]
