"""Re-entrancy (Naiad §3.2): cut-through delivery to idle vertices on the same worker, and a
busy vertex re-entered on the sender's stack only up to its limit."""

from __future__ import annotations

from typing import Any

import pytest

import naiad


class Bouncer(naiad.Vertex):
    """Inside a loop: forwards every record decremented, until it reaches 0; records how deep
    its own on_recv calls nest."""

    def __init__(self, reentrancy: int) -> None:
        self.reentrancy = reentrancy
        self.depth = 0
        self.max_depth = 0
        self.calls = 0

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.depth += 1
        self.calls += 1
        self.max_depth = max(self.max_depth, self.depth)
        self.send(cap, [x - 1 for x in batch if x > 0])
        self.depth -= 1


def run_bouncer(reentrancy: int, rounds: int) -> Bouncer:
    bouncer = Bouncer(reentrancy)

    def build(s: naiad.Scope) -> None:
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            body = s.from_epochs([[rounds]]).enter(loop).concat(cycle)
            body.unary(bouncer).connect_loop(handle)

    naiad.run(build)
    return bouncer


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_a_busy_vertex_is_reentered_at_most_to_its_limit(limit: int) -> None:
    bouncer = run_bouncer(limit, rounds=10)
    assert bouncer.calls == 11  # every message was delivered, one per iteration
    assert bouncer.max_depth == limit + 1


def test_deep_reentrancy_is_capped_by_the_cut_through_stack() -> None:
    bouncer = run_bouncer(10_000, rounds=200)
    assert bouncer.calls == 201
    assert 1 < bouncer.max_depth < 100  # bounded: the rest waited in the mailbox


class Upstream(naiad.Vertex):
    def __init__(self) -> None:
        self.active = False

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.active = True
        self.send(cap, batch)
        self.active = False


class Downstream(naiad.Vertex):
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.on_senders_stack: list[bool] = []

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.on_senders_stack.append(self.upstream.active)


@pytest.mark.parametrize("exchange", [False, True])
def test_cut_through_to_an_idle_vertex_on_the_same_worker_only(exchange: bool) -> None:
    seen: list[Downstream] = []

    def build(s: naiad.Scope) -> None:
        up = Upstream()
        down = Downstream(up)
        seen.append(down)
        key = (lambda x: x // 2) if exchange else None
        s.from_epochs([[0, 1, 2, 3]]).unary(up).unary(down, exchange=key)

    naiad.run(build, workers=2)
    delivered = [flag for down in seen for flag in down.on_senders_stack]
    if exchange:
        # Each worker keeps its own part on its stack; the other part crosses to a peer's
        # queue: both paths are used, and the peer's never runs on the sender's stack.
        assert sorted(delivered) == [False, False, True, True]
    else:
        assert delivered == [True, True]


def test_messages_to_a_busy_non_reentrant_vertex_wait_in_its_mailbox() -> None:
    bouncer = run_bouncer(0, rounds=5)
    assert bouncer.max_depth == 1 and bouncer.calls == 6
