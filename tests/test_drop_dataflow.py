"""``Dataflow.drop()`` ends one running dataflow (timely's ``drop_dataflow``) and the runtime
goes on: its operators never run again, its handles refuse naming the drop (never hang), the
trace it imported compacts again, and frames and progress batches peers still send for it are
ignored, on one worker, several, and several processes (simulated and real)."""

from __future__ import annotations

import ast
import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

import naiad
from naiad.differential import Collection, import_trace
from tests.cluster.test_departures import naiad_run
from tests.test_a_build_that_raises import arranged_source, replace_one_record

CONFIGS = [(1, 1), (2, 1), (1, 2), (2, 2)]  # (workers, processes): processes simulated
IDS = [f"{w}w{p}p" for w, p in CONFIGS]


def runtime(workers: int, processes: int, central: bool = False) -> naiad.Runtime:
    return naiad.Runtime(workers, processes=processes, transport="inproc", central=central)


def spinning_loop(calls: list[int]) -> Any:
    """A build whose loop never converges: every record goes round for ever (through an
    exchange, so with several workers messages are always on their way between them),
    counting its trips in ``calls``."""

    def build(s: naiad.Scope) -> Any:
        handle, numbers = s.new_input()
        with s.iterative() as loop:
            feedback, cycle = loop.feedback()
            body = numbers.enter(loop).concat(cycle).exchange(lambda x: x)

            def step(x: int) -> int:
                calls[0] += 1
                return x + 1

            body.map(step).connect_loop(feedback)
        return handle

    return build


def squares(s: naiad.Scope) -> Any:
    handle, numbers = s.new_input()
    out = numbers.exchange(lambda x: x).map(lambda x: x * x)
    return handle, out.collect(), out.probe()


async def feed_squares(
    df: naiad.Dataflow, epochs: range, wait: bool = True, close: bool = True
) -> list[tuple[int, int]]:
    """Feeds ``epochs`` of numbers to a ``squares`` dataflow (``wait``: waiting for each),
    then (``close``) closes it and returns its answers once it has completed."""
    for epoch in epochs:
        for i, (handle, _, _) in enumerate(df.results):
            handle.send([epoch * 10 + i])
            handle.advance_to(epoch + 1)
        if wait:
            await asyncio.wait_for(df.results[0][2].wait(epoch), 30)
    if not close:
        return []
    for handle, _, _ in df.results:
        handle.close()
    await asyncio.wait_for(df.finished(), 30)
    return sorted(r for _, out, _ in df.results for r in out)


def expected_squares(epochs: int, workers: int) -> list[tuple[int, int]]:
    return sorted((e, (e * 10 + i) ** 2) for e in range(epochs) for i in range(workers))


def check_forgotten(rt: naiad.Runtime, df: naiad.Dataflow) -> None:
    """Nothing of ``df`` stays in the runtime: no instance, no progress tracking, no frames
    or batches kept for it, no progress batch buffered by a worker."""
    assert df.id not in rt.dataflows
    for process in rt.processes:
        assert df.id not in process.instances
        assert process.progress.finished(df.id)
        assert df.id not in process._early
        assert df.id not in process.progress._unbuilt
        for worker in process.workers:
            assert df.id not in worker.buffers


@pytest.mark.parametrize(
    ("workers", "processes", "central"),
    [(w, p, False) for w, p in CONFIGS] + [(2, 3, True)],
    ids=[*IDS, "2w3p-central"],
)
def test_a_loop_that_never_converges_is_dropped_while_another_dataflow_answers(
    workers: int, processes: int, central: bool
) -> None:
    async def main() -> tuple[list[Any], list[Any], int, int, int]:
        async with runtime(workers, processes, central) as rt:
            other = rt.dataflow(squares, name="squares")
            await feed_squares(other, range(5), close=False)
            calls = [0]
            spinning = rt.dataflow(spinning_loop(calls), name="spinning")
            for handle in spinning.results:
                handle.send([1, 2, 3])
                handle.close()  # closed: only the loop holds it, for ever
            while calls[0] < 100:
                await asyncio.sleep(0.01)
            # waited for: the loop's messages never stop, but the worker delivers a
            # notification at least every MESSAGES_BEFORE_A_NOTIFICATION of them
            await feed_squares(other, range(5, 10), close=False)
            held = [str(h) for h in spinning.holders()]
            spinning.drop()
            at_drop = calls[0]
            answers = await feed_squares(other, range(10, 12))
            await asyncio.sleep(0.2)  # frames and batches in flight arrive, and are ignored
            after_drop = calls[0]
            check_forgotten(rt, spinning)
            third = rt.dataflow(squares, name="squares again")
            again = await feed_squares(third, range(5))
            return answers, again, at_drop, after_drop, len(held)

    answers, again, at_drop, after_drop, held = asyncio.run(main())
    assert answers == expected_squares(12, workers * processes)
    assert again == expected_squares(5, workers * processes)
    assert held > 0  # it was running, held by the messages going round
    assert after_drop == at_drop  # not one more trip once dropped


