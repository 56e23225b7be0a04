"""Graph construction: dataflow builds, scopes (loop contexts) and streams.

Every worker runs the same build function and so declares the same operators in the same
order; operator and channel ids come from that order. :class:`DataflowBuild` records what one
worker declared (plain data: operators, their logic, edges, pacts); the runtime compares the
builds of all workers (:meth:`DataflowBuild.fingerprint`), turns one into the logical graph the
progress tracker uses, and instantiates every worker's shards from its own build.

A :class:`ScopeCore` is the root scope, a loop context nested in another (Naiad §2.1), or a
region (timely's ``region``). Times in a loop context are the enclosing scope's times with a
loop counter appended; streams belong to exactly one scope and cross loop boundaries only
through ingress and egress operators. A region has its parent's times: it only groups
operators (for reading and rendering the graph), so a stream crosses its boundary without an
operator, re-labelled, and the logical graph, hence progress tracking, is the one the same
operators would make without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from naiad.actors.vertex import Vertex, overrides
from naiad.dataflow.channels import Pact, Pipeline
from naiad.progress.reachability import GraphBuilder
from naiad.progress.summary import PathSummary, TimeClass


class BuildError(ValueError):
    """The dataflow is malformed: streams from the wrong scope, loops left open, ..."""


NEVER_RUNS = "the build of its dataflow raised, so it never runs: build the dataflow again"
"""Why a handle made by a build that failed (an input's, a probe's) refuses to be used."""


@dataclass
class OperatorSpec:
    """One operator as declared by one worker."""

    node: int
    name: str
    scope: ScopeCore
    logic: Vertex
    inputs: int
    outputs: int
    summary: list[list[list[PathSummary]]] | None
    initial_capability: bool


@dataclass
class EdgeSpec:
    source: tuple[int, int]
    target: tuple[int, int]
    pact: Pact


@dataclass
class DataflowBuild:
    """Everything one worker's build function declared for one dataflow."""

    dataflow: int
    name: str
    index: int
    peers: int
    operators: list[OperatorSpec] = field(default_factory=list)
    edges: list[EdgeSpec] = field(default_factory=list)
    open_loops: dict[int, str] = field(default_factory=dict)  # feedback node -> its name
    built: bool = False  # the build function returned: the graph is fixed
    undo: list[Callable[[], None]] = field(default_factory=list)
    """What :meth:`build_failed` releases besides the operators' own holds: holds taken on
    things outside the dataflow while it was built (a trace handle on an imported
    arrangement). Emptied once the dataflow runs: it must not keep them alive."""

    def check_open(self, what: str) -> None:
        if self.built:
            raise BuildError(
                f"dataflow {self.name!r} is already built and running: {what} must be "
                f"declared inside its build function"
            )

    def build_failed(self) -> None:
        """The dataflow will never run (its build raised, here or on another worker or
        process): every operator undoes what it registered outside it, and so does
        :attr:`undo`. Not left to garbage collection: a traceback the user keeps holds the
        build's objects, and with them whatever they hold."""
        for op in self.operators:
            op.logic.build_failed()
        undo, self.undo = self.undo, []
        for release in undo:
            release()

    def graph(self) -> GraphBuilder:
        """The logical graph for the progress tracker."""
        graph = GraphBuilder()
        for op in self.operators:
            graph.add_node(op.name, op.inputs, op.outputs, op.summary)
        for edge in self.edges:
            graph.add_edge(edge.source, edge.target)
        return graph

    def fingerprint(self) -> list[tuple[Any, ...]]:
        """What must be equal on every worker: operators, ports, edges and scopes, in order."""
        ops = [(op.name, op.inputs, op.outputs, op.scope.depth) for op in self.operators]
        edges = [(e.source, e.target, type(e.pact).__name__) for e in self.edges]
        return [*ops, *edges]

    def check_complete(self) -> None:
        if self.open_loops:
            names = ", ".join(repr(n) for n in self.open_loops.values())
            raise BuildError(
                f"dataflow {self.name!r}: feedback {names} was never connected; "
                f"call stream.connect_loop(handle) (for a differential Variable: "
                f"variable.set(result))"
            )
        self.built = True


