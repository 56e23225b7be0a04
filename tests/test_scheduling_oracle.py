"""The key correctness property of timely dataflow (Naiad §2.2-2.3), checked by an oracle.

    On random DAGs and nested loops, under random schedules and 1, 2 and 4 workers, a
    notification is never delivered while a message at an earlier or equal time can still
    arrive, and every requested notification is delivered once the inputs close.

Every operator of a generated dataflow is a :class:`Checker` vertex (plus the built-ins that
only route or re-time records: ``enter``, ``leave``, ``feedback``, ``concat``, ``exchange``).
All workers run in this process, so a :class:`SchedulingOracle` can see the *global* state:

* every record in flight, at the logical input port of the Checker it will reach and at the
  time it will have there (a sender registers a record before ``send``, a receiver retires it
  in ``on_recv``; the model of the graph says how ``enter``/``leave``/``feedback`` re-time it);
* every notification requested and not yet delivered (a capability of its Checker);
* the callbacks on the stack (their borrowed capabilities) and every open input's epoch.

From these pointstamps and its *own* could-result-in over the logical graph (a search over
the concrete times paths produce, not naiad's summaries) the oracle checks:

1. safety, when it happens: at ``on_notify(t)`` of operator X no pointstamp could still
   result in a message at X at a time ``<= t``;
2. safety, eventually: after X was notified at ``t`` (on any worker), X never receives a
   message at a time ``<= t``;
3. no input frontier is ever ahead of the truth (invariant 6): for every pointstamp, the
   frontier of every port it could reach is at or below the time it implies there;
4. liveness: once the inputs close the dataflow completes, nothing is left in flight, and
   every request (a distinct pending ``(operator, worker, time)``) was delivered exactly
   once;
5. the data: what every Checker received equals a sequential reference run of the same plan
   (Checkers decide deterministically per ``(operator, port, time, record)``), and records
   on an exchanged port are on the worker their key names.

Schedules vary by worker count, per-vertex re-entrancy limits (0..2), the scheduler's
activation budget per worker turn (patched per example), and, for asynchronous inputs,
random interleavings of ``send``/``advance_to``/``close`` with ``await asyncio.sleep(0)``.

Also here: unit tests of the oracle itself, a regression test for notification order (a
request made inside ``on_notify`` precedes later ready times, Naiad §2.3), and Figure 4 of
the paper (DistinctCount) against a Counter oracle.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import naiad
from naiad import Product
from naiad.actors.worker import Worker
from naiad.progress.timestamp import less_equal
from naiad.runtime.runtime import run_coroutine

Time = Any

# Exchange keys a generated edge may use; "exop" means a separate ``exchange`` operator.
KEYS: dict[str, Callable[[int], int]] = {"ex": lambda v: v, "ex7": lambda v: v * 7 + 3}

RUN_TIMEOUT_S = 30.0  # a dataflow that does not complete in this time has a liveness bug


class OracleViolation(AssertionError):
    """The oracle saw the runtime break a timely-dataflow guarantee."""


# --------------------------------------------------------------------------------------------
# The model of the logical graph, and could-result-in computed from it
# --------------------------------------------------------------------------------------------


def retime(kind: str, t: Time) -> Time:
    """The time a record has after passing a built-in operator of this kind."""
    if kind == "enter":
        return Product(t, 0)
    if kind == "leave":
        return t.outer
    if kind == "feedback":
        return Product(t.outer, t.inner + 1)
    return t  # concat, exchange


@dataclass
class Model:
    """Operators by naiad node id: their kind, inputs (source node per port), and for Checkers
    the scope depth, the decrement flag and the exchange key of each port."""

    kind: dict[int, str] = field(default_factory=dict)
    inputs: dict[int, list[int]] = field(default_factory=dict)
    depth: dict[int, int] = field(default_factory=dict)
    dec: dict[int, bool] = field(default_factory=dict)
    keys: dict[tuple[int, int], str | None] = field(default_factory=dict)
    _succ: dict[int, list[tuple[int, int]]] | None = None
    _dests: dict[tuple[int, Time], list[tuple[int, int, Time]]] = field(default_factory=dict)
    _reach: dict[tuple[int, Time], list[tuple[int, int, Time]]] = field(default_factory=dict)

    def add(self, node: int, kind: str, inputs: list[int], depth: int = 0) -> None:
        assert node not in self.kind, f"node {node} registered twice"
        self.kind[node] = kind
        self.inputs[node] = list(inputs)
        self.depth[node] = depth

    def checkers(self) -> list[int]:
        return [n for n, k in self.kind.items() if k == "checker"]

    def succ(self, node: int) -> list[tuple[int, int]]:
        if self._succ is None:
            succ: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for m, sources in self.inputs.items():
                for port, n in enumerate(sources):
                    succ[n].append((m, port))
            self._succ = dict(succ)
        return self._succ.get(node, [])

    def dests(self, node: int, t: Time) -> list[tuple[int, int, Time]]:
        """Where a record sent by ``node`` at ``t`` is received: ``(checker, port, time)``,
        once per path (a record reaching a port along two paths arrives twice)."""
        key = (node, t)
        found = self._dests.get(key)
        if found is None:
            found = []
            stack = [(node, t)]
            while stack:
                n, time = stack.pop()
                for m, port in self.succ(n):
                    kind = self.kind[m]
                    if kind == "checker":
                        found.append((m, port, time))
                    else:
                        stack.append((m, retime(kind, time)))
            self._dests[key] = found
        return found

    def reach(self, node: int, t: Time) -> list[tuple[int, int, Time]]:
        """Could-result-in from ``node``'s output at ``t``: every ``(checker, port, time)``
        a message could reach (Naiad §2.3), by a search over concrete times. A Checker may
        send at any time at or after the time it handles, so it passes times on unchanged;
        a state dominated by one already seen adds nothing, which bounds the search around
        loops (every cycle strictly advances a loop counter)."""
        key = (node, t)
        found = self._reach.get(key)
        if found is None:
            seen: dict[tuple[int, int], list[Time]] = defaultdict(list)
            work = [(node, t)]
            while work:
                n, time = work.pop()
                for x, port, s in self.dests(n, time):
                    times = seen[(x, port)]
                    if any(less_equal(v, s) for v in times):
                        continue
                    times[:] = [v for v in times if not less_equal(s, v)]
                    times.append(s)
                    work.append((x, s))
            found = [(x, p, s) for (x, p), times in seen.items() for s in times]
            self._reach[key] = found
        return found


# --------------------------------------------------------------------------------------------
# Deterministic Checker decisions (shared by the runtime and the reference interpreter)
# --------------------------------------------------------------------------------------------


def later(t: Time, r: random.Random, strict: bool) -> Time:
    """A time at or after ``t`` (strictly after if ``strict``)."""
    if t.__class__ is int:
        return t + r.randint(1 if strict else 0, 2)
    outer = later(t.outer, r, False)
    inner = t.inner + r.randint(0, 1)
    if strict and outer == t.outer and inner == t.inner:
        inner += 1
    return Product(outer, inner)


def decide(
    salt: int, node: int, port: int, t: Time, v: int, depth: int, dec: bool
) -> tuple[list[tuple[str, Time, int]], list[Time]]:
    """What a Checker does with record ``v`` received at ``t`` on ``port``: the records it
    emits as ``("send" | "stash", time, value)`` (a stash is sent from ``on_notify(time)``),
    and the times of extra notifications it requests. Root-scope Checkers may delay records
    to later epochs; inside loops records keep their time (only feedback advances it), and
    a decrementing Checker (the one closing a cycle) drops records that reach 0."""
    r = random.Random(f"{salt}|{node}|{port}|{t!r}|{v}")
    out: list[tuple[str, Time, int]] = []
    value = v - 1 if dec else v
    roll = r.random()
    if not dec or value > 0:
        if roll < 0.5:
            out.append(("send", t, value))
        elif roll < 0.68:
            out.append(("stash", t if depth else t + r.randint(0, 2), value))
        elif roll < 0.8 and depth == 0:
            out.append(("send", t + r.randint(1, 2), value))
        elif roll < 0.88 and depth == 0:
            out.append(("send", t, value))
            out.append(("stash", t + r.randint(0, 1), value))
        elif roll < 0.9 and depth:
            out.append(("send", t, value))
        # otherwise dropped
    notes = [later(t, r, False)] if r.random() < 0.3 else []
    return out, notes


def renotify(salt: int, node: int, t: Time) -> Time | None:
    """An extra notification an ``on_notify(t)`` requests, at a strictly later time."""
    r = random.Random(f"{salt}|{node}|renotify|{t!r}")
    return later(t, r, True) if r.random() < 0.3 else None


# --------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------


class SchedulingOracle:
    """Sees the global state of one run (all workers share this process)."""

    def __init__(self, salt: int, peers: int, frontier_checks: bool = True) -> None:
        self.salt = salt
        self.peers = peers
        self.model = Model()
        self.frontier_checks = frontier_checks
        self.inflight: Counter[tuple[int, int, Time]] = Counter()  # (X, port, time) -> records
        self.pending: dict[tuple[int, int], set[Time]] = defaultdict(set)  # (X, w) -> times
        self.requested: Counter[tuple[int, int, Time]] = Counter()  # distinct requests
        self.delivered: Counter[tuple[int, int, Time]] = Counter()
        self.notified: dict[int, list[Time]] = defaultdict(list)  # X -> times, any worker
        self.stack: list[tuple[int, Time]] = []  # callbacks running: (X, time)
        self.inputs: dict[tuple[int, int], Time] = {}  # (input node, worker) -> open epoch
        self.received: Counter[tuple[int, int, Time, int]] = Counter()
        self.emitted: list[tuple[int, Time, int]] = []  # what sources emit: (node, t, v)
        self.vertices: dict[int, list[Checker]] = defaultdict(list)
        self.errors: list[str] = []
        self.notifications = 0
        self.messages = 0

    def fail(self, message: str) -> None:
        self.errors.append(message)
        raise OracleViolation(message)

    # --- events ------------------------------------------------------------------------------
    def send(self, node: int, t: Time, values: list[int]) -> None:
        """Registers records that ``node`` is about to send at ``t`` (before ``send``)."""
        for x, port, s in self.model.dests(node, t):
            self.inflight[(x, port, s)] += len(values)

    def source(self, node: int, t: Time, values: list[int]) -> None:
        """Records a source will emit (or an input sends): in flight and in the reference."""
        self.send(node, t, values)
        self.emitted.extend((node, t, v) for v in values)

    def recv(self, x: int, w: int, port: int, t: Time, batch: list[int]) -> None:
        self.messages += 1
        self.check_frontiers(f"operator {x} worker {w} receiving at {t!r}")
        for done in self.notified[x]:
            if less_equal(t, done):
                self.fail(
                    f"operator {x} (worker {w}) received a message at {t!r} on port {port} "
                    f"after a notification at {done!r} was delivered to it"
                )
        key = (x, port, t)
        left = self.inflight[key] - len(batch)
        if left < 0:
            self.fail(
                f"operator {x} (worker {w}) received {len(batch)} records at {t!r} on port "
                f"{port}, but only {self.inflight[key]} were ever sent there at that time"
            )
        if left:
            self.inflight[key] = left
        else:
            del self.inflight[key]
        route = self.model.keys.get((x, port))
        for v in batch:
            self.received[(x, port, t, v)] += 1
            if route is not None and KEYS[route](v) % self.peers != w:
                self.fail(
                    f"operator {x} port {port} is exchanged by {route!r}, but record {v} "
                    f"arrived on worker {w} of {self.peers}"
                )

    def request(self, x: int, w: int, t: Time) -> None:
        # A request for a time already pending is the same request (one notification per
        # distinct pending time); a request after that time was delivered is a new one.
        if t not in self.pending[(x, w)]:
            self.requested[(x, w, t)] += 1
            self.pending[(x, w)].add(t)

    def notify(self, x: int, w: int, t: Time) -> None:
        """``on_notify(t)`` of operator ``x`` on worker ``w`` is starting."""
        self.notifications += 1
        self.delivered[(x, w, t)] += 1
        if t not in self.pending[(x, w)]:
            self.fail(
                f"operator {x} (worker {w}) was notified at {t!r}, but no request for that "
                f"time was pending (never requested, or delivered twice)"
            )
        self.pending[(x, w)].discard(t)
        for y, p, s in self.implied():
            if y == x and less_equal(s, t):
                self.fail(
                    f"operator {x} (worker {w}) was notified at {t!r} while a message at "
                    f"{s!r} could still arrive on its port {p}: {self.origin(x, p, s)}"
                )
        self.check_frontiers(f"operator {x} worker {w} notified at {t!r}")
        self.notified[x].append(t)

    # --- the global state as pointstamps -----------------------------------------------------
    def pointstamps(self) -> set[tuple[int, Time, int | None]]:
        """``(node, time, port)`` of every event outstanding in the global state: port is the
        input port of a record in flight, None for a capability at the node's output."""
        stamps: set[tuple[int, Time, int | None]] = {
            (x, t, port) for (x, port, t), n in self.inflight.items() if n > 0
        }
        for (x, _), times in self.pending.items():
            stamps.update((x, t, None) for t in times)
        stamps.update((x, t, None) for x, t in self.stack)
        stamps.update((node, t, None) for (node, _), t in self.inputs.items())
        return stamps

    def implied(self) -> set[tuple[int, int, Time]]:
        """``(checker, port, time)`` for every time some pointstamp could result in."""
        reach = self.model.reach
        out: set[tuple[int, int, Time]] = set()
        for node, t, port in self.pointstamps():
            if port is not None:
                out.add((node, port, t))
            out.update(reach(node, t))
        return out

    def origin(self, x: int, p: int, s: Time) -> str:
        """Which outstanding events could result in a message at ``s`` on ``x``'s port ``p``
        (for error messages)."""
        found = []
        for (y, port, t), n in self.inflight.items():
            here = (y, port) == (x, p) and less_equal(t, s)
            if n > 0 and (here or self._reaches(y, t, x, p, s)):
                found.append(f"{n} record(s) in flight to operator {y} port {port} at {t!r}")
        for (y, w), times in self.pending.items():
            found.extend(
                f"a pending notification of operator {y} worker {w} at {t!r}"
                for t in times
                if self._reaches(y, t, x, p, s)
            )
        found.extend(
            f"a running callback of operator {y} at {t!r}"
            for y, t in self.stack
            if self._reaches(y, t, x, p, s)
        )
        found.extend(
            f"the open input of worker {w} at {t!r}"
            for (y, w), t in self.inputs.items()
            if self._reaches(y, t, x, p, s)
        )
        return "; ".join(found)

    def _reaches(self, y: int, t: Time, x: int, p: int, s: Time) -> bool:
        return any(
            (x2, p2) == (x, p) and less_equal(s2, s) for x2, p2, s2 in self.model.reach(y, t)
        )

    def check_frontiers(self, when: str) -> None:
        """Invariant 6: no input frontier is ahead of what the global state implies."""
        if not self.frontier_checks:
            return
        vertices = self.vertices
        for x, p, s in self.implied():
            frontier = vertices[x][0].frontier(p)
            if not frontier.less_equal(s):
                self.fail(
                    f"{when}: the input frontier {frontier.frontier!r} of operator {x} port "
                    f"{p} is ahead of {s!r}, which could still arrive there: "
                    f"{self.origin(x, p, s)}"
                )

    # --- the end -----------------------------------------------------------------------------
    def check_final(self) -> None:
        assert not self.errors, self.errors
        assert not self.stack, self.stack
        left = {k: n for k, n in self.inflight.items() if n}
        assert not left, f"records never delivered: {left}"
        undelivered = {k: sorted(v) for k, v in self.pending.items() if v}
        assert not undelivered, f"requested notifications never delivered: {undelivered}"
        assert self.delivered == self.requested, (
            f"notifications delivered {dict(self.delivered)} != requested {dict(self.requested)}"
        )
        for x, shards in self.vertices.items():
            for vertex in shards:
                assert not vertex.stash, f"operator {x} never released {vertex.stash}"
        expected = reference(self.model, self.salt, self.emitted)
        if self.received != expected:
            missing = expected - self.received
            extra = self.received - expected
            raise AssertionError(
                f"received records differ from the reference: missing {dict(missing)}, "
                f"unexpected {dict(extra)}"
            )