class Keeper(naiad.Vertex):
    """Keeps its initial capability for ever: its dataflow can never complete."""

    def on_start(self, cap: naiad.Capability) -> None:
        self.kept = cap.retain()

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        self.send(cap, batch)


def held_dataflow(s: naiad.Scope) -> Any:
    """A dataflow that a kept capability holds open, with every kind of handle on it."""
    handle, stream = s.new_input()
    unordered, free = s.new_unordered_input()
    kept = stream.concat(free).unary(Keeper(), name="keeper")
    session, c = Collection.new_input(s)
    arranged = c.arrange_by_self()
    seen: list[Any] = []
    return {
        "input": handle,
        "unordered": unordered,
        "session": session,
        "probe": kept.probe(),
        "subscribe": kept.subscribe(lambda t, rs: seen.append((t, rs))),
        "view": c.view(),
        "trace": arranged.trace,
        "collected": stream.collect(),  # not held: its epoch 0 completes
    }


@pytest.mark.parametrize(("workers", "processes"), CONFIGS, ids=IDS)
def test_the_handles_of_a_dropped_dataflow_refuse_naming_the_drop(
    workers: int, processes: int
) -> None:
    async def main() -> None:
        async with runtime(workers, processes) as rt:
            df = rt.dataflow(held_dataflow, name="held")
            first = df.results[0]
            first["input"].send([7])
            first["session"].insert(7)
            for part in df.results:
                part["input"].advance_to(1)
                part["session"].advance_to(1)
            await asyncio.wait_for(first["view"].wait(0), 30)
            waits = [
                asyncio.ensure_future(w)
                for w in (
                    df.finished(),
                    first["probe"].wait(0),
                    first["subscribe"].wait(0),
                    first["view"].wait(3),
                    first["trace"].wait(3),
                )
            ]
            await asyncio.sleep(0.05)
            assert not any(w.done() for w in waits)  # held: they wait
            df.drop()
            for w in waits:  # every wait under way ends, naming the drop
                with pytest.raises(naiad.DataflowDropped, match="'held' was dropped"):
                    await asyncio.wait_for(w, 5)
            name = "'held' was dropped"
            refusals = [
                lambda: first["input"].send([1]),
                lambda: first["input"].advance_to(5),
                lambda: first["unordered"].capability.send([1]),
                lambda: first["session"].insert(1),
                lambda: first["probe"].less_equal(0),
                lambda: first["view"].at(0),
            ]
            for refused in refusals:
                with pytest.raises(naiad.DataflowDropped, match=name):
                    refused()
            for w in (
                df.finished(),
                df.finished(timeout=1),
                first["probe"].wait(),
                first["subscribe"].wait(5),
                first["trace"].wait(5),
            ):
                with pytest.raises(naiad.DataflowDropped, match=name):
                    await asyncio.wait_for(w, 5)
            assert df.done and df.dropped and df.holders() == []
            # what it produced stays readable; a second drop, close_inputs: nothing
            assert sorted(r for part in df.results for r in part["collected"]) == [(0, 7)]
            df.drop()
            df.close_inputs()
            for part in df.results:
                part["trace"].close()
            check_forgotten(rt, df)

    asyncio.run(main())  # the runtime's exit does not wait for the dropped dataflow


