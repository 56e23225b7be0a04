"""On real processes over TCP (``naiad run``, two processes of two workers): each process
knows its index and its global workers (``rt.process_index``, ``rt.workers``,
``df.by_worker``) and feeds each of its workers' inputs by index; ``collect(gather=True)``,
``capture(gather=True)`` and ``changes(gather=True)`` hold every process's records at worker
0, in process 0, and process 1's gathered results refuse to be read; the README's cluster
example."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from tests.cluster.test_departures import naiad_run

README = Path(__file__).resolve().parent.parent.parent / "README.md"

SCRIPT = """
import asyncio, json, os, naiad
from naiad.differential import Collection

async def main():
    async with naiad.Runtime() as rt:
        facts = {"process": rt.process_index, "workers": rt.workers, "peers": rt.peers}

        def build(scope):
            handle, stream = scope.new_input()
            session, collection = Collection.new_input(scope)
            records = stream.exchange(lambda x: x).collect(gather=True)
            changes = collection.changes(gather=True)
            log = stream.capture(gather=True)
            return scope.index, handle, session, records, changes, log

        df = rt.dataflow(build)
        facts["built"] = {str(w): r[0] for w, r in df.by_worker.items()}
        for w, (_, handle, session, *_) in df.by_worker.items():
            handle.send([10 * w + 1, 10 * w + 2])
            session.insert((w, "x"))
            handle.advance_to(1)
            session.advance_to(1)
            handle.send([10 * w + 3])
            session.remove(((w + 1) % rt.peers, "x"))  # inserted by another worker
            session.insert("late")
            handle.close()
            session.close()
        await df.finished()
    if rt.process_index == 0:
        facts["records"] = df.result(0)[3]
        facts["changes"] = df.result(0)[4]
        facts["captured"] = df.result(0)[5].records()
        facts["frontiers"] = df.result(0)[5].frontiers()
    refused = []
    for w, (_, _, _, records, changes, log) in df.by_worker.items():
        if w == 0:
            continue
        for result in (records, changes, log):
            try:
                len(result)
            except ValueError as error:
                refused.append([w, str(error)])
    facts["refused"] = refused
    with open(os.path.join(os.environ["OUT"], f"{rt.process_index}.json"), "w") as out:
        json.dump(facts, out)

asyncio.run(main())
"""


def test_a_cluster_member_knows_its_workers_and_reads_gathered_results_in_process_0(
    tmp_path: Path,
) -> None:
    done = naiad_run(tmp_path, SCRIPT, env={"OUT": str(tmp_path)}, processes=2, workers=2)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = (json.loads((tmp_path / f"{p}.json").read_text()) for p in range(2))
    assert (first["process"], first["workers"], first["peers"]) == (0, [0, 1], 4)
    assert (second["process"], second["workers"], second["peers"]) == (1, [2, 3], 4)
    assert first["built"] == {"0": 0, "1": 1} and second["built"] == {"2": 2, "3": 3}
    records = [tuple(pair) for pair in first["records"]]
    assert sorted(records) == sorted(
        [(0, 10 * w + 1) for w in range(4)]
        + [(0, 10 * w + 2) for w in range(4)]
        + [(1, 10 * w + 3) for w in range(4)]
    )
    assert [t for t, _ in records] == sorted(t for t, _ in records)  # in time order
    captured = [tuple(pair) for pair in first["captured"]]
    assert sorted(captured) == sorted(records)
    assert first["frontiers"] in ([[0], [1], []], [[0], []])  # the global frontier
    # consolidated over all four workers: "late" once with diff 4, every (w, "x") removed;
    # in time order, and within a time in the order of the records' reprs
    assert first["changes"] == [[[w, "x"], 0, 1] for w in range(4)] + [["late", 1, 4]] + [
        [[w, "x"], 1, -1] for w in range(4)
    ]
    assert [w for w, _ in first["refused"]] == [1, 1, 1]
    assert [w for w, _ in second["refused"]] == [2, 2, 2, 3, 3, 3]
    for _, message in first["refused"] + second["refused"]:
        assert "share of a gathered" in message and "rt.process_index is 0" in message


def test_the_readme_cluster_example_prints_every_workers_records_once(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    block = next(b for b in blocks if "gather=True" in b)
    done = naiad_run(tmp_path, block, processes=2, workers=2)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = block.rsplit("# ", 1)[1]
    assert done.stdout.splitlines() == [expected.strip()]  # printed by process 0 only
    assert ast.literal_eval(expected) == sorted((0, x * x) for w in range(4) for x in (w, w + 10))
