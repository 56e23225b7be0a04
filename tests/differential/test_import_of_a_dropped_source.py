"""The arrangement of a dropped dataflow stays readable through a trace handle kept before
the drop, but can no longer be imported: it will never move again, so an import of it could
never complete. Building a dataflow that imports it must be refused like any build that
raises (the error naming the import, the arrangement and the drop; nothing built, nothing
held), and the runtime must go on: the refusal came from the import's ``on_start``, after
the build, and an ``on_start`` that raises stops the whole runtime, every other dataflow
with it ("cannot build dataflow 'squares': the runtime has stopped after an error")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, import_trace
from tests.test_a_build_that_raises import arranged_source
from tests.test_drop_dataflow import expected_squares, feed_squares, squares


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_importing_a_dropped_dataflows_arrangement_is_refused_and_the_runtime_goes_on(
    workers: int, processes: int
) -> None:
    async def main() -> tuple[list[Any], list[Any], list[int]]:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
            other = rt.dataflow(squares, name="squares")
            src = rt.dataflow(arranged_source, name="source")
            traces = [arranged.trace for _, arranged, _ in src.results]
            src.results[0][0].insert(7)
            for session, _, _ in src.results:
                session.advance_to(1)
            for trace in traces:  # sealed everywhere (the probe is before the arrangement)
                await asyncio.wait_for(trace.wait(0), 10)
            src.drop()

            def late(s: naiad.Scope) -> Any:
                imported = import_trace(traces[s.index], s, name="imp")
                _, q = Collection.new_input(s)
                imported.join(q.map(lambda r: (r, r)))
                return imported.as_collection().probe()

            with pytest.raises(
                naiad.DataflowDropped,
                match=r"'imp' imports 'arrange_by_self', whose dataflow stopped .* "
                r"dataflow 'source' was dropped",
            ):
                rt.dataflow(late, name="late")
            answers = await feed_squares(other, range(3))
            # still readable at the complete times
            read = []
            for trace in traces:
                cursor = trace.cursor(at=0)
                read.extend(cursor.key() for _ in cursor)
            handles = [len(trace.spine.handles) for trace in traces]
            for trace in traces:
                trace.close()
            return answers, read, handles

    # before the fix: the refusal stopped the runtime ("cannot build dataflow 'squares': the
    # runtime has stopped after an error: DataflowStopped: 'imp' imports ...")
    answers, read, handles = asyncio.run(main())
    assert answers == expected_squares(3, workers * processes)
    assert read == [7]
    assert handles == [1] * (workers * processes)  # the user's own, nothing of the build
