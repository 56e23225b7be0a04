"""A dataflow whose build raises never runs, and leaves nothing behind in what outlives it: a
``ProbeHandle`` shared with other dataflows keeps probing only theirs, and an imported trace
is not held back by the readers the failed build made on it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad import BuildError
from naiad.differential import Collection, import_trace


def failing(build: Any, failure: str) -> Any:
    """``build``, then a build error of kind ``failure`` (on the last worker only: the other
    workers' builds completed)."""

    def wrapped(scope: naiad.Scope) -> Any:
        build(scope)
        if scope.index == scope.peers - 1:
            if failure == "raise":
                raise RuntimeError("the user's build failed")
            scope.feedback()  # never connected: check_complete refuses the build

    return wrapped


@pytest.mark.parametrize("failure", ["raise", "open loop"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_shared_probe_handle_keeps_only_the_dataflows_that_run(
    failure: str, workers: int
) -> None:
    async def main() -> list[Any]:
        async with naiad.Runtime(workers=workers) as rt:
            shared = naiad.ProbeHandle()

            def build(s: naiad.Scope) -> Any:
                handle, stream = s.new_input()
                stream.probe_with(shared)
                return handle

            live = rt.dataflow(build).results
            with pytest.raises((RuntimeError, BuildError)):
                rt.dataflow(failing(build, failure))
            seen = [list(shared.frontier)]
            for h in live:
                h.send([1])
                h.advance_to(3)
            await asyncio.wait_for(shared.wait(2), 30)  # the live dataflow's frontier only
            seen.append(list(shared.frontier))
            for h in live:
                h.close()
            await asyncio.wait_for(shared.wait(), 30)
            return seen

    # before the fix: AttributeError ('ProbeVertex' object has no attribute 'shard'), which
    # also failed the live dataflow when its probe read the handle
    assert asyncio.run(main()) == [[0], [3]]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_import_does_not_hold_the_source_trace(workers: int) -> None:
    async def main() -> tuple[int, int, int]:
        async with naiad.Runtime(workers=workers) as rt:

            def source(s: naiad.Scope) -> Any:
                session, c = Collection.new_input(s)
                return session, c.arrange_by_self(), c.probe()

            src = rt.dataflow(source)
            traces = [arranged.trace for _, arranged, _ in src.results]
            spines = [t.spine for t in traces]

            def importer(s: naiad.Scope) -> None:
                imported = import_trace(src.result(s.index)[1].trace, s)
                imported.join(Collection.from_epochs(s, [[(1, 1)]]))  # readers of the spine
                imported.count()

            with pytest.raises(RuntimeError, match="the user's build failed"):
                rt.dataflow(failing(importer, "raise"))
            for t in traces:
                t.close()
            readers = sum(len(s.handles) for s in spines)
            sessions = [session for session, _, _ in src.results]
            probe = src.results[0][2]
            epochs = 100
            for epoch in range(epochs):  # one record alive, replaced at every epoch
                sessions[0].insert(epoch)
                if epoch:
                    sessions[0].remove(epoch - 1)
                for session in sessions:
                    session.advance_to(epoch + 1)
                await asyncio.wait_for(probe.wait(epoch), 30)
            rows = sum(len(b) for s in spines for b in s.batches)
            for session in sessions:
                session.close()
            return readers, rows, 2 * epochs

    readers, rows, history = asyncio.run(main())
    # before the fix: 3 readers per worker stayed, and the spines kept the whole history
    assert readers == 0
    assert rows < history // 4
