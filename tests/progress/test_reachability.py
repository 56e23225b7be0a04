"""Could-result-in and frontiers on random logical graphs, against path enumeration.

The graphs are random DAGs of operators (1-2 inputs and outputs) with loop contexts, nested
up to two deep. A loop context is modelled as timely's subgraph boundary would be: an
``ingress`` node (summary: push a counter), a ``feedback`` node (+1 on the innermost
counter) closing the loop, ordinary identity operators inside, and ``egress`` nodes (pop the
counter). Every location carries times of its own shape: ``int`` at the root, then one
``Product`` / ``Lex`` coordinate per enclosing loop.

Two oracles are used:

* ``via_psi``: minimal elements of ``{s(t) : (l, t) active, s in reach.summaries(l, T)}``,
  which checks the Tracker's bookkeeping given ``Ψ``;
* ``via_paths``: a search over ``(location, time)`` states applying the single-step summaries
  of the graph itself (edges and node summaries), never looking at ``Ψ``. It keeps only the
  minimal times per location, which is exact because every step is monotone, and it
  terminates because times are well-quasi-ordered. This is the oracle that fails if ``Ψ``
  is computed wrongly.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.progress.progress_actor import ProgressActor
from naiad.progress.reachability import CycleError, GraphBuilder, Tracker
from naiad.progress.summary import PathSummary
from naiad.progress.timestamp import Lex, Product, less_equal

SETTINGS = settings(max_examples=60, deadline=None, database=None)

# Every tracker test runs on both strategies, whatever the graph's size would pick.
STRATEGIES = pytest.mark.parametrize("strategy", ["psi", "frontier"])
# ... and the oracle tests also on Ψ with some targets unwatched (their frontiers worked out
# when read: DerivedFrontier)
TRACKERS = pytest.mark.parametrize("strategy", ["psi", "frontier", "psi-unwatched"])

IDENTITY = PathSummary()


# --------------------------------------------------------------------------- graph generation


@dataclass
class Spec:
    """A logical graph, plus the time shape (tuple of loop classes) of every node's ports."""

    nodes: list[tuple[str, int, int, list | None]] = field(default_factory=list)
    edges: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)
    in_shape: list[tuple] = field(default_factory=list)
    out_shape: list[tuple] = field(default_factory=list)

    def add(self, name, inputs, outputs, summary, in_shape, out_shape=None) -> int:
        self.nodes.append((f"{name}{len(self.nodes)}", inputs, outputs, summary))
        self.in_shape.append(in_shape)
        self.out_shape.append(in_shape if out_shape is None else out_shape)
        return len(self.nodes) - 1

    def builder(self) -> GraphBuilder:
        g = GraphBuilder()
        for name, inputs, outputs, summary in self.nodes:
            g.add_node(name, inputs, outputs, summary)
        for source, target in self.edges:
            g.add_edge(source, target)
        return g

    def node_summary(self, n):
        _, inputs, outputs, summary = self.nodes[n]
        if summary is None:
            return [[[IDENTITY] for _ in range(outputs)] for _ in range(inputs)]
        return summary


CELLS = st.sampled_from(
    [
        [IDENTITY],
        [IDENTITY],
        [IDENTITY],
        [],
        [PathSummary.feedback(1)],  # an operator that delays by one (a "delay" operator)
        [IDENTITY, PathSummary.feedback(2)],  # redundant second summary
    ]
)