def reference(model: Model, salt: int, emitted: list[tuple[int, Time, int]]) -> Counter[Any]:
    """The records every Checker receives, by a sequential run of the same decisions."""
    counts: Counter[tuple[int, int, Time, int]] = Counter()
    work: deque[tuple[int, Time, int, int]] = deque()
    for node, t, v in emitted:
        work.append((node, t, v, 1))
    steps = 0
    while work:
        steps += 1
        assert steps < 500_000, "the reference does not terminate: a plan without a decrement"
        y, t, v, mult = work.popleft()
        for x, port, s in model.dests(y, t):
            counts[(x, port, s, v)] += mult
            outs, _ = decide(salt, x, port, s, v, model.depth[x], model.dec[x])
            for _, t2, v2 in outs:
                work.append((x, t2, v2, mult))
    return counts


# --------------------------------------------------------------------------------------------
# The Checker vertex
# --------------------------------------------------------------------------------------------


class Checker(naiad.Vertex):
    """Forwards, delays, stashes (until a notification) or drops records as :func:`decide`
    says, requests extra notifications, and reports everything to the oracle."""

    def __init__(self, oracle: SchedulingOracle, depth: int, dec: bool, reentrancy: int) -> None:
        self.oracle = oracle
        self.depth = depth
        self.dec = dec
        self.reentrancy = reentrancy
        self.node = -1  # naiad's node id, set once the operator is declared
        self.stash: dict[Time, list[int]] = defaultdict(list)
        self.split = random.Random(f"{oracle.salt}|split")  # batch splitting: no data effect

    def _notify(self, t: Time) -> None:
        self.oracle.request(self.node, self.index, t)
        self.notify_at(t)

    def _send(self, t: Time, values: list[int]) -> None:
        if len(values) > 1 and self.split.random() < 0.3:
            cut = self.split.randint(1, len(values) - 1)
            self._send(t, values[:cut])
            self._send(t, values[cut:])
            return
        self.oracle.send(self.node, t, values)
        self.send(t, values)

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        oracle, t = self.oracle, cap.time
        oracle.recv(self.node, self.index, port, t, batch)
        oracle.stack.append((self.node, t))
        try:
            sends: dict[Time, list[int]] = defaultdict(list)
            for v in batch:
                outs, notes = decide(oracle.salt, self.node, port, t, v, self.depth, self.dec)
                for kind, t2, v2 in outs:
                    if kind == "send":
                        sends[t2].append(v2)
                    else:
                        self.stash[t2].append(v2)
                        self._notify(t2)
                for t2 in notes:
                    self._notify(t2)
            for t2, values in sends.items():
                self._send(t2, values)
        finally:
            oracle.stack.pop()

    def on_notify(self, cap: naiad.Capability) -> None:
        oracle, t = self.oracle, cap.time
        oracle.notify(self.node, self.index, t)
        oracle.stack.append((self.node, t))
        try:
            values = self.stash.pop(t, None)
            if values:
                self._send(t, values)
            t2 = renotify(oracle.salt, self.node, t)
            if t2 is not None and _counters(t2) <= _counters(t) + 2:
                self._notify(t2)
        finally:
            oracle.stack.pop()


