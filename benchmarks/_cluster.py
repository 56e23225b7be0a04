"""Running benchmarks on a cluster of naiad processes, and the TCP floors they are compared with.

Parent side (the benchmark's own process):

* :func:`run_cluster` launches ``python -m naiad.runtime.cli run benchmarks/<member> -w W -n P
  -- args`` (P local processes over TCP on loopback) and returns what every process wrote
  with :func:`member_write`: one JSON object per process, read from a temporary directory
  (``NAIAD_BENCH_OUT``), in process order. A member that fails fails the run with its stderr.
* :func:`tcp_stream_floor`: raw socket throughput between two OS processes (this one
  receiving, a child sending 64 KiB ``sendall`` writes).
* :func:`tcp_pingpong_floor`: small-message round trips between two OS processes over a
  ``TCP_NODELAY`` connection with asyncio streams on uvloop.

Member side (``benchmarks/_cluster_*.py``, run by every process of the cluster):
:func:`member_write`, :func:`clock` (``CLOCK_MONOTONIC``, one clock for every process of the
machine, so stamps taken in different processes can be compared), :func:`cpu_seconds`,
:func:`peak_rss_mb`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
ENV_OUT = "NAIAD_BENCH_OUT"
FLOOR_SCRIPT = BENCH_DIR / "_floor_tcp.py"


class ClusterRunError(RuntimeError):
    """A cluster run failed (a member exited with an error, or it timed out)."""


def clock() -> float:
    """Seconds on ``CLOCK_MONOTONIC``: comparable between processes of one machine."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def cpu_seconds() -> float:
    """This process's CPU time (user + system), seconds."""
    return time.process_time()


