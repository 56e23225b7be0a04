"""``subscribe`` and ``collect``: a callback per completed time (Naiad §4.1's Subscribe).

The vertex buffers what arrives per time and, whenever its input frontier moves, hands every
time that can no longer receive records to the callback, in time order, once. The buffered
times are indexed (a ``TimeQueue``): a frontier move costs the times it completes, not a test
of every time still buffered (quadratic when one input runs far ahead of another). For
integer epochs, an epoch in which nothing arrived is reported too (with an empty list) once the
frontier is seen beyond it, unless the frontier was seen to jump over more than
:data:`EMPTY_EPOCHS` at once (epochs that are timestamps): then only the epochs with records
in that jump are; when the stream ends, the frontier empties at once and epochs
after the last one seen cannot be told apart from epochs that never existed, so only those
with records are reported. The callback runs on every worker, with that
worker's share of the records; with ``gather=True`` every record goes to worker 0, where the
callback runs with all of them, in time order (and never runs on the other workers).

``subscribe`` returns a :class:`~naiad.ProbeHandle` whose frontier moves only after the
callbacks for the times before it have run on this worker, so a driver can
``await handle.wait(epoch)`` for the callback itself, not merely for the stream's frontier.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from naiad.actors.supervision import DataflowDropped
from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.operators.gather import GatheredElsewhere, to_worker_zero
from naiad.operators.probe import ProbeHandle
from naiad.progress.antichain import Antichain, TimeQueue
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


EMPTY_EPOCHS = 100_000
"""The longest run of empty epochs reported one by one (a frontier jumping further, as with
epochs that are timestamps, skips the empty ones)."""


class SubscribeVertex(Vertex):
    def __init__(
        self, callback: Callable[[Any, list[Any]], None], minimum: Any, levels: int | None = None
    ) -> None:
        self.callback = callback
        self.buffered: dict[Any, list[Any]] = {}
        self.waiting = TimeQueue()  # the keys of ``buffered``, indexed
        # the first integer epoch not yet reported; None inside a loop (only times seen)
        self.next_epoch: int | None = 0 if minimum.__class__ is int else None
        self.reported = Antichain([minimum])  # the frontier as of the last callbacks
        # shaped like the stream's times: a Lex time on a Product loop's handle is refused
        self.handle = ProbeHandle(lambda: self.reported, levels, least=minimum)
        self.handle._what = "subscription handle"

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        records = self.buffered.get(cap.time)
        if records is None:
            self.buffered[cap.time] = records = []
            self.waiting.add(cap.time)
        records.extend(batch)

    def on_frontier(self) -> None:
        lows = self.frontier(0).frontier
        ready = self.waiting.pop_ready([lows])  # the buffered times complete now, in order
        complete: Iterable[Any] = ready
        if self.next_epoch is not None:
            # Integer epochs: every epoch before the frontier is complete, empty ones too,
            # unless the frontier jumped over more than EMPTY_EPOCHS of them (epochs that are
            # timestamps): then only those with records.
            upto = lows[0] if lows else max(self.next_epoch, ready[-1] + 1 if ready else 0)
            if upto - self.next_epoch <= EMPTY_EPOCHS:
                complete = range(self.next_epoch, upto)
            self.next_epoch = max(upto, self.next_epoch)
        for t in complete:
            self.callback(t, self.buffered.pop(t, []))
        self.reported = Antichain(lows)
        self.handle._check_waiters()

    def build_failed(self) -> None:
        self.handle._never_runs("subscribe")  # it would wait for ever

    def dropped(self, error: DataflowDropped) -> None:
        self.handle._drop(DataflowDropped(f"subscribe {self.name!r}: {error}"))

    def checkpoint(self) -> Any:
        return {"buffered": self.buffered, "next_epoch": self.next_epoch}

    def restore(self, state: Any) -> None:
        self.buffered = state["buffered"]
        self.waiting = TimeQueue(self.buffered)
        self.next_epoch = state["next_epoch"]


def subscribe(
    stream: Stream,
    callback: Callable[[Any, list[Any]], None],
    name: str = "subscribe",
    gather: bool = False,
) -> ProbeHandle:
    """Calls ``callback(time, records)`` once per completed time, in time order; returns a
    handle whose ``wait(t)`` returns once the callbacks up to ``t`` have run here. With
    ``gather``, every worker's records go to worker 0 and the callback runs there only, with
    all the records of each time.

    >>> import naiad
    >>> seen = []
    >>> _ = naiad.run(lambda s: s.from_epochs([[1], [], [2, 3]]).subscribe(
    ...     lambda t, rs: seen.append((t, rs))))
    >>> seen
    [(0, [1]), (1, []), (2, [2, 3])]
    >>> seen = []
    >>> _ = naiad.run(lambda s: s.from_epochs([[1], [2, 3]]).subscribe(
    ...     lambda t, rs: seen.append((s.index, t, sorted(rs))), gather=True), workers=2)
    >>> seen
    [(0, 0, [1]), (0, 1, [2, 3])]
    """
    if not callable(callback):
        raise TypeError(f"subscribe {name!r}: callback must be a function, not {callback!r}")
    _check_gather(gather, f"subscribe {name!r}")
    if gather and stream.scope.index != 0:
        callback = _nothing  # this worker receives nothing; worker 0 reports every time
    vertex = SubscribeVertex(callback, stream.scope.minimum(), stream.scope.depth)
    pact = to_worker_zero() if gather else Pipeline()
    stream.scope.add_operator(name, vertex, [(stream, pact)], outputs=0)
    return vertex.handle


def collect(
    stream: Stream, name: str = "collect", gather: bool = False
) -> list[tuple[Any, Any]] | GatheredElsewhere:
    """A list that fills with ``(time, record)`` pairs as times complete, in time order:
    this worker's share, or with ``gather`` every worker's, at worker 0 (on the other
    workers, a :class:`~naiad.operators.gather.GatheredElsewhere` that refuses to be read).

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([[1, 2, 3], [4]]).collect(), workers=2)
    [[(0, 1), (0, 3), (1, 4)], [(0, 2)]]
    >>> out = naiad.run(lambda s: s.from_epochs([[1, 2, 3], [4]]).collect(gather=True), workers=2)
    >>> sorted(out[0]), out[1]
    ([(0, 1), (0, 2), (0, 3), (1, 4)], <collect 'collect' of worker 1: gathered at worker 0>)
    """
    _check_gather(gather, f"collect {name!r}")
    out: list[tuple[Any, Any]] = []
    subscribe(stream, lambda t, rs: out.extend((t, r) for r in rs), name, gather)
    if gather and stream.scope.index != 0:
        return GatheredElsewhere(f"collect {name!r}", stream.scope.index, "collect(gather=True)")
    return out


def _nothing(time: Any, records: list[Any]) -> None:
    pass


def _check_gather(gather: Any, what: str) -> None:
    if not isinstance(gather, bool):
        raise TypeError(f"{what}: gather must be True or False, not {gather!r}")
