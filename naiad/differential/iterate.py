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

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.differential.updates import Updates, fields_of
from naiad.operators import loops
from naiad.operators.scope import Scope

if TYPE_CHECKING:
    from naiad.differential.collection import Collection


def _entered(counters: Callable[[Updates], np.ndarray] | None) -> Callable[[Updates], Updates]:
    def transform(u: Updates) -> Updates:
        counter = np.zeros(len(u), dtype=np.int64) if counters is None else counters(u)
        return u.retimed(np.column_stack([u.times, counter]))

    return transform


COUNTER_BITS = 62
"""Bits of an ``enter_at`` counter. A loop's times are int64 columns and its frontier runs a
feedback step ahead of the times in it, so a counter near ``2**63`` leaves no room to
iterate (the loop failed with a bare ``OverflowError`` in a join's arrangement); from
``2**62`` there are ``2**62`` iterations of room."""


def entry_counters(
    at: Callable[..., Any], what: str, bits: int = COUNTER_BITS, shift: int = 0
) -> Callable[[Updates], np.ndarray]:
    """The loop counter at which each update of a batch enters: ``at(*columns)`` checked by
    :func:`loop_counters` (in ``[0, 2**bits)``), shifted left by ``shift`` bits."""

    def counters(u: Updates) -> np.ndarray:
        if u.mixed:  # each width's records as columns, as in a batch of their shape alone
            out = np.zeros(len(u), dtype=np.int64)
            widths = np.fromiter(map(fields_of, u.data[0].tolist()), np.int64, len(u))
            for width, part in u.by_width():
                out[widths == width] = counters(part)
            return out
        return loop_counters(at(*u.data), len(u), what, bits) << shift

    return counters


def loop_counters(values: Any, n: int, what: str, bits: int = 63) -> np.ndarray:
    """``values``, what a vectorized user function returned for ``n`` records, as ``n``
    int64 loop counters in ``[0, 2**bits)``. A scalar is every record's counter; booleans
    count as 0 and 1; floats are taken only if they are integral (``d // delta`` of float
    distances), never truncated; anything else raises an error that names ``what``.

    >>> loop_counters(3, 2, "p").tolist(), loop_counters([0.0, 2.0], 2, "p").tolist()
    ([3, 3], [0, 2])
    >>> loop_counters([0.5, 1], 2, "iterate: priority(*columns)")
    Traceback (most recent call last):
    ...
    TypeError: iterate: priority(*columns) must return integers (or integral floats), not 0.5
    >>> loop_counters([1], 3, "p")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: p returned an array of shape (1,) for 3 records: one integer per record (...
    """
    a = np.asarray(values)
    if a.ndim == 0:
        a = np.full(n, a)
    elif a.shape != (n,):
        raise ValueError(
            f"{what} returned an array of shape {a.shape} for {n} records: one integer per "
            f"record (shape ({n},)) or one integer for all"
        )
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    kind = a.dtype.kind
    if kind == "f":
        with np.errstate(invalid="ignore"):
            fractional = ~np.isfinite(a) | (a != np.floor(a))
        if fractional.any():
            raise TypeError(
                f"{what} must return integers (or integral floats), not {a[fractional][0].item()}"
            )
    elif kind not in "biu":  # booleans count as 0 and 1, as threshold's counts do
        shown = "integers beyond int64" if kind == "O" else f"{a.dtype} values"
        raise TypeError(f"{what} must return integers, not {shown}")
    low, high = a.min(), a.max()
    if low < 0 or high >= 1 << bits:
        shown = (low if low < 0 else high).item()
        raise ValueError(f"{what} must return integers in [0, 2**{bits}), not {shown}")
    return a.astype(np.int64)


def _left(u: Updates) -> Updates:
    return u.retimed(u.times[:, :-1])


def _advanced(step: int) -> Callable[[Updates], Updates]:
    def transform(u: Updates) -> Updates:
        times = u.times.copy()
        times[:, -1] += step
        return u.retimed(times)

    return transform


