"""Thousands of random and mutated frames fired at a live cluster's ports during a
computation: the strangers are rejected, and the computation still gives the right answer."""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from pathlib import Path

from naiad.transport.codec import Header, Kind, encode_message
from naiad.transport.tcp import HELLO, RESPONSE
from tests.cluster.streaming import epoch_totals, expected_totals, start_member, wait_started


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def junk(rng: random.Random) -> bytes:
    """Random bytes, valid frames with bits flipped, or handshakes with a forged proof."""
    parts = encode_message(rng.randrange(100), [rng.randrange(1000) for _ in range(5)])
    payload = b"".join(bytes(p) for p in parts)
    frame = Header(Kind.DATA, 0, 0, 1, 0, len(payload), 0).pack() + payload
    choice = rng.randrange(4)
    if choice == 0:
        return rng.randbytes(rng.randrange(1, 200))
    if choice == 1:
        flipped = bytearray(frame)
        for _ in range(rng.randrange(1, 8)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    if choice == 2:  # a plausible handshake response with a forged proof, then a frame
        response = RESPONSE.pack(b"NAIADTCP", 1, 1, 2, rng.randbytes(32), rng.randbytes(32))
        return response + frame
    return frame * rng.randrange(1, 4)


def fire(ports: list[int], count: int, stop: threading.Event, sent: list[int]) -> None:
    rng = random.Random(1234)
    while sent[0] < count and not stop.is_set():
        port = rng.choice(ports)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                if rng.random() < 0.5:
                    conn.recv(HELLO.size)  # read the challenge first, sometimes
                conn.sendall(junk(rng))
                sent[0] += 1
        except OSError:
            time.sleep(0.01)  # not listening yet, or it closed on us: both fine


def test_fuzzing_a_live_cluster_does_not_change_its_result(tmp_path: Path) -> None:
    ports = free_ports(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    env = dict(os.environ, NAIAD_SECRET="fuzz-test-secret")
    epochs = 300
    args = [str(epochs), "-1", "0", str(tmp_path), "0.005"]
    members = [start_member(i, 2, hostfile, tmp_path, args, env) for i in range(2)]
    # Fire once both members run the computation (strangers during the members' own start-up
    # are a separate case: see the closing note), and pace the epochs so the fuzzing overlaps.
    wait_started(tmp_path, members)
    stop, sent = threading.Event(), [0]
    fuzzer = threading.Thread(target=fire, args=(ports, 3000, stop, sent))
    fuzzer.start()
    try:
        codes = [m.wait(timeout=120) for m in members]
    finally:
        stop.set()
        fuzzer.join()
        for m in members:
            if m.poll() is None:
                m.kill()
    stderr = "".join((tmp_path / f"stderr-{i}").read_text() for i in range(2))
    assert codes == [0, 0], stderr[-3000:]
    assert sent[0] > 200, "the fuzzer barely ran during the computation"
    assert "rejected" in stderr or "handshake" in stderr  # the strangers were noticed
    assert epoch_totals(tmp_path, 2) == expected_totals(epochs, workers=4)
