"""An import hears of its source's batches on the source's stack (the source's arrange
operator seals a batch and calls the import's listener), and sends them on from there, so
operators of the importing dataflow run on that stack (cut-through). One of them may drop
its own dataflow (``Dataflow.drop`` from a callback), or another importing dataflow whose
listener comes next. The drop must end that dataflow alone: the import stopped only at its
next step, its capability's ``downgrade`` raised ``DataflowDropped`` into the source's
callback, naming the source's operator 'arrange', and the whole runtime stopped (the
source and every other dataflow with it). The same for ``close_inputs()`` from there."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import naiad
from naiad.differential import import_trace
from tests.test_a_build_that_raises import arranged_source


class DropsOnArrival(naiad.Vertex):
    """Drops ``victim[0]`` (a dataflow) when its first message arrives."""

    def __init__(self, victim: list[naiad.Dataflow]) -> None:
        self.victim = victim

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        if self.victim and not self.victim[0].dropped:
            self.victim[0].drop()


def importer(src: naiad.Dataflow, victim: list[naiad.Dataflow]) -> Any:
    def build(s: naiad.Scope) -> Any:
        imported = import_trace(src.result(s.index)[1].trace, s).as_collection()
        imported.stream.unary(DropsOnArrival(victim), name="dropper")
        return imported.changes(), imported.probe()

    return build


def contents(changes: list[Any], t: int) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for record, time, diff in changes:
        if time <= t:
            out[record] += diff
    return +out


@pytest.mark.parametrize("whom", ["itself", "the next importer"])
@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_a_dataflow_dropped_from_a_callback_on_the_source_stack_ends_alone(
    workers: int, processes: int, whom: str
) -> None:
    async def main() -> tuple[list[Any], Counter[Any], list[int]]:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
            src = rt.dataflow(arranged_source, name="source")
            sessions = [session for session, _, _ in src.results]
            probe = src.results[0][2]
            spines = [arranged.spine for _, arranged, _ in src.results]
            victim: list[naiad.Dataflow] = []
            first = rt.dataflow(importer(src, victim if whom == "itself" else []), "first")
            # listens after `first`: `first` drops it while the source calls the listeners
            second = rt.dataflow(importer(src, victim), "second")
            victim.append(first if whom == "itself" else second)
            survivor = second if whom == "itself" else first
            for epoch in range(6):
                sessions[epoch % len(sessions)].insert(epoch)
                for session in sessions:
                    session.advance_to(epoch + 1)
                await asyncio.wait_for(probe.wait(epoch), 10)
                await asyncio.wait_for(survivor.results[0][1].wait(epoch), 10)
            with pytest.raises(naiad.DataflowDropped, match=f"'{victim[0].name}' was dropped"):
                await asyncio.wait_for(victim[0].finished(), 10)
            answer = contents([c for changes, _ in survivor.results for c in changes], 5)
            survivor.drop()
            src.close_inputs()
            for _, arranged, _ in src.results:
                arranged.trace.close()
            await asyncio.wait_for(src.finished(), 10)
            return sorted(rt.dataflows), answer, [len(s.handles) for s in spines]

    dataflows, answer, handles = asyncio.run(main())
    # before the fix: DataflowDropped "operator 'import': dataflow 'first' was dropped",
    # raised in operator 'arrange' (the source's), stopped the runtime at epoch 0
    assert answer == Counter(range(6))
    assert dataflows == []
    assert handles == [0] * len(handles)


class ClosesOnArrival(naiad.Vertex):
    """Closes the inputs (and imports) of ``dataflow[0]`` when its first message arrives."""

    def __init__(self, dataflow: list[naiad.Dataflow]) -> None:
        self.dataflow = dataflow

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.dataflow[0].close_inputs()


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_an_import_stopped_from_a_callback_on_the_source_stack_completes(
    workers: int, processes: int
) -> None:
    """``close_inputs()`` from such a callback stops the import at what it has sent: the
    import's drain under way went on to drop its capability a second time (the nested
    close had dropped it), and the CapabilityError ("the capability for time 0 is no
    longer valid") stopped the runtime from the source's 'arrange'."""

    async def main() -> tuple[list[Any], int]:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
            src = rt.dataflow(arranged_source, name="source")
            sessions = [session for session, _, _ in src.results]
            holder: list[naiad.Dataflow] = []

            def build(s: naiad.Scope) -> Any:
                imported = import_trace(src.result(s.index)[1].trace, s).as_collection()
                imported.stream.unary(ClosesOnArrival(holder), name="closer")
                return imported.changes()

            holder.append(rt.dataflow(build, name="closing"))
            for epoch in range(3):
                sessions[0].insert(epoch)
                for session in sessions:
                    session.advance_to(epoch + 1)
                await asyncio.wait_for(src.results[0][2].wait(epoch), 10)
            await asyncio.wait_for(holder[0].finished(), 10)
            src.close_inputs()
            for _, arranged, _ in src.results:
                arranged.trace.close()
            await asyncio.wait_for(src.finished(), 10)
            return [c for part in holder[0].results for c in part], len(rt.dataflows)

    changes, running = asyncio.run(main())
    assert changes == [(0, 0, 1)]  # the first batch, sent before it stopped; nothing twice
    assert running == 0