def _counters(t: Time) -> int:
    """The sum of a time's coordinates (bounds chains of re-notifications)."""
    if t.__class__ is int:
        return int(t)
    return _counters(t.outer) + t.inner


# --------------------------------------------------------------------------------------------
# Plans: random dataflows as printable instruction lists
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A dataflow to build on every worker, and how to feed it.

    Instructions (stream ids index the streams created so far, in order):
    ``("source",)``, ``("checker", ((sid, route), ...), dec, reentrancy)``,
    ``("concat", (sid, ...))``, ``("loop",)``, ``("enter", sid)``, ``("feedback",)``,
    ``("connect", sid)``, ``("leave", sid)``, ``("end",)``.
    """

    instructions: tuple[tuple[Any, ...], ...]
    source: str = "epochs"  # or "input"
    epochs: tuple[tuple[int, ...], ...] = ((1, 2, 3),)
    script: tuple[tuple[Any, ...], ...] = ()  # for "input": send / advance / close / sleep
    salt: int = 0


class _PlanGen:
    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw
        self.ins: list[tuple[Any, ...]] = [("source",)]
        self.scope_of: list[int] = [0]  # stream id -> scope id
        self.scopes = 1
        self.cur = 0

    def new(self, scope: int) -> int:
        self.scope_of.append(scope)
        return len(self.scope_of) - 1

    def pick(self, scope: int | None = None) -> int:
        want = self.cur if scope is None else scope
        return self.draw(st.sampled_from([i for i, s in enumerate(self.scope_of) if s == want]))

    def checker(self, inputs: list[int], dec: bool = False) -> int:
        routes = st.sampled_from([None, None, "ex", "ex7", "exop"])
        cfg = tuple((s, self.draw(routes)) for s in inputs)
        self.ins.append(("checker", cfg, dec, self.draw(st.integers(0, 2))))
        return self.new(self.cur)

    def dag(self, lo: int, hi: int) -> None:
        for _ in range(self.draw(st.integers(lo, hi))):
            kind = self.draw(st.sampled_from(["unary", "unary", "binary", "concat"]))
            if kind == "unary":
                self.checker([self.pick()])
            elif kind == "binary":
                self.checker([self.pick(), self.pick()])
            else:
                self.ins.append(("concat", (self.pick(), self.pick())))
                self.checker([self.new(self.cur)])

    def loop(self, src: int, nested: bool) -> int:
        outer = self.cur
        self.ins.append(("loop",))
        self.cur = scope = self.scopes
        self.scopes += 1
        self.ins.append(("enter", src))
        entered = self.new(scope)
        self.ins.append(("feedback",))
        cycle = self.new(scope)
        self.ins.append(("concat", (entered, cycle)))
        chain = [self.new(scope)]
        kinds = ["unary", "enter", "self"] + (["nested"] if nested else [])
        for _ in range(self.draw(st.integers(0, 2))):
            kind = self.draw(st.sampled_from(kinds))
            if kind == "unary":
                chain.append(self.checker([chain[-1]]))
            elif kind == "enter":  # a second input entering from the enclosing scope
                self.ins.append(("enter", self.pick(outer)))
                other = self.new(scope)
                pair = [chain[-1], other]
                if self.draw(st.booleans()):
                    pair.reverse()
                chain.append(self.checker(pair))
            elif kind == "self":
                chain.append(self.checker([chain[-1], self.draw(st.sampled_from(chain))]))
            else:
                chain.append(self.loop(chain[-1], nested=False))
        dec = self.checker([chain[-1]], dec=True)
        self.ins.append(("connect", dec))
        out = self.draw(st.sampled_from([*chain, dec]))
        if self.draw(st.booleans()):
            out = self.checker([out])
        self.ins.append(("leave", out))
        self.ins.append(("end",))
        self.cur = outer
        return self.new(outer)


@st.composite
def plans(draw: Callable[[Any], Any], loops: bool = True) -> Plan:
    gen = _PlanGen(draw)
    gen.dag(0, 2)
    for _ in range(draw(st.integers(0, 2)) if loops else 0):
        left = gen.loop(gen.pick(), nested=True)
        if draw(st.booleans()):
            gen.checker([left])
    gen.dag(1, 2)
    source = draw(st.sampled_from(["epochs", "input"]))
    records = st.lists(st.integers(1, 3), min_size=1, max_size=4)
    epochs = draw(st.lists(st.lists(st.integers(1, 3), max_size=5), min_size=1, max_size=4))
    epochs.insert(draw(st.integers(0, len(epochs))), draw(records))  # at least one record
    send = st.tuples(st.just("send"), st.integers(0, 3), records)
    script = draw(
        st.lists(
            st.one_of(
                send,
                send,
                st.tuples(st.just("advance"), st.integers(0, 3), st.integers(0, 2)),
                st.tuples(st.just("sleep"), st.integers(1, 3)),
                st.tuples(st.just("close"), st.integers(0, 3)),
            ),
            max_size=14,
        )
    )
    script.insert(draw(st.integers(0, len(script))), draw(send))  # at least one record
    return Plan(
        instructions=tuple(gen.ins),
        source=source,
        epochs=tuple(tuple(e) for e in epochs),
        script=tuple((op[0], op[1], tuple(op[2])) if op[0] == "send" else op for op in script),
        salt=draw(st.integers(0, 2**16)),
    )


# --------------------------------------------------------------------------------------------
# Building and running a plan
# --------------------------------------------------------------------------------------------


def build_plan(plan: Plan, oracle: SchedulingOracle, scope: naiad.Scope) -> Any:
    """Declares the plan's dataflow on one worker; worker 0 also fills the oracle's model.
    Returns the worker's input handle (for an "input" source)."""
    first = scope.index == 0
    model = oracle.model
    streams: list[naiad.Stream] = []
    scopes: list[naiad.Scope] = [scope]
    handles: list[naiad.FeedbackHandle] = []
    result = None

    def declare(stream: naiad.Stream, kind: str, inputs: list[naiad.Stream]) -> None:
        if first:
            model.add(stream.node, kind, [s.node for s in inputs], scopes[-1].depth)
        streams.append(stream)

    for ins in plan.instructions:
        op = ins[0]
        if op == "source":
            if plan.source == "epochs":
                stream = scope.from_epochs([list(e) for e in plan.epochs])
            else:
                result, stream = scope.new_input()
            declare(stream, "source", [])
        elif op == "checker":
            _, cfg, dec, reentrancy = ins
            inputs, pacts, routes = [], [], []
            for sid, route in cfg:
                stream = streams[sid]
                if route == "exop":
                    exchanged = stream.exchange(KEYS["ex"])
                    if first:
                        model.add(exchanged.node, "exchange", [stream.node], scopes[-1].depth)
                    inputs.append(exchanged)
                    pacts.append(None)
                    routes.append("ex")
                else:
                    inputs.append(stream)
                    pacts.append(KEYS[route] if route else None)
                    routes.append(route)
            vertex = Checker(oracle, scopes[-1].depth, dec, reentrancy)
            name = f"checker{len(streams)}"
            if len(inputs) == 1:
                out = inputs[0].unary(vertex, name=name, exchange=pacts[0])
            else:
                out = inputs[0].binary(inputs[1], vertex, name=name, exchange=(pacts[0], pacts[1]))
            vertex.node = out.node
            oracle.vertices[out.node].append(vertex)
            declare(out, "checker", inputs)
            if first:
                model.dec[out.node] = dec
                for port, route in enumerate(routes):
                    model.keys[(out.node, port)] = route
        elif op == "concat":
            parts = [streams[s] for s in ins[1]]
            declare(parts[0].concat(*parts[1:]), "concat", parts)
        elif op == "loop":
            scopes.append(scopes[-1].iterative())
        elif op == "enter":
            declare(streams[ins[1]].enter(scopes[-1]), "enter", [streams[ins[1]]])
        elif op == "feedback":
            handle, cycle = scopes[-1].feedback()
            handles.append(handle)
            declare(cycle, "feedback", [])
        elif op == "connect":
            handle = handles.pop()
            streams[ins[1]].connect_loop(handle)
            if first:
                model.inputs[handle.node].append(streams[ins[1]].node)
        elif op == "leave":
            stream = streams[ins[1]]
            left = stream.leave()
            scopes_depth = scopes[-1].depth - 1
            if first:
                model.add(left.node, "leave", [stream.node], scopes_depth)
            streams.append(left)
        elif op == "end":
            scopes.pop()
        else:  # pragma: no cover
            raise ValueError(ins)
    assert len(scopes) == 1 and not handles
    if first:
        (source,) = [n for n, k in model.kind.items() if k == "source"]
        if plan.source == "epochs":
            for epoch, values in enumerate(plan.epochs):
                oracle.source(source, epoch, list(values))
        else:
            for w in range(scope.peers):
                oracle.inputs[(source, w)] = 0
    return result