class Generator:
    def __init__(self, draw, max_depth: int, max_loops: int) -> None:
        self.draw = draw
        self.max_depth = max_depth
        self.loops_left = max_loops
        self.spec = Spec()

    def connect(self, sources, node, port) -> None:
        for _ in range(self.draw(st.integers(1, 2))):  # occasionally fan in
            self.spec.edges.append((self.draw(st.sampled_from(sources)), (node, port)))

    def scope(self, shape: tuple, sources: list) -> list:
        """Adds operators and loops at ``shape``; returns the output ports created there."""
        draw, spec = self.draw, self.spec
        sources = list(sources)
        for _ in range(draw(st.integers(1, 4))):
            can_loop = len(shape) < self.max_depth and self.loops_left > 0
            if can_loop and draw(st.integers(0, 2)) == 0:
                self.loops_left -= 1
                sources.extend(self.loop(shape, sources))
                continue
            inputs, outputs = draw(st.integers(1, 2)), draw(st.integers(1, 2))
            if draw(st.booleans()):
                summary = None  # the default: identity from every input to every output
            else:
                summary = [[draw(CELLS) for _ in range(outputs)] for _ in range(inputs)]
            n = spec.add("op", inputs, outputs, summary, shape)
            for port in range(inputs):
                if draw(st.integers(0, 9)):  # mostly connected
                    self.connect(sources, n, port)
            sources.extend((n, j) for j in range(outputs))
        return sources

    def loop(self, shape: tuple, sources: list) -> list:
        draw, spec = self.draw, self.spec
        cls = draw(st.sampled_from([Product, Product, Lex]))
        inner = (*shape, cls)
        inner_sources = []
        for _ in range(draw(st.integers(1, 2))):
            ingress = spec.add("ingress", 1, 1, [[[PathSummary.ingress(cls)]]], shape, inner)
            self.connect(sources, ingress, 0)
            inner_sources.append((ingress, 0))
        feedback = spec.add("feedback", 1, 1, [[[PathSummary.feedback(1)]]], inner)
        inner_sources.append((feedback, 0))
        inner_sources = self.scope(inner, inner_sources)
        if draw(st.booleans()):
            # close the loop from the most downstream output: longer cycles, nested loops on them
            spec.edges.append((inner_sources[-1], (feedback, 0)))
        else:
            self.connect(inner_sources, feedback, 0)
        exits = []
        for _ in range(draw(st.integers(1, 2))):
            egress = spec.add("egress", 1, 1, [[[PathSummary.egress()]]], inner, shape)
            self.connect(inner_sources, egress, 0)
            exits.append((egress, 0))
        return exits


@st.composite
def graphs(draw, max_depth=2, max_loops=3):
    gen = Generator(draw, max_depth, max_loops)
    spec = gen.spec
    inputs = [spec.add("input", 0, 1, None, ()) for _ in range(draw(st.integers(1, 2)))]
    sources = gen.scope((), [(n, 0) for n in inputs])
    for _ in range(draw(st.integers(1, 2))):
        sink = spec.add("sink", 1, 0, None, ())
        gen.connect(sources, sink, 0)
    return spec


@st.composite
def nested_graphs(draw):
    """Graphs that certainly contain a loop nested in a loop."""
    gen = Generator(draw, max_depth=2, max_loops=2)
    spec = gen.spec
    source = spec.add("input", 0, 1, None, ())
    outer_exits = gen.loop((), [(source, 0)])
    # ``loop`` may not have nested anything; nest one explicitly inside a fresh loop as well
    cls = draw(st.sampled_from([Product, Lex]))
    ing = spec.add("ingress", 1, 1, [[[PathSummary.ingress(cls)]]], (), (cls,))
    spec.edges.append(((source, 0), (ing, 0)))
    fb = spec.add("feedback", 1, 1, [[[PathSummary.feedback(1)]]], (cls,))
    inner_exits = gen.loop((cls,), [(ing, 0), (fb, 0)])
    body = spec.add("op", 2, 1, None, (cls,))
    spec.edges.append((draw(st.sampled_from(inner_exits)), (body, 0)))
    spec.edges.append(((fb, 0), (body, 1)))
    spec.edges.append(((body, 0), (fb, 0)))
    egress = spec.add("egress", 1, 1, [[[PathSummary.egress()]]], (cls,), ())
    spec.edges.append(((body, 0), (egress, 0)))
    sink = spec.add("sink", 2, 0, None, ())
    spec.edges.append(((egress, 0), (sink, 0)))
    spec.edges.append((draw(st.sampled_from(outer_exits)), (sink, 1)))
    return spec


@st.composite
def times(draw, shape, high=3):
    t = draw(st.integers(0, high))
    for cls in shape:
        t = cls(t, draw(st.integers(0, high)))
    return t


# --------------------------------------------------------------------------- the oracles


