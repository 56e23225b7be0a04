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
times at or before the latest tick notified.

A time that cannot leave yet is set apart until what holds it changes, not examined at every
frontier move (with many records waiting in a loop, that cost waiting times x moves): a time
whose tick is not ready (or that has no tick) until that tick is notified; a time whose ready
tick ``c`` is not final, for ``Product(int, int)`` times, until no element of the clock's
frontier has an outer time before ``c``'s (for a complete ``c``, exactly what its finality
asks of a time from an earlier epoch; times of other shapes are examined at each move). A
new tick can only change the choice of a time at or before it whose tick comes after it in the
tuple order (or that has none): it puts those back, not every time set apart (which cost times
x ticks heap operations; the times set apart for a tick after it, or for none, are still each
compared with it). Only the ready ticks that may have lost the last time that chose them are
tested for dropping. Ticks dropped from the sorted list are marked and removed in bulk, so
dropping the earliest of n ticks does not move the n - 1 others (a clock far ahead of the data
cost n**2 / 2 moves).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import Counter
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Broadcast, Pipeline
from naiad.dataflow.scope import StreamCore
from naiad.operators.map import map_batch
from naiad.progress.antichain import le
from naiad.progress.capability import Capability
from naiad.progress.timestamp import Product, join

if TYPE_CHECKING:
    from naiad.operators.stream import Stream

DATA, CLOCK = 0, 1