async def drive(
    plan: Plan, oracle: SchedulingOracle, workers: int, processes: int = 1, central: bool = False
) -> None:
    """``workers`` in all, split over ``processes`` simulated processes (each with its own
    progress actor, exchanging progress batches through the in-process transport, directly
    or through a central accumulator)."""
    async with naiad.Runtime(
        workers=workers // processes, processes=processes, transport="inproc", central=central
    ) as rt:
        dataflow = rt.dataflow(lambda scope: build_plan(plan, oracle, scope))
        if plan.source == "input":
            handles: list[naiad.InputHandle] = dataflow.results
            (source,) = [n for n, k in oracle.model.kind.items() if k == "source"]
            for op in plan.script:
                if op[0] == "sleep":
                    for _ in range(op[1]):
                        await asyncio.sleep(0)
                    continue
                w = op[1] % workers
                handle = handles[w]
                if handle.closed:
                    continue
                if op[0] == "send":
                    oracle.source(source, handle.epoch, list(op[2]))  # before it can arrive
                    handle.send(list(op[2]))
                elif op[0] == "advance":
                    handle.advance_to(handle.epoch + op[2])
                    oracle.inputs[(source, w)] = handle.epoch  # after: the oracle lags safely
                else:
                    handle.close()
                    del oracle.inputs[(source, w)]
            for w, handle in enumerate(handles):
                if not handle.closed:
                    handle.close()
                    del oracle.inputs[(source, w)]
        await asyncio.wait_for(dataflow.finished(), RUN_TIMEOUT_S)


