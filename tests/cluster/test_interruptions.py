"""A member of a cluster of real processes whose runtime is cancelled (a timeout) while it
waits for its dataflows to finish: it stops at once and the other processes stop too, with
an error that says why; cancelled while it leaves, it still closes its sockets and stops the
processes it launched. Each script runs under ``naiad run`` (or launches itself) on
loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import naiad
from tests.cluster.test_departures import REPORTS, naiad_run


def test_a_timeout_while_leaving_the_runtime_stops_every_process(tmp_path: Path) -> None:
    """Regression: the cancellation was taken for a normal end. Process 0 said goodbye and
    waited 30 s for process 1's, which was still waiting for the dataflow that process 0 had
    abandoned: process 1 hung until the launcher killed it."""
    done = naiad_run(
        tmp_path,
        """
        import asyncio, os, naiad
        me = int(os.environ["NAIAD_PROCESS"])
        class Hold(naiad.Vertex):  # process 0 keeps the dataflow from completing
            def on_start(self, cap):
                self.cap = cap.retain() if me == 0 else None
            def on_recv(self, port, cap, batch):
                pass
        async def main():
            async with asyncio.timeout(0.5 if me == 0 else None):
                async with naiad.Runtime() as rt:
                    rt.dataflow(lambda s: s.new_input()[1].unary(Hold()).probe())
        """,
        tail=REPORTS,
    )
    assert done.returncode == 3, done.stderr
    assert "process 0: TimeoutError" in done.stdout, done.stdout
    assert (
        "process 1: PeerFailed: process 0 stopped the cluster: DataflowStopped: the runtime was "
        "stopped by CancelledError"
    ) in done.stdout, done.stdout


def test_a_process_that_died_before_the_others_connected_is_named_at_once(
    tmp_path: Path,
) -> None:
    """Regression: the others retried its refused connection for connect_timeout (30 s),
    though the launcher had bound its socket before starting any process: a refusal means it
    has exited. naiad run killed them first (its grace period), so they never said why."""
    done = naiad_run(
        tmp_path,
        """
        import asyncio, os, naiad
        me = int(os.environ["NAIAD_PROCESS"])
        if me == 0:
            raise SystemExit(5)  # gone before the cluster connects
        async def main():
            async with naiad.Runtime():
                pass
        """,
        tail=REPORTS,
        processes=3,
    )
    for me in (1, 2):
        assert (
            f"process {me}: ConnectionError: process {me}: process 0 at 127.0.0.1:"
        ) in done.stdout, (done.stdout, done.stderr)
    assert done.stdout.count("refused the connection: it is no longer running") == 2
    assert "naiad: process 0 exited with status 5" in done.stderr, done.stderr
    assert done.returncode == 5


def test_a_process_lost_while_the_cluster_connects_is_reported_without_a_traceback(
    tmp_path: Path,
) -> None:
    """Regression: process 2 lost process 1 (which gave up connecting) before process 0 had
    connected; its runtime tried to tell every peer why and logged "on_lost(1) raised ...
    RuntimeError: process 2 sent to process 0 before start() connected it"."""
    done = naiad_run(
        tmp_path,
        """
        import asyncio, os, naiad
        me = int(os.environ["NAIAD_PROCESS"])
        async def main():
            if me == 0:
                await asyncio.sleep(2.5)  # its socket listens already; it answers late
            rt = naiad.Runtime(connect_timeout=3)
            if me == 1:
                await asyncio.sleep(1.0)  # process 2 connects to it meanwhile
                await asyncio.wait_for(rt.__aenter__(), 0.5)  # gives up: process 0 is late
            async with rt:
                rt.dataflow(lambda s: s.new_input()[1].probe())
        """,
        tail=REPORTS,
        processes=3,
    )
    assert "process 1: TimeoutError" in done.stdout, (done.stdout, done.stderr)
    assert "process 2: DataflowStopped: cannot build dataflow" in done.stdout, done.stdout
    assert "before start() connected it" not in done.stderr, done.stderr
    assert "raised" not in done.stderr, done.stderr


