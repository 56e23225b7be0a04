"""The progress actor: one per process, owner of its dataflows' trackers, and its end of the
distributed progress protocol (Naiad §3.3).

Workers do not touch a tracker. Each worker accumulates the count changes of a callback (and
of everything delivered on its stack) in a :class:`ChangeBatch` and submits the batch when the
callback returns. The progress actor applies batches whole (invariant 1): a worker's batch
carries both the decrement for the message it consumed and the increments for what it
produced, and no frontier is recomputed in the middle of a batch, so the counts never show a
hole where a message could still appear (invariant 2).

With one process, a submitted batch is applied at once. With several, the actor keeps the
*local view* of the global counts: its tracker holds every batch that has been broadcast, by
any process, and received here. Local batches go to an outgoing buffer, which is broadcast to
every process (itself included, by applying it locally) as one batch, positive updates first,
numbered per (sender, receiver). Received batches are applied in sequence order: early ones
wait in a reorder buffer, duplicates are dropped (invariant 3, whatever the transport).

Local accumulation. Holding the outgoing buffer is always *safe*: it is a delayed broadcast
of batches merged into one, and Naiad's safety argument allows any FIFO delay; everything a
held increment could produce is still implied, in every view, by the broadcast pointstamp it
descends from, whose decrement is held too. Whatever rule decides *when* to flush, the buffer
leaves whole (positives first) and is applied to the local view only when it leaves, so no
holding rule can put a local frontier ahead of the global one: the rules below are about
liveness only. The buffer is held only while every update in it is

1. an increment (withholding one never keeps a frontier from moving), or
2. a decrement of a pointstamp that another active pointstamp of the local view
   could-result-in (retiring it moves no frontier): Naiad's two conditions; or
3. a decrement of a pointstamp ``p`` that a *resident occurrence* ``q`` could-result-in
   (``q`` may be ``p`` itself), where ``q`` is also active in the local view with the held
   updates applied.

Anything else flushes the whole buffer. The condition is re-checked whenever the local view or
the buffer changes. A decrement whose count merely stays positive in the local view is *not*
holdable: other processes may hold decrements of the same pointstamp, and together they retire
it.

Resident occurrences are the outstanding pointstamps this process knows to be outstanding in
the *true* global state, whatever any view says: a capability one of its shards holds (at a
source location: the count of the capabilities its own workers' batches created and dropped,
from their initial ones; capabilities never move between processes) and a message waiting in
one of its mailboxes (at a target location: counted by the shards from the message's arrival
until it is taken out to be consumed, which is before the worker submits the decrement). Rule 3
is live for the reason rule 2 is, with the truth in place of the view: if a stuck state were
reachable -- no message in flight or waiting, every batch delivered, every buffer held for ever
-- every view would be the same ``V``; take a pointstamp ``m`` active in ``V`` that no truly
active pointstamp could-result-in (itself included), minimal among such. Someone holds a
decrement of ``m``. By rule 2 it is dominated by another ``V``-active ``q`` (``q`` is then
truly active or dominated by one, contradicting the choice of ``m``, or a smaller candidate,
contradicting minimality); by rule 3 by a resident occurrence, which is truly active, again
contradicting the choice. So in such a state every ``V``-active pointstamp is truly active or
dominated by one, and (by safety) every truly active one is ``V``-active or dominated by one:
``V`` implies exactly the true frontiers and nothing waits for a flush. And since ``q`` stays
active in the view with the held updates applied, what rule 3 holds could not move the local
frontier either (the property rules 1 and 2 have).

Checking the rules. A search for what holds a decrement walks the active pointstamps (rule
2) and the resident occurrences (rule 3) of every location that reaches it; searching every
held decrement on every batch, as the check once did, made a run quadratic in the epochs in
flight. Each held decrement keeps what a search found for it, its *witness*, and is searched
again only once that witness went away: a view witness (rule 2) when a received batch leaves
its count at zero or below (the view changes nowhere else while the buffer holds anything; a
flush empties the buffer and forgets every witness), a resident one (rule 3) when its count
here, or its count in the view with the held updates applied, is no longer positive. Shards
count their mailboxes without telling the actor, so resident witnesses are checked again, in
O(1) each, at every check. A valid witness satisfies its rule and a decrement without one
gets the full search, so the decisions are those of searching every held decrement.

Central accumulator (optional, ``hub=0``). Instead of broadcasting, every other process
sends its flushed batches to the hub only and applies nothing locally until the hub sends it
back; the hub adds each received batch, whole, to its own outgoing buffer, and flushes that
buffer (under the same rule) to every process and to itself. Batches stay whole and FIFO per
pair, so the safety argument is unchanged; every view sees every update exactly once, and a
process receives one merged batch from the hub instead of one from each of its peers. The hub
holds its buffer whether or not ``accumulate`` is set (a hub that relayed every batch at once
would only add traffic; Naiad's *GlobalAcc* accumulates at the hub): without it, only rules 1
and 2 apply there, and the liveness argument above needs no more than those.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from naiad.progress.antichain import le
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.reachability import Reachability, Tracker

log = logging.getLogger(__name__)

FrontierListener = Callable[[list[int]], None]
Pointstamp = tuple[int, Any]  # (location, time)
Changes = list[tuple[Pointstamp, int]]
# send(peer process, dataflow, sequence number, changes); raises, having sent nothing, if it
# cannot send them (the number is then used by the next batch)
Broadcast = Callable[[int, int, int, Changes], None]


class UnappliableBatch(ValueError):
    """A batch received from another process that names a location its dataflow lacks."""

    def __init__(self, sender: int, message: str) -> None:
        super().__init__(message)
        self.sender = sender


@dataclass
class _Registered:
    tracker: Tracker
    on_change: FrontierListener
    outgoing: ChangeBatch = field(default_factory=ChangeBatch)
    # Per location, {time: count} of the occurrences this process knows to be outstanding in
    # the true global state (see "Resident occurrences" above), or None without accumulation.
    local: list[dict[Any, int]] | None = None
    # The hold check's memory (see "Checking the rules" above), emptied by every flush: each
    # held decrement (a key whose sum in ``outgoing`` is negative) with its witness, the
    # pointstamp that holds it and whether it is resident (rule 3) or active in the view
    # (rule 2), or None while it has none.
    held: dict[Pointstamp, tuple[Pointstamp, bool] | None] = field(default_factory=dict)
    unchecked: set[Pointstamp] = field(default_factory=set)  # the held with no witness
    # A view witness -> the decrements it was found to hold (some may hold by another since).
    dependents: dict[Pointstamp, list[Pointstamp]] = field(default_factory=dict)
    by_resident: set[Pointstamp] = field(default_factory=set)  # the held by a resident


@dataclass
class ProgressStats:
    """Counts of progress traffic leaving this process (for Naiad Figure 6c)."""

    batches_sent: int = 0
    updates_sent: int = 0
    batches_received: int = 0


def _sign_then_location(change: tuple[tuple[int, Any], int]) -> tuple[bool, int]:
    (loc, _), delta = change
    return delta < 0, loc


class ProgressActor:
    """Applies progress batches to per-dataflow trackers and reports moved frontiers.

    >>> from naiad.progress.reachability import GraphBuilder
    >>> g = GraphBuilder(); a = g.add_node("in", 0, 1); b = g.add_node("out", 1, 0)
    >>> g.add_edge((a, 0), (b, 0)); r = g.build()
    >>> moved = []
    >>> actor = ProgressActor()
    >>> actor.register(0, r, [((r.source(a, 0), 0), 1)], moved.extend)
    >>> actor.submit(0, [((r.source(a, 0), 1), 1), ((r.source(a, 0), 0), -1)])
    >>> moved == [r.target(b, 0)], actor.tracker(0).frontier(r.target(b, 0)).frontier
    (True, [1])
    """

    def __init__(
        self,
        process: int = 0,
        processes: int = 1,
        broadcast: Broadcast | None = None,
        accumulate: bool = True,
        hub: int | None = None,
        strategy: str | None = None,
    ) -> None:
        """``strategy``: how every tracker keeps its frontiers (``"psi"`` or ``"frontier"``;
        None: :class:`Tracker` picks by each dataflow's graph)."""
        if processes > 1 and broadcast is None:
            raise ValueError("a progress actor of a multi-process cluster needs a broadcast")
        if hub is not None and not 0 <= hub < processes:
            raise ValueError(f"the central accumulator {hub} is not a process of {processes}")
        self.process = process
        self.processes = processes
        self.accumulate = accumulate
        self.strategy = strategy
        self.hub = hub if processes > 1 else None
        # Whether the outgoing buffer may be held: with local accumulation, and at the hub.
        self._holds = accumulate or (self.hub is not None and self.hub == process)
        self._broadcast = broadcast
        self._dataflows: dict[int, _Registered] = {}
        self._next_out = [0] * processes  # next sequence number to each peer
        self._next_in = [0] * processes  # next sequence number expected from each peer
        self._reorder: list[dict[int, tuple[int, Changes]]] = [{} for _ in range(processes)]
        # batches for dataflows not built yet, with their senders
        self._unbuilt: dict[int, list[tuple[int, Changes]]] = {}
        # Which dataflows finished, without a record per finished dataflow (a runtime may
        # build and finish millions in turn): the runtime numbers them in the order it builds
        # them, so every id below ``_next_id`` was registered, and is finished once
        # unregistered, except the few ``_skipped`` on the way (not registered yet, or never).
        self._next_id = 0
        self._skipped: set[int] = set()
        self.stats = ProgressStats()
        self.batches_applied = 0

    # --- dataflows -----------------------------------------------------------------------------
    def register(
        self,
        dataflow: int,
        reachability: Reachability,
        initial: Iterable[tuple[tuple[int, Any], int]],
        on_change: FrontierListener,
        local_initial: Iterable[tuple[tuple[int, Any], int]] = (),
        unwatched: Iterable[int] = (),
    ) -> None:
        """Starts tracking a dataflow from its initial capability counts (the same in every
        process, so no exchange is needed to agree on them); ``local_initial``: the part of
        them held by this process's workers. Then applies the batches received for it before
        it was built, after checking every one of them (the check a built dataflow's batches
        get when they arrive): if one names a location the dataflow lacks, raises
        :class:`UnappliableBatch` naming its sender, having applied none of them and
        registered nothing. ``unwatched``: targets whose frontier no vertex waits on, which
        the tracker may work out only when read (see :class:`PsiTracker`)."""
        if dataflow in self._dataflows:
            raise ValueError(f"dataflow {dataflow} is already registered")
        early = self._unbuilt.pop(dataflow, [])
        count = len(reachability.locations)
        for sender, changes in early:
            for (loc, _), _ in changes:
                if not (loc.__class__ is int and 0 <= loc < count):
                    raise UnappliableBatch(
                        sender,
                        f"progress update for location {loc!r} of dataflow {dataflow}, which "
                        f"has {count} locations",
                    )
        if dataflow >= self._next_id:
            self._skipped.update(range(self._next_id, dataflow))
            self._next_id = dataflow + 1
        else:
            self._skipped.discard(dataflow)
        tracker = Tracker(reachability, self.strategy, unwatched)
        tracker.update_iter(initial)
        tracker.propagate()
        registered = _Registered(tracker, on_change)
        if self.processes > 1 and self.accumulate:
            local: list[dict[Any, int]] = [{} for _ in reachability.locations]
            for (loc, time), count in local_initial:
                if count:
                    local[loc][time] = local[loc].get(time, 0) + count
            registered.local = local
        self._dataflows[dataflow] = registered
        for _, changes in early:  # (counted as received when they arrived)
            self._apply_received(dataflow, registered, changes)

    def unregister(self, dataflow: int) -> None:
        """Stops tracking a completed (or dropped) dataflow, forgetting the updates it has
        not broadcast; late batches for it are ignored."""
        self._dataflows.pop(dataflow, None)

    def finished(self, dataflow: int) -> bool:
        """Whether ``dataflow`` was registered and has been unregistered since."""
        return (
            dataflow < self._next_id
            and dataflow not in self._dataflows
            and dataflow not in self._skipped
        )

    def tracker(self, dataflow: int) -> Tracker:
        return self._dataflows[dataflow].tracker

    def pending(self, dataflow: int) -> list[tuple[tuple[int, Any], int]]:
        """The local updates not yet broadcast."""
        return list(self._dataflows[dataflow].outgoing)

    def resident(self, dataflow: int) -> list[dict[Any, int]] | None:
        """Where this process's shards count the messages waiting in their mailboxes: per
        target location, ``{time: messages}`` (a message counts from its arrival until it is
        taken out to be consumed); None when nothing is held, so there is nothing to count."""
        return self._dataflows[dataflow].local

    # --- local batches ---------------------------------------------------------------------------
    def submit(self, dataflow: int, changes: Changes) -> None:
        """Takes one worker's progress batch (whole; a list: it is read twice). A batch of a
        dataflow that has finished (been dropped, while a callback of it ran) goes nowhere."""
        registered = self._dataflows.get(dataflow)
        if registered is None:
            if self.finished(dataflow):
                return
            raise KeyError(f"dataflow {dataflow} is not registered")
        if self.processes == 1:
            tracker = registered.tracker
            for (loc, time), delta in changes:
                tracker.update(loc, time, delta)
            self.batches_applied += 1
            self._report(registered)
            return
        if not self._holds:
            registered.outgoing.extend(changes)
            self._flush(dataflow, registered)
            return
        self._hold(registered, changes)
        local = registered.local
        if local is not None:  # (None: the hub, without local accumulation)
            is_target = registered.tracker.reachability.is_target
            for (loc, time), delta in changes:
                if not is_target[loc]:  # a capability of a local shard
                    at = local[loc]
                    count = at.get(time, 0) + delta
                    if count:
                        at[time] = count
                    else:
                        del at[time]
        if self._must_flush(registered):
            self._flush(dataflow, registered)

    @staticmethod
    def _hold(registered: _Registered, changes: Iterable[tuple[Pointstamp, int]]) -> None:
        """Adds ``changes`` to the outgoing buffer, keeping track of its decrements."""
        add = registered.outgoing.update
        held = registered.held
        for key, delta in changes:
            if add(key, delta) < 0:
                if key not in held:
                    held[key] = None
                    registered.unchecked.add(key)
            elif key in held:
                ProgressActor._release(registered, key)

    @staticmethod
    def _release(registered: _Registered, key: Pointstamp) -> None:
        """Forgets ``key`` as a held decrement (its sum is no longer negative); an entry of
        ``dependents`` naming it goes stale, and is skipped."""
        witness = registered.held.pop(key)
        if witness is None:
            registered.unchecked.discard(key)
        elif witness[1]:
            registered.by_resident.discard(key)

    def flush(self, dataflow: int) -> None:
        """Broadcasts the held updates of ``dataflow`` now."""
        registered = self._dataflows.get(dataflow)
        if registered is not None and not registered.outgoing.is_empty():
            self._flush(dataflow, registered)

    def _flush(self, dataflow: int, registered: _Registered) -> None:
        changes = registered.outgoing.drain()  # positives first
        if registered.held or registered.dependents:
            registered.held = {}
            registered.unchecked = set()
            registered.dependents = {}
            registered.by_resident = set()
        if not changes:
            return
        # Updates of one location side by side: the wire format packs runs of them tightly.
        changes.sort(key=_sign_then_location)
        assert self._broadcast is not None
        spoke = self.hub is not None and self.process != self.hub
        for peer in [self.hub] if spoke else range(self.processes):
            if peer is not None and peer != self.process:
                seq = self._next_out[peer]
                # numbered once sent: a broadcast that raises (it sends nothing) leaves no gap
                # that the peer would wait for forever
                self._broadcast(peer, dataflow, seq, changes)
                self._next_out[peer] = seq + 1
        self.stats.batches_sent += 1
        self.stats.updates_sent += len(changes)
        if spoke:
            # Applied when the hub sends it back; but what was received before this flush
            # must still move the frontiers now.
            self._report(registered)
            return
        tracker = registered.tracker
        for (loc, time), delta in changes:
            tracker.update(loc, time, delta)
        self.batches_applied += 1
        self._report(registered)

    def _must_flush(self, registered: _Registered) -> bool:
        """Whether a held decrement satisfies none of rules 2 and 3 (see "Checking the
        rules" above: only the decrements without a witness are searched)."""
        held = registered.held
        if not held:
            return False
        tracker = registered.tracker
        unchecked = registered.unchecked
        by_resident = registered.by_resident
        if by_resident:
            # Mailboxes count their messages without telling the actor: every resident
            # witness is checked again, in O(1).
            local = registered.local
            assert local is not None
            outgoing = registered.outgoing
            gone = []
            for key in by_resident:
                witness = held[key]
                assert witness is not None
                q = witness[0]
                if local[q[0]].get(q[1], 0) <= 0 or tracker.count(*q) + outgoing.get(q) <= 0:
                    gone.append(key)
            for key in gone:
                by_resident.discard(key)
                held[key] = None
                unchecked.add(key)
        while unchecked:
            key = unchecked.pop()
            loc, time = key
            # the cheap rule first: the resident scan walks every waiting time of every
            # location that reaches ``loc``
            found = self._dominated(tracker, loc, time)
            if found is not None:
                held[key] = (found, False)
                waiting = registered.dependents.get(found)
                if waiting is None:
                    registered.dependents[found] = [key]
                else:
                    waiting.append(key)
                continue
            found = self._resident_below(registered, loc, time)
            if found is not None:
                held[key] = (found, True)
                by_resident.add(key)
                continue
            unchecked.add(key)
            return True
        return False

    @staticmethod
    def _view_changed(registered: _Registered, changes: Changes) -> None:
        """After ``changes`` were applied to the view: the held decrements whose view witness
        is no longer active have no witness any more."""
        dependents = registered.dependents
        count = registered.tracker.count
        held = registered.held
        for key, _ in changes:
            waiting = dependents.get(key)
            if waiting is not None and count(*key) <= 0:
                del dependents[key]
                for d in waiting:
                    if held.get(d) == (key, False):
                        held[d] = None
                        registered.unchecked.add(d)

    @staticmethod
    def _dominated(tracker: Tracker, loc: int, time: Any) -> Pointstamp | None:
        """An active pointstamp other than ``(loc, time)`` that could-result-in it (rule 2),
        or None."""
        return tracker.dominator(loc, time)

    @staticmethod
    def _resident_below(registered: _Registered, loc: int, time: Any) -> Pointstamp | None:
        """A resident occurrence ``q`` that could-result-in ``(loc, time)`` (``q`` may be that
        pointstamp itself) and is also active in the local view with the held updates applied
        (rule 3), or None."""
        local = registered.local
        if local is None:
            return None
        tracker = registered.tracker
        held = registered.outgoing
        for other, applies in tracker.reaching(loc):
            at = local[other]
            if not at:
                continue
            for t, count in at.items():
                if count <= 0 or tracker.count(other, t) + held.get((other, t)) <= 0:
                    continue
                for apply in applies:
                    if le(t if apply is None else apply(t), time):
                        return other, t
        return None

    # --- remote batches --------------------------------------------------------------------------
    def receive(self, sender: int, seq: int, dataflow: int, changes: Changes) -> None:
        """Takes a batch broadcast by process ``sender``; applies batches in sequence order."""
        expected = self._next_in[sender]
        if seq < expected:
            log.debug("progress: dropping duplicate batch %d from process %d", seq, sender)
            return
        if seq > expected:
            self._reorder[sender][seq] = (dataflow, changes)
            return
        self._apply_remote(sender, dataflow, changes)
        expected += 1
        waiting = self._reorder[sender]
        while expected in waiting:
            self._apply_remote(sender, *waiting.pop(expected))
            expected += 1
        self._next_in[sender] = expected

    def _apply_remote(self, sender: int, dataflow: int, changes: Changes) -> None:
        """Takes the next batch from ``sender``, in sequence order: applies it, or keeps it
        until its dataflow is built."""
        self.stats.batches_received += 1
        registered = self._dataflows.get(dataflow)
        if registered is None:
            if not self.finished(dataflow):
                self._unbuilt.setdefault(dataflow, []).append((sender, changes))
            return
        self._apply_received(dataflow, registered, changes)

    def _apply_received(self, dataflow: int, registered: _Registered, changes: Changes) -> None:
        """Applies a received batch to a registered dataflow's view (at the hub: merges it
        into what the hub broadcasts)."""
        if self.hub == self.process:
            # The hub merges a spoke's batch, whole, into what it broadcasts.
            self._hold(registered, changes)
            if self._must_flush(registered):
                self._flush(dataflow, registered)
            return
        tracker = registered.tracker
        for (loc, time), delta in changes:
            tracker.update(loc, time, delta)
        self.batches_applied += 1
        if registered.dependents:
            self._view_changed(registered, changes)
        if registered.held and self._must_flush(registered):
            self._flush(dataflow, registered)
        else:
            self._report(registered)

    def _report(self, registered: _Registered) -> None:
        moved = registered.tracker.propagate()
        if moved or registered.tracker.active == 0:
            registered.on_change(moved)
