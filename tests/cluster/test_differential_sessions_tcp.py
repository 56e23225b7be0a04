"""The differential layer on two real processes over TCP, checked against a plain-Python
oracle: input sessions on every worker feed words and edges with retractions over several
epochs (a process's inputs closing at an earlier epoch than the other's); count, distinct,
join, min, wcc and reachability (iterations) are read through views on every process at every
epoch; an arrangement of the first dataflow is imported by a second dataflow built later,
read, dropped, and imported again; with compaction of views and trace, and a small frame limit
that splits the differential batches between processes."""

from __future__ import annotations

import ast
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_departures import naiad_run

EPOCHS = 6


def plan(seed: int, last: int) -> list[list[tuple[str, Any, int]]]:
    """Per epoch, ``(collection, record, diff)`` changes (a retraction only of a present
    record); none from epoch ``last`` on (every input is closed)."""
    rng = random.Random(seed)
    present: dict[str, Counter[Any]] = {"w": Counter(), "e": Counter()}
    epochs = []
    for t in range(EPOCHS):
        changes = []
        for _ in range(rng.randrange(3, 40) if t < last else 0):
            kind = "w" if rng.random() < 0.4 else "e"
            live = sorted(r for r, m in present[kind].items() if m > 0)
            if live and rng.random() < 0.3:
                record, diff = rng.choice(live), -1
            else:
                record = (
                    rng.choice("abcdefgh") * 30 if kind == "w" else tuple(rng.sample(range(12), 2))
                )
                diff = 1
            present[kind][record] += diff
            changes.append((kind, record, diff))
        epochs.append(changes)
    return epochs


MEMBER = """
import ast, asyncio, json, os
import naiad
from naiad.differential import Collection, import_trace
from naiad.libraries.graph import reachability, wcc

ME = int(os.environ["NAIAD_PROCESS"])
CLOSE = [int(c) for c in os.environ["CLOSE"].split(",")]  # per process: inputs end there
IMPORT, DROP = int(os.environ["IMPORT"]), int(os.environ["DROP"])
COMPACT = os.environ["COMPACT"] == "1"


def deliver(report, key, t, view):
    report.setdefault(key, {}).setdefault(str(t), []).extend(
        [repr(r), m] for r, m in view.at(t).items()
    )


async def main():
    with open(os.environ["PLAN"]) as given:
        epochs = ast.literal_eval(given.read())  # the test's plan()
    EPOCHS = len(epochs)
    report = {}
    async with naiad.Runtime() as rt:
        peers, local = rt.worker_count * rt.process_count, rt.worker_count

        def build(scope):
            words_in, words = Collection.new_input(scope)
            edges_in, edges = Collection.new_input(scope)
            by_src = edges.arrange_by_key()
            roots = edges.map(lambda e: e[0]).filter(lambda n: n % 5 == 0)
            views = {
                "count": words.count().view(gather=False),
                "distinct": words.distinct().view(gather=False),
                "paths": edges.map(lambda e: (e[1], e[0])).join(by_src).view(gather=False),
                "min": edges.min().view(gather=False),
                "wcc": wcc(edges).view(gather=False),
                "reach": reachability(by_src, roots).view(gather=False),
            }
            return (words_in, edges_in), by_src.trace, views

        def importer(scope):
            imported = import_trace(df.result(scope.index)[1], scope)
            return imported.as_collection().map(lambda e: e[0]).count().view(gather=False)

        df = rt.dataflow(build)
        imports = None
        for t in range(EPOCHS + 1):
            if t == CLOSE[ME]:
                for w in df.workers:
                    for session in df.result(w)[0]:
                        session.close()
            if t == EPOCHS:
                break
            if t < CLOSE[ME]:
                open_workers = [w for w in range(peers) if t < CLOSE[w // local]]
                for i, (kind, record, diff) in enumerate(epochs[t]):
                    w = open_workers[i % len(open_workers)]
                    if w in df.workers:
                        df.result(w)[0][kind == "e"].update(record, diff)
                for w in df.workers:
                    for session in df.result(w)[0]:
                        session.advance_to(t + 1)
            for w in df.workers:
                _, trace, views = df.result(w)
                for name, view in views.items():
                    await view.wait(t)
                    deliver(report, name, t, view)
                    if COMPACT:
                        view.set_logical_compaction([t])
                if COMPACT and t >= IMPORT:
                    trace.set_logical_compaction([t])
            if t in (IMPORT, DROP):
                if imports is not None:
                    imports.drop()
                imports = rt.dataflow(importer)  # built later, on every process
            if imports is not None:
                for w in df.workers:
                    await imports.result(w).wait(t)
                    deliver(report, "imported", t, imports.result(w))
        await df.finished()
        await imports.finished()
    os.write(1, (json.dumps(report) + "\\n").encode())

asyncio.run(main())
"""


