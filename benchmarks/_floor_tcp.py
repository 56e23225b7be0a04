"""The child side of the TCP floors of ``benchmarks._cluster`` (a script, not a module):

``python benchmarks/_floor_tcp.py send PORT NBYTES CHUNK``: connects to ``127.0.0.1:PORT``,
waits for one go byte, then writes ``NBYTES`` with ``sendall`` in ``CHUNK``-byte pieces.

``python benchmarks/_floor_tcp.py pong PORT``: connects (asyncio streams on uvloop,
TCP_NODELAY) and echoes every 8-byte message until the stop message.
"""

from __future__ import annotations

import asyncio
import socket
import sys

PING_SIZE = 8
PING_STOP = b"\xff" * PING_SIZE


def send(port: int, nbytes: int, chunk: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        payload = memoryview(bytes(range(256)) * (chunk // 256 + 1))[:chunk]
        if sock.recv(1) != b"g":
            raise SystemExit("no go byte")
        full, rest = divmod(nbytes, chunk)
        sendall = sock.sendall
        for _ in range(full):
            sendall(payload)
        if rest:
            sendall(payload[:rest])
        sock.shutdown(socket.SHUT_WR)


async def pong(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        message = await reader.readexactly(PING_SIZE)
        if message == PING_STOP:
            break
        writer.write(message)
    writer.close()
    await writer.wait_closed()


def main(argv: list[str]) -> None:
    if argv[0] == "send":
        send(int(argv[1]), int(argv[2]), int(argv[3]))
    elif argv[0] == "pong":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(pong(int(argv[1])))
    else:
        raise SystemExit(f"unknown floor {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
