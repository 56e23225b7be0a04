"""Cluster configuration and local process launching.

A naiad cluster is P processes running the same program (as timely does): each builds the
same dataflows and drives its own workers' inputs; worker ``w`` of process ``p`` has global
index ``p * W + w``. A process learns its role from the environment, set by ``naiad run`` or
by a ``Runtime(processes=P, transport="tcp")`` that launches the others:

``NAIAD_PROCESS`` / ``NAIAD_PROCESSES`` / ``NAIAD_WORKERS``: its index, the cluster size and
the workers per process; ``NAIAD_ADDRESSES``: ``host:port`` of every process, comma
separated; ``NAIAD_SECRET`` (or ``NAIAD_SECRET_FILE``): the cluster secret that members prove
they know; ``NAIAD_LISTEN_FD``: a listening socket the launcher bound for this process (so no
port can be taken between choosing it and listening on it). ``NAIAD_MAX_PAYLOAD`` (optional,
the same in every process): the largest frame payload in bytes a process accepts (256 MiB by
default); larger messages are sent as several. ``NAIAD_CONNECT_TIMEOUT`` (optional): seconds a
process waits for its peers at start-up (30 by default; ``naiad run --connect-timeout`` sets
it), for members started by hand on several machines. ``NAIAD_REPORT_FD``: the write end of a pipe
to ``naiad run``, where a member reports its runtime's first failure (see
:class:`FailureReports`).

Local launches bind loopback sockets; a secret is generated when none is given.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from naiad.transport.codec import MAX_PAYLOAD

ENV_PROCESS = "NAIAD_PROCESS"
ENV_PROCESSES = "NAIAD_PROCESSES"
ENV_WORKERS = "NAIAD_WORKERS"
ENV_ADDRESSES = "NAIAD_ADDRESSES"
ENV_SECRET = "NAIAD_SECRET"
ENV_SECRET_FILE = "NAIAD_SECRET_FILE"
ENV_LISTEN_FD = "NAIAD_LISTEN_FD"
ENV_SELF_LAUNCHED = "NAIAD_SELF_LAUNCHED"
ENV_MAX_PAYLOAD = "NAIAD_MAX_PAYLOAD"
ENV_REPORT_FD = "NAIAD_REPORT_FD"
ENV_CONNECT_TIMEOUT = "NAIAD_CONNECT_TIMEOUT"
CONNECT_TIMEOUT = 30.0
ONE_SELF_LAUNCH = (
    "a script that launches its own cluster (Runtime(processes>1, transport='tcp')) runs one "
    "such runtime: its other processes run the whole script alongside it. For several "
    "runtimes in one script, start it with 'naiad run SCRIPT -n P'"
)


class LaunchError(RuntimeError):
    """The cluster could not be configured or started."""


@dataclass
class Member:
    """This process's place in a TCP cluster, as read from the environment."""

    process: int
    processes: int
    workers: int
    addresses: list[tuple[str, int]]
    secret: bytes
    listen_fd: int | None
    self_launched: bool = False  # started by a Runtime of process 0, not by 'naiad run'
    report_fd: int | None = None  # where to report a failure to 'naiad run'


def parse_addresses(text: str) -> list[tuple[str, int]]:
    """``"h1:p1,h2:p2"`` (or one per line) as ``[(h1, p1), (h2, p2)]``.

    >>> parse_addresses("127.0.0.1:5000, [::1]:5001")
    [('127.0.0.1', 5000), ('::1', 5001)]
    """
    out = []
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise LaunchError(f"address {item!r} is not host:port")
        if not 0 < int(port) < 65536:
            raise LaunchError(f"address {item!r}: a port is 1..65535")
        address = (host.strip("[]"), int(port))
        if address in out:
            raise LaunchError(f"address {item!r} is listed twice: every process needs its own")
        out.append(address)
    return out


def read_secret(env: os._Environ[str] | dict[str, str] = os.environ) -> bytes | None:
    if env.get(ENV_SECRET):
        # the variable's own bytes: not text in every process's encoding (random bytes, say)
        return os.fsencode(env[ENV_SECRET])
    if env.get(ENV_SECRET_FILE):
        path = env[ENV_SECRET_FILE]
        try:
            secret = Path(path).read_bytes().strip()
        except OSError as exc:
            raise LaunchError(f"{ENV_SECRET_FILE}={path}: {exc.strerror or exc}") from None
        if not secret:
            raise LaunchError(f"{ENV_SECRET_FILE}={path} is empty")
        return secret
    return None


