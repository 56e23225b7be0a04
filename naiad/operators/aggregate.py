"""``aggregate``: folds the values of each key at each time, emits once the time completes
(timely's ``aggregate``).

Records are ``(key, value)`` pairs, routed by ``key(k)`` (an int) so that every value of a key
reaches one worker. Per time and key the vertex keeps one aggregate, starting from ``init()``
and replaced by ``fold(k, value, aggregate)`` for each value; once the time is complete (a
notification) it sends ``emit(k, aggregate)`` for each key seen at that time, and forgets them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Exchange
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class AggregateVertex(Vertex):
    def __init__(
        self,
        fold: Callable[[Any, Any, Any], Any],
        emit: Callable[[Any, Any], Any],
        init: Callable[[], Any],
    ) -> None:
        self.fold, self.emit, self.init = fold, emit, init
        self.pending: dict[Any, dict[Any, Any]] = {}  # time -> key -> aggregate

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        aggregates = self.pending.get(cap.time)
        if aggregates is None:
            aggregates = self.pending[cap.time] = {}
            self.notify_at(cap)
        fold, init = self.fold, self.init
        for k, value in batch:  # pairs: the channel checked them (routed)
            aggregates[k] = fold(k, value, aggregates[k] if k in aggregates else init())

    def on_notify(self, cap: Capability) -> None:
        emit = self.emit
        self.send(cap, [emit(k, a) for k, a in self.pending.pop(cap.time).items()])


def pair(record: Any, name: str) -> tuple[Any, Any]:
    """``record`` as a ``(key, value)`` pair, or the error that names the operator."""
    if record.__class__ is tuple and len(record) == 2:
        return record
    if isinstance(record, tuple | list) and len(record) == 2:
        return record[0], record[1]
    raise TypeError(f"{name!r}: records must be (key, value) pairs, not {record!r:.80}")


def routed(key: Callable[[Any], int], what: str, name: str) -> Exchange:
    """The exchange that sends every record of a key to one worker: ``key(k)`` of its key.
    Its check refuses a batch holding a record that is not a pair at the sender, on every
    layout (one worker too): a send to an input raises, with nothing of it delivered."""
    if not callable(key):
        raise TypeError(f"{what} {name!r}: key must be a function of a record's key, not {key!r}")

    def check(batch: Any) -> None:
        for record in batch:
            if record.__class__ is not tuple or len(record) != 2:
                pair(record, name)

    return Exchange(key=lambda record: key(record[0]), check=check)


def iterable_result(result: Any, name: str, call: str | Callable[[], str]) -> Iterable[Any]:
    """``result`` if it can be iterated over; a ``TypeError`` naming the operator if not.
    ``call`` names the call that returned it; a function making that name is called only
    to refuse (a record's repr, made for every record, may cost more than the call).

    >>> iterable_result([1], "flat_map 'f'", "f(2)")
    [1]
    >>> iterable_result(None, "flat_map 'f'", "f(2)")
    Traceback (most recent call last):
    ...
    TypeError: flat_map 'f': f(2) must return an iterable, not None
    """
    try:
        iter(result)
    except TypeError:
        shown = call() if callable(call) else call
        raise TypeError(f"{name}: {shown} must return an iterable, not {result!r}") from None
    return cast(Iterable[Any], result)


def checked_functions(what: str, name: str, **functions: Any) -> None:
    for argument, f in functions.items():
        if not callable(f):
            raise TypeError(f"{what} {name!r}: {argument} must be a function, not {f!r}")


def aggregate(
    stream: Stream,
    fold: Callable[[Any, Any, Any], Any],
    emit: Callable[[Any, Any], Any],
    key: Callable[[Any], int],
    init: Callable[[], Any] = lambda: None,
    name: str = "aggregate",
) -> Stream:
    """Per time and key of ``(key, value)`` records: ``emit(k, aggregate)`` once the time is
    complete, the aggregate being ``init()`` folded with ``fold(k, value, aggregate)``;
    records of a key meet on worker ``key(k) % peers``.

    >>> import naiad
    >>> words = [[("a", 1), ("b", 2), ("a", 3)], [("b", 5)]]
    >>> sums = lambda s: s.from_epochs(words).aggregate(
    ...     lambda k, v, total: total + v, lambda k, total: (k, total), key=len, init=int)
    >>> sorted(naiad.run(lambda s: sums(s).collect())[0])
    [(0, ('a', 4)), (0, ('b', 2)), (1, ('b', 5))]
    """
    checked_functions("aggregate", name, fold=fold, emit=emit, init=init)
    node = stream.scope.add_operator(
        name, AggregateVertex(fold, emit, init), [(stream, routed(key, "aggregate", name))]
    )
    return stream.derive(node)
