"""``naiad run SCRIPT -w W -n P -p I --hostfile FILE``: members started one by one, as on
several machines, each listening on its own line of the hostfile. Two loopback addresses
(127.0.0.1 and 127.0.0.2) stand in for two hosts: each member must bind its own address,
not a wildcard, and reach the other at the other's."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.cluster.streaming import epoch_totals, expected_totals, start_member, wait_started

HOSTS = ["127.0.0.1", "127.0.0.2"]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def loopback_alias_works() -> bool:
    try:
        with socket.socket() as s:
            s.bind((HOSTS[1], 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not loopback_alias_works(), reason="127.0.0.2 is not a loopback address here")
def test_members_on_two_addresses_compute_together(tmp_path: Path) -> None:
    ports = [free_port(h) for h in HOSTS]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{h}:{p}\n" for h, p in zip(HOSTS, ports, strict=True)))
    env = dict(os.environ, NAIAD_SECRET="hostfile-test-secret")
    epochs = 40
    args = [str(epochs), "-1", "0", str(tmp_path), "0.01"]
    # the later process first: whichever starts first waits for the other
    members = [start_member(i, 2, hostfile, tmp_path, args, env) for i in (1, 0)]
    try:
        wait_started(tmp_path, members)
        # process 1 listens on its own address only: its port on the other one is closed
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((HOSTS[0], ports[1]), timeout=2).close()
        codes = [m.wait(timeout=120) for m in members]
    finally:
        for m in members:
            if m.poll() is None:
                m.kill()
    stderr = "".join((tmp_path / f"stderr-{i}").read_text() for i in range(2))
    assert codes == [0, 0], stderr[-3000:]
    assert epoch_totals(tmp_path, 2) == expected_totals(epochs, workers=4)
