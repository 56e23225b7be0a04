"""The ``naiad`` command, in timely's style.

``naiad run SCRIPT -w W -n P [script args]`` starts P local processes running SCRIPT, with W
workers each, connected over TCP on loopback with a generated secret. When processes fail,
it gives the others a grace period to stop, names the one whose failure came first (the
members' runtimes report which failures other processes caused) and exits with its status
(128 + the signal for one killed by a signal). ``naiad run SCRIPT -w W -n P -p I --hostfile
FILE`` runs process I of a cluster spread over several machines: FILE lists ``host:port`` of
every process, one per line, and the secret comes from ``NAIAD_SECRET`` or
``NAIAD_SECRET_FILE``. Inside SCRIPT, ``naiad.Runtime()`` and ``naiad.run(build)`` pick the
configuration up from the environment.
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from naiad.runtime import launch

# After one process fails, how long the others get to notice and stop on their own.
GRACE_SECONDS = 10.0
# After SIGTERM to the processes of an interrupted launcher, how long before SIGKILL.
STOP_SECONDS = 5.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="naiad", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    # no abbreviations: the script's own options ('--work', '--host') pass through to it
    # instead of being taken for naiad's ('--workers', '--hostfile')
    run = sub.add_parser("run", help="run a script on a cluster of processes", allow_abbrev=False)
    run.add_argument("script", help="the Python script every process runs")
    run.add_argument("-w", "--workers", type=int, default=1, help="workers per process")
    run.add_argument("-n", "--processes", type=int, default=1, help="number of processes")
    run.add_argument("-p", "--process", type=int, help="this process's index (with --hostfile)")
    run.add_argument("--hostfile", help="host:port of every process, one per line")
    run.add_argument(
        "--connect-timeout",
        type=float,
        help="seconds every process waits for its peers at start-up (default 30)",
    )
    args, script_args = parser.parse_known_args(argv)
    if script_args and script_args[0] == "--":
        script_args = script_args[1:]
    if not Path(args.script).exists():
        parser.error(f"no such script: {args.script}")
    if args.workers < 1 or args.processes < 1:
        parser.error("-w and -n must be at least 1")
    try:
        if args.connect_timeout is not None:
            try:
                seconds = launch.checked_timeout(args.connect_timeout, "--connect-timeout")
            except ValueError as exc:
                parser.error(str(exc))
            # every process reads it, the launched ones from the environment they inherit
            os.environ[launch.ENV_CONNECT_TIMEOUT] = str(seconds)
        launch.connect_timeout()  # a bad NAIAD_CONNECT_TIMEOUT is named before anything starts
        if args.process is not None:
            if args.hostfile is None:
                parser.error("-p needs --hostfile")
            try:
                hosts = Path(args.hostfile).read_text()
            except OSError as exc:
                parser.error(f"cannot read the hostfile {args.hostfile}: {exc.strerror or exc}")
            return _run_member(
                args.script, script_args, args.workers, args.processes, args.process, hosts
            )
        if args.hostfile is not None:
            parser.error("--hostfile needs -p (the index of this process)")
        return _run_local(args.script, script_args, args.workers, args.processes)
    except launch.LaunchError as exc:  # a bad hostfile or secret: the message says it all
        print(f"naiad: {exc}", file=sys.stderr)
        return 2


def _run_member(
    script: str, script_args: list[str], workers: int, processes: int, index: int, hosts: str
) -> int:
    addresses = launch.parse_addresses(hosts)
    # launch errors like the others (main prints them and exits with 2): a bare SystemExit
    # exited with 1, the status of a script that failed
    if len(addresses) != processes:
        raise launch.LaunchError(
            f"the hostfile lists {len(addresses)} processes, -n says {processes}"
        )
    if not 0 <= index < processes:
        raise launch.LaunchError(f"-p {index} is not in 0..{processes - 1}")
    if launch.read_secret() is None:
        raise launch.LaunchError(
            f"set {launch.ENV_SECRET} or {launch.ENV_SECRET_FILE} on every machine"
        )
    os.environ.update(
        {
            launch.ENV_PROCESS: str(index),
            launch.ENV_PROCESSES: str(processes),
            launch.ENV_WORKERS: str(workers),
            launch.ENV_ADDRESSES: ",".join(f"{h}:{p}" for h, p in addresses),
        }
    )
    sys.argv = [script, *script_args]
    # as 'python SCRIPT' (how the processes of a local launch run it) would: the modules
    # beside the script are importable (runpy.run_path does not add its directory)
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")
    return 0


class _Terminated(Exception):
    """The launcher got SIGTERM or SIGHUP."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated(signum)


# Signals that stop the launcher and, through it, its processes (SIGHUP: its terminal closed,
# or 'kill -HUP' to it alone; by default it died and left them running).
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _run_local(script: str, script_args: list[str], workers: int, processes: int) -> int:
    listeners = launch.bind_listeners(processes)
    secret = launch.read_secret() or launch.new_secret()
    reports = launch.FailureReports()
    try:
        children = launch.spawn(
            [script, *script_args],
            processes,
            workers,
            listeners,
            secret,
            range(processes),
            report_fd=reports.write_fd,
        )
        for sock in listeners:
            sock.close()
        # Stopped itself (SIGTERM, SIGHUP, or SIGINT sent to the launcher alone), the launcher
        # stops its processes too: none is left running without it.
        previous = {signum: signal.signal(signum, _terminated) for signum in STOPPING_SIGNALS}
        try:
            return _supervise(children, reports)
        except (KeyboardInterrupt, _Terminated) as exc:
            print("naiad: interrupted; stopping the processes", file=sys.stderr)
            _stop(children)
            return 128 + (exc.signum if isinstance(exc, _Terminated) else signal.SIGINT)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    finally:
        reports.close()


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every child still running; SIGKILL to those left after the grace period."""
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _supervise(children: list[subprocess.Popen[bytes]], reports: launch.FailureReports) -> int:
    """Waits for the processes; after the first failure, gives the others a grace period.
    Names the process whose failure came first and returns its status."""
    exited: list[int] = []  # in the order their exits were seen
    deadline = None
    while True:
        reports.read()
        for index, child in enumerate(children):
            if index not in exited and child.poll() is not None:
                exited.append(index)
                if child.returncode != 0 and deadline is None:
                    deadline = time.monotonic() + GRACE_SECONDS
        if len(exited) == len(children):
            break
        if deadline is not None and time.monotonic() > deadline:
            for child in children:
                if child.poll() is None:
                    child.kill()
        time.sleep(0.05)
    reports.read()  # written before each member exited: all in the pipe now
    failed = [index for index in exited if children[index].returncode != 0]
    if not failed:
        return 0
    root = reports.root_cause(failed)
    code = children[root].returncode
    report = reports.reports.get(root)
    cause = f": {report.error}" if report is not None else ""
    print(f"naiad: process {root} {launch.exit_description(code)}{cause}", file=sys.stderr)
    return launch.shell_status(code)


if __name__ == "__main__":
    raise SystemExit(main())
