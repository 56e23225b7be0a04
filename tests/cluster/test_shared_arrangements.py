"""Sharing an arrangement between two dataflows of a cluster of real processes: each worker
imports the trace handle of its own worker, found with ``Dataflow.result(scope.index)``
(``results`` lists only this process's workers)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import naiad
from tests.cluster.test_departures import naiad_run

SHARING = """
import asyncio, os, naiad
from naiad.differential import Collection, import_trace
KEYS = 40

async def main():
    async with naiad.Runtime() as rt:
        def source(scope):
            session, collection = Collection.new_input(scope)
            arranged = collection.arrange_by_key()
            return session, arranged.trace, arranged.stream.probe()

        df1 = rt.dataflow(source)
        peers = rt.worker_count * rt.process_count
        for worker, (session, _, _) in zip(df1.workers, df1.results):
            for key in range(worker, KEYS, peers):
                session.insert((key, key * 10))
            session.advance_to(1)
        await df1.results[0][2].wait(0)

        def importer(scope):
            imported = import_trace(df1.result(scope.index)[1], scope)
            queries = Collection.from_epochs(scope, [[((k, -k), 1) for k in range(0, KEYS, 3)]])
            return imported.join(queries).changes()

        df2 = rt.dataflow(importer)
        for session, _, _ in df1.results:
            session.close()
        await df2.finished()
    for changes in df2.results:
        for change in changes:
            os.write(1, f"{change!r}\\n".encode())

asyncio.run(main())
"""


def test_each_worker_of_a_cluster_imports_its_own_part(tmp_path: Path) -> None:
    """Two processes of two workers: outside process 0, ``results[scope.index]`` is no
    worker's handle (an IndexError, or another worker's part before import_trace checked);
    ``result(scope.index)`` is the worker's own, and the join finds every queried key."""
    done = naiad_run(tmp_path, SHARING, workers=2)
    assert done.returncode == 0, done.stderr
    got = sorted(ast.literal_eval(line) for line in done.stdout.splitlines())
    # every third key (the workers split the queries), joined on k with (k, 10k)
    want = sorted(((k, k * 10, -k), 0, 1) for k in range(0, 40, 3))
    assert got == want


def test_result_is_a_global_workers_build_result_in_this_process() -> None:
    async def main() -> None:
        async with naiad.Runtime(2, processes=2, transport="inproc") as rt:
            df = rt.dataflow(lambda scope: scope.index * 10)
            assert [df.result(w) for w in range(4)] == [0, 10, 20, 30]
            with pytest.raises(LookupError, match="worker 4 is not one of this process's"):
                df.result(4)

    asyncio.run(main())