def max_payload(env: os._Environ[str] | dict[str, str] = os.environ) -> int:
    """The frame payload limit: ``NAIAD_MAX_PAYLOAD``, or the codec's default.

    >>> max_payload({"NAIAD_MAX_PAYLOAD": "65536"})
    65536
    """
    text = env.get(ENV_MAX_PAYLOAD)
    if not text:
        return MAX_PAYLOAD
    if not text.isdigit() or not 1024 <= int(text) < 2**32:
        raise LaunchError(f"{ENV_MAX_PAYLOAD}={text!r}: bytes, from 1024 to 2**32 - 1")
    return int(text)


def connect_timeout(env: os._Environ[str] | dict[str, str] = os.environ) -> float:
    """Seconds to wait for the peers at start-up: ``NAIAD_CONNECT_TIMEOUT``, or 30.

    >>> connect_timeout({"NAIAD_CONNECT_TIMEOUT": "600"}), connect_timeout({})
    (600.0, 30.0)
    """
    text = env.get(ENV_CONNECT_TIMEOUT)
    if not text:
        return CONNECT_TIMEOUT
    try:
        return checked_timeout(text, ENV_CONNECT_TIMEOUT)
    except ValueError as exc:
        raise LaunchError(str(exc)) from None


def checked_timeout(value: str | float, what: str) -> float:
    """``value`` as a number of seconds (positive and finite), or a ``ValueError`` naming
    ``what``."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if isinstance(value, bool) or not 0 < seconds < math.inf:
        raise ValueError(f"{what}={value!r}: seconds, a positive finite number")
    return seconds


def member_from_env(env: os._Environ[str] | dict[str, str] = os.environ) -> Member | None:
    """This process's membership, if it was launched as part of a cluster."""
    if ENV_PROCESS not in env:
        return None
    try:
        process = int(env[ENV_PROCESS])
        processes = int(env[ENV_PROCESSES])
        workers = int(env.get(ENV_WORKERS, "1"))
    except (KeyError, ValueError) as exc:
        raise LaunchError(f"incomplete cluster environment: {exc}") from exc
    addresses = parse_addresses(env.get(ENV_ADDRESSES, ""))
    if len(addresses) != processes:
        raise LaunchError(
            f"{ENV_ADDRESSES} lists {len(addresses)} addresses for {processes} processes"
        )
    secret = read_secret(env)
    if secret is None:
        raise LaunchError(f"a cluster member needs {ENV_SECRET} or {ENV_SECRET_FILE}")
    fd = env.get(ENV_LISTEN_FD)
    report = env.get(ENV_REPORT_FD)
    return Member(
        process,
        processes,
        workers,
        addresses,
        secret,
        int(fd) if fd else None,
        env.get(ENV_SELF_LAUNCHED) == "1",
        int(report) if report and report.isdigit() else None,
    )


def worker_count(text: str) -> int:
    """A script's ``--workers`` value (an argparse ``type``): an integer of at least 1, so
    that ``--workers 0`` is a usage error naming the option, not a ``Runtime`` traceback.

    >>> worker_count("3")
    3
    >>> worker_count("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: workers per process must be at least 1, not 0
    """
    import argparse

    count = int(text)  # argparse reports a ValueError as "invalid worker_count value"
    if count < 1:
        raise argparse.ArgumentTypeError(f"workers per process must be at least 1, not {count}")
    return count


def script_workers(given: int | None, otherwise: int = 2) -> int:
    """The workers per process for a script's own ``--workers`` option: ``given`` if set,
    else the ``-w`` that ``naiad run`` launched this process with (a ``Runtime`` asking for
    another number would be refused), else ``otherwise``.

    >>> script_workers(3), script_workers(None, otherwise=2)   # not launched
    (3, 2)
    """
    if given is not None:
        return given
    member = member_from_env()
    return otherwise if member is None else member.workers