def run_plan(
    plan: Plan,
    workers: int,
    budget_seed: int,
    frontier_checks: bool = True,
    processes: int = 1,
    central: bool = False,
) -> SchedulingOracle:
    """Runs ``plan`` with ``workers`` workers (over ``processes`` simulated processes) under
    a random activation budget per turn."""
    oracle = SchedulingOracle(plan.salt, workers, frontier_checks)
    budgets = random.Random(budget_seed)
    step = Worker.step

    def random_step(self: Worker, budget: int = 64, deadline: float = float("inf")) -> int:
        return step(self, budgets.choice((1, 1, 2, 3, budget)), deadline)

    with mock.patch.object(Worker, "step", random_step):
        run_coroutine(drive(plan, oracle, workers, processes, central))
    oracle.check_final()
    return oracle


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    plan=plans(),
    layout=st.sampled_from(
        [
            (2, 1, False),
            (4, 1, False),
            (1, 1, False),
            (2, 2, False),
            (4, 2, False),
            (3, 3, True),
            (4, 2, True),
        ]
    ),
    budget_seed=st.integers(0, 2**16),
)
def test_notifications_are_safe_and_live_on_random_dataflows(
    plan: Plan, layout: tuple[int, int, bool], budget_seed: int
) -> None:
    """``layout`` is (workers in all, processes, central accumulator): with several processes
    the frontiers each vertex sees come from its own process's view, so invariant 6 is checked
    under the distributed protocol with local accumulation (and through a central hub)."""
    workers, processes, central = layout
    note(f"plan={plan!r}")
    oracle = run_plan(plan, workers, budget_seed, processes=processes, central=central)
    note(f"{oracle.messages} messages, {oracle.notifications} notifications")
    depth = max(oracle.model.depth.values())
    event(f"{plan.source} source, {workers} workers, {processes} processes, loop depth {depth}")
    event(f"messages: {_bucket(oracle.messages)}, notifications: {_bucket(oracle.notifications)}")