class ReclockVertex(Vertex):
    def __init__(self) -> None:
        self.waiting: dict[Any, list[Any]] = {}  # data time -> its batches
        # the keys of ``waiting`` not set apart, a heap in the tuple order
        self.times: list[Any] = []
        # the ticks that may still be chosen (those not complete yet, and the ready ones),
        # sorted in the tuple order: a time's tick is the first at or after it there; and
        # those of them dropped since, still in the list until it is compacted
        self.ticks: list[Any] = []
        self.gone: set[Any] = set()
        self.ready: dict[Any, Capability] = {}  # complete ticks some waiting time may go to
        # the latest tick notified: times after it cannot go to a ready tick (a bound that
        # never falls: a time popped whose tick is not ready just waits apart)
        self.latest: Any = None
        # the ready ticks that may have lost the last time that chose them (only these are
        # tested for dropping: not every ready tick at every move)
        self.loose: set[Any] = set()
        # times set apart: per tick not yet ready (None: no tick at or after them), and a
        # heap of (the tick's outer time, time, tick) for Product(int, int) times whose ready
        # tick waits for the clock to leave the earlier epochs
        self.unready: dict[Any, list[Any]] = {}
        self.blocked: list[tuple[int, Any, Any]] = []
        self.parked: Counter[Any] = Counter()  # tick -> the times set apart that chose it

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        if port == CLOCK:
            ticks, i = self.ticks, bisect.bisect_left(self.ticks, cap.time)
            if i == len(ticks) or ticks[i] != cap.time:
                ticks.insert(i, cap.time)
                self.notify_at(cap)
                self._unpark_for(cap.time)  # the first tick at or after a time may be it
            return
        batches = self.waiting.get(cap.time)
        if batches is None:
            batches = self.waiting[cap.time] = []
            heapq.heappush(self.times, cap.time)
        batches.append(batch)

    def on_notify(self, cap: Capability) -> None:
        ready = self.ready
        ready[cap.time] = cap  # borrowed: kept only if the choice of some time is not final
        self.loose.add(cap.time)
        if self.latest is None or self.latest < cap.time:
            self.latest = cap.time
        self._release(cap.time)
        if cap.time in ready:
            ready[cap.time] = cap.retain()

    def on_frontier(self) -> None:
        if self.ready:  # a tick waits for the clock to pass what could come before it
            self._release()

    def _unpark_for(self, new: Any) -> None:
        """Puts back among the times to examine those set apart that may go to the new tick
        ``new``: at or before it, with a tick after it in the tuple order or none (the others
        keep their tick, and what they wait for). Putting back every time at each new tick
        cost times set apart x ticks heap operations."""
        for tick in [c for c in self.unready if c is None or new < c]:
            group = self.unready[tick]
            back = [time for time in group if le(time, new)]
            if not back:
                continue
            if len(back) < len(group):
                self.unready[tick] = [time for time in group if not le(time, new)]
            else:
                del self.unready[tick]
            if tick is not None:
                self._unparked(tick, len(back))
            for time in back:
                heapq.heappush(self.times, time)
        moved = [e for e in self.blocked if new < e[2] and le(e[1], new)]
        if moved:
            self.blocked = [e for e in self.blocked if not (new < e[2] and le(e[1], new))]
            heapq.heapify(self.blocked)
            for _, time, tick in moved:
                self._unparked(tick, 1)
                heapq.heappush(self.times, time)

    def _unpark(self, tick: Any, low: Any) -> None:
        """Puts back among the times to examine those set apart for ``tick`` (if not None),
        and the blocked ones whose tick's outer time is at most ``low`` (all if None)."""
        times, blocked = self.times, self.blocked
        back = self.unready.pop(tick, []) if tick is not None else []
        if back:
            self._unparked(tick, len(back))
        while blocked and (low is None or blocked[0][0] <= low):
            _, time, held = heapq.heappop(blocked)
            self._unparked(held, 1)
            back.append(time)
        for time in back:
            heapq.heappush(times, time)

    def _unparked(self, tick: Any, n: int) -> None:
        """``n`` times set apart for ``tick`` are not any more (no count stays at zero: one
        per tick would pile up)."""
        left = self.parked[tick] - n
        if left:
            self.parked[tick] = left
        else:
            self.parked.pop(tick, None)
            self.loose.add(tick)

    def _tick(self, time: Any) -> Any:
        """The first tick at or after ``time`` (None if none)."""
        ticks, gone = self.ticks, self.gone
        i = bisect.bisect_left(ticks, time)  # only these can be at or after it
        if time.__class__ is not Product or time.outer.__class__ is not int:
            return next(
                (c for c in itertools.islice(ticks, i, None) if le(time, c) and c not in gone),
                None,
            )
        # Product(int, int): the ticks from i on have an outer time at or after ``time``'s,
        # so a tick is at or after it when its counter is; an epoch whose next counter is
        # lower is skipped to its first counter that is not, by bisection (a scan read every
        # tick of every epoch in between: records at (0, k) and ticks at (1, k) cost k each)
        inner, n = time.inner, len(ticks)
        while i < n:
            c = ticks[i]
            if c.inner < inner:
                i = bisect.bisect_left(ticks, Product(c.outer, inner), i)
            elif c in gone:
                i += 1
            else:
                return c
        return None

    def _release(self, borrowed: Any = None) -> None:
        """Sends the waiting records whose tick is ready and final; drops the ready ticks
        that no waiting time can go to any more (the choice only moves earlier as ticks
        arrive, and no data can arrive at or before a complete tick). The capability of the
        tick ``borrowed`` is the notification's own."""
        ready, times, waiting, parked = self.ready, self.times, self.waiting, self.parked
        frontier = self.frontier(CLOCK).frontier
        # Product(int, int): a blocked time's tick is final once the clock left the epochs
        # before the tick's (the least outer time of the frontier; None if it is empty)
        low = min((f.outer for f in frontier), default=None) if self.blocked else None
        self._unpark(borrowed, low)
        latest, loose = self.latest, self.loose
        kept: list[Any] = []
        out: dict[Any, list[Any]] = {}
        while times and times[0] <= latest:
            time = heapq.heappop(times)
            tick = self._tick(time)
            if tick is None or tick not in ready:
                self.unready.setdefault(tick, []).append(time)
                if tick is not None:
                    parked[tick] += 1
                continue
            if any(join(f, time) < tick for f in frontier):
                if tick.__class__ is Product and tick.outer.__class__ is int:
                    heapq.heappush(self.blocked, (tick.outer, time, tick))
                    parked[tick] += 1
                else:  # examined again at the next move
                    kept.append(time)
                continue
            records = out.get(tick)
            if records is None:
                records = out[tick] = []
                loose.add(tick)
            for batch in waiting.pop(time):
                if batch.__class__ is list:
                    records.extend(batch)
                else:  # an array goes whole
                    self.send(ready[tick], batch)
        for tick, records in sorted(out.items()):
            self.send(ready[tick], records)
        chosen = {self._tick(time) for time in kept}  # (their ticks stay loose)
        for time in kept:
            heapq.heappush(times, time)
        gone = self.gone
        for tick in loose:
            if tick in ready and tick not in chosen and tick not in parked:
                cap = ready.pop(tick)
                if tick != borrowed:
                    cap.drop()
                gone.add(tick)
        self.loose = chosen
        if len(gone) > len(self.ticks) // 2:  # compacted once half are gone: O(1) a tick
            self.ticks[:] = [c for c in self.ticks if c not in gone]
            gone.clear()


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
