"""Members of a ``--hostfile`` cluster started by hand, as an operator would on several
machines, with configurations that do not agree: each must stop with an error naming the
problem instead of waiting forever. A hang fails through the timeouts."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "naiad.runtime.cli", "run"]
# this checkout, for the processes a launcher starts (they run the script's directory first)
ROOT = str(Path(__file__).resolve().parents[2])
EXCHANGE = (
    "import naiad\n"
    "print(naiad.run(lambda s: s.from_epochs([list(range(8))]).exchange(lambda x: x)"
    ".collect()), flush=True)\n"
)


def printed(stdout: str) -> list[str]:
    """The results the processes printed, sorted. They share one pipe, and unbuffered (with
    PYTHONUNBUFFERED set) print writes a line and its newline apart: one process's result
    may land before the other's newline (seen once in about 700 runs)."""
    return sorted(re.findall(r"\[\[.*?\]\]", stdout))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_members(
    tmp_path: Path, script: str, options: dict[int, list[str]], secret: str = "members"
) -> list[tuple[int, str, str]]:
    """Starts process ``i`` with ``naiad run ... options[i]`` for each ``i``; returns each
    one's exit status, stdout and stderr."""
    path = tmp_path / "script.py"
    path.write_text(script)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"127.0.0.1:{free_port()}\n" for _ in options))
    members = [
        subprocess.Popen(
            [*CLI, str(path), *extra, "-p", str(index), "--hostfile", str(hostfile)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NAIAD_SECRET": secret},
        )
        for index, extra in options.items()
    ]
    try:
        outs = [m.communicate(timeout=90) for m in members]
    finally:
        for m in members:
            if m.poll() is None:
                m.kill()
                m.wait()
    return [(m.returncode, out, err) for m, (out, err) in zip(members, outs, strict=True)]


def test_members_started_with_different_workers_are_told_so(tmp_path: Path) -> None:
    # process 0 would place 2 workers, process 1 four: each would wait for progress from
    # workers the other does not have
    ended = start_members(
        tmp_path, EXCHANGE, {1: ["-n", "2", "-w", "2"], 0: ["-n", "2", "-w", "1"]}
    )
    for code, out, err in ended:
        assert code != 0 and not out, err
        assert "runs -w 1" in err and "runs -w 2" in err and "same -w" in err, err


def run_python(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python args`` in ``cwd``, importing naiad from this checkout."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
    )


def test_a_self_launching_module_started_with_dash_m_runs_everywhere(tmp_path: Path) -> None:
    # the other process ran pkg/main.py as a file, where the relative import fails
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "build.py").write_text(
        "def build(scope):\n"
        "    return scope.from_epochs([[1, 2, 3, 4]]).exchange(lambda x: x).collect()\n"
    )
    (package / "main.py").write_text(
        "import naiad\n"
        "from .build import build\n"
        "print(naiad.run(build, workers=1, processes=2, transport='tcp'), flush=True)\n"
    )
    done = run_python(["-m", "pkg.main"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert printed(done.stdout) == ["[[(0, 1), (0, 3)]]", "[[(0, 2), (0, 4)]]"]


def test_a_launched_process_that_exits_before_connecting_is_named(tmp_path: Path) -> None:
    # process 0 waited connect_timeout (30 s), then said only that process 1 did not connect
    script = tmp_path / "script.py"
    script.write_text(
        "import os, naiad\n"
        "if os.environ.get('NAIAD_PROCESS') == '1':\n"
        "    raise SystemExit(7)\n"
        "naiad.run(lambda s: s.from_epochs([[1]]).collect(), processes=2, transport='tcp')\n"
    )
    done = run_python([str(script)], tmp_path)
    assert done.returncode == 1
    assert done.stderr.endswith(
        "ClusterError: process 1 exited with status 7 before the cluster connected\n"
    ), done.stderr


def test_script_options_that_abbreviate_naiad_options_reach_the_script(tmp_path: Path) -> None:
    # argparse took '--work 3' for '--workers 3' and '--host h' for '--hostfile h'
    script = tmp_path / "script.py"
    script.write_text("import os, sys\nprint(os.environ['NAIAD_WORKERS'], sys.argv[1:])\n")
    done = subprocess.run(
        [*CLI, str(script), "--work", "3", "--host", "h", "--proc", "-n", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 ['--work', '3', '--host', 'h', '--proc']\n"


def test_a_hung_up_launcher_stops_its_processes(tmp_path: Path) -> None:
    # SIGHUP killed the launcher and left its processes running, children of init
    script = tmp_path / "forever.py"
    script.write_text(
        "import os, time\n"
        f"path = os.path.join({str(tmp_path)!r}, 'pid-' + os.environ['NAIAD_PROCESS'])\n"
        "open(path + '.tmp', 'w').write(str(os.getpid()))\n"
        "os.rename(path + '.tmp', path)\n"
        "time.sleep(600)\n"
    )
    # stderr in a file: processes left running would hold a pipe open
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("w") as stderr_file:
        launcher = subprocess.Popen([*CLI, str(script), "-n", "2"], stderr=stderr_file)
    paths = [tmp_path / f"pid-{i}" for i in range(2)]
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not all(p.exists() for p in paths):
            assert time.monotonic() < deadline and launcher.poll() is None
            time.sleep(0.05)
        pids = [int(p.read_text()) for p in paths]
        launcher.send_signal(signal.SIGHUP)
        launcher.wait(timeout=60)
        stderr = stderr_path.read_text()
        assert launcher.returncode == 128 + signal.SIGHUP, stderr
        assert "stopping the processes" in stderr
        for pid in pids:  # reaped by the launcher: gone
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        launcher.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_secret_file_of_random_bytes_serves_a_local_launch(tmp_path: Path) -> None:
    # the launcher decoded the secret as UTF-8 to hand it to its processes: UnicodeDecodeError
    secret = tmp_path / "secret"
    secret.write_bytes(bytes(range(128, 160)) + b"\xff")
    script = tmp_path / "script.py"
    script.write_text(EXCHANGE)
    done = subprocess.run(
        [*CLI, str(script), "-n", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NAIAD_SECRET_FILE": str(secret), "PYTHONPATH": ROOT},
    )
    assert done.returncode == 0, done.stderr
    assert printed(done.stdout) == [
        "[[(0, 0), (0, 2), (0, 4), (0, 6)]]",
        "[[(0, 1), (0, 3), (0, 5), (0, 7)]]",
    ]


def test_members_import_the_modules_beside_their_script(tmp_path: Path) -> None:
    # 'naiad run DIR/script.py -n 2' could, '... -p I --hostfile F' could not: the member ran
    # the script without its directory on sys.path (ModuleNotFoundError: No module named ...)
    (tmp_path / "beside.py").write_text(
        "def build(scope):\n"
        "    return scope.from_epochs([[1, 2, 3, 4]]).exchange(lambda x: x).collect()\n"
    )
    script = "import naiad\nfrom beside import build\nprint(naiad.run(build), flush=True)\n"
    ended = start_members(tmp_path, script, {1: ["-n", "2"], 0: ["-n", "2"]})
    assert [code for code, _, _ in ended] == [0, 0], ended
    assert sorted(out for _, out, _ in ended) == ["[[(0, 1), (0, 3)]]\n", "[[(0, 2), (0, 4)]]\n"]


def test_a_self_launch_refused_before_launching_can_be_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the refused runtime counted as the script's one self-launching runtime: the second try
    # said a script runs only one, instead of why the first was refused
    import naiad
    from naiad.runtime import runtime
    from naiad.runtime.launch import LaunchError

    monkeypatch.setattr(runtime, "_self_launched", False)
    monkeypatch.setattr(sys, "argv", ["-c"])  # as under 'python -c': nothing to run again
    build = lambda s: s.from_epochs([[1]]).collect()  # noqa: E731
    for _ in range(2):
        with pytest.raises(LaunchError, match="run it as a script file"):
            naiad.run(build, processes=2, transport="tcp")
    assert not runtime._self_launched


def test_the_start_up_timeout_is_set_from_the_command_line(tmp_path: Path) -> None:
    """The wait for peers was fixed at 30 s: members started by hand on several machines had
    30 s to all come up, and '--connect-timeout' went to the script as one of its options."""
    path = tmp_path / "script.py"
    path.write_text(EXCHANGE)
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"127.0.0.1:{free_port()}\n127.0.0.1:{free_port()}\n")
    member = [*CLI, str(path), "-n", "2", "-p", "0", "--hostfile", str(hostfile)]
    env = {**os.environ, "NAIAD_SECRET": "members"}
    # process 1 never starts: process 0 names it once its own timeout has passed
    done = subprocess.run(
        [*member, "--connect-timeout", "1.5"], capture_output=True, text=True, env=env, timeout=25
    )
    assert done.returncode != 0 and "process 1" in done.stderr, done.stderr
    assert "did not connect within 1.5 s" in done.stderr, done.stderr
    # the same from the environment; a bad value is named before anything starts
    done = subprocess.run(
        member,
        capture_output=True,
        text=True,
        env={**env, "NAIAD_CONNECT_TIMEOUT": "1"},
        timeout=25,
    )
    assert "did not connect within 1 s" in done.stderr, done.stderr
    for bad in ("0", "soon", "inf"):
        done = subprocess.run(
            [*member, "--connect-timeout", bad], capture_output=True, text=True, env=env, timeout=25
        )
        assert done.returncode == 2 and "--connect-timeout" in done.stderr, done.stderr
        done = subprocess.run(
            member,
            capture_output=True,
            text=True,
            env={**env, "NAIAD_CONNECT_TIMEOUT": bad},
            timeout=25,
        )
        assert done.returncode == 2 and "NAIAD_CONNECT_TIMEOUT" in done.stderr, done.stderr
        assert "positive finite number" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("options", "secret", "message"),
    [
        (["-n", "2", "-p", "2"], "s", "-p 2 is not in 0..1"),
        (["-n", "3", "-p", "0"], "s", "the hostfile lists 2 processes, -n says 3"),
        (["-n", "2", "-p", "0"], None, "set NAIAD_SECRET or NAIAD_SECRET_FILE on every machine"),
    ],
)
def test_a_member_misconfigured_on_its_command_line_exits_with_2(
    tmp_path: Path, options: list[str], secret: str | None, message: str
) -> None:
    """These exited with 1, the status of a script that failed, where every other launch
    error exits with 2 (the usage status)."""
    path = tmp_path / "script.py"
    path.write_text(EXCHANGE)
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"127.0.0.1:{free_port()}\n127.0.0.1:{free_port()}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAIAD_SECRET")}
    if secret is not None:
        env["NAIAD_SECRET"] = secret
    done = subprocess.run(
        [*CLI, str(path), *options, "--hostfile", str(hostfile)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2 and f"naiad: {message}" in done.stderr, done.stderr
    assert not done.stdout