def _bucket(n: int) -> str:
    return "0" if n == 0 else "1-9" if n < 10 else "10-99" if n < 100 else "100+"


# A fixed dataflow covering everything at once, so that every worker count and re-entrancy
# limit is exercised on every run, whatever the random examples drew: a root DAG with binary
# and exchanged edges, a loop with a second entered input and a self-join on its cycle, and a
# nested loop inside it.
NESTED = (
    ("source",),  # 0
    ("checker", ((0, "ex"),), False, 0),  # 1
    ("checker", ((0, None), (1, "ex7")), False, 1),  # 2
    ("loop",),
    ("enter", 2),  # 3
    ("feedback",),  # 4
    ("concat", (3, 4)),  # 5
    ("checker", ((5, "exop"),), False, 2),  # 6
    ("loop",),
    ("enter", 6),  # 7
    ("feedback",),  # 8
    ("concat", (7, 8)),  # 9
    ("checker", ((9, None), (9, "ex")), False, 1),  # 10
    ("checker", ((10, "ex7"),), True, 0),  # 11
    ("connect", 11),
    ("leave", 10),  # 12
    ("end",),
    ("enter", 1),  # 13
    ("checker", ((12, "ex"), (13, None)), False, 2),  # 14
    ("checker", ((14, None),), True, 1),  # 15
    ("connect", 15),
    ("leave", 14),  # 16
    ("end",),
    ("checker", ((16, "ex"), (2, "exop")), False, 0),  # 17
)


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("source", ["epochs", "input"])
@pytest.mark.parametrize("salt", [1, 2, 3])
def test_nested_loops_fixed_dataflow(workers: int, source: str, salt: int) -> None:
    script = (
        ("send", 0, (3, 1, 2)),
        ("sleep", 1),
        ("send", 1, (2, 3)),
        ("advance", 0, 1),
        ("send", 2, (1,)),
        ("advance", 1, 2),
        ("sleep", 2),
        ("send", 0, (3, 3)),
        ("close", 3),
        ("send", 1, (2,)),
        ("advance", 2, 1),
        ("send", 2, (1, 2)),
    )
    plan = Plan(NESTED, source, ((3, 1, 2, 2), (1, 3), (), (2, 3, 1)), script, salt)
    oracle = run_plan(plan, workers, budget_seed=salt)
    assert oracle.notifications > 0 and oracle.messages > 0


