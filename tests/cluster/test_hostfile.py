"""``naiad run SCRIPT -w W -n P -p I --hostfile FILE``: members started one by one, as on
several machines, each listening on its own line of the hostfile. Two loopback addresses
(127.0.0.1 and 127.0.0.2) stand in for two hosts: each member must bind its own address,
not a wildcard, and reach the other at the other's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

MEMBERS = str(Path(__file__).with_name("members.py"))
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
    members = []
    for i in (1, 0):  # the later process first: whichever starts first waits for the other
        members.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "naiad.runtime.cli",
                    "run",
                    MEMBERS,
                    "-w",
                    "2",
                    "-n",
                    "2",
                    "-p",
                    str(i),
                    "--hostfile",
                    str(hostfile),
                    "--",
                    str(epochs),
                    "-1",
                    "0",
                    str(tmp_path),
                    "0.01",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(tmp_path / f"stderr-{i}").open("wb"),
            )
        )
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"process-{i}.json.started").exists() for i in range(2)):
            assert time.monotonic() < deadline, "the cluster did not start"
            assert all(m.poll() is None for m in members), "a member exited during start-up"
            time.sleep(0.02)
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
    totals: dict[str, int] = {}
    for index in range(2):
        report = json.loads((tmp_path / f"process-{index}.json").read_text())
        assert report["ok"] is True
        for epoch, total in report["sums"].items():
            totals[epoch] = totals.get(epoch, 0) + total
    assert totals == {str(e): sum(e * 10 + i for i in range(10)) * 4 for e in range(epochs)}