def enter(
    c: Collection,
    loop: Any,
    name: str = "enter",
    counters: Callable[[Updates], np.ndarray] | None = None,
) -> Collection:
    """``c`` inside ``loop`` (which may be nested several levels below ``c``'s scope), each
    update at loop counter 0 or at ``counters(batch)`` (see :func:`entry_counters`). A
    region on the way (or as ``loop``) re-times nothing. ``c``'s own scope is refused, as
    :meth:`Arranged.enter` refuses it: it names no loop to enter (``enter_at`` would drop
    its counters)."""
    from naiad.differential.collection import Collection

    check_loop_scope(loop, name)
    check_counted(loop, counters, name)
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
    if not chain:  # as Arranged.enter: entering nothing is a mistake (enter_at's counters lost)
        raise ValueError(
            f"{name}: {loop.path()!r} is the collection's own scope; a collection enters a "
            "loop or region nested inside it (in its own scope it is used as it is)"
        )
    stream = c.stream
    for i, inner in enumerate(reversed(chain)):
        last = i == len(chain) - 1
        stream = loops.enter(stream, inner, name, _entered(counters if last else None))
    return Collection(stream)


def check_loop_scope(loop: Any, name: str) -> None:
    """Refuses, while the dataflow is built, a ``loop`` to enter (or to iterate a variable
    in) that is no scope, naming ``name``.

    >>> check_loop_scope(None, "enter")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: enter: expected a loop scope to enter, not None (a loop: scope.iterative(), ...
    """
    if not isinstance(loop, Scope):
        shown = "None" if loop is None else type(loop).__name__
        raise TypeError(
            f"{name}: expected a loop scope to enter, not {shown} (a loop: scope.iterative(), "
            "or a region: scope.region())"
        )


def check_counted(loop: Any, counters: Any, name: str) -> None:
    """Refuses per-update counters (``enter_at``, ``enter_prioritized``) into a region: its
    times are its parent's, with no loop counter to set."""
    if counters is not None and getattr(loop, "is_region", False):
        raise ValueError(
            f"{name}: {loop.path()!r} is a region, not a loop: its times have no loop "
            f"counter to enter at (enter the loop itself)"
        )


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

        check_loop_scope(loop, f"variable {name!r}")
        check_step(step, name)
        self.handle, stream = loops.feedback(loop, step, name, _advanced(step))
        self.scope = stream.scope
        self.source = source
        feedback = Collection(stream)
        self.collection = source.concat(feedback, name=name + ".concat") if source else feedback
        self.name = name

    def set(self, result: Collection) -> Collection:
        """Closes the loop: the variable's next value is ``result``. The feedback is
        consolidated first (a body that never consolidates would otherwise feed cancelling
        updates back for ever), unless ``result`` is a reduction's output, which is already
        consolidated (``Collection.consolidated``)."""
        from naiad.dataflow.scope import BuildError

        if self.handle.connected:
            raise BuildError(f"variable {self.name!r} is set twice: set() closes its loop once")
        check_loop_value(result, self.scope, f"variable {self.name!r}: the result given to set()")
        delta = result if self.source is None else result.concat(self.source.negate())
        if not result.consolidated:
            # cancelling updates would otherwise circulate forever through a body that never
            # consolidates (an identity or a map feeds a (+x, -x) pair back every round)
            delta = delta.consolidate(self.name + ".consolidate")
        # else a reduction's output: every round's result is consolidated by the reduction's
        # input arrangement, and the pairs the source's negation makes at its entry times
        # cancel there one round later. The consolidation would add a wait for the frontier
        # per round: the batch WCC ran 25% faster without it.
        delta.stream.connect_loop(self.handle)
        return result