def test_dropping_an_ended_dataflow_does_nothing() -> None:
    async def main() -> list[Any]:
        async with naiad.Runtime(2) as rt:
            df = rt.dataflow(lambda s: s.from_epochs([[1, 2]]).collect(), name="done")
            await df.finished()
            df.drop()
            await df.finished()  # completed, not dropped
            assert not df.dropped
            return df.results

    assert sorted(r for part in asyncio.run(main()) for r in part) == [(0, 1), (0, 2)]


@pytest.mark.parametrize(("workers", "processes"), CONFIGS, ids=IDS)
def test_a_dropped_importer_no_longer_holds_the_source_trace(workers: int, processes: int) -> None:
    async def main() -> tuple[int, int, int, list[Any]]:
        async with runtime(workers, processes) as rt:
            src = rt.dataflow(arranged_source, name="source")
            traces = [arranged.trace for _, arranged, _ in src.results]
            spines = [t.spine for t in traces]

            def importer(s: naiad.Scope) -> Any:
                imported = import_trace(src.result(s.index)[1].trace, s)
                queries, q = Collection.new_input(s)  # never advanced: the join holds epoch 0
                imported.join(q.map(lambda r: (r, r)))
                imported.count()
                return queries

            query = rt.dataflow(importer, name="query")
            for t in traces:
                t.close()  # only the importer holds the source's history now
            sessions = [session for session, _, _ in src.results]
            probe = src.results[0][2]
            await replace_one_record(sessions, probe, range(0, 100))
            held = sum(len(b) for s in spines for b in s.batches)
            with pytest.raises(RuntimeError, match="'source' cannot be dropped: operator"):
                src.drop()  # the query imports it
            query.drop()
            await replace_one_record(sessions, probe, range(100, 200))
            rows = sum(len(b) for s in spines for b in s.batches)
            readers = sum(len(s.handles) for s in spines)
            with pytest.raises(naiad.DataflowDropped, match="'query' was dropped"):
                query.results[0].insert(1)
            src.drop()  # nothing follows it any more
            check_forgotten(rt, src)
            check_forgotten(rt, query)
            return held, rows, readers, [str(h) for h in src.holders()]

    held, rows, readers, holders = asyncio.run(main())
    assert held > 150  # the importer held the whole history: 2 rows per epoch (199)
    assert rows < 20  # before the drop the importer held it all (measured: 399 rows)
    assert readers == 0
    assert holders == []


def test_the_refusal_names_the_importing_dataflow_and_drops_nothing() -> None:
    async def main() -> None:
        async with naiad.Runtime(2) as rt:
            src = rt.dataflow(arranged_source, name="source")
            query = rt.dataflow(
                lambda s: (
                    import_trace(src.result(s.index)[1].trace, s, name="imp")
                    .as_collection()
                    .probe()
                ),
                name="query",
            )
            with pytest.raises(RuntimeError) as refused:
                src.drop()
            assert "operator 'imp' of dataflow 'query'" in str(refused.value)
            assert not src.done and not src.dropped
            src.results[0][0].insert(5)  # the source still runs, and feeds the import
            for session, _, _ in src.results:
                session.advance_to(1)
            await asyncio.wait_for(query.results[0].wait(0), 30)
            query.close_inputs()  # the import stops following: the source may go now
            src.drop()
            await asyncio.wait_for(query.finished(), 30)
            for _, arranged, _ in src.results:
                arranged.trace.close()

    asyncio.run(main())


def test_a_live_capture_replayed_elsewhere_refuses_the_drop() -> None:
    async def main() -> list[Any]:
        async with naiad.Runtime() as rt:
            captured = rt.dataflow(
                lambda s: (lambda h, st: (h, st.capture()))(*s.new_input()), name="captured"
            )
            handle, log = captured.results[0]
            replaying = rt.dataflow(lambda s: s.replay([log]).collect(), name="replaying")
            with pytest.raises(RuntimeError, match="of dataflow 'replaying'"):
                captured.drop()
            handle.send([1])
            handle.close()
            await asyncio.wait_for(replaying.finished(), 30)
            captured.drop()  # ended: nothing to do
            return replaying.results[0]

    assert asyncio.run(main()) == [(0, 1)]


