"""Random differential programs against a from-scratch interpreter.

Hypothesis draws a DAG of collection operators over two inputs (maps and filters, concat,
negate, consolidate, joins, semijoins and antijoins, the reduce family, arrangements shared by
several readers and read from inside loops, iterations with random bodies, prioritized
iterations, nested loops, ``enter_at``, regions, ``Lex`` loops) and random change histories
(retractions, multiplicities, empty epochs); every node of the root scope is compared at
every epoch with a plain-Python interpreter that recomputes each collection from scratch
(a loop by iterating its body to a fixed point; a ``Lex`` loop starting each epoch from the
previous epoch's result, as its lexicographic times make it). Loops of one to three
``Variable``s (mutual recursion, feedback steps 1 or 2, seeds entered at counters or none)
run in ``Product`` and in ``Lex`` loops, and ``Lex`` loops nest in loops of either kind: a
``Lex`` loop at an outer time starts from everything its collections accumulated at the
outer times strictly before it, which the interpreter keeps per outer time (for a ``Product``
outer time by inclusion and exclusion; see :func:`past`). Loop bodies end with
``distinct`` or ``min`` and values stay in a small finite domain, so each loop converges or
cycles; programs whose loops the interpreter finds cycling are rejected before naiad runs
them. A second test feeds the program through input sessions, reads a view of its last node
at every epoch, and imports that node's arrangement into a second dataflow mid-stream.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, Variable, import_trace
from naiad.progress import Lex
from tests.differential import reference as ref
from tests.differential.reference import layouts

D = 5  # keys and values are integers in [0, D)

MAPS: list[Callable[[Any], Any]] = [
    lambda r: ((r[0] + 1) % D, r[1]),
    lambda r: (r[1], r[0]),
    lambda r: (r[0], (r[1] * 2 + r[0]) % D),
    lambda r: (r[0] % 3, r[1]),
]
FILTERS: list[Callable[[Any], bool]] = [
    lambda r: (r[0] + r[1]) % 3 != 0,
    lambda r: r[1] < 3,
    lambda r: r[0] != 2,
]
JOINED: list[Callable[[Any], Any]] = [  # (key, left value, right value) -> a pair
    lambda r: (r[0], (r[1] + r[2]) % D),
    lambda r: (r[2], r[1]),
    lambda r: (r[1], r[0]),
]
THRESHOLDS: list[Callable[[np.ndarray], Any]] = [
    lambda c: np.minimum(c, 2),
    lambda c: (c > 1).astype(np.int64),
    np.abs,
]
THRESHOLDS_REF: list[Callable[[int], int]] = [lambda c: min(c, 2), lambda c: int(c > 1), abs]
REDUCERS: list[Callable[[Any, list[tuple[Any, int]]], list[tuple[Any, int]]]] = [
    lambda k, vs: [(len(vs) % D, 1)],
    lambda k, vs: [(v, 1) for v, c in sorted(vs) if c > 0][:2],
    lambda k, vs: [(sum(c for _, c in vs) % D, 2)],
]
ENTER_AT: list[Callable[..., Any]] = [
    lambda k, v: v % 3,
    lambda k, v: 2,
    lambda k, v: (k + v) % 2,
]
ENTER_AT_REF: list[Callable[[Any], int]] = [lambda r: r[1] % 3, lambda r: 2, lambda r: sum(r) % 2]

PRIORITIES: list[Callable[..., Any]] = [lambda k, v: v % 3, lambda k, v: k]
PRIORITIES_REF: list[Callable[[Any], int]] = [lambda r: r[1] % 3, lambda r: r[0]]
SHIFT = 32  # a prioritized loop's counter is (priority << SHIFT) + iteration

WORK = 30000  # node evaluations the interpreter allows a program
BOUND = 40  # iterations the interpreter allows a loop before it calls it cycling


class Cycling(Exception):
    """The interpreter found a loop without a fixed point."""


# --- programs ----------------------------------------------------------------------------------
# A scope's program is a list of nodes; a node's inputs are refs: ("L", j) node j of the same
# scope, ("X",) the loop variable, ("O", ref, at) ``ref`` of the enclosing scope entered
# (at counter ENTER_AT[at], or 0 if at is None). ("ojoin", ...) reads an arrangement of the
# enclosing scope from inside a loop.
UNARY = ["map", "filter", "negate", "consolidate", "count", "distinct", "threshold"]
UNARY += ["sum", "min", "max", "reduce"]
BINARY = ["concat", "join", "semijoin", "antijoin"]


@st.composite
def scope_program(
    draw: Any,
    base: list[Any],
    outer: list[Any],
    depth: int,
    size: int,
    loop: bool = True,
    loops: bool = False,
) -> Any:
    """Nodes over the refs ``base`` of this scope (and ``outer``, refs of the enclosing scope
    that may be entered); with ``loops``, mostly loops, loops of ``Variable``s among them,
    with ``Lex`` loops inside them."""
    nodes: list[Any] = []

    def pick() -> Any:
        local = base + [("L", j) for j in range(len(nodes))]
        if outer and (not local or draw(st.integers(0, 3)) == 0):
            at = draw(st.sampled_from([None, None, 0, 1, 2])) if loop else None
            return ("O", draw(st.sampled_from(outer)), at)
        return draw(st.sampled_from(local))

    for _ in range(draw(st.integers(1, size))):
        nested = depth < 2 and bool(base or nodes)
        kinds = UNARY + BINARY + ["iterate", "region"] * nested + ["ojoin"] * bool(outer)
        kinds += ["lex"] * (depth == 0)
        if loops and depth == 0 and nested:  # mostly loops, and Lex loops inside them
            kinds += ["mutual", "lexm", "iterate", "lex"] * 4 + ["mutual", "lexm"] * 2
        elif loops and depth == 1 and bool(base or nodes):
            kinds += ["lexm"] * 6 + ["mutual"] * 2
        kind = draw(st.sampled_from(kinds))
        arranged = draw(st.booleans())
        if kind in ("map", "filter"):
            table = MAPS if kind == "map" else FILTERS
            nodes.append((kind, pick(), draw(st.integers(0, len(table) - 1))))
        elif kind in ("negate", "consolidate", "sum", "min", "max"):
            nodes.append((kind, pick()))
        elif kind in ("count", "distinct"):
            nodes.append((kind, pick(), arranged))
        elif kind == "threshold":
            nodes.append((kind, pick(), draw(st.integers(0, len(THRESHOLDS) - 1))))
        elif kind == "reduce":
            nodes.append((kind, pick(), draw(st.integers(0, len(REDUCERS) - 1)), arranged))
        elif kind == "concat":
            nodes.append((kind, pick(), pick()))
        elif kind == "join":
            nodes.append((kind, pick(), pick(), draw(st.integers(0, len(JOINED) - 1)), arranged))
        elif kind in ("semijoin", "antijoin"):
            nodes.append((kind, pick(), pick(), arranged))
        elif kind == "ojoin":
            at = draw(st.sampled_from([None, 0, 1])) if loop else None
            fid = draw(st.integers(0, len(JOINED) - 1))
            nodes.append((kind, draw(st.sampled_from(outer)), pick(), fid, at))
        elif kind == "iterate":
            seed = pick()
            mine = base + [("L", j) for j in range(len(nodes))]
            body = draw(scope_program([("X",)], mine, depth + 1, 3, loops=loops))
            last = draw(st.sampled_from(["distinct", "min"]))
            priority = draw(st.sampled_from([None, None, 0, 1]))
            nodes.append((kind, seed, body, last, priority))
        elif kind == "lex":  # a loop with (epoch, iteration) ordered lexicographically
            seed = pick()
            mine = base + [("L", j) for j in range(len(nodes))]
            body = draw(scope_program([("X",)], mine, depth + 1, 3, False, loops))
            nodes.append((kind, seed, body, draw(st.sampled_from(["distinct", "min"]))))
        elif kind in ("mutual", "lexm"):  # Variables of one loop (Product, resp. Lex)
            mine = base + [("L", j) for j in range(len(nodes))]
            nv = draw(st.integers(1, 3))
            xs = [("X", v) for v in range(nv)]
            seeds: list[Any] = []
            steps, bodies, lasts = [], [], []
            for _ in range(nv):
                if draw(st.integers(0, 3)) == 0:
                    seeds.append(None)  # Variable(loop): starts empty
                else:
                    at = draw(st.sampled_from([None, None, 0, 1, 2]))
                    seeds.append(("O", draw(st.sampled_from(mine)), at))
                steps.append(draw(st.sampled_from([1, 1, 2])))
                bodies.append(draw(scope_program(xs, mine, depth + 1, 3, loops=loops)))
                lasts.append(draw(st.sampled_from(["distinct", "min"])))
            out = draw(st.integers(0, nv - 1))  # the variable whose result leaves
            nodes.append((kind, tuple(seeds), tuple(steps), tuple(bodies), tuple(lasts), out))
        else:  # region: its nodes see this scope's refs entered (unchanged)
            mine = base + [("L", j) for j in range(len(nodes))]
            body = draw(scope_program([], mine, depth + 1, 3, False, loops))
            nodes.append((kind, body))
    return nodes


# --- the interpreter ---------------------------------------------------------------------------
def interpret(
    nodes: list[Any],
    resolve: Callable[[Any], Counter],
    i: int,
    memory: dict[int, Any] | None = None,
) -> list[Counter]:
    """Every node's collection; ``resolve`` gives refs that are not nodes of this scope and
    ``i`` is the loop counter (for ``enter_at``; a large number outside loops). ``memory``
    carries the root scope's ``Lex`` loops from one epoch to the next."""
    values: list[Counter] = []

    def get(r: Any) -> Counter:
        if r[0] == "L":
            return values[r[1]]
        if r[0] == "O" and r[2] is not None:
            if isinstance(i, LexK):
                return resolve(r)
            at = ENTER_AT_REF[r[2]]
            return Counter({x: c for x, c in resolve((*r[:2], None)).items() if at(x) <= i})
        return resolve(r)

    for node in nodes:
        CTX["steps"] = CTX.get("steps", 0) + 1
        if CTX["steps"] > WORK:
            raise Cycling  # too much work for the interpreter: rejected like a cycle
        kind = node[0]
        out: Counter
        if kind == "map":
            out = Counter()
            for x, c in get(node[1]).items():
                out[MAPS[node[2]](x)] += c
            out = ref.clean(out)
        elif kind == "filter":
            out = Counter({x: c for x, c in get(node[1]).items() if FILTERS[node[2]](x)})
        elif kind == "negate":
            out = Counter({x: -c for x, c in get(node[1]).items()})
        elif kind == "consolidate":
            out = get(node[1])
        elif kind == "count":
            out = Counter()
            for x, c in ref.count(get(node[1])).items():
                out[(x[0], (x[1] + x[2]) % D)] += c
            out = ref.clean(out)
        elif kind == "distinct":
            out = ref.distinct(get(node[1]))
        elif kind == "threshold":
            out = ref.threshold(get(node[1]), THRESHOLDS_REF[node[2]])
        elif kind == "sum":
            out = Counter({(k, s % D): c for (k, s), c in ref.sum_(get(node[1])).items()})
        elif kind in ("min", "max"):
            out = ref.extreme(get(node[1]), kind == "max")
        elif kind == "reduce":
            out = ref.reduce(get(node[1]), REDUCERS[node[2]])
        elif kind == "concat":
            out = Counter(get(node[1]))
            out.update(get(node[2]))
            out = ref.clean(out)
        elif kind in ("join", "ojoin"):
            left = ("O", node[1], node[4]) if kind == "ojoin" else node[1]
            right, fid = node[2], node[3]
            out = Counter()
            for x, c in ref.join(get(left), get(right)).items():
                out[JOINED[fid](x)] += c
            out = ref.clean(out)
        elif kind in ("semijoin", "antijoin"):
            keys = ref.clean(Counter())
            for x, c in get(node[2]).items():
                keys[x[0]] += c
            keys = ref.clean(keys)
            f = ref.semijoin if kind == "semijoin" else ref.antijoin
            out = f(get(node[1]), keys)
        elif kind == "iterate":
            out = fixed_point(node, get, i)
        elif kind == "region":
            out = interpret(node[1], lambda r: get(r[1]), i)[-1]
        elif kind == "lex":
            assert memory is not None
            out = lex_fixed_point(node, get, memory, len(values))
        elif kind in ("mutual", "lexm"):
            out = mutual_fixed_point(node, get)
        else:
            raise AssertionError(kind)
        values.append(ref.clean(out))
    return values