def peak_rss_mb() -> float:
    """This process's lifetime peak resident set (MB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    path = [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(path)  # members import benchmarks._cluster
    env.update(extra or {})
    return env


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kills the process group this module started for ``proc`` (its cluster members)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_cluster(
    member: str,
    workers: int,
    processes: int,
    args: list[str],
    timeout: float = 600.0,
) -> list[dict[str, Any]]:
    """Runs ``benchmarks/<member>`` on ``processes`` local processes of ``workers`` workers
    (``naiad run`` over TCP); returns each process's :func:`member_write` object."""
    script = BENCH_DIR / member
    with tempfile.TemporaryDirectory(prefix="naiad-bench-") as out:
        cmd = [
            sys.executable,
            "-m",
            "naiad.runtime.cli",
            "run",
            str(script),
            "-w",
            str(workers),
            "-n",
            str(processes),
            "--",
            *args,
        ]
        # A session of its own: on a timeout the launcher and its members are killed together.
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=_child_env({ENV_OUT: out}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            proc.communicate()
            raise ClusterRunError(f"{member} -w {workers} -n {processes} timed out") from exc
        except BaseException:  # interrupted: leave no member behind
            _kill_group(proc)
            raise
        if proc.returncode != 0:
            raise ClusterRunError(
                f"{member} -w {workers} -n {processes} exited with {proc.returncode}:\n"
                f"{stderr[-3000:]}"
            )
        results = []
        for index in range(processes):
            path = Path(out, f"process-{index}.json")
            if not path.exists():
                raise ClusterRunError(
                    f"{member}: process {index} wrote no result\n{stderr[-3000:]}"
                )
            results.append(json.loads(path.read_text()))
        return results


def machine_load() -> dict[str, Any]:
    """The machine's 1-minute load average and CPU count: a cluster's processes need a core
    each, so a busy machine (other work running) slows them and stretches their round trips;
    reported so that readers can tell."""
    return {"loadavg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


def member_index() -> int:
    return int(os.environ.get("NAIAD_PROCESS", "0"))


ENV_PROFILE = "NAIAD_BENCH_PROFILE"


def member_run(coro: Any) -> Any:
    """Runs a member's coroutine on naiad's event loop; under cProfile when
    ``NAIAD_BENCH_PROFILE`` names a directory (``profile-<process>.prof`` is written there;
    ``NAIAD_BENCH_PROFILE_CPU=1`` profiles CPU time instead of wall-clock time)."""
    from naiad.runtime.runtime import run_coroutine

    where = os.environ.get(ENV_PROFILE)
    if not where:
        return run_coroutine(coro)
    import cProfile

    # NAIAD_BENCH_PROFILE_CPU=1: CPU time (a process descheduled by a busy machine does not
    # charge the call it was in); wall-clock time otherwise.
    cpu = os.environ.get("NAIAD_BENCH_PROFILE_CPU") == "1"
    profile = cProfile.Profile(time.process_time) if cpu else cProfile.Profile()
    profile.enable()
    try:
        return run_coroutine(coro)
    finally:
        profile.disable()
        profile.dump_stats(str(Path(where, f"profile-{member_index()}.prof")))


def member_write(data: dict[str, Any]) -> None:
    """Writes this member's result for :func:`run_cluster` (or prints it when run alone)."""
    index = member_index()
    out = os.environ.get(ENV_OUT)
    text = json.dumps(data | {"process": index})
    if out is None:
        print(text, flush=True)
    else:
        Path(out, f"process-{index}.json").write_text(text)


# --- floors ------------------------------------------------------------------------------------
def _listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def _spawn_floor(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(FLOOR_SCRIPT), *args], env=_child_env(), start_new_session=True
    )


def _reap(child: subprocess.Popen[bytes], what: str) -> None:
    try:
        code = child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        child.wait()
        raise ClusterRunError(f"the {what} floor's child did not exit") from None
    if code != 0:
        raise ClusterRunError(f"the {what} floor's child exited with {code}")


def tcp_stream_floor(nbytes: int, chunk: int = 64 * 1024) -> float:
    """Seconds for a child process to ``sendall`` ``nbytes`` in ``chunk``-byte writes to this
    process, which ``recv_into``\\ s a ``chunk``-byte buffer until it has them all. Timed here
    from the moment the go byte is sent (the child is connected and ready) to the last byte."""
    listener = _listener()
    child = _spawn_floor("send", str(listener.getsockname()[1]), str(nbytes), str(chunk))
    try:
        listener.settimeout(30)
        conn, _ = listener.accept()
    finally:
        listener.close()
    with conn:
        conn.settimeout(60)
        buf = bytearray(chunk)
        view = memoryview(buf)
        start = time.perf_counter()
        conn.sendall(b"g")
        got = 0
        while got < nbytes:
            n = conn.recv_into(view)
            if n == 0:
                raise ClusterRunError(f"the sender closed after {got} of {nbytes} bytes")
            got += n
        seconds = time.perf_counter() - start
    _reap(child, "tcp stream")
    return seconds


PING_SIZE = 8
PING_STOP = b"\xff" * PING_SIZE


def _nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _pinger(rounds: int) -> list[float]:
    loop = asyncio.get_running_loop()
    connected: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
    connected = loop.create_future()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not connected.done():
            connected.set_result((reader, writer))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    child = _spawn_floor("pong", str(port))
    try:
        reader, writer = await asyncio.wait_for(connected, 30)
        _nodelay(writer)
        clock_ = time.perf_counter
        stamps = [clock_()]
        for i in range(rounds):
            writer.write(i.to_bytes(PING_SIZE, "little"))
            await reader.readexactly(PING_SIZE)
            stamps.append(clock_())
        writer.write(PING_STOP)
        await writer.drain()
        await reader.read()  # the child closes after the stop message
        writer.close()
    finally:
        server.close()
    await asyncio.to_thread(_reap, child, "tcp ping-pong")
    return stamps


def tcp_pingpong_floor(rounds: int) -> list[float]:
    """The stamps (``perf_counter``) of ``rounds`` round trips of an 8-byte message between
    this process and a child, over one TCP_NODELAY loopback connection, asyncio streams on
    uvloop at both ends; the first stamp is taken once the child is connected."""
    from benchmarks._common import run_async

    return run_async(_pinger(rounds))


def alternate(reps: int, fns: dict[str, Any]) -> dict[str, list[Any]]:
    """Calls every function of ``fns`` once per round, ``reps`` rounds (so that load from
    elsewhere falls on all of them alike); returns each one's results in order. Each function
    measures itself (a cluster run times itself inside its processes) and returns a dict
    with at least ``seconds``."""
    from benchmarks._common import log

    out: dict[str, list[Any]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            result = fn()
            out[name].append(result)
            log(f"  {name}: run {len(out[name])}: {result['seconds']:.4g} s")
    return out
