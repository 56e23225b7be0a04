"""``capture`` and ``replay``: a stream as an event log, and an event log as a stream.

``stream.capture()`` records, on each worker, what reaches that worker and how the stream's
frontier moves, as a :class:`CaptureLog` of plain events (timely's ``Event``):

* ``("messages", time, batch)``: a batch of records at ``time``, as the worker received it;
* ``("progress", changes)``: the frontier changed; ``changes`` is a list of ``(time, diff)``
  pairs (``+1`` for a time the frontier gained, ``-1`` for one it lost, gains first).

Every log starts, implicitly, with its frontier at the least time (count 1), as timely's
do; a log whose frontier has become empty is *complete*. Messages at a time always come before
the progress event that passes that time.

``scope.replay(logs)`` turns logs (captured in another dataflow, another runtime, or loaded
from a file) back into a stream with the same records at the same times: worker ``w`` of the
replaying dataflow replays ``logs[w::peers]`` (any number of logs on any number of workers; a
worker without logs holds nothing), or with ``split=False`` exactly the logs its build gives
it. It holds one capability per element of the frontier of what it replays (the meet of its
logs' frontiers: every captured log sees the stream's global frontier), so the replayed
stream's frontier moves as the original's did, one progress event per activation. A log
still being captured is followed: the replay wakes when it grows, until it completes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from naiad.actors.supervision import DataflowDropped, DataflowStopped
from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.dataflow.scope import BuildError
from naiad.operators.gather import GatheredElsewhere, to_worker_zero
from naiad.operators.input import ImportVertex
from naiad.progress.antichain import MutableAntichain, le
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time_like, same_shape

if TYPE_CHECKING:
    from naiad.dataflow.scope import ScopeCore
    from naiad.operators.stream import Stream

MESSAGES = "messages"
PROGRESS = "progress"


class CaptureLog(Sequence[Any]):
    """The events of one worker's share of a stream: a read-only list of event tuples that
    grows while the capture runs (``len``, indexing and iteration see what is there now;
    ``async for event in log.follow()`` waits for the rest).

    ``CaptureLog(events)`` makes a log from events saved earlier (``list(log)``: plain
    tuples, lists and times, which the wire codec and pickle both carry).

    >>> import naiad
    >>> logs = naiad.run(lambda s: s.from_epochs([[1, 2], [3]]).capture())
    >>> logs[0].records(), logs[0].frontiers()
    ([(0, 1), (0, 2), (1, 3)], [[0], [1], []])
    >>> list(logs[0])[:2]
    [('messages', 0, [1, 2]), ('progress', [(1, 1), (0, -1)])]
    """

    def __init__(self, events: Iterable[Any] = (), minimum: Any = 0) -> None:
        self._events: list[Any] = [tuple(e) for e in events]
        self.minimum = minimum  # the least time: the frontier a log starts from
        self.live = False  # a running capture still appends to it
        self.failure: BaseException | None = None  # what stopped the captured dataflow
        self._followers: list[ReplayVertex] = []  # woken after each append
        self._waiters: list[asyncio.Future[None]] = []  # follow() waiting for more
        # the frontier of the first ``_folded`` events: ``complete`` folds in only the events
        # added since (polling a growing log re-read every event at every call)
        self._frontier = MutableAntichain()
        self._frontier.update_iter([(minimum, 1)])
        self._folded = 0

    @property
    def events(self) -> list[Any]:
        """The list of events itself, plain data to save or send (``list(log)`` copies what is
        there now; this list keeps growing while the capture runs: do not modify it)."""
        return self._events

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, index: Any) -> Any:
        return self._events[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._events)

    def __repr__(self) -> str:
        state = "live" if self.live else "complete" if self.complete else "ended"
        return f"<CaptureLog of {len(self._events)} events, {state}>"

    @property
    def complete(self) -> bool:
        """Whether the frontier of the events so far is empty: the stream ended."""
        events, frontier = self._events, self._frontier
        while self._folded < len(events):
            event = events[self._folded]
            if event[0] == PROGRESS:
                frontier.update_iter(event[1])
            self._folded += 1
        return frontier.is_empty()

    def records(self) -> list[tuple[Any, Any]]:
        """The ``(time, record)`` pairs of the messages so far, in arrival order."""
        return [(e[1], r) for e in self._events if e[0] == MESSAGES for r in e[2]]

    def frontiers(self) -> list[list[Any]]:
        """The frontier at the start and after each progress event (sorted lists of times)."""
        counts = MutableAntichain()
        counts.update_iter([(self.minimum, 1)])
        out = [[self.minimum]]
        for event in self._events:
            if event[0] == PROGRESS:
                counts.update_iter(event[1])
                out.append(sorted(counts.frontier))
        return out

    async def follow(self) -> AsyncIterator[Any]:
        """Every event, waiting for new ones while the capture runs; ends once the captured
        stream has ended (raises ``DataflowStopped`` if its dataflow stopped first)."""
        i = 0
        while True:
            while i < len(self._events):
                yield self._events[i]
                i += 1
            if self.failure is not None:
                raise _stopped("a CaptureLog's follow()", self.failure)
            if not self.live:
                return
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            await future

    def _append(self, event: Any) -> None:
        self._events.append(event)
        self._wake()

    def _stop(self, failure: BaseException | None) -> None:
        """The capture ends: its stream completed (``None``), or its dataflow stopped."""
        if failure is not None and self.failure is None:
            self.failure = failure
        self.live = False
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)
        for follower in list(self._followers):
            follower.wake()


def _stopped(what: str, failure: BaseException) -> DataflowStopped:
    error = DataflowStopped(
        f"{what}: the captured dataflow stopped before its stream completed "
        f"({type(failure).__name__}: {failure})"
    )
    error.__cause__ = failure
    return error


class CaptureVertex(Vertex):
    """Appends every message and every move of its input frontier to its log."""

    def __init__(self, log: CaptureLog) -> None:
        self.log = log
        self.seen: list[Any] = [log.minimum]  # the frontier as of the last progress event
        log.live = True

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        self.log._append((MESSAGES, cap.time, batch))

    def on_frontier(self) -> None:
        now = self.frontier(0).frontier
        seen = self.seen
        if now == seen:
            return
        # sets: a frontier of k incomparable times (a loop's staircase) cost k**2 list
        # comparisons per move
        before, after = set(seen), set(now)
        changes = [(t, 1) for t in now if t not in before]  # gains first (invariant 2)
        changes.extend((t, -1) for t in seen if t not in after)
        self.seen = list(now)
        if changes:
            self.log._append((PROGRESS, changes))
        if not now:
            self.log._stop(None)

    def dataflow_stopped(self, failure: BaseException) -> None:
        self.log._stop(failure)

    def followers(self) -> list[Vertex]:
        """The replays following this log while it grows."""
        return list(self.log._followers)


class ReplayVertex(ImportVertex):
    """Emits the messages of its logs and holds capabilities for the meet of their
    frontiers, one progress event per log and activation."""

    def __init__(self, logs: list[CaptureLog]) -> None:
        self.logs = logs
        self.read = [0] * len(logs)  # per log, the events replayed
        self.open = list(range(len(logs)))  # the logs not replayed to their end yet
        self.held = [MutableAntichain() for _ in logs]  # per log, its frontier so far
        self.counts = MutableAntichain()  # all of them: the frontier to hold
        self.caps: dict[Any, Capability] = {}
        self.minimum: Any = None
        self.following = False

    def on_start(self, cap: Capability) -> None:
        if not self.logs:
            return  # this worker replays nothing: the initial capability goes
        self.minimum = cap.time
        for log, held in zip(self.logs, self.held, strict=True):
            held.update_iter([(cap.time, 1)])
            log._followers.append(self)
        self.counts.update_iter([(cap.time, len(self.logs))])
        self.caps = {cap.time: cap.retain()}
        self.following = True

    def wake(self) -> None:
        """A log it follows grew (or ended): one step of replay at the next activation."""
        self.shard.worker.schedule_notify(self.shard)

    def on_frontier(self) -> None:  # scheduled at start and by wake: one step of replay
        if not self.caps:
            return
        more = False
        logs, held, read = self.logs, self.held, self.read
        for i in self.open:
            more |= self._step(i, logs[i])
        # a log read to its end, its frontier empty, has nothing more to give (stepping it at
        # each activation cost the logs x the activations of the longest)
        self.open = [i for i in self.open if not held[i].is_empty() or read[i] < len(logs[i])]
        if not self.caps:
            # every log's frontier is empty: an event still unread came after its log's end
            # (it would otherwise be dropped unread)
            for i, log in enumerate(self.logs):
                if self.read[i] < len(log._events):
                    raise ValueError(
                        f"replay {self.name!r}: event {self.read[i]} of log {i} is "
                        f"{log._events[self.read[i]]!r:.80}, after the log's frontier became "
                        f"empty (its stream had ended)"
                    )
            self._unfollow()
        elif more:
            self.wake()  # the next progress event at the next activation

    def _step(self, i: int, log: CaptureLog) -> bool:
        """Replays log ``i`` up to and including its next progress event; returns whether
        events are left to replay now."""
        events, at = log._events, self.read[i]
        while at < len(events):
            event = events[at]
            at += 1
            self.read[i] = at
            if event[0] == MESSAGES and len(event) == 3:
                self._send(i, event[1], event[2])
            elif event[0] == PROGRESS and len(event) == 2:
                self._progress(i, event[1])
                if at < len(events):
                    return True
                break
            else:
                raise ValueError(
                    f"replay {self.name!r}: event {at - 1} of log {i} is {event!r:.80}; an "
                    f"event is ('messages', time, batch) or ('progress', [(time, diff), ...])"
                )
        if not self.held[i].is_empty() and not log.live:
            if log.failure is not None:
                raise _stopped(f"replay {self.name!r} of log {i}", log.failure)
            raise ValueError(
                f"replay {self.name!r}: log {i} ends with its frontier at "
                f"{sorted(self.held[i].frontier)}, not empty: it was captured from a stream "
                f"that had not completed"
            )
        return False

    def _time(self, i: int, time: Any) -> Any:
        return as_time_like(time, self.minimum, f"replay {self.name!r}: a time of log {i}")

    def _send(self, i: int, time: Any, batch: Any) -> None:
        time = self._time(i, time)
        if not self.held[i].less_equal(time):
            raise ValueError(
                f"replay {self.name!r}: log {i} has a message at time {time!r} after its "
                f"frontier passed it ({sorted(self.held[i].frontier)})"
            )
        if batch.__class__ is list:
            batch = batch.copy()  # the log is read again by others; a consumer may modify it
        cap = self.caps.get(time)
        if cap is not None:
            self.send(cap, batch)
            return
        cap = self._delayed(time)
        self.send(cap, batch)
        cap.drop()

    def _delayed(self, time: Any) -> Capability:
        for held in self.caps.values():
            if le(held.time, time):
                return held.delayed(time)
        raise AssertionError(f"no capability at or before {time!r}")  # pragma: no cover

    def _progress(self, i: int, changes: Any) -> None:
        changes = [(self._time(i, t), int(d)) for t, d in changes]
        held = self.held[i]
        for t, d in changes:
            if d > 0 and not held.less_equal(t):  # a frontier only moves forward
                raise ValueError(
                    f"replay {self.name!r}: log {i}'s frontier gains time {t!r}, which is not "
                    f"at or after its frontier {sorted(held.frontier)}: a log's frontier "
                    f"only moves forward"
                )
        held.update_iter(changes)
        moved = self.counts.update_iter(changes)
        for t, d in moved:  # the new capabilities first, then the old ones go (invariant 2)
            if d > 0 and t not in self.caps:
                self.caps[t] = self._delayed(t)
        for t, d in moved:
            if d < 0:
                self.caps.pop(t).drop()

    def close(self) -> None:
        """Stops following the logs: what was replayed stands, nothing later is."""
        for cap in self.caps.values():
            cap.drop()
        self.caps = {}
        self._unfollow()

    def dataflow_stopped(self, failure: BaseException) -> None:
        self._unfollow()

    def dropped(self, error: DataflowDropped) -> None:
        self._unfollow()

    def _unfollow(self) -> None:
        if self.following:
            self.following = False
            for log in self.logs:
                log._followers.remove(self)


def capture(
    stream: Stream, name: str = "capture", gather: bool = False
) -> CaptureLog | GatheredElsewhere:
    """This worker's share of ``stream`` as a growing :class:`CaptureLog` (its messages and
    the stream's frontier moves); ``naiad.run`` returns one per worker. With ``gather``,
    every worker's messages go to worker 0, whose log holds the whole stream (on the other
    workers, a :class:`~naiad.operators.gather.GatheredElsewhere` that refuses to be read).

    >>> import naiad
    >>> logs = naiad.run(lambda s: s.from_epochs([[1, 2, 3]]).capture(), workers=2)
    >>> [log.records() for log in logs]
    [[(0, 1), (0, 3)], [(0, 2)]]
    >>> logs = naiad.run(lambda s: s.from_epochs([[1, 2, 3]]).capture(gather=True), workers=2)
    >>> frontiers = logs[0].frontiers()  # (the steps between depend on the schedule)
    >>> sorted(logs[0].records()), frontiers[0], frontiers[-1], logs[1]
    ([(0, 1), (0, 2), (0, 3)], [0], [], <capture 'capture' of worker 1: gathered at worker 0>)
    """
    if not isinstance(gather, bool):
        raise TypeError(f"capture {name!r}: gather must be True or False, not {gather!r}")
    if gather and stream.scope.index != 0:
        # this worker receives nothing: a log here would only pile up a progress event per
        # move of the frontier, for as long as the stream runs, that nobody can read
        stream.scope.add_operator(name, _Elsewhere(), [(stream, to_worker_zero())], outputs=0)
        return GatheredElsewhere(f"capture {name!r}", stream.scope.index, "capture(gather=True)")
    log = CaptureLog(minimum=stream.scope.minimum())
    pact = to_worker_zero() if gather else Pipeline()
    stream.scope.add_operator(name, CaptureVertex(log), [(stream, pact)], outputs=0)
    return log


class _Elsewhere(Vertex):
    """A gathered capture on a worker other than 0, which no message reaches (and which is
    not woken by frontier moves: it has no ``on_frontier``)."""

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        raise AssertionError("a gathered capture received a message on a worker other than 0")


def replay(scope: ScopeCore, logs: Any, name: str = "replay", split: bool = True) -> Stream:
    """A stream of the records of ``logs`` at their times, whose frontier moves as theirs did.

    ``logs`` is one log or a list of logs, each a :class:`CaptureLog` or a list of its events.
    Worker ``w`` replays ``logs[w::peers]``; with ``split=False``, every log it is given.

    ``scope`` may be a loop context (as timely's ``replay_into`` takes any scope): the logs'
    times are then the loop's (``Product`` or ``Lex`` times of its depth, as a capture in a
    loop of the same shape records them), and the replay is a source inside the loop: it
    holds capabilities at loop times, from the loop's least time until its logs' frontiers
    pass them, so the loop's outer times complete only once the logs have passed them, as
    for any operator of the loop. A log of another shape is refused: a :class:`CaptureLog`
    when the dataflow is built, a list of events at its first time of another shape.

    >>> import naiad
    >>> logs = naiad.run(lambda s: s.from_epochs([[1, 2], [3]]).capture(), workers=2)
    >>> out = naiad.run(lambda s: s.replay(logs).map(lambda x: x * 10).collect())
    >>> sorted(out[0])
    [(0, 10), (0, 20), (1, 30)]
    >>> def countdown(s):                       # a stream of a loop, captured there
    ...     with s.iterative() as loop:
    ...         handle, cycle = loop.feedback()
    ...         body = s.from_epochs([[2]]).enter(loop).concat(cycle)
    ...         body.map(lambda x: x - 1).filter(lambda x: x >= 0).connect_loop(handle)
    ...     return body.capture()
    >>> logs = naiad.run(countdown)
    >>> def again(s):                            # replayed inside a loop of another dataflow
    ...     with s.iterative() as loop:
    ...         return loop.replay(logs).leave().collect()
    >>> sorted(naiad.run(again)[0])
    [(0, 0), (0, 1), (0, 2)]
    """
    given = [logs] if isinstance(logs, CaptureLog) else _listed(logs, name)
    checked = [_as_log(log, k, name, scope) for k, log in enumerate(given)]
    mine = checked[scope.index :: scope.peers] if split else checked
    node = scope.add_operator(name, ReplayVertex(mine), [])
    return scope.stream(node)


def _listed(logs: Any, name: str) -> list[Any]:
    if isinstance(logs, str | bytes | dict) or not isinstance(logs, Iterable):
        raise TypeError(
            f"replay {name!r}: logs must be a CaptureLog or a list of them (or of lists of "
            f"events), not {type(logs).__name__}"
        )
    return list(logs)


def _as_log(log: Any, k: int, name: str, scope: ScopeCore) -> CaptureLog:
    minimum = scope.minimum()
    if isinstance(log, CaptureLog):
        if not same_shape(log.minimum, minimum):
            raise BuildError(
                f"replay {name!r}: logs[{k}] was captured from a stream with times like "
                f"{log.minimum!r}, and scope {scope.path()!r} has times like {minimum!r}; "
                f"replay a log into a scope whose times have its stream's shape"
            )
        return log
    if isinstance(log, GatheredElsewhere):
        raise ValueError(
            f"replay {name!r}: logs[{k}] is worker {log.worker}'s share of a gathered capture, "
            f"which is empty: its records are in worker 0's log; replay that one alone"
        )
    if isinstance(log, tuple) and log and isinstance(log[0], str):
        raise TypeError(
            f"replay {name!r}: logs[{k}] is an event, not a log: give a list of logs (to "
            f"replay one list of events, give [events])"
        )
    if isinstance(log, str | bytes | dict) or not isinstance(log, Iterable):
        raise TypeError(
            f"replay {name!r}: logs[{k}] must be a CaptureLog or a list of events, not "
            f"{type(log).__name__}"
        )
    return CaptureLog(log, minimum)
