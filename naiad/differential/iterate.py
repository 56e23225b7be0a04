"""Iteration over collections (seed 002 §3.3, FixedPoint): ingress, the variable with its
feedback (the incrementer), and egress; nested loops; prioritized iteration (§5.1.2).

Differential batches carry their updates' times inside, so crossing a loop boundary re-times
the updates too: entering appends a loop counter (0, or a priority), leaving drops it, and
the feedback edge adds the step to it. A :class:`Variable` started from a collection
``source`` is ``source`` at iteration 0 and, at iteration ``i > 0``, the value given to
:meth:`Variable.set` at iteration ``i - 1``: the feedback carries ``result - source``, so
the accumulation of ``source + feedback`` at ``i`` is the result at ``i - 1``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.differential.updates import Updates
from naiad.operators import loops

if TYPE_CHECKING:
    from naiad.differential.collection import Collection


def _entered(at: Callable[..., Any] | None) -> Callable[[Updates], Updates]:
    def transform(u: Updates) -> Updates:
        if at is None:
            counter = np.zeros((len(u), 1), dtype=np.int64)
        else:
            counter = np.asarray(at(*u.data), dtype=np.int64).reshape(len(u), 1)
            if len(counter) and counter.min() < 0:
                raise ValueError("enter_at: priorities (loop counters) must be non-negative")
        return Updates(u.data, np.hstack([u.times, counter]), u.diffs)

    return transform


def _left(u: Updates) -> Updates:
    return Updates(u.data, u.times[:, :-1], u.diffs)


def _advanced(step: int) -> Callable[[Updates], Updates]:
    def transform(u: Updates) -> Updates:
        times = u.times.copy()
        times[:, -1] += step
        return Updates(u.data, times, u.diffs)

    return transform


def enter(
    c: Collection, loop: Any, name: str = "enter", at: Callable[..., Any] | None = None
) -> Collection:
    """``c`` inside ``loop`` (which may be nested several levels below ``c``'s scope)."""
    from naiad.differential.collection import Collection

    chain = []
    scope = loop
    while scope is not None and scope is not c.scope:
        chain.append(scope)
        scope = scope.parent
    if scope is None:
        raise ValueError(
            f"{name}: loop {loop.path()!r} is not nested inside the collection's scope "
            f"{c.scope.path()!r}"
        )
    stream = c.stream
    for i, inner in enumerate(reversed(chain)):
        last = i == len(chain) - 1
        stream = loops.enter(stream, inner, name, _entered(at if last else None))
    return Collection(stream)


def leave(c: Collection, name: str = "leave") -> Collection:
    from naiad.differential.collection import Collection

    return Collection(loops.leave(c.stream, name, _left))


class Variable:
    """A collection defined in terms of itself inside a loop (also for mutual recursion).

    ``Variable(loop, source)`` starts as ``source`` (a collection already inside ``loop``);
    ``Variable(loop)`` starts empty. Use ``.collection`` in the body, then ``set(result)``
    exactly once.
    """

    def __init__(
        self, loop: Any, source: Collection | None = None, step: int = 1, name: str = "variable"
    ) -> None:
        from naiad.differential.collection import Collection

        self.handle, stream = loops.feedback(loop, step, name, _advanced(step))
        self.source = source
        feedback = Collection(stream)
        self.collection = source.concat(feedback, name=name + ".concat") if source else feedback
        self.name = name

    def set(self, result: Collection) -> Collection:
        """Closes the loop: the variable's next value is ``result``."""
        delta = result if self.source is None else result.concat(self.source.negate())
        # consolidating the feedback keeps cancelling updates from circulating forever
        delta.consolidate(self.name + ".consolidate").stream.connect_loop(self.handle)
        return result


def iterate(
    c: Collection,
    body: Callable[[Collection], Collection],
    priority: Callable[..., Any] | None,
    name: str,
) -> Collection:
    scope = c.scope
    if priority is None:
        loop = scope.iterative(name)
        var = Variable(loop, c.enter(loop, name + ".enter"), name=name + ".variable")
        return var.set(body(var.collection)).leave(name + ".leave")
    # Prioritized (seed 002 §5.1.2): the loop counter is the pair (priority, iteration),
    # ordered lexicographically, in product with the enclosing time. The pair is packed in
    # one integer counter, priority in the high bits: entering at ``priority << 32`` and the
    # feedback's +1 keep exactly that order, with the loop's ordinary ``Product`` time (so a
    # new epoch still corrects every earlier (priority, iteration), retractions included).
    loop = scope.iterative(name)
    var = Variable(
        loop, enter_prioritized(c, loop, priority, name + ".enter_at"), name=name + ".variable"
    )
    return var.set(body(var.collection)).leave(name + ".leave")


def priority_counter(priority: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """The loop counter at which a record of priority ``priority(*columns)`` enters a
    prioritized loop: (priority, iteration 0), packed."""

    def at(*columns: np.ndarray) -> np.ndarray:
        p = np.asarray(priority(*columns), dtype=np.int64)
        if len(p) and (p.min() < 0 or p.max() >= 1 << 30):
            raise ValueError("iterate: priorities must lie in [0, 2**30)")
        return p << PRIORITY_SHIFT

    return at


def enter_prioritized(
    c: Collection, loop: Any, priority: Callable[..., Any], name: str = "enter_prioritized"
) -> Collection:
    """``c`` inside a prioritized loop, each record at its priority's first iteration."""
    return enter(c, loop, name, priority_counter(priority))


PRIORITY_SHIFT = 32
"""Bits of the loop counter below the priority: iterations per priority before overflow."""
