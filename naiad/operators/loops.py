"""Loop contexts: ingress, egress and feedback (Naiad §2.1); entering and leaving regions.

Entering a loop appends a counter starting at 0 to every time; leaving drops it; the feedback
vertex adds ``step`` to it, and is the only way to close a cycle, so every cycle strictly
advances time (invariant 5). These vertices only re-time messages: each message in is one
message out, at the time the vertex's path summary gives. A region re-times nothing: a
stream enters or leaves it as the same output port, re-labelled with the region or its
parent (no vertex, no message hop, the same logical graph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import StatelessVertex, fan_out
from naiad.dataflow.channels import Pipeline
from naiad.dataflow.scope import BuildError
from naiad.progress.capability import Capability
from naiad.progress.summary import PathSummary
from naiad.progress.timestamp import as_time

if TYPE_CHECKING:
    from naiad.operators.scope import Scope
    from naiad.operators.stream import Stream


class Retime(StatelessVertex):
    """Forwards each batch at ``retime(time)``: the time its path summary allows.

    ``transform`` rewrites the batch on the way (differential batches carry their updates'
    times inside and re-time them too)."""

    def __init__(
        self, retime: Callable[[Any], Any], transform: Callable[[Any], Any] | None = None
    ) -> None:
        self.retime = retime
        self.transform = transform

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        time = self.retime(cap.time)
        if self.transform is not None:
            batch = self.transform(batch)
        fan_out(self.shard.outputs[0].pushers, time, batch)


class FeedbackHandle:
    """The not-yet-connected input of a feedback vertex."""

    def __init__(self, scope: Scope, node: int, name: str) -> None:
        self.scope = scope
        self.node = node
        self.name = name
        self.connected = False


def enter(
    stream: Stream,
    loop: Scope,
    name: str = "ingress",
    transform: Callable[[Any], Any] | None = None,
) -> Stream:
    """``stream`` inside the loop context ``loop``, its times extended with counter 0 (in a
    region ``loop``, the same stream: ``transform`` is for loops' re-timing and not applied)."""
    if loop.parent is not stream.scope:
        kind = "region" if loop.is_region else "loop"
        raise BuildError(
            f"cannot enter {kind} {loop.path()!r} from scope {stream.scope.path()!r}: "
            f"a stream enters only a loop or region nested directly in its own scope"
        )
    time_class = loop.time_class
    if time_class is None:
        return stream.derive(stream.node, stream.port, scope=loop)
    node = loop.add_operator(
        name,
        Retime(lambda t: time_class(t, 0), transform),
        [(stream, Pipeline())],
        summary=[[[PathSummary.ingress(time_class)]]],
        input_scope=stream.scope,
    )
    return stream.derive(node, scope=loop)


def leave(
    stream: Stream, name: str = "egress", transform: Callable[[Any], Any] | None = None
) -> Stream:
    """``stream`` outside its loop context, the loop counter dropped (out of a region, the
    same stream; ``transform`` not applied)."""
    parent = stream.scope.parent
    if parent is None:
        raise BuildError(
            f"stream {stream!r} is not inside a loop context or region; it cannot leave"
        )
    if stream.scope.is_region:
        return stream.derive(stream.node, stream.port, scope=parent)
    node = parent.add_operator(
        name,
        Retime(lambda t: t.outer, transform),
        [(stream, Pipeline())],
        summary=[[[PathSummary.egress()]]],
        input_scope=stream.scope,
    )
    return stream.derive(node, scope=parent)


def feedback(
    scope: Scope,
    step: int = 1,
    name: str = "feedback",
    transform: Callable[[Any], Any] | None = None,
) -> tuple[FeedbackHandle, Stream]:
    """A feedback vertex: its output stream now, its input later via ``connect_loop``."""
    try:
        step = as_time(step, 0, f"feedback {name!r}: step")
    except TypeError as exc:
        raise BuildError(str(exc)) from None
    if step < 1:
        raise BuildError(
            f"feedback {name!r}: step must be at least 1 (got {step}); a cycle whose feedback "
            f"does not advance time would never let its times complete"
        )
    if scope.depth == 0:  # the root scope or a region of it: integer epochs
        retime: Callable[[Any], Any] = lambda t: t + step  # noqa: E731
    else:
        retime = lambda t: t.__class__(t.outer, t.inner + step)  # noqa: E731
    node = scope.add_operator(name, Retime(retime, transform), [], summary=None, outputs=1)
    spec = scope.build.operators[node]
    spec.inputs = 1
    spec.summary = [[[PathSummary.feedback(step)]]]
    scope.build.open_loops[node] = name
    return FeedbackHandle(scope, node, name), scope.stream(node)


def connect_loop(stream: Stream, handle: FeedbackHandle) -> None:
    """Closes a cycle: ``stream``'s records re-enter the loop through the feedback vertex."""
    if handle.connected:
        raise BuildError(f"feedback {handle.name!r} is already connected")
    if stream.scope is not handle.scope:
        raise BuildError(
            f"feedback {handle.name!r} belongs to scope {handle.scope.path()!r}, but the stream "
            f"connected to it belongs to {stream.scope.path()!r}"
        )
    handle.scope.connect(stream, handle.node, 0, Pipeline())
    handle.connected = True
    del handle.scope.build.open_loops[handle.node]
