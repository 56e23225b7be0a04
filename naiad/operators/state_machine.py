"""``state_machine``: a state per key, updated by each value in time order (timely's
``state_machine``).

Records are ``(key, value)`` pairs, routed by ``key(k)`` (an int). For each record the vertex
calls ``f(k, value, state)`` with the key's state (``init()`` at first), which returns
``(new_state, outputs)``: the records of ``outputs`` are sent at the record's time, and a new
state of ``None`` forgets the key (its next value starts from ``init()`` again). A record
whose time may still be preceded by others (the input frontier is strictly before it) waits,
with a capability retained for its time, until the frontier no longer holds it back, so each
key's state sees its values in time order; the others are applied at once, after any waiting
time they follow. Within one time, values of a key are applied in arrival order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.operators.aggregate import checked_functions, iterable_result, routed
from naiad.progress.antichain import TimeQueue
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream

Transition = Callable[[Any, Any, Any], tuple[Any, Iterable[Any]]]


class StateMachineVertex(Vertex):
    def __init__(self, f: Transition, init: Callable[[], Any]) -> None:
        self.f, self.init = f, init
        self.states: dict[Any, Any] = {}
        # time -> records waiting for earlier times, and a capability held for that time
        self.stashed: dict[Any, tuple[Capability, list[Any]]] = {}
        # the stashed times, indexed: a frontier move costs the times it releases, not a
        # test of every time still stashed (quadratic when many times wait)
        self.queue = TimeQueue()

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        time = cap.time
        if self.frontier(0).less_than(time):  # earlier times may still arrive: wait
            stash = self.stashed.get(time)
            if stash is None:
                stash = self.stashed[time] = (cap.retain(), [])
                self.queue.add(time)
            stash[1].extend(batch)
        else:
            self._catch_up()
            self._apply(cap, batch)

    def on_frontier(self) -> None:
        self._catch_up()

    def _catch_up(self) -> None:
        """Applies, least first, the stashed times the frontier no longer holds back. Called
        before a message applied at once too: a message at a later time can arrive after the
        frontier has passed a stashed time, before ``on_frontier`` has run."""
        if not self.stashed:
            return
        # Nothing before t can arrive once no frontier element is below t (the times the
        # queue releases) or t is itself an element (an antichain has none below it).
        queue, elements = self.queue, self.frontier(0).frontier
        ready = queue.pop_ready([elements])
        for t in elements:
            if t in queue:
                queue.discard(t)
                ready.append(t)
        for t in sorted(ready):  # a linear extension of the partial order of times
            cap, records = self.stashed.pop(t)
            self._apply(cap, records)
            cap.drop()

    def _apply(self, cap: Capability, batch: Any) -> None:
        f, init, states, name = self.f, self.init, self.states, self.name
        out: list[Any] = []
        for k, value in batch:  # pairs: the channel checked them (routed)
            result = f(k, value, states[k] if k in states else init())
            if not (isinstance(result, tuple) and len(result) == 2):
                raise TypeError(
                    f"state_machine {name!r}: f must return (new state, outputs), not "
                    f"{result!r:.80}"
                )
            state, outputs = result
            if state is None:
                states.pop(k, None)
            else:
                states[k] = state
            try:
                out.extend(outputs)
            except TypeError:  # outputs that are no iterable (None) are named; else the user's
                call = f"f({k!r:.40}, value, state) (its outputs, second in the pair)"
                iterable_result(outputs, f"state_machine {name!r}", call)
                raise
        self.send(cap, out)


def state_machine(
    stream: Stream,
    f: Transition,
    key: Callable[[Any], int],
    init: Callable[[], Any] = lambda: None,
    name: str = "state_machine",
) -> Stream:
    """For ``(key, value)`` records, ``f(k, value, state) -> (new_state, outputs)`` per record
    in time order per key; ``outputs`` are sent at the record's time; a ``None`` state forgets
    the key. Records of a key meet on worker ``key(k) % peers``.

    >>> import naiad
    >>> def running(k, v, total):               # emits each key's running total
    ...     return total + v, [(k, total + v)]
    >>> events = [[("a", 1), ("b", 2)], [("a", 3)], [("a", 4)]]
    >>> naiad.run(lambda s: s.from_epochs(events).state_machine(
    ...     running, key=len, init=int).collect())
    [[(0, ('a', 1)), (0, ('b', 2)), (1, ('a', 4)), (2, ('a', 8))]]
    """
    checked_functions("state_machine", name, f=f, init=init)
    node = stream.scope.add_operator(
        name, StateMachineVertex(f, init), [(stream, routed(key, "state_machine", name))]
    )
    return stream.derive(node)