class Model:
    """A built graph together with everything the oracles need, derived from the Spec."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.reach = spec.builder().build()
        r = self.reach
        self.shape: dict[int, tuple] = {}
        self.targets: list[int] = []
        self.steps: dict[int, list[tuple[int, PathSummary]]] = {}
        for n, (_, inputs, outputs, _) in enumerate(spec.nodes):
            for i in range(inputs):
                loc = r.target(n, i)
                self.shape[loc] = spec.in_shape[n]
                self.targets.append(loc)
                self.steps[loc] = []
            for j in range(outputs):
                loc = r.source(n, j)
                self.shape[loc] = spec.out_shape[n]
                self.steps[loc] = []
        assert sorted(self.shape) == list(range(len(r.locations)))
        assert sorted(self.targets) == sorted(r.target_locations)
        for (sn, sp), (tn, tp) in spec.edges:
            self.steps[r.source(sn, sp)].append((r.target(tn, tp), IDENTITY))
        for n in range(len(spec.nodes)):
            for i, row in enumerate(spec.node_summary(n)):
                for j, cell in enumerate(row):
                    for s in cell:
                        self.steps[r.target(n, i)].append((r.source(n, j), s))
        self._cache: dict = {}

    def locations(self) -> list[int]:
        return sorted(self.shape)

    def paths_from(self, loc: int, t) -> dict[int, list]:
        """Minimal times reachable at every location from pointstamp ``(loc, t)`` (incl. itself)."""
        key = (loc, repr(t))
        if key in self._cache:
            return self._cache[key]
        best: dict[int, list] = {}
        queue = deque([(loc, t)])
        visited = 0
        while queue:
            here, time = queue.popleft()
            visited += 1
            assert visited < 50_000, "path search did not terminate"
            mins = best.setdefault(here, [])
            if any(less_equal(m, time) for m in mins):
                continue
            mins[:] = [m for m in mins if not less_equal(time, m)]
            mins.append(time)
            for nxt, s in self.steps[here]:
                queue.append((nxt, s.apply(time)))
        self._cache[key] = best
        return best

    def via_paths(self, active, target) -> list:
        implied = [m for loc, t in active for m in self.paths_from(loc, t).get(target, [])]
        return minimal(implied)

    def via_psi(self, active, target) -> list:
        implied = [s.apply(t) for loc, t in active for s in self.reach.summaries(loc, target)]
        return minimal(implied)


def minimal(elements) -> list:
    elements = list(dict.fromkeys(elements))
    return [t for t in elements if not any(e != t and less_equal(e, t) for e in elements)]


def key(elements) -> list[str]:
    return sorted(map(repr, elements))


@st.composite
def change_batches(draw, model: Model, max_batches=8):
    """Batches of ±1 pointstamp changes drawn from a small pool (so they collide and cancel)."""
    locs = model.locations()
    pool = []
    for _ in range(draw(st.integers(1, 6))):
        loc = draw(st.sampled_from(locs))
        pool.append((loc, draw(times(model.shape[loc]))))
    change = st.tuples(st.sampled_from(pool), st.sampled_from([1, 1, 1, -1, -1, 2, -2, 0]))
    batch = st.lists(change, min_size=1, max_size=5)
    return draw(st.lists(batch, min_size=1, max_size=max_batches))


# --------------------------------------------------------------------------- Ψ itself


def check_psi_against_paths(model: Model, data) -> None:
    """For random start pointstamps, Ψ gives exactly the minimal times path search finds."""
    locs = model.locations()
    for _ in range(4):
        l1 = data.draw(st.sampled_from(locs))
        t1 = data.draw(times(model.shape[l1]))
        found = model.paths_from(l1, t1)
        for l2 in locs:
            psi = model.reach.summaries(l1, l2)
            # Ψ is an antichain under the summary order
            for s in psi:
                for s2 in psi:
                    assert s == s2 or not s.less_equal(s2), (s, s2)
            assert (len(psi) > 0) == (l2 in found), (l1, l2)
            got = minimal(s.apply(t1) for s in psi)
            assert key(got) == key(found.get(l2, [])), (l1, t1, l2, list(psi))
        assert IDENTITY in list(model.reach.summaries(l1, l1))


@SETTINGS
@given(spec=graphs(), data=st.data())
def test_psi_matches_path_search(spec, data):
    check_psi_against_paths(Model(spec), data)


@settings(max_examples=30, deadline=None, database=None)
@given(spec=nested_graphs(), data=st.data())
def test_psi_matches_path_search_nested(spec, data):
    model = Model(spec)
    assert max(len(s) for s in model.shape.values()) == 2
    check_psi_against_paths(model, data)


# --------------------------------------------------------------------------- a + b: the Tracker


def run_tracker(model: Model, batches, strategy: str, data=None) -> None:
    unwatched: set[int] = set()
    if strategy == "psi-unwatched":
        strategy = "psi"
        unwatched = set(data.draw(st.sets(st.sampled_from(model.targets)), label="unwatched"))
    tracker = Tracker(model.reach, strategy, unwatched)
    assert type(tracker).__name__ == {"psi": "PsiTracker", "frontier": "FrontierTracker"}[strategy]
    counts: Counter = Counter()
    for batch in batches:
        before = {t: list(tracker.frontier(t).frontier) for t in model.targets}
        for (loc, t), delta in batch:
            tracker.update(loc, t, delta)
            counts[loc, t] += delta
        moved = tracker.propagate()
        active = [lt for lt, c in counts.items() if c > 0]

        # a. every frontier equals both oracles
        for target in model.targets:
            frontier = tracker.frontier(target).frontier
            assert len(frontier) == len(set(frontier))
            expected = key(model.via_paths(active, target))
            assert key(model.via_psi(active, target)) == expected
            assert key(frontier) == expected, (target, active)

        # b. propagate reports exactly the watched targets whose frontier changed
        changed = {
            t
            for t in model.targets
            if t not in unwatched and key(before[t]) != key(tracker.frontier(t).frontier)
        }
        assert len(moved) == len(set(moved))
        assert set(moved) == changed

        assert tracker.is_idle() == (not active)
        assert tracker.active == len(active)

        # c. the holders: the active pointstamps no other active one reaches (path search)
        holders = [
            (loc, t)
            for loc, t in active
            if not any(
                less_equal(m, t)
                for other in active
                if other != (loc, t)
                for m in model.paths_from(*other).get(loc, [])
            )
        ]
        got = tracker.holders()
        expected_holders = [(loc, t, counts[loc, t]) for loc, t in holders]
        assert sorted(map(repr, got)) == sorted(map(repr, expected_holders))
        assert bool(got) == bool(active)  # no cycle of pointstamps holding each other
        assert sorted(map(repr, tracker.pointstamps())) == sorted(
            repr((loc, t, c)) for (loc, t), c in counts.items() if c
        )
    assert tracker.propagate() == []  # nothing pending


@TRACKERS
@SETTINGS
@given(spec=graphs(), data=st.data())
def test_tracker_frontiers_match_oracles(strategy, spec, data):
    model = Model(spec)
    run_tracker(model, data.draw(change_batches(model)), strategy, data)


@TRACKERS
@settings(max_examples=25, deadline=None, database=None)
@given(spec=nested_graphs(), data=st.data())
def test_tracker_frontiers_match_oracles_nested(strategy, spec, data):
    model = Model(spec)
    run_tracker(model, data.draw(change_batches(model)), strategy, data)


@st.composite
def move_batches(draw, model: Model, max_batches=8):
    """Batches that move pointstamps from one location to another at the same time, as
    a worker's batches do (a capability passed downstream, a message consumed while its
    operator holds the time), with the +1 and -1 of a move in one batch. Tokens are placed,
    moved (several at once, sometimes back and forth) and retired."""
    locs = model.locations()
    tokens: list[tuple[int, Any]] = []
    batches = []
    for _ in range(draw(st.integers(1, max_batches))):
        batch = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["place", "move", "move", "move", "retire"]))
            if kind == "place" or not tokens:
                loc = draw(st.sampled_from(locs))
                token = (loc, draw(times(model.shape[loc])))
                tokens.append(token)
                batch.append((token, 1))
            elif kind == "move":
                i = draw(st.integers(0, len(tokens) - 1))
                a, t = tokens[i]
                b = draw(st.sampled_from([x for x in locs if model.shape[x] == model.shape[a]]))
                tokens[i] = (b, t)
                batch += [((b, t), 1), ((a, t), -1)]  # the new occurrence first
            else:
                batch.append((tokens.pop(draw(st.integers(0, len(tokens) - 1))), -1))
        batches.append(batch)
    return batches


@TRACKERS
@SETTINGS
@given(spec=st.one_of(graphs(max_loops=2), nested_graphs()), data=st.data())
def test_tracker_frontiers_match_oracles_when_pointstamps_move(strategy, spec, data):
    model = Model(spec)
    run_tracker(model, data.draw(move_batches(model)), strategy, data)


@STRATEGIES
def test_tracker_keeps_the_class_of_times_equal_as_tuples(strategy):
    """A Product loop and a Lex loop side by side: Product(1, 0) == Lex(1, 0) as tuples,
    but each location's implied times keep their own class, also when crossings of both
    classes at equal times arrive in one batch (a tracker that grouped crossings by time
    alone would give one class to both)."""
    g = GraphBuilder()
    src = g.add_node("input", 0, 1)
    into_p = g.add_node("ingress_p", 1, 1, [[[PathSummary.ingress(Product)]]])
    into_l = g.add_node("ingress_l", 1, 1, [[[PathSummary.ingress(Lex)]]])
    sink_p, sink_l = g.add_node("sink_p", 1, 0), g.add_node("sink_l", 1, 0)
    g.add_edge((src, 0), (into_p, 0))
    g.add_edge((src, 0), (into_l, 0))
    g.add_edge((into_p, 0), (sink_p, 0))
    g.add_edge((into_l, 0), (sink_l, 0))
    r = g.build()
    out_p, out_l, at_p, at_l = (
        r.source(into_p, 0),
        r.source(into_l, 0),
        *(r.target(n, 0) for n in (sink_p, sink_l)),
    )
    tracker = Tracker(r, strategy)
    # unpaired crossings (three placements) at equal times
    tracker.update_iter([((out_p, Product(1, 0)), 1), ((out_l, Lex(1, 0)), 1)])
    tracker.update(r.source(src, 0), 5, 1)
    tracker.propagate()
    assert [type(t) for t in tracker.frontier(at_p).frontier] == [Product]
    assert [type(t) for t in tracker.frontier(at_l).frontier] == [Lex]
    # a retirement and a placement at equal times of different classes, Product first
    tracker.update_iter([((out_p, Product(1, 0)), -1), ((out_l, Lex(1, 1)), 1)])
    tracker.update(out_l, Lex(1, 0), -1)
    tracker.update(r.source(src, 0), 5, -1)
    tracker.propagate()
    tracker.update_iter([((out_p, Product(2, 0)), 1), ((out_l, Lex(1, 1)), -1)])
    tracker.propagate()
    tracker.update_iter([((out_p, Product(2, 0)), -1), ((out_l, Lex(2, 0)), 1)])
    assert tracker.propagate()
    assert tracker.frontier(at_p).frontier == []
    assert [(type(t), t) for t in tracker.frontier(at_l).frontier] == [(Lex, Lex(2, 0))]
    # the same among three crossings (grouped by time)
    tracker.update(out_p, Product(3, 0), 1)
    tracker.propagate()
    tracker.update_iter(
        [((out_p, Product(3, 0)), -1), ((out_l, Lex(3, 0)), 1), ((out_l, Lex(2, 0)), -1)]
    )
    assert tracker.propagate()
    assert tracker.frontier(at_p).frontier == []
    assert [(type(t), t) for t in tracker.frontier(at_l).frontier] == [(Lex, Lex(3, 0))]


@STRATEGIES
@SETTINGS
@given(spec=graphs(max_loops=1), data=st.data())
def test_tracker_balanced_batches_return_to_idle(strategy, spec, data):
    """Adding and later retracting every change leaves every frontier empty again."""
    model = Model(spec)
    batches = data.draw(change_batches(model, max_batches=4))
    tracker = Tracker(model.reach, strategy)
    for batch in batches:
        tracker.update_iter(((lt, d) for lt, d in batch))
        tracker.propagate()
    for batch in batches:
        tracker.update_iter(((lt, -d) for lt, d in batch))
        tracker.propagate()
    assert tracker.is_idle()
    assert tracker.pointstamps() == []
    for target in model.targets:
        assert tracker.frontier(target).frontier == []


@STRATEGIES
def test_tracker_zero_delta_is_a_no_op(strategy):
    g = GraphBuilder()
    a = g.add_node("input", 0, 1)
    b = g.add_node("sink", 1, 0)
    g.add_edge((a, 0), (b, 0))
    r = g.build()
    tracker = Tracker(r, strategy)
    tracker.update(r.source(a, 0), 3, 0)
    assert tracker.propagate() == []
    assert tracker.pointstamps() == []
    assert tracker.is_idle()


@STRATEGIES
def test_tracker_documented_loop_example(strategy):
    """input -> ingress -> op <-> feedback, op -> egress -> sink."""
    spec = Spec()
    inp = spec.add("input", 0, 1, None, ())
    ing = spec.add("ingress", 1, 1, [[[PathSummary.ingress()]]], (), (Product,))
    op = spec.add("op", 2, 1, None, (Product,))
    fb = spec.add("feedback", 1, 1, [[[PathSummary.feedback(1)]]], (Product,))
    eg = spec.add("egress", 1, 1, [[[PathSummary.egress()]]], (Product,), ())
    sink = spec.add("sink", 1, 0, None, ())
    spec.edges += [
        ((inp, 0), (ing, 0)),
        ((ing, 0), (op, 0)),
        ((fb, 0), (op, 1)),
        ((op, 0), (fb, 0)),
        ((op, 0), (eg, 0)),
        ((eg, 0), (sink, 0)),
    ]
    model = Model(spec)
    r = model.reach
    tracker = Tracker(r, strategy)
    # a message in flight to the op at (epoch 2, iteration 3)
    tracker.update(r.target(op, 1), Product(2, 3), 1)
    tracker.propagate()
    assert tracker.frontier(r.target(op, 1)).frontier == [Product(2, 3)]
    assert tracker.frontier(r.target(op, 0)).frontier == []
    assert tracker.frontier(r.target(fb, 0)).frontier == [Product(2, 3)]
    assert tracker.frontier(r.target(eg, 0)).frontier == [Product(2, 3)]
    assert tracker.frontier(r.target(sink, 0)).frontier == [2]
    # the op's inputs also see the time coming around the loop, which is later
    assert r.could_result_in(Product(2, 3), r.target(op, 1), Product(2, 4), r.target(op, 1))
    assert not r.could_result_in(Product(2, 3), r.target(op, 1), Product(2, 2), r.target(op, 1))
    assert not r.could_result_in(Product(2, 3), r.target(op, 1), 1, r.target(sink, 0))
    # the input's capability at epoch 1 implies iteration 0 everywhere in the loop
    tracker.update(r.source(inp, 0), 1, 1)
    moved = tracker.propagate()
    assert set(moved) == {
        r.target(t, p) for t, p in [(ing, 0), (op, 0), (op, 1), (fb, 0), (eg, 0), (sink, 0)]
    }
    assert tracker.frontier(r.target(op, 1)).frontier == [Product(1, 1)]
    assert tracker.frontier(r.target(op, 0)).frontier == [Product(1, 0)]
    assert tracker.frontier(r.target(sink, 0)).frontier == [1]


# --------------------------------------------------------------------------- c: cycles


def test_cycle_without_feedback_names_its_operators():
    g = GraphBuilder()
    src = g.add_node("source", 0, 1)
    a = g.add_node("alpha", 2, 1)
    b = g.add_node("beta", 1, 1)
    c = g.add_node("gamma", 1, 1)
    g.add_edge((src, 0), (a, 0))
    g.add_edge((a, 0), (b, 0))
    g.add_edge((b, 0), (c, 0))
    g.add_edge((c, 0), (a, 1))
    with pytest.raises(CycleError) as info:
        g.build()
    message = str(info.value)
    for name in ("alpha", "beta", "gamma"):
        assert repr(name) in message
    assert "'source'" not in message
    assert "feedback" in message


def test_self_loop_without_feedback():
    g = GraphBuilder()
    a = g.add_node("lonely", 1, 1)
    g.add_edge((a, 0), (a, 0))
    with pytest.raises(CycleError, match="lonely"):
        g.build()


def test_cycle_through_feedback_builds():
    g = GraphBuilder()
    src = g.add_node("source", 0, 1)
    ing = g.add_node("ingress", 1, 1, [[[PathSummary.ingress()]]])
    a = g.add_node("alpha", 2, 1)
    b = g.add_node("beta", 1, 1)
    fb = g.add_node("feedback", 1, 1, [[[PathSummary.feedback(1)]]])
    g.add_edge((src, 0), (ing, 0))
    g.add_edge((ing, 0), (a, 0))
    g.add_edge((a, 0), (b, 0))
    g.add_edge((b, 0), (fb, 0))
    g.add_edge((fb, 0), (a, 1))
    r = g.build()
    around = r.summaries(r.target(a, 1), r.target(a, 1))
    assert list(around) == [PathSummary.identity()]
    assert list(r.summaries(r.source(b, 0), r.target(a, 1))) == [PathSummary.feedback(1)]
    assert list(r.summaries(r.source(src, 0), r.target(a, 1))) == [
        PathSummary.ingress().then(PathSummary.feedback(1))
    ]
    # an operator whose own summary advances also closes a cycle legally
    g = GraphBuilder()
    d = g.add_node("delay", 1, 1, [[[PathSummary.feedback(2)]]])
    g.add_edge((d, 0), (d, 0))
    r = g.build()
    assert list(r.summaries(r.source(d, 0), r.source(d, 0))) == [PathSummary.identity()]
    assert list(r.summaries(r.target(d, 0), r.source(d, 0))) == [PathSummary.feedback(2)]


@pytest.mark.parametrize("where", ["root", "loop"])
@SETTINGS
@given(spec=graphs(max_loops=2), data=st.data())
def test_adding_a_back_edge_without_feedback_raises(where, spec, data):
    """Closing any cycle among plain operators (no feedback on it) is rejected."""
    model = Model(spec)
    ops = [n for n, (name, i, o, s) in enumerate(spec.nodes) if name.startswith("op") and s is None]
    if where == "loop":
        ops = [n for n in ops if spec.in_shape[n]]
    else:
        ops = [n for n in ops if not spec.in_shape[n]]
    r = model.reach
    # pick two identity operators in the same scope where the second is reachable from the
    # first without advancing time; a back edge from the second to the first is a bad cycle
    candidates = [
        (x, y)
        for x in ops
        for y in ops
        if spec.in_shape[x] == spec.in_shape[y]
        and PathSummary.identity() in list(r.summaries(r.target(x, 0), r.source(y, 0)))
    ]
    if not candidates:
        return
    x, y = data.draw(st.sampled_from(candidates))
    spec.edges.append(((y, 0), (x, 0)))
    with pytest.raises(CycleError) as info:
        spec.builder().build()
    assert spec.nodes[x][0] in str(info.value) or "does not strictly advance" in str(info.value)


def test_loop_exit_fed_back_into_the_loop_without_outer_feedback_raises():
    """ingress -> body(+inner feedback) -> egress -> ingress: the inner feedback is no help."""
    g = GraphBuilder()
    src = g.add_node("source", 0, 1)
    merge = g.add_node("merge", 2, 1)
    ing = g.add_node("ingress", 1, 1, [[[PathSummary.ingress()]]])
    body = g.add_node("body", 2, 1)
    fb = g.add_node("feedback", 1, 1, [[[PathSummary.feedback(1)]]])
    eg = g.add_node("egress", 1, 1, [[[PathSummary.egress()]]])
    g.add_edge((src, 0), (merge, 0))
    g.add_edge((merge, 0), (ing, 0))
    g.add_edge((ing, 0), (body, 0))
    g.add_edge((body, 0), (fb, 0))
    g.add_edge((fb, 0), (body, 1))
    g.add_edge((body, 0), (eg, 0))
    g.add_edge((eg, 0), (merge, 1))
    with pytest.raises(CycleError):
        g.build()
    # with a feedback vertex on the outer cycle it is fine
    g.edges.pop()
    outer_fb = g.add_node("outer feedback", 1, 1, [[[PathSummary.feedback(1)]]])
    g.add_edge((eg, 0), (outer_fb, 0))
    g.add_edge((outer_fb, 0), (merge, 1))
    r = g.build()
    assert list(r.summaries(r.target(merge, 1), r.target(merge, 1))) == [PathSummary.identity()]
    assert r.could_result_in(0, r.target(merge, 0), 1, r.target(merge, 1))
    assert not r.could_result_in(0, r.target(merge, 0), 0, r.target(merge, 1))


def test_cycle_whose_only_feedback_is_inside_a_loop_it_leaves_raises():
    """merge -> ingress -> feedback -> egress -> merge: every step-cycle has a feedback, yet
    the cycle's summary (ingress, +1, egress) is the identity. Only the Ψ check can see it."""
    g = GraphBuilder()
    src = g.add_node("source", 0, 1)
    merge = g.add_node("merge", 2, 1)
    ing = g.add_node("ingress", 1, 1, [[[PathSummary.ingress()]]])
    fb = g.add_node("feedback", 1, 1, [[[PathSummary.feedback(1)]]])
    eg = g.add_node("egress", 1, 1, [[[PathSummary.egress()]]])
    g.add_edge((src, 0), (merge, 0))
    g.add_edge((merge, 0), (ing, 0))
    g.add_edge((ing, 0), (fb, 0))
    g.add_edge((fb, 0), (eg, 0))
    g.add_edge((eg, 0), (merge, 1))
    with pytest.raises(CycleError, match="does not strictly advance"):
        g.build()
    # the same inside the loop: feedback -> egress -> ingress back to the feedback
    g = GraphBuilder()
    fb = g.add_node("feedback", 1, 1, [[[PathSummary.feedback(1)]]])
    eg = g.add_node("egress", 1, 1, [[[PathSummary.egress()]]])
    ing = g.add_node("ingress", 1, 1, [[[PathSummary.ingress()]]])
    g.add_edge((fb, 0), (eg, 0))
    g.add_edge((eg, 0), (ing, 0))
    g.add_edge((ing, 0), (fb, 0))
    with pytest.raises(CycleError):
        g.build()


