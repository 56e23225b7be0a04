"""Progress tracking on a chain of ``M`` maps costs ``O(M)`` per epoch, not ``O(M**2)``.

Each epoch moves the input's capability, which every target of the chain sees, and each of a
worker's batches (15 per epoch at 400 maps) leaves a message count inside the chain. The Ψ
fan-out sends each of those changes to every target downstream: 636 antichain entries per
epoch at 100 maps, 6,264 at 400 (9.8x). Propagating frontier changes visits each target about
once per epoch: 212 and 830 entries (3.9x). Work is counted as the entries folded into the
trackers' antichains, never as time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad.progress import reachability
from naiad.progress.antichain import MutableAntichain
from tests.counting import Work

EPOCHS = 10


async def chain_of_maps(maps: int, work: Work) -> type:
    """Runs ``EPOCHS`` epochs of one record through ``maps`` maps, counting only after two
    warm-up epochs; returns the class of the dataflow's tracker."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("in")
            for _ in range(maps):
                stream = stream.map(lambda x: x + 1)
            return handle, stream.collect(), stream.probe()

        df = rt.dataflow(build)
        handle, out, probe = df.results[0]
        for epoch in range(2 + EPOCHS):
            if epoch == 2:
                work.reset()
            handle.send([epoch])
            handle.advance_to(epoch + 1)
            await probe.wait(epoch)
        counted = work.total
        kind = type(df.instances[0].process.progress.tracker(df.id))
        handle.close()
        await df.finished()
        assert sorted(out) == [(e, e + maps) for e in range(2 + EPOCHS)]
        work.counts["epochs"] = counted
        return kind


@pytest.mark.timeout(300)
def test_tracker_work_per_epoch_is_linear_in_a_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    work = Work(monkeypatch)
    work.count(
        MutableAntichain, "update_iter", "entries", weight=lambda self, changes: len(changes)
    )
    for cls in (reachability.PsiTracker, reachability.FrontierTracker):
        work.within(cls, "propagate", "entries")
    per_epoch: dict[tuple[str, int], float] = {}
    for strategy, threshold in (("auto", reachability.FRONTIER_TRACKING_ABOVE), ("psi", 1e9)):
        monkeypatch.setattr(reachability, "FRONTIER_TRACKING_ABOVE", threshold)
        for maps in (100, 400):
            kind = asyncio.run(chain_of_maps(maps, work))
            assert kind is (
                reachability.FrontierTracker if strategy == "auto" else reachability.PsiTracker
            )
            per_epoch[strategy, maps] = work.counts["epochs"] / EPOCHS
    frontier = per_epoch["auto", 400] / per_epoch["auto", 100]
    psi = per_epoch["psi", 400] / per_epoch["psi", 100]
    assert per_epoch["auto", 100] > 100, per_epoch  # the counting reached the tracker
    assert frontier <= 4.5, per_epoch
    assert psi >= 8, per_epoch  # what the Ψ fan-out does on the same runs
