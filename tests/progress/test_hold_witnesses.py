"""Local accumulation remembers, per held decrement, the pointstamp that holds it (its
witness) and searches again only for decrements that are new or whose witness went away.

The hold check used to search every held decrement on every submitted and every received
batch: with thousands of epochs in flight, thousands of searches per batch (and a walk over
every zero-sum key left in the buffer), which made a multi-process run quadratic in the
epochs in flight (3,000 epochs: 4-6 s of CPU per process against 1.3-1.9 s without
accumulation). The decisions must not change: :func:`reference_must_flush` is the check as it
was, and the differential test compares it with the actor's at every decision.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.progress.antichain import le
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.progress_actor import ProgressActor, _Registered
from naiad.progress.reachability import GraphBuilder, Reachability
from naiad.progress.summary import PathSummary
from naiad.progress.timestamp import Product


def reference_must_flush(registered: _Registered) -> bool:
    """The hold check before witnesses (``ProgressActor._must_flush`` as it was): every held
    decrement, searched every time."""
    tracker = registered.tracker
    for (loc, time), delta in registered.outgoing:
        if (
            delta < 0
            and not tracker.dominated(loc, time)
            and not _reference_resident_below(registered, loc, time)
        ):
            return True
    return False


def _reference_resident_below(registered: _Registered, loc: int, time: Any) -> bool:
    local = registered.local
    if local is None:
        return False
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
                    return True
    return False


def loop_graph() -> tuple[Reachability, list[bool]]:
    """input -> ingress -> body <-> feedback; body -> egress -> sink; and per location
    whether its times are loop times (``Product``) rather than epochs."""
    g = GraphBuilder()
    nodes = [
        g.add_node("input", 0, 1),
        g.add_node("ingress", 1, 1, [[[PathSummary.ingress(Product)]]]),
        g.add_node("body", 2, 2),
        g.add_node("feedback", 1, 1, [[[PathSummary.feedback(1)]]]),
        g.add_node("egress", 1, 1, [[[PathSummary.egress()]]]),
        g.add_node("sink", 1, 0),
    ]
    for (a, p), (b, q) in [
        ((0, 0), (1, 0)),
        ((1, 0), (2, 0)),
        ((2, 0), (3, 0)),
        ((3, 0), (2, 1)),
        ((2, 1), (4, 0)),
        ((4, 0), (5, 0)),
    ]:
        g.add_edge((nodes[a], p), (nodes[b], q))
    r = g.build()
    inner = [
        node in (2, 3) or (node == 1 and is_source) or (node == 4 and not is_source)
        for node, _, is_source in r.locations
    ]
    return r, inner


REACH, INNER = loop_graph()
SOURCE = REACH.source(0, 0)  # the input's output, where the initial capabilities are
TARGETS = REACH.target_locations


def times(loc: int) -> st.SearchStrategy[Any]:
    if INNER[loc]:
        return st.builds(Product, st.integers(0, 1), st.integers(0, 2))
    return st.integers(0, 2)


# a few times per location, and the initial capability often: witnesses come and go
POINTSTAMPS = st.one_of(
    st.just((SOURCE, 0)),
    st.integers(0, len(REACH.locations) - 1).flatmap(
        lambda loc: st.tuples(st.just(loc), times(loc))
    ),
)
CHANGES = st.lists(st.tuples(POINTSTAMPS, st.sampled_from([-2, -1, -1, 1, 2])), max_size=3)
MAILBOX = st.sampled_from(TARGETS).flatmap(lambda loc: st.tuples(st.just(loc), times(loc)))
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), CHANGES),
        st.tuples(st.just("receive"), CHANGES, st.integers(0, 1)),
        st.tuples(st.just("submit"), CHANGES),
        st.tuples(st.just("receive"), CHANGES, st.integers(0, 1)),
        st.tuples(st.just("retire"), st.integers(0, 20), st.integers(0, 1)),
        st.tuples(st.just("arrive"), MAILBOX),
        st.tuples(st.just("take"), MAILBOX),
        st.tuples(st.just("flush")),
    ),
    min_size=10,
    max_size=80,
)
# (processes, this process, hub, accumulate)
MODES = [(2, 0, None, True), (3, 1, 0, True), (3, 0, 0, True), (3, 0, 0, False)]


def test_the_witnesses_make_the_decisions_of_the_full_search() -> None:
    seen: Counter[str] = Counter()

    # derandomized: the cases counted below are reached by this fixed set of examples
    # (random sets missed "a view witness went away" once in a few hundred runs)
    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(
        mode=st.sampled_from(MODES), initial=st.integers(1, 4), mine=st.integers(1, 2), steps=STEPS
    )
    def run(
        mode: tuple[int, int, int | None, bool], initial: int, mine: int, steps: list[Any]
    ) -> None:
        processes, me, hub, accumulate = mode
        actor = ProgressActor(me, processes, lambda *_: None, accumulate=accumulate, hub=hub)
        decide = actor._must_flush
        last: dict[Any, Any] = {}  # the witnesses after the last check that held

        def checked(registered: _Registered) -> bool:
            nonlocal last
            expected = reference_must_flush(registered)
            held = registered.held
            if any(held.get(key, 0) is None for key in last):
                seen["a view witness went away"] += 1
            local, tracker, outgoing = registered.local, registered.tracker, registered.outgoing
            for q, by_resident in last.values():
                if by_resident and (
                    local[q[0]].get(q[1], 0) <= 0 or tracker.count(*q) + outgoing.get(q) <= 0
                ):
                    seen["a resident witness went away"] += 1
            decision = decide(registered)
            assert decision == expected, (registered.outgoing, held)
            seen["flush" if decision else "hold"] += 1
            if decision:
                last = {}
                return decision
            if registered.by_resident:
                seen["held by a resident"] += 1
            last = dict(held)
            return decision

        actor._must_flush = checked  # type: ignore[method-assign]
        actor.register(
            0, REACH, [((SOURCE, 0), initial)], lambda _: None, [((SOURCE, 0), min(mine, initial))]
        )
        registered = actor._dataflows[0]
        senders = [0] if hub is not None and me != hub else [p for p in range(processes) if p != me]
        seq = Counter[int]()
        resident = actor.resident(0)
        for step in steps:
            kind = step[0]
            if kind == "submit":
                batch = ChangeBatch(step[1])
                actor.submit(0, batch.drain())
            elif kind in ("receive", "retire"):
                sender = senders[step[2] % len(senders)]
                if kind == "receive":
                    changes = ChangeBatch(step[1]).drain()
                else:  # another process retires a pointstamp active in this view
                    active = sorted(registered.tracker.active_pointstamps(), key=repr)
                    if not active:
                        continue
                    loc, t, count = active[step[1] % len(active)]
                    changes = [((loc, t), -count)]
                actor.receive(sender, seq[sender], 0, changes)
                seq[sender] += 1
            elif kind == "flush":
                actor.flush(0)
                last = {}
            elif resident is not None:  # a shard counts a message waiting in its mailbox
                (loc, t) = step[1]
                at = resident[loc]
                if kind == "arrive":
                    at[t] = at.get(t, 0) + 1
                elif t in at:
                    at[t] -= 1
                    if not at[t]:
                        del at[t]
                continue
            # After a batch the old check holds nothing it would not hold (when the actor
            # skipped it, the buffer had no decrement to search).
            assert not reference_must_flush(registered)

    run()
    # the runs reached the cases the witnesses are for
    cases = ["flush", "hold", "held by a resident"]
    assert min(
        seen[k] for k in [*cases, "a view witness went away", "a resident witness went away"]
    ), seen


def test_many_epochs_in_flight_cost_one_search_per_new_decrement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Process 1 holds the input at epoch 0 while process 0's input runs n epochs ahead
    and its worker consumes a message of process 1's at every epoch: n decrements held
    (each dominated by process 1's capability in the view), each searched once, not once
    per later batch (about n**2 searches, 10,004 for n = 100)."""
    searches = 0
    dominated, resident_below = ProgressActor._dominated, ProgressActor._resident_below

    def counting_dominated(tracker: Any, loc: int, time: Any) -> Any:
        nonlocal searches
        searches += 1
        return dominated(tracker, loc, time)

    def counting_resident_below(registered: Any, loc: int, time: Any) -> Any:
        nonlocal searches
        searches += 1
        return resident_below(registered, loc, time)

    monkeypatch.setattr(ProgressActor, "_dominated", staticmethod(counting_dominated))
    monkeypatch.setattr(ProgressActor, "_resident_below", staticmethod(counting_resident_below))
    g = GraphBuilder()
    a = g.add_node("in", 0, 1)
    b = g.add_node("out", 1, 0)
    g.add_edge((a, 0), (b, 0))
    r = g.build()
    src, tgt = r.source(a, 0), r.target(b, 0)

    def run(n: int) -> int:
        nonlocal searches
        searches = 0
        sent: list[Any] = []
        actor = ProgressActor(0, 2, lambda *args: sent.append(args[-1]), accumulate=True)
        actor.register(0, r, [((src, 0), 2)], lambda _: None, [((src, 0), 1)])
        mailbox = actor.resident(0)
        assert mailbox is not None
        for e in range(n):
            actor.receive(1, e, 0, [((tgt, e), 1)])  # process 1 sent a message at e
            mailbox[tgt][e] = 1  # it arrives, and is taken out to be consumed
            del mailbox[tgt][e]
            actor.submit(0, [((src, e + 1), 1), ((src, e), -1), ((tgt, e), -1)])
        assert len(actor.pending(0)) > n  # held: the decrements and the input's capability
        actor.receive(1, n, 0, [((src, 0), -1)])  # process 1's input closes
        actor.submit(0, [((src, n), -1)])  # and process 0's
        # nothing left held, and the view (which applied what was sent) counts nothing
        assert actor.pending(0) == [] and actor.tracker(0).is_idle()
        assert sum(len(changes) for changes in sent) >= n
        return searches

    small, large = run(100), run(200)
    assert small <= 4 * 100, small
    assert large <= 2 * small + 10, (small, large)