def fixed_point(node: Any, get: Callable[[Any], Counter], i: int) -> Counter:
    """The loop's result: its variable at counter ``j`` is the body's result at ``j - 1``
    plus the seed entering at ``j`` (at 0 without priorities, else at its priority's first
    counter). Once stable, the counter jumps to the next priority entering."""
    _, seed, body, last, priority = node
    start = get(seed)

    def entry(r: Any) -> int:
        return 0 if priority is None else PRIORITIES_REF[priority](r) << SHIFT

    def seed_at(j: int) -> Counter:
        return Counter({r: c for r, c in start.items() if entry(r) <= j})

    events = sorted({entry(r) for r in start})
    j, x = 0, seed_at(0)
    seen_states: set[str] = set()
    # the greatest counter of earlier epochs: a Lex loop inside may change until then
    horizon = CTX["horizon"].get(id(node), -1) if has_lex_loop(body) else -1
    for _ in range(BOUND * 4):

        def inner(r: Any, x: Counter = x) -> Counter:
            return x if r == ("X",) else get(r[1])

        CTX["stack"].append(("P", id(node), j))
        try:
            result = ref.clean(finish(interpret(body, inner, j), last))
        finally:
            CTX["stack"].pop()
        CTX["horizon"][id(node)] = max(CTX["horizon"].get(id(node), -1), j)
        following = Counter(result)
        following.update(seed_at(j + 1))
        following.subtract(seed_at(j))
        following = ref.clean(following)
        if following == x and j >= 2 and j > horizon:  # enter_at counters are below 3
            later = [e for e in events if e > j + 1]
            if not later:
                return result
            j = later[0] - 1  # nothing changes until then
            continue
        if priority is None and j > 3 + max(horizon, 0):
            state = repr(sorted(following.items()))
            if state in seen_states and following != x:
                raise Cycling  # back to a state that is no fixed point
            seen_states.add(state)
        j, x = j + 1, following
    raise Cycling


