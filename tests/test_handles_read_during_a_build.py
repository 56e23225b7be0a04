"""Handles read from the build function that makes them, before the dataflow has run: a
probe (its own or a shared one) answers that nothing is complete, a view refuses to be read
at a time not complete; then the dataflow runs and they answer as usual. They raised
``AttributeError: 'ProbeVertex' object has no attribute 'shard'`` (and the same of
``ViewVertex``), naming nothing the user did."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad.differential import Collection


@pytest.mark.parametrize("workers", [1, 2])
def test_probes_read_in_their_build_call_nothing_complete(workers: int) -> None:
    async def main() -> list[Any]:
        seen: list[Any] = []
        async with naiad.Runtime(workers) as rt:
            shared = naiad.ProbeHandle()

            def first(s: naiad.Scope) -> Any:
                inp, stream = s.new_input()
                stream.probe_with(shared)
                return inp

            inputs = rt.dataflow(first).results
            for inp in inputs:
                inp.advance_to(5)
            await shared.wait(4)
            seen.append(("shared before", shared.less_equal(4), shared.less_equal(5)))

            def second(s: naiad.Scope) -> Any:
                inp, stream = s.new_input()
                own = stream.probe()
                stream.probe_with(shared)
                # the new stream starts at 0: nothing of it is complete
                seen.append(("build", own.less_equal(0), own.done(), shared.less_equal(0)))
                return inp, own

            results = rt.dataflow(second).results
            for inp, _ in results:
                inp.send([1])
                inp.advance_to(3)
            own = results[0][1]
            await own.wait(2)
            await shared.wait(2)
            seen.append(("after", own.less_equal(2), own.less_equal(3), shared.less_equal(3)))
            for inp in inputs:
                inp.close()
            for inp, _ in results:
                inp.close()
            await shared.wait()
            seen.append(("end", own.done(), shared.done()))
        return seen

    assert asyncio.run(asyncio.wait_for(main(), 30)) == [
        ("shared before", False, True),
        *[("build", True, False, True)] * workers,  # (the build runs once per worker)
        ("after", False, True, True),
        ("end", True, True),
    ]


def test_a_view_read_in_its_build_refuses_a_time_not_complete() -> None:
    async def main() -> list[Any]:
        seen: list[Any] = []
        async with naiad.Runtime(1) as rt:

            def build(s: naiad.Scope) -> Any:
                session, c = Collection.new_input(s)
                view = c.view()
                seen.append(view.complete(0))
                with pytest.raises(ValueError, match="time 0 is not complete yet"):
                    view.at(0)
                return session, view

            ((session, view),) = rt.dataflow(build).results
            session.insert("a")
            session.advance_to(1)
            await view.wait(0)
            seen.append((view.complete(0), view.at(0)))
            session.close()
        return seen

    assert asyncio.run(asyncio.wait_for(main(), 30)) == [False, (True, {"a": 1})]
