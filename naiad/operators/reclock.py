"""``reclock``: records re-timed to the ticks of a clock stream (timely's ``Reclock``).

A record at time ``t`` is released at the least time ``c`` of the clock stream with
``t <= c``, once neither the data nor the clock can still produce anything at or before
``c`` (a notification at ``c``); records after every tick wait for a later one (and are never
released if none comes). Only the clock's times matter, not its records, and every worker
needs every tick: the clock reaches the vertex as one marker per batch, broadcast, so each
worker releases its own data at the ticks of the whole clock stream.

Times in a loop are only partially ordered: two ticks at or after ``t`` may be incomparable
(``Product(0, 5)`` and ``Product(1, 0)`` for ``t = Product(0, 0)``), so "the least" is taken in
the tuple order, the total order that extends the partial one (``naiad/progress/timestamp.py``;
the outer time first). Timely's reclock releases at whichever such tick is notified first,
which depends on scheduling; here the choice is the least in the tuple order of *all* ticks at
or after ``t``, so a tick ``c`` that is complete waits until no tick before it in that order can
still come: none can once every element ``f`` of the clock's frontier has ``join(f, t)`` at or
after ``c`` (a later tick at or after both ``f`` and ``t`` is at or after their join). For
totally ordered times that holds as soon as ``c`` is complete, as before.

The vertex holds no capability for its buffered data: the clock's notification holds the time
it releases at, which is enough, because data at ``t <= c`` can only be released at ``c`` or a
later tick; the notification's capability is kept (``ready``) while the choice of a waiting
time that would go there is not final. Waiting times sit in a heap in the tuple order, which
lists a time before every time it precedes in the partial order: a release pops only the
times at or before the latest ready tick.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Broadcast, Pipeline
from naiad.dataflow.scope import StreamCore
from naiad.operators.map import map_batch
from naiad.progress.antichain import le
from naiad.progress.capability import Capability
from naiad.progress.timestamp import join

if TYPE_CHECKING:
    from naiad.operators.stream import Stream

DATA, CLOCK = 0, 1


class ReclockVertex(Vertex):
    def __init__(self) -> None:
        self.waiting: dict[Any, list[Any]] = {}  # data time -> its batches
        self.times: list[Any] = []  # the keys of ``waiting``, a heap in the tuple order
        # the ticks that may still be chosen (those not complete yet, and the ready ones),
        # sorted in the tuple order: a time's tick is the first at or after it there
        self.ticks: list[Any] = []
        self.ready: dict[Any, Capability] = {}  # complete ticks some waiting time may go to

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        if port == CLOCK:
            ticks, i = self.ticks, bisect.bisect_left(self.ticks, cap.time)
            if i == len(ticks) or ticks[i] != cap.time:
                ticks.insert(i, cap.time)
                self.notify_at(cap)
            return
        batches = self.waiting.get(cap.time)
        if batches is None:
            batches = self.waiting[cap.time] = []
            heapq.heappush(self.times, cap.time)
        batches.append(batch)

    def on_notify(self, cap: Capability) -> None:
        ready = self.ready
        ready[cap.time] = cap  # borrowed: kept only if the choice of some time is not final
        self._release(cap.time)
        if cap.time in ready:
            ready[cap.time] = cap.retain()

    def on_frontier(self) -> None:
        if self.ready:  # a tick waits for the clock to pass what could come before it
            self._release()

    def _release(self, borrowed: Any = None) -> None:
        """Sends the waiting records whose tick is ready and final; drops the ready ticks
        that no waiting time can go to any more (the choice only moves earlier as ticks
        arrive, and no data can arrive at or before a complete tick). The capability of the
        tick ``borrowed`` is the notification's own."""
        ticks, ready, times, waiting = self.ticks, self.ready, self.times, self.waiting
        frontier = self.frontier(CLOCK).frontier
        latest = max(ready)
        chosen: set[Any] = set()
        kept: list[Any] = []
        out: dict[Any, list[Any]] = {}
        while times and times[0] <= latest:
            time = heapq.heappop(times)
            start = bisect.bisect_left(ticks, time)  # only these can be at or after it
            tick = next((c for c in itertools.islice(ticks, start, None) if le(time, c)), None)
            if tick is None or tick not in ready or any(join(f, time) < tick for f in frontier):
                kept.append(time)
                chosen.add(tick)
                continue
            records = out.setdefault(tick, [])
            for batch in waiting.pop(time):
                if batch.__class__ is list:
                    records.extend(batch)
                else:  # an array goes whole
                    self.send(ready[tick], batch)
        for time in kept:
            heapq.heappush(times, time)
        for tick, records in sorted(out.items()):
            self.send(ready[tick], records)
        for tick in [c for c in ready if c not in chosen]:
            cap = ready.pop(tick)
            if tick != borrowed:
                cap.drop()
            del ticks[bisect.bisect_left(ticks, tick)]


def reclock(stream: Stream, clock: Stream, name: str = "reclock") -> Stream:
    """Each record at the least time of ``clock`` at or after its own, released once both
    streams have passed that time. Of incomparable clock times (in a loop) the least in the
    tuple order (outer time first) is chosen, whatever the schedule: a record at
    ``Product(0, 0)`` with ticks at ``Product(1, 0)`` and ``Product(0, 5)`` leaves at
    ``Product(0, 5)``, once the clock can no longer tick at ``Product(0, 1..4)``.

    >>> import naiad
    >>> def build(s):
    ...     data = s.from_epochs([["a"], ["b"], ["c"], ["d"], ["e"]])
    ...     clock = s.from_epochs([[], ["tick"], [], ["tick"]])   # ticks at 1 and 3
    ...     return data.reclock(clock).collect()
    >>> naiad.run(build)
    [[(1, 'a'), (1, 'b'), (3, 'c'), (3, 'd')]]
    """
    if not isinstance(clock, StreamCore):
        raise TypeError(f"reclock {name!r}: the clock must be a stream, not {clock!r:.80}")
    ticks = map_batch(clock, _tick, f"{name}.ticks")
    node = stream.scope.add_operator(
        name, ReclockVertex(), [(stream, Pipeline()), (ticks, Broadcast())]
    )
    return stream.derive(node)


def _tick(batch: Any) -> list[None]:
    return [None]