def check_step(step: Any, name: str) -> None:
    """Refuses, while the dataflow is built, a variable's ``step`` from ``2**COUNTER_BITS``
    on: a loop's times are int64 columns and its frontier runs a step ahead of them, so
    with such a step not one round fits (the round at ``step`` has its frontier at
    ``2 * step``, past int64; the loop failed with a bare ``OverflowError`` in an
    arrangement even when the round fed nothing back). Smaller steps, and steps below 1 or
    not integers, are left to :func:`naiad.operators.loops.feedback`.

    >>> check_step(2**62, "v")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    naiad.dataflow.scope.BuildError: variable 'v': step must be in [1, 2**62), not 46116860...
    """
    from naiad.dataflow.scope import BuildError

    integral = isinstance(step, numbers.Integral) and not isinstance(step, bool)
    if integral and int(step) >= 1 << COUNTER_BITS:
        raise BuildError(
            f"variable {name!r}: step must be in [1, 2**{COUNTER_BITS}), not {int(step)}: "
            "a loop's counters are int64 and its frontier runs a step ahead of its times, "
            "so from that step not one round of feedback fits"
        )


def check_loop_value(result: Any, scope: Any, what: str) -> None:
    """Refuses, while the dataflow is built, a loop's next value that is not a collection
    of the loop's own scope, naming where it came from, ``what`` (rather than fail on an
    attribute of it, or blame an operator of the loop's machinery).

    >>> check_loop_value(None, None, "iterate 'it': what body(collection) returns")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: iterate 'it': what body(collection) returns must be the Collection of the loop's ...
    """
    from naiad.dataflow.scope import BuildError
    from naiad.differential.arrange import Arranged
    from naiad.differential.collection import Collection

    if not isinstance(result, Collection):
        hint = (
            " (an arrangement: return its .as_collection())" if isinstance(result, Arranged) else ""
        )
        raise TypeError(
            f"{what} must be the Collection of the loop's next value, not "
            f"{'None' if result is None else type(result).__name__}{hint}"
        )
    if result.scope is not scope:
        raise BuildError(
            f"{what} is a collection of scope {result.scope.path()!r}, not of the "
            f"loop {scope.path()!r}: a collection of an enclosing scope goes in with "
            ".enter(loop)"
        )


def iterate(
    c: Collection,
    body: Callable[[Collection], Collection],
    priority: Callable[..., Any] | None,
    name: str,
) -> Collection:
    from naiad.differential.collection import check_function

    check_function(body, 1, name, "body(collection)")
    scope = c.scope
    what = f"iterate {name!r}: what body(collection) returns"
    if priority is None:
        loop = scope.iterative(name)
        var = Variable(loop, c.enter(loop, name + ".enter"), name=name + ".variable")
        result = body(var.collection)
        check_loop_value(result, var.scope, what)
        return var.set(result).leave(name + ".leave")
    # Prioritized (seed 002 §5.1.2): the loop counter is the pair (priority, iteration),
    # ordered lexicographically, in product with the enclosing time. The pair is packed in
    # one integer counter, priority in the high bits: entering at ``priority << 32`` and the
    # feedback's +1 keep exactly that order, with the loop's ordinary ``Product`` time (so a
    # new epoch still corrects every earlier (priority, iteration), retractions included).
    loop = scope.iterative(name)
    var = Variable(
        loop, enter_prioritized(c, loop, priority, name + ".enter_at"), name=name + ".variable"
    )
    result = body(var.collection)
    check_loop_value(result, var.scope, what)
    return var.set(result).leave(name + ".leave")


def enter_prioritized(
    c: Collection, loop: Any, priority: Callable[..., Any], name: str = "enter_prioritized"
) -> Collection:
    """``c`` inside a prioritized loop, each record at its priority's first iteration: the
    loop counter (priority, iteration 0), packed."""
    what = f"{name}: priority(*columns)"
    return enter(c, loop, name, entry_counters(priority, what, PRIORITY_BITS, PRIORITY_SHIFT))


PRIORITY_SHIFT = 32
"""Bits of the loop counter below the priority: iterations per priority before overflow."""

PRIORITY_BITS = 30
"""Bits of a priority: with the shift, a packed counter stays well inside int64."""
