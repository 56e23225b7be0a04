"""Progress batches that reach a process before it has built their dataflow are checked, as a
built dataflow's are when they arrive, before any of them is applied: a corrupt one (here a
forged frame naming a location the dataflow lacks) stops the runtime with an error naming the
process that sent it, and leaves nothing half-applied."""

from __future__ import annotations

import re
from typing import Any

import pytest

import naiad
from naiad.progress.progress_actor import ProgressActor, UnappliableBatch
from naiad.progress.reachability import GraphBuilder, Reachability
from naiad.runtime.process import ClusterError
from naiad.transport.codec import Header, Kind, encode_changes


def forge(rt: naiad.Runtime, changes: list[tuple[tuple[int, Any], int]]) -> None:
    """Process 0 receives, as if from process 1, a progress batch for dataflow 0."""
    payload = encode_changes(changes)
    header = Header(Kind.PROGRESS, 0, 0, 1, 0, len(payload), 0)
    rt.processes[0]._on_frame(1, header, memoryview(payload))


def build(s: naiad.Scope) -> tuple[naiad.InputHandle, naiad.ProbeHandle]:
    handle, stream = s.new_input()
    return handle, stream.exchange(lambda x: x).probe()


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_corrupt_batch_for_a_dataflow_not_built_yet_is_rejected_naming_its_sender(
    workers: int,
) -> None:
    """Regression: the batch waited unchecked; building the dataflow applied its first update
    and then raised IndexError from rt.dataflow, which named nothing."""
    with pytest.raises(ClusterError) as raised:
        async with naiad.Runtime(workers, processes=2, transport="inproc") as rt:
            forge(rt, [((0, 0), 1), ((999, 0), 1)])  # the first update is a valid one
            rt.dataflow(build)
    error = raised.value
    assert error.peer == 1
    assert re.fullmatch(
        r"process 1 sent a frame process 0 cannot apply: progress update for location 999 of "
        r"dataflow 0, which has \d+ locations",
        str(error),
    ), error
    assert rt._failure is error  # the runtime stopped for it (and told the peers)


def graph() -> tuple[Reachability, int]:
    g = GraphBuilder()
    a = g.add_node("in", 0, 1)
    b = g.add_node("out", 1, 0)
    g.add_edge((a, 0), (b, 0))
    r = g.build()
    return r, r.source(a, 0)


def test_register_applies_the_sound_early_batches() -> None:
    r, src = graph()
    actor = ProgressActor(0, 2, lambda *_: None)
    actor.receive(1, 0, 0, [((src, 1), 1)])
    actor.register(0, r, [((src, 0), 2)], lambda _: None)
    assert actor.tracker(0).count(src, 1) == 1


def test_register_applies_none_of_the_early_batches_if_one_is_corrupt() -> None:
    r, src = graph()
    actor = ProgressActor(0, 2, lambda *_: None)
    actor.receive(1, 0, 0, [((src, 1), 1)])  # sound
    actor.receive(1, 1, 0, [((src, 2), 1), ((7, 2), 1)])  # location 7 does not exist
    with pytest.raises(UnappliableBatch, match="location 7 of dataflow 0") as raised:
        actor.register(0, r, [((src, 0), 2)], lambda _: None)
    assert raised.value.sender == 1
    with pytest.raises(KeyError):
        actor.tracker(0)  # nothing registered, nothing applied


def test_an_early_batch_is_counted_once_as_received() -> None:
    """Regression: a batch that arrived before its dataflow was built was counted in
    ``stats.batches_received`` when it arrived and again when ``register`` applied it (two
    early batches and one later counted 5)."""
    r, src = graph()
    actor = ProgressActor(0, 2, lambda *_: None)
    actor.receive(1, 0, 0, [((src, 1), 1)])
    actor.receive(1, 1, 0, [((src, 2), 1)])
    actor.receive(1, 1, 0, [((src, 2), 1)])  # a duplicate: dropped, not counted
    assert actor.stats.batches_received == 2
    actor.register(0, r, [((src, 0), 2)], lambda _: None)
    assert actor.stats.batches_received == 2
    actor.receive(1, 2, 0, [((src, 3), 1)])
    # every batch received was applied, and counted once
    assert actor.stats.batches_received == actor.batches_applied == 3
    assert [actor.tracker(0).count(src, t) for t in range(4)] == [2, 1, 1, 1]
