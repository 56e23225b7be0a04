"""Scripts the cluster tests run as ``naiad run`` members (each process runs ``main``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import naiad


class DiesAt(naiad.Vertex):
    """Process ``victim`` kills itself with SIGKILL when it sees epoch ``epoch``."""

    def __init__(self, victim: int, epoch: int) -> None:
        self.victim = victim
        self.epoch = epoch

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        if int(os.environ.get("NAIAD_PROCESS", "0")) == self.victim and cap.time >= self.epoch:
            os.kill(os.getpid(), signal.SIGKILL)
        self.send(cap, batch)


async def stream_epochs(
    epochs: int, victim: int, die_at: int, report: str, pace: float = 0.0
) -> None:
    """Feeds ``epochs`` epochs, waiting for each to complete; prints a JSON line with the
    per-epoch sums seen by this process, or the error that stopped it."""
    sums: dict[int, int] = {}

    def build(scope: naiad.Scope) -> tuple[naiad.InputHandle, naiad.ProbeHandle]:
        handle, stream = scope.new_input()
        routed = stream.exchange(lambda x: x).unary(DiesAt(victim, die_at))
        done = routed.subscribe(lambda t, rs: sums.__setitem__(t, sums.get(t, 0) + sum(rs)))
        return handle, done

    try:
        async with naiad.Runtime() as rt:
            df = rt.dataflow(build)
            with open(report + ".started", "w"):
                pass  # the cluster is connected and running
            for epoch in range(epochs):
                if pace:
                    await asyncio.sleep(pace)
                for handle, _ in df.results:
                    handle.send([epoch * 10 + i for i in range(10)])
                    handle.advance_to(epoch + 1)
                for _, done in df.results:
                    await done.wait(epoch)
        with open(report, "w") as out:
            print(json.dumps({"ok": True, "sums": sums}), file=out)
    except Exception as exc:
        with open(report, "w") as out:
            print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), file=out)
        sys.exit(3)


if __name__ == "__main__":
    epochs, victim, die_at, out_dir = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        sys.argv[4],
    )
    pace = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    report = os.path.join(out_dir, f"process-{os.environ.get('NAIAD_PROCESS', '0')}.json")
    asyncio.run(stream_epochs(epochs, victim, die_at, report, pace))
