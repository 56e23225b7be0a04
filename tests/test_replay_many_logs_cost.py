"""A replay of many logs steps, at each activation, only the logs not replayed to their end:
``ReplayVertex.on_frontier`` stepped every log at every activation, and an activation replays
one progress event per log, so one log of n epochs replayed beside L - 1 logs that had ended
cost L x n steps (8,040 for L = 40 and n = 200; 240 now). Its records and the frontier it
holds are the logs' (checked against the logs themselves)."""

from __future__ import annotations

from typing import Any

import pytest

import naiad
from naiad.operators.capture import ReplayVertex
from tests.counting import Work


def long_and_short(epochs: int, logs: int) -> tuple[list[Any], list[list[Any]]]:
    """One log with a record at each of ``epochs`` epochs, and ``logs - 1`` with one record at
    time 0 that end at once."""
    long: list[Any] = []
    for t in range(epochs):
        long += [("messages", t, [t]), ("progress", [(t + 1, 1), (t, -1)])]
    long.append(("progress", [(epochs, -1)]))
    short = [("messages", 0, [-1]), ("progress", [(0, -1)])]
    return long, [short] * (logs - 1)


def replayed(s: naiad.Scope, logs: list[Any]) -> Any:
    stream = s.replay(logs, split=False)
    return stream.collect(), stream.capture()


@pytest.mark.timeout(60)
def test_logs_that_ended_are_not_stepped_again(monkeypatch: pytest.MonkeyPatch) -> None:
    work = Work(monkeypatch)
    work.count(ReplayVertex, "_step")
    cost = {}
    for logs in (40, 80):
        work.reset()
        long, short = long_and_short(200, logs)
        ((out, log),) = naiad.run(lambda s, given=[long, *short]: replayed(s, given))
        assert sorted(out) == [(0, -1)] * (logs - 1) + [(t, t) for t in range(200)]
        # the frontier moved forward through the long log's epochs (a capture may see two
        # steps at once), to the end
        *steps, end = log.frontiers()
        assert end == [] and steps[0] == [0]
        assert [f[0] for f in steps] == sorted({f[0] for f in steps if f[0] <= 200})
        cost[logs] = work.total
    # the old steps: the logs x the long log's 201 activations (8,040 at 40 logs, 16,080
    # at 80); now one per activation and one per log: 240 and 280
    assert cost[40] <= 600 and cost[80] <= 1.5 * cost[40], cost
    assert cost[40] > 0, cost
