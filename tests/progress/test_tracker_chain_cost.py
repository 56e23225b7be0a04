"""Progress tracking on a chain of ``M`` operators costs ``O(M)`` per epoch, not ``O(M**2)``.

Each epoch moves the input's capability, which every target of the chain sees, and each of a
worker's batches leaves a message count inside the chain. On a chain of operators that watch
their frontiers (a map and a probe per step), the Ψ fan-out sends each of those changes to
every target downstream: 642 antichain entries per epoch at 100 steps, 6,288 at 400 (9.8x).
Propagating frontier changes, the tracker chosen for such a chain, visits each target about
once per epoch: 418 and 1,654 (4.0x). On a chain of maps alone, whose inputs nobody watches,
Ψ skips those inputs (``PsiTracker``'s unwatched targets) and stays the choice: each change
reaches the sinks' inputs only, 20 and 56 entries. Work is counted as the entries folded
into the trackers' antichains, never as time.
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


async def chain_of(maps: int, work: Work, watched: bool = False) -> type:
    """Runs ``EPOCHS`` epochs of one record through ``maps`` maps (``watched``: each followed
    by a probe, which watches its frontier), counting only after two warm-up epochs; returns
    the class of the dataflow's tracker."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("in")
            probes = naiad.ProbeHandle()
            for _ in range(maps):
                stream = stream.map(lambda x: x + 1)
                if watched:
                    stream = stream.probe_with(probes)
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
    per_epoch: dict[tuple[str, str, int], float] = {}
    for chain in ("probes", "maps"):
        for strategy, threshold in (("auto", reachability.FRONTIER_TRACKING_ABOVE), ("psi", 1e9)):
            monkeypatch.setattr(reachability, "FRONTIER_TRACKING_ABOVE", threshold)
            for maps in (100, 400):
                kind = asyncio.run(chain_of(maps, work, watched=chain == "probes"))
                frontiers = strategy == "auto" and chain == "probes"
                assert kind is (
                    reachability.FrontierTracker if frontiers else reachability.PsiTracker
                )
                per_epoch[chain, strategy, maps] = work.counts["epochs"] / EPOCHS
    growth = {
        (chain, strategy): per_epoch[chain, strategy, 400] / per_epoch[chain, strategy, 100]
        for chain, strategy, _ in per_epoch
    }
    assert per_epoch["probes", "auto", 100] > 100, per_epoch  # the counting reached the tracker
    assert growth["probes", "auto"] <= 4.5, per_epoch
    assert growth["probes", "psi"] >= 8, per_epoch  # what the Ψ fan-out does on the same runs
    # maps: Ψ on its own (auto chose it), each change reaching the sinks' inputs only
    assert growth["maps", "auto"] <= 4.5, per_epoch
    assert per_epoch["maps", "auto", 400] < per_epoch["probes", "auto", 400] / 4, per_epoch
