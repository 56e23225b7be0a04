"""Runs one build function on any configuration and gathers every worker's results.

``run_everywhere("package.module:build", workers=W, processes=P, transport=T)`` returns the
list of what ``build`` returned on every worker of the cluster, in global worker order: with
one process or the in-process transport by calling :func:`naiad.run` here; with TCP by running
``naiad run`` on real processes, each of which writes its workers' results to a file (in the
wire codec: msgpack with tuples and times preserved, never pickle). Tests use it to run the
same dataflow, with the same oracle, on every configuration.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from naiad.transport.codec import packb, unpackb

ENV_OUTPUT = "NAIAD_HARNESS_OUTPUT"


def load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def run_everywhere(
    target: str,
    workers: int = 1,
    processes: int = 1,
    transport: str = "inproc",
    timeout: float = 120.0,
) -> list[Any]:
    from naiad.runtime.runtime import run

    if processes == 1 or transport == "inproc":
        return run(load(target), workers, processes=processes, transport=transport)
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, **{ENV_OUTPUT: out})
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *sys.path])
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "naiad.runtime.cli",
                "run",
                __file__,
                "-w",
                str(workers),
                "-n",
                str(processes),
                "--",
                target,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"cluster run of {target} failed:\n{done.stderr[-4000:]}")
        results: list[Any] = []
        for index in range(processes):
            results.extend(unpackb(Path(out, f"process-{index}.bin").read_bytes()))
        return results


def _member_main() -> None:
    from naiad.runtime.runtime import run

    target = sys.argv[1]
    results = run(load(target))
    index = os.environ["NAIAD_PROCESS"]
    Path(os.environ[ENV_OUTPUT], f"process-{index}.bin").write_bytes(packb(results))


if __name__ == "__main__":
    _member_main()