def test_oracle_flags_a_notification_while_a_message_is_in_flight() -> None:
    """The oracle itself: in flight upstream through a loop, or at the operator itself."""
    oracle = SchedulingOracle(salt=0, peers=1, frontier_checks=False)
    m = oracle.model
    m.add(0, "source", [])
    m.add(1, "enter", [0], 1)
    m.add(2, "feedback", [], 1)
    m.add(3, "concat", [1, 2], 1)
    m.add(4, "checker", [3], 1)
    m.add(5, "checker", [4], 1)
    m.inputs[2].append(5)
    m.add(6, "leave", [5], 0)
    m.add(7, "checker", [6], 0)
    m.dec.update({4: False, 5: True, 7: False})
    oracle.send(5, Product(0, 0), [1])  # upstream of 4, reaches it at (0, 1) via feedback
    oracle.request(4, 0, Product(0, 1))
    oracle.request(7, 0, 0)
    with pytest.raises(OracleViolation, match="could still arrive"):
        oracle.notify(4, 0, Product(0, 1))
    with pytest.raises(OracleViolation, match="could still arrive"):
        oracle.notify(7, 0, 0)  # leaves the loop at epoch 0
    oracle = SchedulingOracle(salt=0, peers=1, frontier_checks=False)
    oracle.model = m
    oracle.request(7, 0, 2)
    oracle.notify(7, 0, 2)
    with pytest.raises(OracleViolation, match="after a notification"):
        oracle.recv(7, 0, 0, 1, [5])


class InOrder(naiad.Vertex):
    """Requests notifications at 0 and 2; ``on_notify(0)`` requests one at 1."""

    def __init__(self, log: list[Time]) -> None:
        self.log = log

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.notify_at(cap.time)
        self.notify_at(cap.time + 2)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.log.append(cap.time)
        if cap.time == 0:
            self.notify_at(1)


async def test_a_notification_requested_in_on_notify_precedes_later_ready_ones() -> None:
    """Regression: the request at 1 is an active pointstamp (1, v) that could-result-in
    (2, v), so 2 is delivered only after 1 (Naiad §2.3)."""
    log: list[Time] = []
    async with naiad.Runtime(workers=1) as rt:

        def build(scope: naiad.Scope) -> naiad.InputHandle:
            handle, stream = scope.new_input()
            stream.unary(InOrder(log))
            return handle

        (handle,) = rt.dataflow(build).results
        handle.send(["x"])
        handle.close()  # 0 and 2 become deliverable together, after the record at 0
    assert log == [0, 1, 2]


class CountPerTime(naiad.Vertex):
    """Counts the records of each time and emits the count when the time is complete."""

    def __init__(self) -> None:
        self.counts: dict[Time, int] = {}

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        if cap.time not in self.counts:
            self.counts[cap.time] = 0
            self.notify_at(cap)
        self.counts[cap.time] += len(batch)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, [(cap.time.inner, self.counts.pop(cap.time))])