# --------------------------------------------------------------------------- d: could_result_in


@SETTINGS
@given(spec=st.one_of(graphs(), nested_graphs()), data=st.data())
def test_could_result_in_matches_path_search(spec, data):
    model = Model(spec)
    locs = model.locations()
    for _ in range(6):
        l1, l2 = data.draw(st.sampled_from(locs)), data.draw(st.sampled_from(locs))
        t1 = data.draw(times(model.shape[l1]))
        found = model.paths_from(l1, t1).get(l2, [])
        # probe with random times and with the reachable times and their neighbours
        probes = [data.draw(times(model.shape[l2], high=5)) for _ in range(3)]
        probes += found
        for t2 in probes:
            expected = any(less_equal(m, t2) for m in found)
            assert model.reach.could_result_in(t1, l1, t2, l2) == expected, (l1, t1, l2, t2)
        # a pointstamp could always result in itself
        assert model.reach.could_result_in(t1, l1, t1, l1)


# --------------------------------------------------------------------------- e: ProgressActor


@STRATEGIES
@SETTINGS
@given(spec=graphs(max_loops=2), data=st.data())
def test_progress_actor_applies_batches_and_reports_moves(strategy, spec, data):
    model = Model(spec)
    batches = data.draw(change_batches(model))
    initial, *rest = batches
    calls: list[list[int]] = []
    actor = ProgressActor(strategy=strategy)
    actor.register(7, model.reach, initial, calls.append)
    assert calls == []  # registration reports nothing
    with pytest.raises(ValueError):
        actor.register(7, model.reach, [], calls.append)

    reference = Tracker(model.reach, "psi" if strategy == "frontier" else "frontier")
    reference.update_iter(initial)
    reference.propagate()
    counts: Counter = Counter()
    for lt, d in initial:
        counts[lt] += d
    tracker = actor.tracker(7)
    assert type(tracker) is not type(reference)  # the other strategy is the reference
    for n, batch in enumerate(rest, start=1):
        before = {t: key(tracker.frontier(t).frontier) for t in model.targets}
        actor.submit(7, batch)
        assert actor.batches_applied == n
        for lt, d in batch:
            counts[lt] += d
        active = [lt for lt, c in counts.items() if c > 0]
        reference.update_iter(batch)
        reference.propagate()
        changed = {t for t in model.targets if before[t] != key(tracker.frontier(t).frontier)}
        if changed or not active:
            assert len(calls) == 1
            assert sorted(calls.pop()) == sorted(changed)
        else:
            assert calls == []
        for t in model.targets:
            assert key(tracker.frontier(t).frontier) == key(reference.frontier(t).frontier)
            assert key(tracker.frontier(t).frontier) == key(model.via_paths(active, t))
    actor.unregister(7)
    with pytest.raises(KeyError):
        actor.tracker(7)
    actor.register(7, model.reach, [], calls.append)  # the id is free again