class ScopeCore:
    """The root scope of a dataflow, a loop context inside another scope, or a region
    (``time_class`` None under a parent: the parent's times)."""

    def __init__(
        self,
        build: DataflowBuild,
        parent: ScopeCore | None = None,
        time_class: TimeClass | None = None,
        name: str = "dataflow",
    ) -> None:
        self.build = build
        self.parent = parent
        self.time_class = time_class
        self.name = name
        # loop levels: the number of counters of this scope's times (a region adds none)
        self.depth: int = 0 if parent is None else parent.depth + (time_class is not None)
        self._children: dict[str, int] = {}  # loops nested here, per name
        # Sibling loops of one name get distinct paths ("loop", "loop#2"): error messages
        # that name two scopes must not name the same one twice.
        self._label = name
        if parent is not None:
            seen = parent._children[name] = parent._children.get(name, 0) + 1
            self._label = name if seen == 1 else f"{name}#{seen}"

    @property
    def index(self) -> int:
        """This worker's index."""
        return self.build.index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.build.peers

    def minimum(self) -> Any:
        """The least time in this scope."""
        if self.parent is None:
            return 0
        if self.time_class is None:  # a region
            return self.parent.minimum()
        return self.time_class(self.parent.minimum(), 0)

    @property
    def is_region(self) -> bool:
        """Whether this scope is a region: its parent's times, no loop of its own."""
        return self.parent is not None and self.time_class is None

    stream_class: type[StreamCore]
    """The class of the streams this scope hands out (the operators layer's ``Stream``)."""

    def stream(self, node: int, port: int = 0) -> Any:
        """A stream for output ``port`` of operator ``node`` of this scope."""
        return self.stream_class(self, node, port)

    def path(self) -> str:
        return self._label if self.parent is None else f"{self.parent.path()}/{self._label}"

    def add_operator(
        self,
        name: str,
        logic: Vertex,
        inputs: Sequence[tuple[StreamCore, Pact]],
        outputs: int = 1,
        summary: list[list[list[PathSummary]]] | None = None,
        input_scope: ScopeCore | None = None,
    ) -> int:
        """Declares an operator whose inputs come from ``inputs``; returns its node id.

        ``input_scope`` is the scope the inputs must belong to (this scope unless the operator
        crosses a scope boundary, as ingress and egress do).
        """
        self.build.check_open(f"operator {name!r}")
        expected = input_scope or self
        for stream, _ in inputs:
            if stream.scope.build is not self.build:
                raise BuildError(f"operator {name!r}: the input stream belongs to another dataflow")
            if stream.scope is not expected:
                raise BuildError(
                    f"operator {name!r} is in scope {expected.path()!r} but its input stream "
                    f"belongs to scope {stream.scope.path()!r}; use .enter(loop) or .leave()"
                )
        build = self.build
        node = len(build.operators)
        build.operators.append(
            OperatorSpec(
                node=node,
                name=name,
                scope=self,
                logic=logic,
                inputs=len(inputs),
                outputs=outputs,
                summary=summary,
                initial_capability=overrides(logic, "on_start"),
            )
        )
        for port, (stream, pact) in enumerate(inputs):
            self.connect(stream, node, port, pact)
        return node

    def connect(self, stream: StreamCore, node: int, port: int, pact: Pact | None = None) -> None:
        self.build.check_open("an edge")
        self.build.edges.append(
            EdgeSpec((stream.node, stream.port), (node, port), pact or Pipeline())
        )


class StreamCore:
    """A stream of ``(time, batch)`` messages: one output port of one operator."""

    __slots__ = ("node", "port", "scope")

    def __init__(self, scope: ScopeCore, node: int, port: int = 0) -> None:
        self.scope = scope
        self.node = node
        self.port = port

    @property
    def name(self) -> str:
        return self.scope.build.operators[self.node].name

    def derive(self, node: int, port: int = 0, scope: ScopeCore | None = None) -> Any:
        """A stream of the same class for an operator built from this one."""
        return type(self)(scope or self.scope, node, port)

    def __repr__(self) -> str:
        return f"<Stream from {self.name!r} output {self.port} in {self.scope.path()!r}>"


ScopeCore.stream_class = StreamCore