def test_many_ready_notifications_are_delivered_in_one_pass() -> None:
    """Regression: on one worker a loop's records circulate before any notification runs, so
    a vertex holds a request per iteration when they all become ready. Delivering each used
    to scan every pending time and submit a progress batch (a frontier rebuild over every
    pending time): quadratic. Now one scan per activation and one batch after it."""
    n = 1500
    submits = Counter[str]()
    scans = Counter[str]()
    inside = [False]
    real_submit = naiad.progress.progress_actor.ProgressActor.submit
    real_deliver = naiad.actors.vertex.VertexShard.deliver_notifications
    real_blocked = naiad.actors.vertex.VertexShard._blocked

    def submit(self: Any, dataflow: int, changes: Any) -> None:
        submits["inside" if inside[0] else "outside"] += 1
        real_submit(self, dataflow, changes)

    def deliver(self: Any) -> None:
        inside[0] = True
        try:
            real_deliver(self)
        finally:
            inside[0] = False

    def blocked(self: Any, t: Any) -> bool:
        scans["blocked"] += 1
        return bool(real_blocked(self, t))

    def build(scope: naiad.Scope) -> list[Any]:
        with scope.iterative() as loop:
            handle, cycle = loop.feedback(step=1)
            body = scope.from_epochs([[n]]).enter(loop).concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).connect_loop(handle)
            return body.unary(CountPerTime()).leave().collect()

    with (
        mock.patch.object(naiad.progress.progress_actor.ProgressActor, "submit", submit),
        mock.patch.object(naiad.actors.vertex.VertexShard, "deliver_notifications", deliver),
        mock.patch.object(naiad.actors.vertex.VertexShard, "_blocked", blocked),
    ):
        (out,) = naiad.run(build, workers=1)
    assert sorted(out) == [(0, (i, 1)) for i in range(n + 1)]
    assert submits["inside"] == 0  # the worker submits after the activation
    assert scans["blocked"] < 20 * n  # it was about n * n / 2


# --------------------------------------------------------------------------------------------
# Figure 4: DistinctCount
# --------------------------------------------------------------------------------------------


class DistinctCount(naiad.Vertex):
    """Naiad Figure 4: output 0 gets each record the first time it is seen at a time; output
    1 gets ``(record, count)`` for every record of a time, once the time is complete."""

    def __init__(self) -> None:
        self.counts: dict[Time, Counter[Any]] = {}

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        counts = self.counts.get(cap.time)
        if counts is None:
            counts = self.counts[cap.time] = Counter()
            self.notify_at(cap)
        fresh = []
        for record in batch:
            if record not in counts:
                fresh.append(record)
            counts[record] += 1
        self.send(cap, fresh, port=0)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.send(cap, sorted(self.counts.pop(cap.time).items()), port=1)


def run_distinct_count(epochs: list[list[int]], workers: int) -> tuple[list[Any], list[Any]]:
    def build(scope: naiad.Scope) -> tuple[list[Any], list[Any]]:
        distinct, counts = scope.from_epochs(epochs).unary(
            DistinctCount(), exchange=lambda r: r, outputs=2
        )
        return distinct.collect(), counts.collect()

    results = naiad.run(build, workers=workers)
    distinct = sorted(x for d, _ in results for x in d)
    counts = sorted(x for _, c in results for x in c)
    return distinct, counts


def distinct_count_oracle(epochs: list[list[int]]) -> tuple[list[Any], list[Any]]:
    distinct, counts = [], []
    for t, batch in enumerate(epochs):
        c = Counter(batch)
        distinct.extend((t, r) for r in c)
        counts.extend((t, pair) for pair in c.items())
    return sorted(distinct), sorted(counts)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_figure4_distinct_count(workers: int) -> None:
    epochs = [[1, 2, 2, 3, 1, 7], [], [5, 5, 5, 5], [9, 1, 9, 2, 3, 2, 8], [4]]
    assert run_distinct_count(epochs, workers) == distinct_count_oracle(epochs)


@settings(max_examples=25, deadline=None)
@given(
    epochs=st.lists(st.lists(st.integers(0, 6), max_size=8), min_size=1, max_size=5),
    workers=st.sampled_from([1, 2, 4]),
)
def test_figure4_distinct_count_random_epochs(epochs: list[list[int]], workers: int) -> None:
    assert run_distinct_count(epochs, workers) == distinct_count_oracle(epochs)


@pytest.mark.parametrize("workers", [1, 2, 4])
async def test_figure4_distinct_count_with_epochs_fed_in_pieces(workers: int) -> None:
    """Each epoch arrives in several sends with the workers running in between, so the
    counts are right only if on_notify waits for the whole epoch."""
    epochs = [[1, 2, 2, 3, 1, 7, 2], [5, 5, 1], [], [9, 1, 9, 2, 3, 2, 8, 8]]
    async with naiad.Runtime(workers=workers) as rt:

        def build(scope: naiad.Scope) -> tuple[Any, ...]:
            handle, stream = scope.new_input()
            distinct, counts = stream.unary(DistinctCount(), exchange=lambda r: r, outputs=2)
            return handle, distinct.collect(), counts.collect()

        dataflow = rt.dataflow(build)
        handles = [r[0] for r in dataflow.results]
        for epoch, batch in enumerate(epochs):
            for i, record in enumerate(batch):
                handles[i % workers].send([record])
                await asyncio.sleep(0)
            for handle in handles:
                handle.advance_to(epoch + 1)
                await asyncio.sleep(0)
        for handle in handles:
            handle.close()
        await dataflow.finished()
    distinct = sorted(x for r in dataflow.results for x in r[1])
    counts = sorted(x for r in dataflow.results for x in r[2])
    assert (distinct, counts) == distinct_count_oracle(epochs)
