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

from naiad.operators.gather import GatheredElsewhere
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
            results.extend(_decoded(unpackb(Path(out, f"process-{index}.bin").read_bytes())))
        return results


_ELSEWHERE = "naiad.harness:GatheredElsewhere"
"""The key of the one-entry dict that stands for a :class:`GatheredElsewhere` in a file."""


def _encodable(value: Any) -> Any:
    """``value`` with every :class:`GatheredElsewhere` (what a gathered collect, changes or
    capture returns on the workers other than 0) inside plain tuples, lists and dicts replaced
    by a dict the codec can write: the results of a gathered build are then read back as on
    one process, instead of failing the member with "cannot send a GatheredElsewhere"."""
    if isinstance(value, GatheredElsewhere):
        return {_ELSEWHERE: [value.what, value.worker, value.method]}
    kind = type(value)  # exact types: a namedtuple (a Product time, say) is kept as it is
    if kind is tuple:
        return tuple(_encodable(v) for v in value)
    if kind is list:
        return [_encodable(v) for v in value]
    if kind is dict:
        return {k: _encodable(v) for k, v in value.items()}
    return value


def _decoded(value: Any) -> Any:
    """The inverse of :func:`_encodable`."""
    kind = type(value)
    if kind is dict:
        if len(value) == 1 and _ELSEWHERE in value:
            return GatheredElsewhere(*value[_ELSEWHERE])
        return {k: _decoded(v) for k, v in value.items()}
    if kind is tuple:
        return tuple(_decoded(v) for v in value)
    if kind is list:
        return [_decoded(v) for v in value]
    return value


def _member_main() -> None:
    from naiad.runtime.runtime import run

    target = sys.argv[1]
    results = run(load(target))
    index = os.environ["NAIAD_PROCESS"]
    Path(os.environ[ENV_OUTPUT], f"process-{index}.bin").write_bytes(packb(_encodable(results)))


if __name__ == "__main__":
    _member_main()