class LexK(int):
    """A counter of a ``Lex`` loop (of ``Variable``s): its entered collections resolve
    themselves (see :func:`mutual_fixed_point`)."""


CTX: dict[str, Any] = {}
"""The interpreter's state across nodes and epochs: ``epoch``; ``stack``, the enclosing loops'
``(kind, id of node, counter)`` (kind "P" Product, "X" Lex); ``limits``, per (collection of a
loop of Variables, outer time) the collection there after all iterations (a Lex loop starts
from its past); ``horizon``, per loop the greatest counter reached so far (a loop with a Lex
loop inside runs at least as far as at earlier epochs, whose corrections reach it there);
``steps``, node evaluations so far (a program past :data:`WORK` is rejected)."""


def reset_ctx() -> None:
    CTX.clear()
    CTX.update(epoch=0, stack=[], limits={}, counters={}, horizon={}, steps=0)


def outer_time() -> tuple[Any, ...]:
    """The time of the scope being interpreted: the epoch and the enclosing loops' counters."""
    return (CTX["epoch"], *CTX["stack"])


def has_lex_loop(program: Any) -> bool:
    """Whether a loop of Variables with Lex times is nested in ``program``: only such a loop
    remembers the earlier epochs' iterations of the loop around it."""
    return "'lexm'" in repr(program)


