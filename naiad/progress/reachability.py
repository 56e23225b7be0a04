"""Could-result-in on the logical graph, and frontiers computed from pointstamp counts.

Two classes with two lifetimes, as in timely's ``reachability.rs``:

* :class:`GraphBuilder` is construction time. It holds the logical graph (nodes with input
  and output ports, each node's internal path summaries, edges from output ports to input
  ports) and :meth:`GraphBuilder.build` gives a :class:`Reachability`: the antichain of
  minimal path summaries from a location to every location it can reach (Naiad §2.3's
  ``Ψ[l1, l2]``), computed up front only inside the graph's cycles (in time linear in the rest
  of the graph), for the rest on demand; it rejects cycles that do not strictly advance time
  (invariant 5).
* :class:`Tracker` is run time. It keeps an occurrence count per pointstamp
  ``(location, time)`` and, for every input port (target), a :class:`MutableAntichain` whose
  frontier is the minimal times implied there by every *active* pointstamp (count > 0)
  through ``Ψ``: the port's input frontier, the times at which messages can still arrive.
  Two strategies keep it: :class:`PsiTracker` fans every change out through ``Ψ`` (small
  graphs), :class:`FrontierTracker` propagates frontier changes from input to input, so
  that the work per epoch grows with the graph, not with its square (big graphs).

Locations are small integers. A *source* is an output port, where capabilities live; a
*target* is an input port, where messages in flight are counted (timely's accounting).
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from naiad.progress.antichain import Antichain, MutableAntichain, _minimal, le
from naiad.progress.summary import PathSummary


class CycleError(ValueError):
    """A cycle in the dataflow graph does not pass through a feedback vertex."""


@dataclass
class _Node:
    name: str
    inputs: int
    outputs: int
    summary: list[list[list[PathSummary]]]


@dataclass
class GraphBuilder:
    """The logical graph of one dataflow, under construction.

    >>> g = GraphBuilder()
    >>> a = g.add_node("input", inputs=0, outputs=1)
    >>> b = g.add_node("map", inputs=1, outputs=1)
    >>> g.add_edge((a, 0), (b, 0))
    >>> r = g.build()
    >>> r.summaries(r.source(a, 0), r.target(b, 0))
    Antichain([PathSummary.identity()])
    """

    nodes: list[_Node] = field(default_factory=list)
    edges: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)

    def add_node(
        self,
        name: str,
        inputs: int,
        outputs: int,
        summary: Sequence[Sequence[Sequence[PathSummary]]] | None = None,
    ) -> int:
        """Adds an operator; ``summary[i][j]`` lists the summaries from input i to output j.

        Without ``summary`` every input connects to every output with the identity.
        """
        if summary is None:
            rows = [[[PathSummary.identity()] for _ in range(outputs)] for _ in range(inputs)]
        else:
            rows = [[list(cell) for cell in row] for row in summary]
            if len(rows) != inputs or any(len(row) != outputs for row in rows):
                raise ValueError(f"summary of {name!r} must be {inputs} x {outputs}")
        self.nodes.append(_Node(name, inputs, outputs, rows))
        return len(self.nodes) - 1

    def add_edge(self, source: tuple[int, int], target: tuple[int, int]) -> None:
        """Connects output port ``source = (node, port)`` to input ``target = (node, port)``."""
        (sn, sp), (tn, tp) = source, target
        if not (0 <= sp < self.nodes[sn].outputs):
            raise ValueError(f"{self.nodes[sn].name!r} has no output port {sp}")
        if not (0 <= tp < self.nodes[tn].inputs):
            raise ValueError(f"{self.nodes[tn].name!r} has no input port {tp}")
        self.edges.append((source, target))

    def build(self) -> Reachability:
        """Computes the minimal summaries between all locations; rejects bad cycles."""
        return Reachability(self)


class Reachability:
    """The frozen result of :meth:`GraphBuilder.build`: locations, one-step successors, the
    strongly connected components, and ``Ψ``.

    Building costs time linear in the graph plus ``Ψ`` *inside* each component (paths between
    two locations of a component never leave it), which is what the cycle check and
    :class:`FrontierTracker` need. ``Ψ`` from or to any one location is computed on demand
    (:meth:`summaries`, :meth:`reaching`), never the whole table: on a chain of ``M``
    operators it has ``O(M**2)`` entries (:class:`PsiTracker` asks for ``Ψ`` to the targets
    it watches only).

    >>> g = GraphBuilder()
    >>> a = g.add_node("in", 0, 1); m = g.add_node("map", 1, 1); b = g.add_node("out", 1, 0)
    >>> g.add_edge((a, 0), (m, 0)); g.add_edge((m, 0), (b, 0))
    >>> r = g.build()
    >>> [r.describe(loc) for loc, _ in r.reaching(r.target(b, 0))]
    ["output 0 of 'in'", "input 0 of 'map'", "output 0 of 'map'", "input 0 of 'out'"]
    """

    def __init__(self, builder: GraphBuilder) -> None:
        self.node_names = [n.name for n in builder.nodes]
        self._sources: list[list[int]] = []
        self._targets: list[list[int]] = []
        self.locations: list[tuple[int, int, bool]] = []  # (node, port, is_source)
        for index, node in enumerate(builder.nodes):
            self._targets.append([self._new_location(index, p, False) for p in range(node.inputs)])
            self._sources.append([self._new_location(index, p, True) for p in range(node.outputs)])
        self.is_target = [not is_source for (_, _, is_source) in self.locations]
        self.target_locations = [loc for loc, t in enumerate(self.is_target) if t]

        # One-step successors: source -> target along edges (identity), and
        # target -> source through the node's internal summaries.
        successors: list[list[tuple[int, PathSummary]]] = [[] for _ in self.locations]
        for (sn, sp), (tn, tp) in builder.edges:
            successors[self._sources[sn][sp]].append((self._targets[tn][tp], PathSummary()))
        for index, node in enumerate(builder.nodes):
            for i, row in enumerate(node.summary):
                for j, cell in enumerate(row):
                    for s in cell:
                        successors[self._targets[index][i]].append((self._sources[index][j], s))
        self._check_cycles(successors)
        self.steps = successors
        # The strongly connected components, topologically ordered, and each location's.
        self.components = _components(successors)
        self.component = [0] * len(self.locations)
        for index, members in enumerate(self.components):
            for loc in members:
                self.component[loc] = index

        # Ψ inside the components with a cycle, from each location in turn (paths of length
        # >= 1 first, for the check, then the identity); a cycle never leaves its component.
        inside = [
            [(nxt, s) for nxt, s in steps if self.component[nxt] == self.component[loc]]
            for loc, steps in enumerate(successors)
        ]
        self._within: dict[int, dict[int, Antichain]] = {}
        for start in range(len(self.locations)):
            if len(self.components[self.component[start]]) == 1:
                continue
            reached = _propagate(start, inside, PathSummary.then)
            for summary in reached.get(start, Antichain()):
                if not summary.advances:
                    raise CycleError(
                        f"a cycle through {self.describe(start)} does not strictly advance "
                        f"time (summary {summary!r}); every cycle needs a feedback vertex"
                    )
            reached.setdefault(start, Antichain()).insert(PathSummary())
            self._within[start] = reached
        self._psi: dict[int, dict[int, Antichain]] = {}  # Ψ from a location, once asked for

    def _new_location(self, node: int, port: int, is_source: bool) -> int:
        self.locations.append((node, port, is_source))
        return len(self.locations) - 1

    def _check_cycles(self, successors: list[list[tuple[int, PathSummary]]]) -> None:
        """Finds a cycle all of whose steps leave time unchanged, and names its operators."""
        # (the steps kept once per location: a node with d of them is on the stack d times)
        still = [[n for n, s in steps if not s.advances] for steps in successors]
        state = [0] * len(self.locations)  # 0 new, 1 on the stack, 2 done
        for root in range(len(self.locations)):
            if state[root]:
                continue
            stack: list[tuple[int, int]] = [(root, 0)]
            path: list[int] = [root]
            state[root] = 1
            while stack:
                loc, i = stack[-1]
                steps = still[loc]
                if i < len(steps):
                    stack[-1] = (loc, i + 1)
                    nxt = steps[i]
                    if state[nxt] == 1:
                        cycle = path[path.index(nxt) :]
                        names: list[str] = []
                        for loc2 in cycle:
                            name = self.node_names[self.locations[loc2][0]]
                            if not names or names[-1] != name:
                                names.append(name)
                        raise CycleError(
                            "the dataflow has a cycle without a feedback vertex: "
                            + " -> ".join(repr(n) for n in [*names, names[0]])
                            + "; close loops with scope.feedback() inside a loop context"
                        )
                    if state[nxt] == 0:
                        state[nxt] = 1
                        stack.append((nxt, 0))
                        path.append(nxt)
                else:
                    state[loc] = 2
                    stack.pop()
                    path.pop()

    def source(self, node: int, port: int) -> int:
        """The location id of output port ``port`` of ``node``."""
        return self._sources[node][port]

    def target(self, node: int, port: int) -> int:
        """The location id of input port ``port`` of ``node``."""
        return self._targets[node][port]

    def summaries(self, l1: int, l2: int) -> Antichain:
        """The minimal summaries of paths from ``l1`` to ``l2`` (empty if unreachable)."""
        return self._psi_from(l1).get(l2, Antichain())

    def could_result_in(self, t1: Any, l1: int, t2: Any, l2: int) -> bool:
        """Whether pointstamp ``(t1, l1)`` could result in ``(t2, l2)`` (Naiad §2.3)."""
        return any(le(s.apply(t1), t2) for s in self.summaries(l1, l2))

    def within(self, loc: int) -> dict[int, Antichain]:
        """``Ψ`` from ``loc`` to the locations of its component (itself included), for a
        location on a cycle; empty for one off every cycle."""
        return self._within.get(loc, {})

    def reaching(self, loc: int) -> list[tuple[int, tuple[PathSummary, ...]]]:
        """The locations that can reach ``loc`` (itself included, by the identity) in
        location order, each with its minimal summaries to ``loc``; computed on each call,
        backwards from ``loc`` (a summary is monotone in the path before it as well)."""
        reached = _propagate(loc, self._predecessors, lambda path, step: step.then(path))
        reached.setdefault(loc, Antichain()).insert(PathSummary())
        return [(other, tuple(reached[other])) for other in sorted(reached)]

    @cached_property
    def _predecessors(self) -> list[list[tuple[int, PathSummary]]]:
        before: list[list[tuple[int, PathSummary]]] = [[] for _ in self.locations]
        for loc, steps in enumerate(self.steps):
            for nxt, s in steps:
                before[nxt].append((loc, s))
        return before

    def _psi_from(self, start: int) -> dict[int, Antichain]:
        psi = self._psi.get(start)
        if psi is None:
            reached = defaultdict(Antichain, _propagate(start, self.steps, PathSummary.then))
            reached[start].insert(PathSummary())
            psi = self._psi[start] = dict(reached)
        return psi

    def describe(self, loc: int) -> str:
        node, port, is_source = self.locations[loc]
        kind = "output" if is_source else "input"
        return f"{kind} {port} of {self.node_names[node]!r}"


FRONTIER_TRACKING_ABOVE = 8.0
"""The mean number of targets off every cycle that a location reaches (other than itself)
above which :class:`Tracker` propagates frontier changes (:class:`FrontierTracker`) rather
than fanning every change out through ``Ψ`` (:class:`PsiTracker`). See :class:`Tracker`
for the measurements behind the value."""


def acyclic_fanout(
    reachability: Reachability, above: float | None = None, unwatched: Iterable[int] = ()
) -> float:
    """The mean, over locations, of the targets off every cycle each one reaches, itself
    excluded: the part of ``Ψ``'s fan-out that propagating frontier changes may skip (a target
    on a cycle gets every change through its component's part of ``Ψ`` in both strategies).
    ``unwatched`` targets do not count: ``Ψ`` skips them (see :class:`PsiTracker`).

    Counted without ``Ψ``, by one pass over the components from the last to the first, each
    one's set of reached targets the union of its successors'. With ``above``, counting stops
    once the mean is sure to exceed it (the count only grows) and returns the mean so far: on
    a long chain the pass then stops after ``O(sqrt(M))`` operators, not ``O(M**2)`` set
    entries.

    >>> g = GraphBuilder()
    >>> a = g.add_node("in", 0, 1); m = g.add_node("map", 1, 1); b = g.add_node("out", 1, 0)
    >>> g.add_edge((a, 0), (m, 0)); g.add_edge((m, 0), (b, 0))
    >>> acyclic_fanout(g.build())  # in: 2 targets, map's input and output: 1 each, out: 0
    1.0
    >>> acyclic_fanout(g.build(), above=0.25)  # stops after out, map's output and input
    0.5
    >>> r = g.build(); acyclic_fanout(r, unwatched=[r.target(m, 0)])  # in: out only, map: 1
    0.75
    """
    r = reachability
    skip = set(unwatched)
    if not r.locations:
        return 0.0
    limit = math.inf if above is None else above * len(r.locations)
    total = 0
    reached: list[set[int]] = [set() for _ in r.components]  # per component, what it reaches
    for c in reversed(range(len(r.components))):
        members = r.components[c]
        found = reached[c]
        for loc in members:
            for nxt, _ in r.steps[loc]:
                if r.component[nxt] != c:
                    found |= reached[r.component[nxt]]
        total += len(found) * len(members)
        if len(members) == 1 and r.is_target[members[0]] and members[0] not in skip:
            found.add(members[0])  # for those upstream; the target itself does not count
        if total > limit:
            break
    return total / len(r.locations)


class Tracker:
    """Pointstamp occurrence counts and the input frontier they imply at every target.

    Two strategies keep the frontiers; ``Tracker(reachability)`` picks one by the graph:

    * :class:`PsiTracker` fans every change of a pointstamp's activity out through ``Ψ`` to
      every target its location reaches. Cheap per change, but a chain of ``M`` operators
      changes ``O(M)`` pointstamps per epoch, each reaching ``O(M)`` targets.
    * :class:`FrontierTracker` propagates frontier changes from input to input, as timely's
      ``reachability.rs`` does, so a change stops where it moves no frontier: ``O(M)`` per
      epoch on that chain, for a fixed cost per :meth:`propagate` that small graphs notice.

    The choice is by :func:`acyclic_fanout`: :class:`FrontierTracker` above
    :data:`FRONTIER_TRACKING_ABOVE`. Measured by replaying the progress batches of real runs
    into both (tracker time per batch, 5 alternated rounds): on a chain of ``M`` maps (acyclic
    fan-out ``(M + 1) / 2``) the two cost the same at ``M = 2``, frontiers 12% less at
    ``M = 4``, 20% at 16, 27% at 64 (24.5 against 33.6 us); the coordination benchmark's loop
    (fan-out 0) costs 37% more with frontiers (8.2 against 6.0 us). Incremental WCC (6.3 with
    its view) costs the same in replay, but its benchmark (``wcc-incremental --quick``, 4
    rounds alternated) was 1-2% slower in median and 4% in p99 latency with frontiers: the
    threshold keeps it, the coordination loop and every chain of up to 15 maps on
    ``Ψ``. ``strategy="psi"`` or ``"frontier"`` forces one. (Those measurements predate
    unwatched targets: :class:`PsiTracker` now skips the inputs of stateless built-ins, and
    the fan-out counts only the others, so a chain of maps stays on ``Ψ`` at any length,
    costing it ``O(1)`` per change; a chain of operators that watch their frontiers, such as
    probes, is what goes over.)

    >>> g = GraphBuilder()
    >>> src = g.add_node("input", 0, 1); sink = g.add_node("sink", 1, 0)
    >>> g.add_edge((src, 0), (sink, 0))
    >>> r = g.build(); tr = Tracker(r)
    >>> tr.update(r.source(src, 0), 0, +1)           # the input holds a capability at 0
    >>> tr.propagate() == [r.target(sink, 0)]
    True
    >>> tr.frontier(r.target(sink, 0)).frontier
    [0]
    >>> tr.update(r.source(src, 0), 1, +1); tr.update(r.source(src, 0), 0, -1)
    >>> _ = tr.propagate(); tr.frontier(r.target(sink, 0)).frontier
    [1]
    >>> type(tr).__name__, type(Tracker(r, strategy="frontier")).__name__
    ('PsiTracker', 'FrontierTracker')
    """

    def __new__(
        cls,
        reachability: Reachability,
        strategy: str | None = None,
        unwatched: Iterable[int] = (),
    ) -> Tracker:
        if cls is Tracker:
            if strategy is None:
                above = FRONTIER_TRACKING_ABOVE
                big = acyclic_fanout(reachability, above, unwatched) > above
                strategy = "frontier" if big else "psi"
            if strategy == "psi":
                cls = PsiTracker
            elif strategy == "frontier":
                cls = FrontierTracker
            else:
                raise ValueError(f"unknown tracker strategy {strategy!r}: 'psi' or 'frontier'")
        return object.__new__(cls)

    def __init__(
        self,
        reachability: Reachability,
        strategy: str | None = None,
        unwatched: Iterable[int] = (),
    ) -> None:
        # (``strategy`` was for __new__, which chose the class; ``unwatched``: see PsiTracker)
        self.reachability = reachability
        n = len(reachability.locations)
        self._counts: list[dict[Any, int]] = [{} for _ in range(n)]
        # Per location, the frontier implied there, kept at targets only; the objects never
        # change (a vertex holds its inputs' for good).
        self._frontiers = [MutableAntichain() for _ in range(n)]
        # Where a change of a pointstamp's activity at a location goes, for propagate to fold
        # in: per location, (location, compiled summaries; None = identity). Set by each
        # strategy.
        self._fanout: list[list[tuple[int, tuple[Any, ...]]]] = []
        self._pending: dict[int, list[tuple[Any, int]]] = {}
        # Per location, once asked for: reachability.reaching compiled (for diagnosis and the
        # progress actor's hold check, which ask about few locations of a big graph).
        self._reaching: dict[int, list[tuple[int, tuple[Any, ...]]]] = {}
        self.active = 0  # pointstamps with a positive count

    def update(self, loc: int, time: Any, delta: int) -> None:
        """Adds ``delta`` to the count of pointstamp ``(loc, time)``; call :meth:`propagate`."""
        counts = self._counts[loc]
        old = counts.get(time, 0)
        new = old + delta
        if new:
            counts[time] = new
        elif old:  # a zero delta for an absent pointstamp is a no-op
            del counts[time]
        if old <= 0 < new:
            sign = 1
            self.active += 1
        elif new <= 0 < old:
            sign = -1
            self.active -= 1
        else:
            return
        pending = self._pending
        for target, summaries in self._fanout[loc]:
            bucket = pending.get(target)
            if bucket is None:
                bucket = pending[target] = []
            for apply in summaries:
                bucket.append((time if apply is None else apply(time), sign))

    def update_iter(self, changes: Iterable[tuple[tuple[int, Any], int]]) -> None:
        for (loc, time), delta in changes:
            self.update(loc, time, delta)

    def propagate(self) -> list[int]:
        """Folds pending changes into the implied frontiers; returns targets whose moved."""
        raise NotImplementedError

    def frontier(self, target: int) -> MutableAntichain:
        """The input frontier at ``target`` (valid after :meth:`propagate`)."""
        return self._frontiers[target]

    def count(self, loc: int, time: Any) -> int:
        """The occurrence count of pointstamp ``(loc, time)`` in this view."""
        return self._counts[loc].get(time, 0)

    def dominated(self, loc: int, time: Any) -> bool:
        """Whether an active pointstamp other than ``(loc, time)`` could-result-in it.

        >>> g = GraphBuilder()
        >>> a = g.add_node("in", 0, 1); b = g.add_node("out", 1, 0); g.add_edge((a, 0), (b, 0))
        >>> r = g.build(); tr = Tracker(r)
        >>> tr.update(r.source(a, 0), 3, 1)
        >>> tr.dominated(r.target(b, 0), 4), tr.dominated(r.target(b, 0), 2)
        (True, False)
        >>> tr.dominated(r.source(a, 0), 3)  # itself does not count
        False
        """
        return self.dominator(loc, time) is not None

    def dominator(self, loc: int, time: Any) -> tuple[int, Any] | None:
        """An active pointstamp other than ``(loc, time)`` that could-result-in it, or None."""
        counts = self._counts
        for other, applies in self.reaching(loc):
            at = counts[other]
            if not at:
                continue
            for t, count in at.items():
                if count > 0 and not (other == loc and t == time):
                    for apply in applies:
                        if le(t if apply is None else apply(t), time):
                            return other, t
        return None

    def reaching(self, loc: int) -> list[tuple[int, tuple[Any, ...]]]:
        """The locations that can reach ``loc`` (itself included), each with its minimal path
        summaries compiled (``None`` for the identity; else a function of the time)."""
        found = self._reaching.get(loc)
        if found is None:
            found = self._reaching[loc] = [
                (other, tuple(s.compile() for s in summaries))
                for other, summaries in self.reachability.reaching(loc)
            ]
        return found

    def active_pointstamps(self) -> list[tuple[int, Any, int]]:
        """Every pointstamp with a positive count, as ``(location, time, count)``."""
        return [
            (loc, t, c)
            for loc, counts in enumerate(self._counts)
            if counts
            for t, c in counts.items()
            if c > 0
        ]

    def holders(self) -> list[tuple[int, Any, int]]:
        """The active pointstamps that no other active one could-result-in, as ``(location,
        time, count)``: what holds every frontier back (a capability on an output, messages
        not yet consumed on an input). Empty exactly when the tracker is idle. For diagnosis:
        it costs a :meth:`dominator` search per active pointstamp.

        >>> g = GraphBuilder()
        >>> a = g.add_node("in", 0, 1); b = g.add_node("out", 1, 0); g.add_edge((a, 0), (b, 0))
        >>> r = g.build(); tr = Tracker(r)
        >>> tr.update(r.source(a, 0), 3, 1); tr.update(r.target(b, 0), 4, 2)
        >>> tr.holders() == [(r.source(a, 0), 3, 1)]  # the messages at 4 wait for it
        True
        """
        return [
            (loc, time, count)
            for loc, time, count in self.active_pointstamps()
            if self.dominator(loc, time) is None
        ]

    def pointstamps(self) -> list[tuple[int, Any, int]]:
        """Every pointstamp with a nonzero count, as ``(location, time, count)``."""
        return [(loc, t, c) for loc, counts in enumerate(self._counts) for t, c in counts.items()]

    def is_idle(self) -> bool:
        """Whether no pointstamp is active: nothing can happen any more."""
        return self.active == 0


class PsiTracker(Tracker):
    """Every change of a pointstamp's activity goes, through ``Ψ``, to every target its
    location reaches; a target's frontier is the minimal times with a positive count there.

    >>> g = GraphBuilder()
    >>> a = g.add_node("in", 0, 1); b = g.add_node("out", 1, 0); g.add_edge((a, 0), (b, 0))
    >>> r = g.build(); tr = PsiTracker(r)
    >>> tr.update(r.source(a, 0), 2, 1); tr.propagate() == [r.target(b, 0)]
    True

    ``unwatched`` targets are input ports no vertex waits on (a stateless built-in's: it
    neither requests notifications nor observes its frontier): the changes skip them, and
    their frontier is worked out from the pointstamps whenever it is read
    (:class:`DerivedFrontier`). In a loop most targets are such (maps, concats, the loop's
    own ingress and feedback), and keeping their frontiers up to date was about half of
    the tracker's work per change.

    >>> tr = PsiTracker(r, unwatched=[r.target(b, 0)])
    >>> tr.update(r.source(a, 0), 2, 1); tr.propagate(), tr.frontier(r.target(b, 0)).frontier
    ([], [2])
    """

    def __init__(
        self,
        reachability: Reachability,
        strategy: str | None = None,
        unwatched: Iterable[int] = (),
    ) -> None:
        super().__init__(reachability)
        skip = set(unwatched)
        # Ψ to each watched target, turned around: work and entries in the number of (location,
        # watched target) pairs, where ``reachability.paths`` (Ψ to every target) would cost
        # O(M**2) on a chain of M maps, all but the last unwatched
        fanout: list[list[tuple[int, tuple[Any, ...]]]] = [[] for _ in reachability.locations]
        for target in reachability.target_locations:
            if target in skip:
                self._frontiers[target] = DerivedFrontier(self, target)
                continue
            for other, summaries in reachability.reaching(target):
                fanout[other].append((target, tuple(s.compile() for s in summaries)))
        self._fanout = fanout

    def propagate(self) -> list[int]:
        if not self._pending:
            return []
        pending, self._pending = self._pending, {}
        frontiers = self._frontiers
        return [t for t, changes in pending.items() if frontiers[t].update_iter(changes)]


class DerivedFrontier(MutableAntichain):
    """The input frontier of an unwatched target (see :class:`PsiTracker`), worked out from
    the tracker's active pointstamps and ``Ψ`` whenever it is read (a :class:`MutableAntichain`
    to read, never updated): nothing keeps it up to date, and the rare reader (a diagnosis,
    a vertex that looks after all) pays for its reads.

    >>> g = GraphBuilder()
    >>> a = g.add_node("in", 0, 1); b = g.add_node("out", 1, 0); g.add_edge((a, 0), (b, 0))
    >>> r = g.build(); tr = PsiTracker(r, unwatched=[r.target(b, 0)])
    >>> tr.update(r.source(a, 0), 3, 1); tr.update(r.source(a, 0), 5, 1)
    >>> f = tr.frontier(r.target(b, 0))
    >>> f.frontier, f.less_equal(4), f.less_than(3), f.count_for(5)
    ([3], True, False, 1)
    """

    __slots__ = ("_target", "_tracker")

    def __init__(self, tracker: Tracker, target: int) -> None:
        super().__init__()
        self._tracker = tracker
        self._target = target

    def _implied(self) -> list[Any]:
        """Every time implied at the target, once per active pointstamp and minimal path
        summary (the multiset a :class:`PsiTracker` keeps for a watched target)."""
        counts = self._tracker._counts
        implied: list[Any] = []
        for other, applies in self._tracker.reaching(self._target):
            for t, count in counts[other].items():
                if count > 0:
                    implied.extend(t if apply is None else apply(t) for apply in applies)
        return implied

    @property
    def frontier(self) -> list[Any]:
        return _minimal(self._implied())

    @property
    def elements(self) -> list[Any]:
        return self.frontier

    def __iter__(self) -> Iterator[Any]:
        return iter(self.frontier)

    def less_equal(self, t: Any) -> bool:
        return any(le(e, t) for e in self.frontier)

    def less_than(self, t: Any) -> bool:
        return any(e != t and le(e, t) for e in self.frontier)

    def is_empty(self) -> bool:
        return not self.frontier

    def count_for(self, t: Any) -> int:
        return self._implied().count(t)

    def update_iter(self, updates: Iterable[tuple[Any, int]]) -> list[tuple[Any, int]]:
        raise TypeError("a derived frontier is worked out from the pointstamps, not updated")

    def __repr__(self) -> str:
        return f"DerivedFrontier(frontier={self.frontier!r})"


class FrontierTracker(Tracker):
    """Frontier changes propagated from input to input, in the topological order of the
    graph's strongly connected components, each visited at most once per :meth:`propagate`.

    Invariant, after :meth:`propagate`: the frontier of a target ``T`` is the set of minimal
    times of ``{s(t) : (l, t) active, s in Ψ[l, T]}``. Summaries are monotone, so minimal
    times suffice: a target off every cycle counts its own active times, those of the sources
    that feed it, and the frontiers of the targets one operator upstream, each through the
    operator's summary; a target on a cycle counts, through its component's part of ``Ψ``,
    the minimal *inputs* of every target of its component (those same three, from outside the
    component). A change that moves no frontier goes no further.

    >>> g = GraphBuilder()
    >>> a = g.add_node("in", 0, 1); m = g.add_node("map", 1, 1); b = g.add_node("out", 1, 0)
    >>> g.add_edge((a, 0), (m, 0)); g.add_edge((m, 0), (b, 0))
    >>> r = g.build(); tr = FrontierTracker(r)
    >>> tr.update(r.source(a, 0), 2, 1); tr.propagate() == [r.target(m, 0), r.target(b, 0)]
    True
    >>> tr.update(r.target(m, 0), 2, 1); tr.propagate()  # held at 2 already: stops there
    []
    """

    def __init__(
        self,
        reachability: Reachability,
        strategy: str | None = None,
        unwatched: Iterable[int] = (),
    ) -> None:
        # every frontier is kept: a target's feeds the targets downstream of it
        super().__init__(reachability)
        r = reachability
        is_target = r.is_target
        # The components of the graph of targets, topologically ordered (a step between two
        # targets passes through one source, whose component lies between theirs).
        targets = ([loc for loc in members if is_target[loc]] for members in r.components)
        self._members = [members for members in targets if members]
        component = self._component = [-1] * len(r.locations)  # -1: a source
        for index, members in enumerate(self._members):
            for loc in members:
                component[loc] = index
        # A target's active times go to itself; a source's to the targets its edges feed.
        identity = (PathSummary().compile(),)
        self._fanout = [
            [(loc, identity)] if is_target[loc] else [(t, identity) for t, _ in steps]
            for loc, steps in enumerate(r.steps)
        ]
        # Per target, the steps to the targets of the next operators out of its component:
        # (next target, compiled summary of the operator).
        self._exits: list[list[tuple[int, Any]]] = [[] for _ in r.locations]
        for loc in r.target_locations:
            through: dict[int, Antichain] = defaultdict(Antichain)
            for source, summary in r.steps[loc]:
                for nxt, _ in r.steps[source]:
                    through[nxt].insert(summary)
            self._exits[loc] = [
                (nxt, s.compile())
                for nxt, summaries in through.items()
                if component[nxt] != component[loc]
                for s in summaries
            ]
        # For a target on a cycle: its minimal inputs, and Ψ to the targets of its component.
        self._inputs: dict[int, MutableAntichain] = {}
        self._within: dict[int, list[tuple[int, tuple[Any, ...]]]] = {}
        for members in self._members:
            if len(members) > 1:
                for loc in members:
                    self._inputs[loc] = MutableAntichain()
                    self._within[loc] = [
                        (other, tuple(s.compile() for s in summaries))
                        for other, summaries in r.within(loc).items()
                        if is_target[other]
                    ]

    def propagate(self) -> list[int]:
        pending = self._pending
        if not pending:
            return []
        self._pending = {}
        component, frontiers, exits = self._component, self._frontiers, self._exits
        queued = {component[loc] for loc in pending}  # (targets only)
        queue = list(queued)
        heapq.heapify(queue)
        moved: list[int] = []
        while queue:
            members = self._members[heapq.heappop(queue)]
            if len(members) == 1:  # off every cycle: its inputs are its implications
                implied: Iterable[tuple[int, list[tuple[Any, int]]]] = (
                    (members[0], pending.pop(members[0])),
                )
            else:
                implied = self._within_component(members, pending).items()
            for loc, changes in implied:
                changed = frontiers[loc].update_iter(changes)
                if not changed:
                    continue
                moved.append(loc)
                for nxt, apply in exits[loc]:
                    bucket = pending.get(nxt)
                    if bucket is None:
                        bucket = pending[nxt] = []
                    _extend(bucket, apply, changed)
                    c = component[nxt]
                    if c not in queued:
                        queued.add(c)
                        heapq.heappush(queue, c)
        return moved

    def _within_component(
        self, members: list[int], pending: dict[int, list[tuple[Any, int]]]
    ) -> dict[int, list[tuple[Any, int]]]:
        """Takes the pending inputs of a component's locations; returns, per location of it,
        the changes their minimal inputs imply there through ``Ψ``."""
        implied: dict[int, list[tuple[Any, int]]] = {}
        for loc in members:
            changes = pending.pop(loc, None)
            if changes is None:
                continue
            changed = self._inputs[loc].update_iter(changes)
            if not changed:
                continue
            for other, summaries in self._within[loc]:
                bucket = implied.get(other)
                if bucket is None:
                    bucket = implied[other] = []
                for apply in summaries:
                    _extend(bucket, apply, changed)
        return implied


def _extend(
    bucket: list[tuple[Any, int]],
    apply: Callable[[Any], Any] | None,
    changes: list[tuple[Any, int]],
) -> None:
    """Adds ``changes`` to ``bucket`` with their times mapped by a compiled summary."""
    if apply is None:
        bucket.extend(changes)
    else:
        bucket.extend([(apply(t), delta) for t, delta in changes])


def _propagate(
    start: int,
    steps: list[list[tuple[int, PathSummary]]],
    compose: Callable[[PathSummary, PathSummary], PathSummary],
) -> dict[int, Antichain]:
    """The minimal summaries of the paths of length >= 1 from ``start`` along ``steps``, each
    path's summary extended by ``compose(summary so far, step)``. Keeping only the minimal
    summaries at every location is exact because composing is monotone in both arguments.

    >>> one = PathSummary.feedback(1)
    >>> _propagate(0, [[(1, one)], [(0, one), (2, one)], []], PathSummary.then)[2]
    Antichain([PathSummary(+2)])
    """
    reached: dict[int, Antichain] = defaultdict(Antichain)
    work: list[tuple[int, PathSummary]] = list(steps[start])
    while work:
        loc, summary = work.pop()
        if reached[loc].insert(summary):
            work.extend((nxt, compose(summary, s)) for nxt, s in steps[loc])
    return dict(reached)


def _components(steps: list[list[tuple[int, PathSummary]]]) -> list[list[int]]:
    """The strongly connected components of the graph of one-step successors, in topological
    order (every step leads to the same component or a later one); Tarjan's algorithm,
    without recursion.

    >>> one = PathSummary.feedback(1)
    >>> _components([[(1, one)], [(0, one), (2, one)], []])  # 0 <-> 1 -> 2
    [[0, 1], [2]]
    """
    index = [-1] * len(steps)  # visiting order, -1 while unvisited
    low = [0] * len(steps)
    on_stack = [False] * len(steps)
    stack: list[int] = []
    found: list[list[int]] = []  # Tarjan finds components in reverse topological order
    visited = 0
    for root in range(len(steps)):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            loc, i = work.pop()
            if i == 0:
                index[loc] = low[loc] = visited
                visited += 1
                stack.append(loc)
                on_stack[loc] = True
            else:  # back from the successor that step i - 1 led to
                low[loc] = min(low[loc], low[steps[loc][i - 1][0]])
            while i < len(steps[loc]):
                nxt = steps[loc][i][0]
                i += 1
                if index[nxt] < 0:
                    work.append((loc, i))
                    work.append((nxt, 0))
                    break
                if on_stack[nxt]:
                    low[loc] = min(low[loc], index[nxt])
            else:
                if low[loc] == index[loc]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack[member] = False
                        members.append(member)
                        if member == loc:
                            break
                    members.sort()
                    found.append(members)
    found.reverse()
    return found