@STRATEGIES
def test_progress_actor_batch_is_applied_whole(strategy):
    """A batch that moves a capability forward never exposes an empty frontier."""
    g = GraphBuilder()
    a = g.add_node("in", 0, 1)
    b = g.add_node("out", 1, 0)
    dangling = g.add_node("dangling", 0, 1)  # its output reaches no input
    g.add_edge((a, 0), (b, 0))
    r = g.build()
    src, elsewhere, target = r.source(a, 0), r.source(dangling, 0), r.target(b, 0)
    seen: list[list[int]] = []
    actor = ProgressActor(strategy=strategy)
    actor.register(0, r, [((src, 0), 1)], seen.append)
    frontier = actor.tracker(0).frontier(target)
    assert frontier.frontier == [0]
    # retract first, then add: applied whole, so the frontier goes straight from 0 to 1
    actor.submit(0, [((src, 0), -1), ((src, 1), 1)])
    assert seen == [[target]]
    assert frontier.frontier == [1]
    # a batch that changes no frontier, with work still active: the listener is not called
    actor.submit(0, [((src, 2), 1)])
    actor.submit(0, [((src, 2), -1)])
    assert seen == [[target]]
    # the last capability on the path goes; one elsewhere stays
    actor.submit(0, [((src, 1), -1), ((elsewhere, 5), 1)])
    assert seen == [[target], [target]]
    assert frontier.frontier == []
    assert not actor.tracker(0).is_idle()
    # becoming idle is reported, even though no frontier moved
    actor.submit(0, [((elsewhere, 5), -1)])
    assert seen == [[target], [target], []]
    assert actor.tracker(0).is_idle()
    assert actor.batches_applied == 5
