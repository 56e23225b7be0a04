"""``reclock``: records re-timed to the ticks of a clock stream (timely's ``Reclock``).

A record at time ``t`` is released at the least time ``c`` of the clock stream with
``t <= c``, once neither the data nor the clock can still produce anything at or before
``c`` (a notification at ``c``); records after every tick wait for a later one (and are never
released if none comes). Only the clock's times matter, not its records, and every worker
needs every tick: the clock reaches the vertex as one marker per batch, broadcast, so each
worker releases its own data at the ticks of the whole clock stream.

The vertex holds no capability for its buffered data: the clock's notification holds the time
it releases at, which is enough, because data at ``t <= c`` can only be released at ``c`` or a
later tick. Waiting times sit in a heap in the tuple order, which lists a time before every
time it precedes in the partial order (``naiad/progress/timestamp.py``): a tick releases the
waiting times it is at or after by popping the heap's least ones.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Broadcast, Pipeline
from naiad.dataflow.scope import StreamCore
from naiad.operators.map import map_batch
from naiad.progress.antichain import le
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream

DATA, CLOCK = 0, 1


class ReclockVertex(Vertex):
    def __init__(self) -> None:
        self.waiting: dict[Any, list[Any]] = {}  # data time -> its batches
        self.times: list[Any] = []  # the keys of ``waiting``, a heap in the tuple order

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        if port == CLOCK:
            self.notify_at(cap)  # one notification per distinct time
            return
        batches = self.waiting.get(cap.time)
        if batches is None:
            batches = self.waiting[cap.time] = []
            heapq.heappush(self.times, cap.time)
        batches.append(batch)

    def on_notify(self, cap: Capability) -> None:
        tick, times, waiting = cap.time, self.times, self.waiting
        records: list[Any] = []
        later: list[Any] = []  # popped but not at or before the tick (a partial order)
        while times and times[0] <= tick:
            time = heapq.heappop(times)
            if not le(time, tick):
                later.append(time)
                continue
            for batch in waiting.pop(time):
                if batch.__class__ is list:
                    records.extend(batch)
                else:  # an array goes whole
                    self.send(cap, batch)
        for time in later:
            heapq.heappush(times, time)
        self.send(cap, records)


def reclock(stream: Stream, clock: Stream, name: str = "reclock") -> Stream:
    """Each record at the least time of ``clock`` at or after its own, released once both
    streams have passed that time.

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