def record(key: Any, t: tuple[Any, ...], value: Counter) -> None:
    CTX["limits"][(key, t)] = value
    if len(t) == 2:  # the counters recorded in that loop at that epoch, sorted
        counters = CTX["counters"].setdefault((key, t[0], t[1][:2]), [])
        if t[1][2] not in counters:
            bisect.insort(counters, t[1][2])


def lookup(key: Any, t: tuple[Any, ...]) -> Counter:
    """The limit recorded for ``key`` at outer time ``t`` (a counter None: the greatest
    recorded), or at the greatest recorded time before it in the same enclosing loop
    (nothing changes at the counters a loop skipped or did not reach; a prioritized loop's
    counters skip by 2**32)."""
    if t[0] < 0:
        return Counter()
    if len(t) == 1:
        return CTX["limits"].get((key, t), Counter())
    kind, nid, j = t[1]
    counters = CTX["counters"].get((key, t[0], (kind, nid)), [])
    before = len(counters) if j is None else bisect.bisect_right(counters, j)
    if not before:
        return Counter()
    return CTX["limits"][(key, (t[0], (kind, nid, counters[before - 1])))]


def past(key: Any, t: tuple[Any, ...]) -> Counter:
    """What ``key`` accumulates over the outer times strictly before ``t`` (every iteration
    of each): at the root, the previous epoch's limit; in a Lex loop, the previous counter's
    (at counter 0, the previous epoch's last); in a Product loop at (e, j), by inclusion and
    exclusion, L(e - 1, j) + L(e, j - 1) - L(e - 1, j - 1)."""
    e = t[0]
    if len(t) == 1:
        return lookup(key, (e - 1,))
    kind, nid, j = t[1]
    if kind == "X":  # Lex: the previous counter, or the previous epoch's limit
        if j > 0:
            return lookup(key, (e, (kind, nid, j - 1)))
        return lookup(key, (e - 1, (kind, nid, None)))
    out = Counter(lookup(key, (e - 1, (kind, nid, j))))
    if j > 0:
        out.update(lookup(key, (e, (kind, nid, j - 1))))
        out.subtract(lookup(key, (e - 1, (kind, nid, j - 1))))
    return ref.clean(out)