def bind_listeners(count: int, host: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` listening sockets on free ports of ``host``."""
    from naiad.transport.tcp import listen_socket

    return [listen_socket(host) for _ in range(count)]


def spawn(
    argv: Sequence[str],
    processes: int,
    workers: int,
    listeners: list[socket.socket],
    secret: bytes,
    indices: Sequence[int],
    self_launched: bool = False,
    report_fd: int | None = None,
) -> list[subprocess.Popen[bytes]]:
    """Starts ``python argv`` once for each process index in ``indices`` (``self_launched``:
    by a runtime of process 0 running the same script; ``report_fd``: where they report
    failures, see :class:`FailureReports`)."""
    addresses = ",".join(f"{s.getsockname()[0]}:{s.getsockname()[1]}" for s in listeners)
    if b"\0" in secret:
        raise LaunchError(
            "the cluster secret contains a NUL byte, which the environment of the processes "
            "launched here cannot carry: use a secret without one"
        )
    children = []
    for index in indices:
        fd = listeners[index].fileno()
        env = dict(os.environ)
        env.update(
            {
                ENV_PROCESS: str(index),
                ENV_PROCESSES: str(processes),
                ENV_WORKERS: str(workers),
                ENV_ADDRESSES: addresses,
                # any bytes (a secret file of random bytes): read_secret encodes them back
                ENV_SECRET: os.fsdecode(secret),
                ENV_LISTEN_FD: str(fd),
            }
        )
        env.pop(ENV_SECRET_FILE, None)
        if self_launched:
            env[ENV_SELF_LAUNCHED] = "1"
        fds = [fd]
        if report_fd is not None:
            env[ENV_REPORT_FD] = str(report_fd)
            fds.append(report_fd)
        children.append(subprocess.Popen([sys.executable, *argv], env=env, pass_fds=fds))
    return children


def exit_description(code: int) -> str:
    """How a process ended, from its return code (negative: the signal that killed it).

    >>> exit_description(3), exit_description(-9)
    ('exited with status 3', 'was killed by SIGKILL')
    """
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name}"


def shell_status(code: int) -> int:
    """A return code as a shell reports it: 128 + the signal for a process killed by one.

    >>> shell_status(3), shell_status(-9)
    (3, 137)
    """
    return 128 - code if code < 0 else code


# A report is one line written in one call, so that the reports of several members never
# interleave: at most PIPE_BUF bytes (4096 on Linux); ASCII JSON spends up to 12 per character.
_REPORT_LIMIT = 300  # characters of the error kept


def report_failure(member: Member, exc: BaseException, peer: int | None) -> None:
    """Tells ``naiad run`` (if it launched this process) why this member's runtime failed, and
    which other process caused it, if one did. Best effort: the pipe never blocks."""
    if member.report_fd is None:
        return
    error = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:_REPORT_LIMIT]
    line = json.dumps({"process": member.process, "peer": peer, "error": error})
    with contextlib.suppress(OSError):
        os.write(member.report_fd, (line + "\n").encode())


@dataclass(frozen=True)
class FailureReport:
    """What a member reported of its runtime's first failure."""

    order: int  # the place of this report among all (a cause is reported before its effects)
    peer: int | None  # the process that caused this failure, if another did
    error: str


class FailureReports:
    """The launcher's end of the members' report pipe: each member's first failure, in the
    order they were reported. A member reports its own failure before it tells its peers,
    so a failure is always reported before the failures it causes in other processes."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        for fd in (self.read_fd, self.write_fd):
            os.set_blocking(fd, False)  # a member never waits for the launcher
        self.reports: dict[int, FailureReport] = {}
        self._partial = b""
        self._count = 0

    def read(self) -> None:
        """Takes in whatever the members have written."""
        while True:
            try:
                chunk = os.read(self.read_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            for line in lines:
                self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            report = json.loads(line)
            process, peer, error = report["process"], report["peer"], str(report["error"])
        except (ValueError, KeyError, TypeError):
            return  # not a report: a member's own write to an inherited descriptor, say
        if isinstance(process, int) and process not in self.reports:
            self.reports[process] = FailureReport(
                self._count, peer if isinstance(peer, int) else None, error
            )
            self._count += 1

    def root_cause(self, failed: Sequence[int]) -> int:
        """Of the processes that failed, given in the order they exited, the one whose failure
        came first: the first to report a failure of its own; else the first to exit without
        a report (killed, or failed outside its runtime); else the first to exit.

        >>> reports = FailureReports()
        >>> for line in (b'{"process": 1, "peer": null, "error": "E: x"}',
        ...              b'{"process": 0, "peer": 1, "error": "PeerFailed: ..."}'):
        ...     reports._take(line)
        >>> reports.root_cause([0, 1]), reports.root_cause([0]), reports.root_cause([2, 0])
        (1, 0, 2)
        >>> reports.close()
        """

        def rank(position: int) -> tuple[int, int]:
            report = self.reports.get(failed[position])
            if report is None:
                return (1, position)
            if report.peer is None:
                return (0, report.order)
            return (2, position)

        return failed[min(range(len(failed)), key=rank)]

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def new_secret() -> bytes:
    return secrets.token_hex(32).encode()


def script_argv() -> list[str]:
    """How to run this program again in another process (for self-launching runtimes)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not sys.argv or sys.argv[0] in ("-c", "") or not Path(sys.argv[0]).exists():
        raise LaunchError(
            "Runtime(processes>1, transport='tcp') runs this program once in every process; "
            "run it as a script file (python script.py) or with 'naiad run SCRIPT -n P'"
        )
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        # started as 'python -m pkg.module': run as a file, its relative imports would fail
        name = spec.name.removesuffix(".__main__")
        return ["-m", name, *sys.argv[1:]]
    return [sys.argv[0], *sys.argv[1:]]
