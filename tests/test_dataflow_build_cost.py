"""Building a dataflow costs work linear in its size, not its square.

``Reachability`` computed ``Ψ`` from every location to every location it reaches when the
graph was built: on a chain of ``M`` maps, ``O(M**2)`` summaries (322,003 antichain entries at
400 maps, 5,128,003 at 1,600; 2.1 s and 42 s to build), though the runtime then picked
``FrontierTracker``, which needs ``Ψ`` only inside cycles. It now picks ``PsiTracker`` for such
a chain, which asks for ``Ψ`` to the targets it watches only (the maps' inputs are unwatched).
Work is counted as the lines of Python executed while ``Runtime.dataflow`` builds the graph
and instantiates it, so that any quadratic loop on the build path shows (scope, graph
builder, reachability, strategy choice, tracker, process), never as time.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

import naiad
from naiad.differential.collection import Collection
from naiad.libraries import graph
from naiad.progress.reachability import FrontierTracker, PsiTracker


def chain(maps: int) -> Callable[[Any], Any]:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("in")
        for _ in range(maps):
            stream = stream.map(lambda x: x + 1)
        return handle, stream.collect(), stream.probe()

    return build


def probed_chain(maps: int) -> Callable[[Any], Any]:
    """A map and a probe per step: every step's frontier is watched."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("in")
        probes = naiad.ProbeHandle()
        for _ in range(maps):
            stream = stream.map(lambda x: x + 1).probe_with(probes)
        return handle, stream.collect(), stream.probe()

    return build


def wcc_in_a_chain(maps: int) -> Callable[[Any], Any]:
    """``maps`` maps before and after the loop of ``graph.wcc``."""

    def build(scope: Any) -> Any:
        session, edges = Collection.new_input(scope, "edges")
        for _ in range(maps):
            edges = edges.map(lambda e: e)
        labels = graph.wcc(edges)
        for _ in range(maps):
            labels = labels.map(lambda e: e)
        return session, labels.changes(), labels.probe()

    return build


def lines_to_build(build: Callable[[Any], Any]) -> tuple[int, type]:
    """The lines of Python run by ``rt.dataflow(build)``, and the class of its tracker; then
    runs the dataflow, one record through it, to check it works."""

    async def main() -> tuple[int, type]:
        async with naiad.Runtime(1) as rt:
            lines = 0

            def local(frame: FrameType, event: str, arg: Any) -> Any:
                nonlocal lines
                lines += event == "line"
                return local

            sys.settrace(lambda frame, event, arg: local)
            try:
                df = rt.dataflow(build)
            finally:
                sys.settrace(None)
            kind = type(df.instances[0].process.progress.tracker(df.id))
            handle, out, probe = df.results[0]
            if isinstance(handle, naiad.InputHandle):
                handle.send([0])
            else:
                handle.update((0, 1), 1)
            handle.advance_to(1)
            await probe.wait(0)
            assert out, "nothing came out"
            handle.close()
            await df.finished()
            return lines, kind

    return asyncio.run(main())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shape", [chain, wcc_in_a_chain, probed_chain])
def test_building_a_long_dataflow_is_linear(shape: Callable[[int], Any]) -> None:
    small, kind_small = lines_to_build(shape(400))
    big, kind_big = lines_to_build(shape(1600))
    # the maps' inputs are unwatched (stateless built-ins), so Ψ reaches few watched targets
    # and stays the choice; a chain of probes, each watched, goes over to frontiers
    expected = FrontierTracker if shape is probed_chain else PsiTracker
    assert kind_small is kind_big is expected
    assert small > 10_000  # the tracing counted the build
    assert big / small <= 4.6, (small, big)  # 4x the operators