def mutual_fixed_point(node: Any, get: Callable[[Any], Counter]) -> Counter:
    """Variables ``X_v`` of one loop: ``X_v`` at counter k is the seed accumulated at k plus
    the feedback (result - seed) accumulated at k - step_v. In a Product loop nothing is
    accumulated before counter 0; in a Lex loop, everything at outer times strictly before
    this one is (all iterations), and a seed or a collection entered at counters holds
    that past plus this outer time's change entered up to k."""
    _, seeds, steps, bodies, lasts, out = node
    lex = node[0] == "lexm"
    me = id(node)
    t = outer_time()

    def entered(r: Any, k: int) -> Counter:
        """``r`` (an ("O", ref, at) ref) accumulated at counter k of this loop."""
        now = get(r[1])
        record(("O", me, r[1]), t, now)
        if r[2] is None:
            return now
        at = ENTER_AT_REF[r[2]]
        if not lex:
            return Counter({x: c for x, c in now.items() if at(x) <= k})
        before = past(("O", me, r[1]), t)
        delta = Counter(now)
        delta.subtract(before)
        acc = Counter(before)
        for x, c in ref.clean(delta).items():
            if at(x) <= k:
                acc[x] += c
        return ref.clean(acc)

    def seed_at(v: int, k: int) -> Counter:
        return Counter() if seeds[v] is None else entered(seeds[v], k)

    nv = len(seeds)
    held = []
    for v in range(nv):
        h = Counter(past(("R", me, v), t))
        h.subtract(past(("O", me, seeds[v][1]), t) if seeds[v] is not None else Counter())
        held.append(h if lex else Counter())
    history: list[list[Counter]] = []  # per counter, every variable's result
    variables: list[list[Counter]] = []
    maxs = max(steps)
    horizon = CTX["horizon"].get(me, -1) if has_lex_loop(bodies) else -1
    seen_states: set[str] = set()
    for k in range(BOUND * 3):
        xs = []
        for v in range(nv):
            x = Counter(seed_at(v, k))
            if k >= steps[v]:
                x.update(history[k - steps[v]][v])
                x.subtract(seed_at(v, k - steps[v]))
            else:
                x.update(held[v])
            xs.append(ref.clean(x))
        variables.append(xs)

        def inner(r: Any, xs: list[Counter] = xs, k: int = k) -> Counter:
            if r[0] == "X":
                return xs[r[1]]
            if lex and r[0] == "O" and r[2] is not None:
                return entered(r, k)
            return get(r[1])

        CTX["stack"].append(("X" if lex else "P", me, k))
        try:
            results = [
                ref.clean(finish(interpret(body, inner, LexK(k) if lex else k), last))
                for body, last in zip(bodies, lasts, strict=True)
            ]
        finally:
            CTX["stack"].pop()
        history.append(results)
        CTX["horizon"][me] = max(CTX["horizon"].get(me, -1), k)
        fixed = k >= 3 + maxs and all(
            variables[k - d] == xs and history[k - d] == results for d in range(1, maxs + 1)
        )
        if fixed and (lex or k > horizon):
            for v in range(nv):
                record(("R", me, v), t, results[v])
            return results[out]
        if not fixed and k > 3 + maxs + max(horizon, 0):
            state = repr([sorted(c.items()) for w in variables[-maxs:] for c in w])
            if state in seen_states:
                raise Cycling  # the loop came back to a state that is no fixed point
            seen_states.add(state)
    raise Cycling