def test_the_connections_closed_after_a_failure_are_not_reported_as_lost(tmp_path: Path) -> None:
    """Regression: after an operator failed in one process, a process often warned that it
    had "lost its connection" to the other, which was only stopping because of that failure
    (about four runs in five); the failure's own error says what happened."""
    for _ in range(3):  # the warning depended on the order in which the two processes closed
        done = naiad_run(
            tmp_path,
            """
            import asyncio, os, naiad
            me = int(os.environ["NAIAD_PROCESS"])
            def check(x):
                if x == 7:
                    raise ValueError("bad record 7")
                return x
            async def main():
                async with naiad.Runtime() as rt:
                    def build(s):
                        handle, stream = s.new_input()
                        return handle, stream.exchange(lambda x: x).map(check).probe()
                    results = rt.dataflow(build).results
                    for epoch in range(3):
                        for handle, _ in results:
                            handle.send(list(range(epoch * 5, epoch * 5 + 5)))
                            handle.advance_to(epoch + 1)
                        await results[0][1].wait(epoch)
            """,
            tail=REPORTS,
            workers=2,
        )
        assert done.returncode == 3, done.stderr
        assert "ValueError: bad record 7" in done.stdout, done.stdout
        assert "lost its connection" not in done.stderr, done.stderr


def test_a_callback_that_exits_the_program_is_named_to_the_other_processes(
    tmp_path: Path,
) -> None:
    """Regression: a ``sys.exit()`` (or a ``KeyboardInterrupt``) raised in a map escaped the
    runtime's task, asyncio cancelled the runtime, and the other process heard only
    "stopped by CancelledError": nothing named the operator, nor the exit (a SystemExit
    prints no traceback)."""
    done = naiad_run(
        tmp_path,
        """
        import asyncio, os, sys, naiad
        me = int(os.environ["NAIAD_PROCESS"])
        def leave(x):
            if x == 2:  # a record of process 0's worker
                sys.exit(7)
            return x
        async def main():
            async with naiad.Runtime() as rt:
                def held(s):
                    handle, stream = s.new_input()  # left open: the runtime waits for it
                    return handle, stream.probe()
                rt.dataflow(held)
                rt.dataflow(lambda s: s.from_epochs([[2, 3]]).map(leave, name="leave").probe())
        """,
        tail=REPORTS,
    )
    assert done.returncode == 7, done.stderr
    # (process 1 may hear it while it runs the dataflows, or before it builds the second)
    assert (
        "process 0 stopped the cluster: DataflowStopped: the runtime was stopped by SystemExit: 7"
    ) in done.stdout, done.stdout
    assert "(naiad: raised in operator 'leave' on worker 0 receiving a message" in done.stdout


# Process 0 launches process 1 itself; process 1 stays in its runtime ("goodbye": process 0
# waits for its goodbye) or leaves it and goes on running ("exit": process 0 waits for it to
# exit) past the moment process 0's task is cancelled.
CANCELLED_WHILE_LEAVING = """
import asyncio, socket, sys, naiad

async def main():
    rt = naiad.Runtime(processes=2, transport="tcp")
    me = rt.process_index
    leaving = asyncio.Event()

    async def run():
        async with rt:
            await rt.dataflow(lambda s: s.from_epochs([[1, 2]]).exchange(lambda x: x).probe()
                              ).finished()
            if me == 1 and sys.argv[1] == "goodbye":
                await asyncio.sleep(60)
            leaving.set()
        if me == 1:
            await asyncio.sleep(60)

    task = asyncio.create_task(run())
    if me == 1:
        await task
        return
    await leaving.wait()
    children = list(rt._children)
    address = rt.processes[0].transport.addresses[0]
    await asyncio.sleep(0.5)  # process 0 is waiting for process 1 now
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        print("cancelled")
    print("running" if any(c.poll() is None for c in children) else "reaped")
    try:
        socket.create_connection(address, timeout=5).close()
        print("listening")
    except OSError:
        print("closed")
    for c in children:  # (what the runtime left behind must not outlive the test)
        if c.poll() is None:
            c.kill()

asyncio.run(main())
"""


@pytest.mark.parametrize("waiting_for", ["goodbye", "exit"])
def test_a_runtime_cancelled_while_it_leaves_closes_its_socket_and_stops_its_processes(
    tmp_path: Path, waiting_for: str
) -> None:
    """Regression: a cancellation (a timeout, Ctrl-C) while ``stop`` waited for process 1's
    goodbye, or for process 1 to exit, skipped the rest of ``stop``: the listening socket
    kept accepting connections and process 1 kept running, a child nobody would wait for."""
    script = tmp_path / "leave.py"
    script.write_text(textwrap.dedent(CANCELLED_WHILE_LEAVING))
    root = Path(naiad.__file__).resolve().parents[1]  # this checkout, in every process
    done = subprocess.run(
        [sys.executable, str(script), waiting_for],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.stdout.split() == ["cancelled", "reaped", "closed"], (done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