def oracle(epochs: list[list[tuple[str, Any, int]]]) -> dict[str, list[Counter[Any]]]:
    """Each view's contents at each epoch, recomputed from scratch."""
    want: dict[str, list[Counter[Any]]] = {}
    words: Counter[Any] = Counter()
    edges: Counter[Any] = Counter()
    for changes in epochs:
        for kind, record, diff in changes:
            (words if kind == "w" else edges)[record] += diff
        live = sorted(e for e, m in edges.items() if m > 0)
        nodes = sorted({n for e in live for n in e})
        label = {n: n for n in nodes}
        for _ in nodes:  # the least label reaches every node of a component
            for a, b in live:
                label[a] = label[b] = min(label[a], label[b])
        reached = {a for a, _ in live if a % 5 == 0}
        for _ in nodes:
            reached |= {b for a, b in live if a in reached}
        degree: Counter[Any] = Counter()
        for (a, _), m in edges.items():
            degree[a] += m
        now = {
            "count": Counter({(w, m): 1 for w, m in words.items() if m}),
            "distinct": Counter({w: 1 for w, m in words.items() if m > 0}),
            "paths": Counter(
                {
                    (b, a, c): m1 * m2
                    for (a, b), m1 in edges.items()
                    for (b2, c), m2 in edges.items()
                    if b == b2 and m1 * m2
                }
            ),
            "min": Counter({(a, min(b for a2, b in live if a2 == a)): 1 for a, _ in live}),
            "wcc": Counter({(n, label[n]): 1 for n in nodes}),
            "reach": Counter({n: 1 for n in reached}),
            "imported": Counter({(n, d): 1 for n, d in degree.items() if d}),
        }
        for name, contents in now.items():
            want.setdefault(name, []).append(contents)
    return want


@pytest.mark.parametrize(
    ("seed", "close", "imports", "compact", "limit"),
    [
        pytest.param(1, "6,3", (2, 4), False, None, id="process 1 closes at 3"),
        pytest.param(2, "2,6", (1, 3), True, None, id="process 0 closes at 2, compaction"),
        pytest.param(3, "6,0", (0, 2), True, "1024", id="process 1 feeds nothing, 1 KiB frames"),
    ],
)
def test_views_on_every_process_meet_the_oracle(
    tmp_path: Path, seed: int, close: str, imports: tuple[int, int], compact: bool, limit: Any
) -> None:
    epochs = plan(seed, max(int(c) for c in close.split(",")))
    (tmp_path / "plan.txt").write_text(repr(epochs))
    env = {
        "PLAN": str(tmp_path / "plan.txt"),
        "CLOSE": close,
        "IMPORT": str(imports[0]),
        "DROP": str(imports[1]),
        "COMPACT": "1" if compact else "0",
        **({"NAIAD_MAX_PAYLOAD": limit} if limit else {}),
    }
    done = naiad_run(tmp_path, MEMBER, env=env, workers=2)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(reports) == 2
    want = oracle(epochs)
    for name, per_epoch in want.items():
        for t, contents in enumerate(per_epoch):
            if name == "imported" and t < imports[0]:
                continue  # not built yet
            got: Counter[Any] = Counter()
            for report in reports:  # each worker's view holds its share
                for record, m in report[name][str(t)]:
                    got[ast.literal_eval(record)] += m
            assert {r: m for r, m in got.items() if m} == contents, (name, t)