def lex_fixed_point(
    node: Any, get: Callable[[Any], Counter], memory: dict[int, Any], index: int
) -> Counter:
    """A ``Lex`` loop at the next epoch: its variable at (e, 0) accumulates every earlier
    epoch's iterations, so it starts from the previous epoch's result (plus the change of the
    seed); later iterations as in a product loop."""
    _, seed, body, last = node
    start = get(seed)
    previous, previous_seed = memory.get(index, (Counter(), Counter()))
    x = Counter(previous)
    x.update(start)
    x.subtract(previous_seed)
    x = ref.clean(x)
    for k in range(BOUND):

        def inner(r: Any, x: Counter = x) -> Counter:
            return x if r == ("X",) else get(r[1])

        CTX["stack"].append(("X", id(node), k))
        try:
            result = ref.clean(finish(interpret(body, inner, 0), last))
        finally:
            CTX["stack"].pop()
        if result == x:
            memory[index] = (result, start)
            return result
        x = result
    raise Cycling


def finish(values: list[Counter], last: str) -> Counter:
    final = values[-1]
    return ref.distinct(final) if last == "distinct" else ref.extreme(final, False)


# --- naiad -------------------------------------------------------------------------------------
class Builder:
    """Builds a scope's program in naiad, arranging each collection at most once per scope
    (so an arrangement is shared by all the readers that ask for it)."""

    def __init__(self, scope: Any, resolve: Callable[[Any], Collection], parent: Any) -> None:
        self.scope, self.resolve, self.parent = scope, resolve, parent
        self.values: list[Collection] = []
        self.arrangements: dict[Any, Any] = {}
        self.entered: dict[Any, Collection] = {}

    def get(self, r: Any) -> Collection:
        if r[0] == "L":
            return self.values[r[1]]
        if r[0] == "O":
            if r not in self.entered:
                outer = self.parent.get(r[1])
                if r[2] is None:
                    self.entered[r] = outer.enter(self.scope)
                else:
                    self.entered[r] = outer.enter_at(self.scope, ENTER_AT[r[2]])
            return self.entered[r]
        return self.resolve(r)

    def arranged(self, r: Any) -> Any:
        if r not in self.arrangements:
            self.arrangements[r] = self.get(r).arrange_by_key()
        return self.arrangements[r]

    def source(self, r: Any, arranged: bool) -> Any:
        return self.arranged(r) if arranged else self.get(r)

    def build(self, nodes: list[Any]) -> list[Collection]:
        for node in nodes:
            self.values.append(self.node(node))
        return self.values

    def node(self, node: Any) -> Collection:
        kind = node[0]
        if kind == "map":
            return self.get(node[1]).map(MAPS[node[2]])
        if kind == "filter":
            return self.get(node[1]).filter(FILTERS[node[2]])
        if kind == "negate":
            return self.get(node[1]).negate()
        if kind == "consolidate":
            return self.get(node[1]).consolidate()
        if kind == "count":
            counted = self.source(node[1], node[2]).count()
            return counted.map(lambda x: (x[0], (x[1] + x[2]) % D))
        if kind == "distinct":
            return self.source(node[1], node[2]).distinct()
        if kind == "threshold":
            return self.get(node[1]).threshold(THRESHOLDS[node[2]])
        if kind == "sum":
            return self.get(node[1]).sum().map(lambda x: (x[0], x[1] % D))
        if kind == "min":
            return self.get(node[1]).min()
        if kind == "max":
            return self.get(node[1]).max()
        if kind == "reduce":
            if node[3]:
                return self.arranged(node[1]).reduce(REDUCERS[node[2]]).as_collection()
            return self.get(node[1]).reduce(REDUCERS[node[2]])
        if kind == "concat":
            return self.get(node[1]).concat(self.get(node[2]))
        if kind == "join":
            joined = self.source(node[1], node[4]).join(self.get(node[2]))
            return joined.map(JOINED[node[3]])
        if kind in ("semijoin", "antijoin"):
            keys = self.get(node[2]).map(lambda x: x[0])
            left = self.source(node[1], node[3])
            return getattr(left, kind)(keys)
        if kind == "ojoin":
            index = self.parent.arranged(node[1])
            if node[4] is not None:
                index = index.enter_at(self.scope, ENTER_AT[node[4]])
            return index.join(self.get(node[2])).map(JOINED[node[3]])
        if kind == "iterate":
            _, seed, body, last, priority = node

            def step(x: Collection) -> Collection:
                inner = Builder(x.scope, lambda r: x, self)
                values = inner.build(body)
                return values[-1].distinct() if last == "distinct" else values[-1].min()

            prioritized = None if priority is None else PRIORITIES[priority]
            return self.get(seed).iterate(step, priority=prioritized)
        if kind == "lex":
            loop = self.scope.iterative("lex", time_class=Lex)
            variable = Variable(loop, self.get(node[1]).enter(loop))
            inner = Builder(loop, lambda r: variable.collection, self)
            result = inner.build(node[2])[-1]
            result = result.distinct() if node[3] == "distinct" else result.min()
            return variable.set(result).leave()
        if kind in ("mutual", "lexm"):
            _, seeds, steps, bodies, lasts, out = node
            if kind == "lexm":
                loop = self.scope.iterative("lexm", time_class=Lex)
            else:
                loop = self.scope.iterative("mutual")
            entered: dict[Any, Collection] = {}
            seeder = Builder(loop, self.get, self)  # seeds are entered refs only
            seeder.entered = entered
            variables = [
                Variable(loop, None if sd is None else seeder.get(sd), step=st_)
                for sd, st_ in zip(seeds, steps, strict=True)
            ]
            results = []
            for body, last in zip(bodies, lasts, strict=True):
                inner = Builder(loop, lambda r: variables[r[1]].collection, self)
                inner.entered = entered
                res = inner.build(body)[-1]
                results.append(res.distinct() if last == "distinct" else res.min())
            for var, res in zip(variables, results, strict=True):
                var.set(res)
            return results[out].leave()
        if kind == "region":
            with self.scope.region("region") as region:
                inner = Builder(region, lambda r: self.get(r[1]).enter(region), self)
                return inner.build(node[1])[-1].leave()
        raise AssertionError(kind)