def test_a_shared_probe_handle_forgets_the_dropped_dataflow() -> None:
    async def main() -> list[list[int]]:
        async with naiad.Runtime(2) as rt:
            shared = naiad.ProbeHandle()

            def build(s: naiad.Scope) -> Any:
                handle, stream = s.new_input()
                stream.probe_with(shared)
                return handle

            kept = rt.dataflow(build, name="kept")
            gone = rt.dataflow(build, name="gone")
            for h in kept.results:
                h.advance_to(3)
            waiting = asyncio.ensure_future(shared.wait(1))
            await asyncio.sleep(0.05)
            assert not waiting.done()  # 'gone' holds it at 0
            seen = [list(shared.frontier)]
            gone.drop()
            await asyncio.wait_for(waiting, 5)  # 'kept' alone: at 3
            seen.append(list(shared.frontier))
            for h in kept.results:
                h.close()
            await asyncio.wait_for(shared.wait(), 30)
            return seen

    assert asyncio.run(main()) == [[0], [3]]


class SelfDropping(naiad.Vertex):
    """Asks for notifications at times 0 to 9 at once; at time 2 drops its own dataflow."""

    def __init__(self, seen: list[Any], dataflow: list[naiad.Dataflow]) -> None:
        self.seen, self.dataflow = seen, dataflow

    def on_start(self, cap: naiad.Capability) -> None:
        for t in range(10):
            self.notify_at(cap.delayed(t))

    def on_notify(self, cap: naiad.Capability) -> None:
        self.seen.append((self.index, cap.time))
        if cap.time == 2:
            self.dataflow[0].drop()


def test_a_callback_may_drop_its_own_dataflow() -> None:
    """An operator's callback drops its own dataflow: the notifications ready in the same
    activation are not delivered (they had been discarded: the delivery loop met them
    missing), no other worker's shard runs again, and the runtime goes on."""

    async def main() -> tuple[list[Any], list[Any]]:
        async with naiad.Runtime(2) as rt:
            seen: list[Any] = []
            holder: list[naiad.Dataflow] = []

            def build(s: naiad.Scope) -> None:
                s.from_epochs([]).unary(SelfDropping(seen, holder), name="self-dropping")

            holder.append(rt.dataflow(build, name="self-dropping"))
            with pytest.raises(naiad.DataflowDropped, match="'self-dropping' was dropped"):
                await asyncio.wait_for(holder[0].finished(), 30)
            other = rt.dataflow(squares)
            return seen, await feed_squares(other, range(3))

    seen, squares_seen = asyncio.run(main())
    # one worker's shard ran first and dropped it at 2; the other's never ran
    assert seen in ([(w, 0), (w, 1), (w, 2)] for w in (0, 1))
    assert squares_seen == expected_squares(3, 2)


TCP_SCRIPT = """
import asyncio, os, naiad
from tests.test_drop_dataflow import spinning_loop, squares, feed_squares

async def main():
    async with naiad.Runtime() as rt:
        calls = [0]
        spinning = rt.dataflow(spinning_loop(calls), name="spinning")
        for handle in spinning.results:
            handle.send(list(range(20)))
            handle.close()
        other = rt.dataflow(squares, name="squares")
        while calls[0] < 200:
            await asyncio.sleep(0.01)
        spinning.drop()  # every process drops its part, at its own moment
        at_drop = calls[0]
        got = await feed_squares(other, range(4))
        await asyncio.sleep(0.2)
        os.write(1, f"{rt.process_index} {calls[0] - at_drop} {got!r}\\n".encode())
        assert not rt.processes[0]._early and not rt.processes[0].progress._unbuilt

asyncio.run(main())
"""


def test_two_tcp_processes_each_drop_their_part(tmp_path: Path) -> None:
    done = naiad_run(
        tmp_path, textwrap.dedent(TCP_SCRIPT), env={"PYTHONPATH": str(Path.cwd())}, workers=2
    )
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert len(lines) == 2, done.stdout
    combined: list[Any] = []
    for process, line in enumerate(lines):
        index, trips, got = line.split(" ", 2)
        assert int(index) == process
        assert int(trips) == 0  # no trip of the loop after this process dropped it
        combined.extend(ast.literal_eval(got))
    # each process's two workers send the same numbers; each collects its workers' share
    assert sorted(combined) == sorted(expected_squares(4, 2) * 2)