RECORDS = st.tuples(st.integers(0, D - 1), st.integers(0, D - 1))


@st.composite
def cases(draw: Any, loops: bool = False) -> Any:
    n = draw(st.integers(1, 4))
    a = draw(ref.histories(RECORDS, count=n))
    b = draw(ref.histories(RECORDS, count=n))
    program = draw(scope_program([("A",), ("B",)], [], 0, 6, loops=loops))
    return a, b, program


def expected(a: ref.Epochs, b: ref.Epochs, program: Any) -> list[list[Counter]]:
    """Per epoch, every node's collection (raises :class:`Cycling`)."""
    out = []
    memory: dict[int, Any] = {}
    reset_ctx()
    for e in range(len(a)):
        inputs = {("A",): ref.accumulated(a, e), ("B",): ref.accumulated(b, e)}
        CTX["epoch"] = e
        values = interpret(program, inputs.__getitem__, 1 << 30, memory)
        out.append(values)
    return out


def run_case(a: ref.Epochs, b: ref.Epochs, program: Any, layout: Any) -> None:
    try:
        want = expected(a, b, program)
    except Cycling:
        assume(False)
        return

    def build(scope: Any) -> Any:
        inputs = {
            ("A",): Collection.from_epochs(scope, a),
            ("B",): Collection.from_epochs(scope, b),
        }
        values = Builder(scope, lambda r: inputs[r], None).build(program)
        return [v.changes() for v in values]

    results = ref.run(build, layout)
    for j in range(len(program)):
        got = [r[j] for r in results]
        try:
            ref.check(got, [w[j] for w in want])
        except AssertionError as e:
            raise AssertionError(f"node {j} {program[j]!r}: {e}") from None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cases(), layouts)
def test_random_programs(case: Any, layout: Any) -> None:
    a, b, program = case
    run_case(a, b, program, layout)


# --- sessions, views and an imported arrangement -----------------------------------------------
def share(worker: int, workers: int, changes: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [c for i, c in enumerate(changes) if i % workers == worker]


async def sessions(
    a: ref.Epochs, b: ref.Epochs, program: Any, second: Any, before: int, layout: Any
) -> tuple[list[Any], list[Any], list[dict[Any, int]]]:
    """Runs ``program`` fed epoch by epoch through input sessions, reading a view of its last
    node at every epoch; after ``before`` epochs a second dataflow imports the arrangement of
    that node (compacted up to ``before``) and runs ``second`` over it and its own input
    (``b`` again, from epoch ``before`` on)."""
    workers, processes, *_ = layout
    views: list[dict[Any, int]] = []
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

        def first(scope: Any) -> Any:
            (sa, ca), (sb, cb) = Collection.new_input(scope), Collection.new_input(scope)
            values = Builder(scope, {("A",): ca, ("B",): cb}.__getitem__, None).build(program)
            arranged = values[-1].arrange_by_key()
            view = values[-1].view()
            return (sa, sb), [v.changes() for v in values], arranged.trace, view

        df1 = rt.dataflow(first)
        mine = df1.workers
        peers = workers * processes
        df2 = None
        for e in range(len(a)):
            if e == before:
                for w in mine:
                    df1.result(w)[2].set_logical_compaction([before])

                def importer(scope: Any) -> Any:
                    s, own = Collection.new_input(scope)
                    imported = import_trace(df1.result(scope.index)[2], scope).as_collection()
                    inputs = {("A",): imported, ("B",): own}
                    values = Builder(scope, inputs.__getitem__, None).build(second)
                    return s, [v.changes() for v in values]

                df2 = rt.dataflow(importer)
                for w in mine:
                    df2.result(w)[0].advance_to(before)
                    df1.result(w)[2].close()  # the import holds the trace from here on
            for w in mine:
                sa, sb = df1.result(w)[0]
                for session, changes in ((sa, a[e]), (sb, b[e])):
                    for record, diff in share(w, peers, changes):
                        session.update(record, diff)
                    session.advance_to(e + 1)
                if df2 is not None:
                    s = df2.result(w)[0]
                    for record, diff in share(w, peers, b[e]):
                        s.update(record, diff)
                    s.advance_to(e + 1)
            if 0 in mine:
                view = df1.result(0)[3]
                await view.wait(e)
                views.append(dict(view.at(e)))
        for w in mine:
            for session in df1.result(w)[0]:
                session.close()
            if df2 is not None:
                df2.result(w)[0].close()
            else:
                df1.result(w)[2].close()
        await df1.finished()
        if df2 is not None:
            await df2.finished()
    first_changes = [df1.result(w)[1] for w in mine]
    second_changes = [] if df2 is None else [df2.result(w)[1] for w in mine]
    return first_changes, second_changes, views


def check_nodes(results: list[Any], want: list[list[Counter]], program: Any, start: int) -> None:
    """Node by node, naiad's changes accumulated to each epoch from ``start`` on."""
    for j in range(len(program)):
        got = ref.accumulate_changes([r[j] for r in results], len(want))
        for e in range(start, len(want)):
            assert got[e] == want[e][j], (
                f"node {j} {program[j]!r}: epoch {e}: {ref.diff_text(got[e], want[e][j])}"
            )


def run_sessions(
    a: ref.Epochs, b: ref.Epochs, program: Any, second: Any, before: int, layout: Any
) -> None:
    try:
        want = expected(a, b, program)
        imported = [Counter(w[-1]) for w in want]
        want2 = []
        memory: dict[int, Any] = {}
        own: ref.Epochs = [[] for _ in range(before)] + b[before:]  # fed from epoch ``before`` on
        for e in range(len(a)):
            inputs = {("A",): imported[e], ("B",): ref.accumulated(own, e)}
            want2.append(interpret(second, inputs.__getitem__, 1 << 30, memory))
    except Cycling:
        assume(False)
        return
    first, other, views = ref.watchdog(sessions(a, b, program, second, before, layout))
    check_nodes(first, want, program, 0)
    for e, view in enumerate(views):
        assert ref.clean(Counter(view)) == want[e][-1], f"view at {e}"
    check_nodes(other, want2, second, before)


@st.composite
def session_cases(draw: Any) -> Any:
    a, b, program = draw(cases())
    second = draw(scope_program([("A",), ("B",)], [], 1, 4))
    return a, b, program, second, draw(st.integers(0, len(a)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(session_cases(), layouts)
def test_random_programs_through_sessions_views_and_an_import(case: Any, layout: Any) -> None:
    a, b, program, second, before = case
    run_sessions(a, b, program, second, before, layout)
