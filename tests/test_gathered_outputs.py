"""Gathered outputs: ``collect(gather=True)``, ``subscribe(f, gather=True)``,
``capture(gather=True)`` and ``Collection.changes(gather=True)`` hold every worker's records
at worker 0, in time order, on 1 and 2 workers and on 2 simulated processes (checked against
the records recomputed from the input); the other workers' results refuse to be read. Real
processes over TCP: tests/cluster/test_gathered_outputs_tcp.py."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.operators.gather import GatheredElsewhere
from naiad.progress.timestamp import less_than

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_ints = st.lists(st.lists(st.integers(-20, 20), max_size=8), min_size=1, max_size=5)


def peers(config: dict[str, int]) -> int:
    return config["workers"] * config.get("processes", 1)


def in_time_order(pairs: list[tuple[Any, Any]]) -> bool:
    times = [t for t, _ in pairs]
    return times == sorted(times)


def assert_refused(result: Any, worker: int, what: str) -> None:
    """Every way of reading another worker's gathered result names the operator and says
    where the records are."""
    assert isinstance(result, GatheredElsewhere)
    for read in (len, list, sorted, bool, lambda r: r[0], lambda r: 1 in r, reversed):
        with pytest.raises(ValueError, match=f"{what}: this is worker {worker}'s share") as info:
            read(result)
        assert "worker 0" in str(info.value) and "gather=False" in str(info.value)


async def fed_live(
    config: dict[str, int], epochs: list[list[int]], build: Any
) -> tuple[list[Any], list[int]]:
    """Runs ``build(scope, stream)`` on an input that every worker feeds in turn (worker
    ``w`` the records at positions ``w, w + peers, ...`` of each epoch), waiting for each
    epoch (for what ``build`` returns if it is a probe handle); returns every worker's result
    and ``df.workers``."""
    async with naiad.Runtime(**config) as rt:

        def built(scope: naiad.Scope) -> tuple[naiad.InputHandle, Any, naiad.ProbeHandle]:
            handle, stream = scope.new_input()
            # spread over the workers, whatever worker sent them
            spread = stream.exchange(lambda x: x * 7 + 3)
            result = build(scope, spread)
            # a subscription's handle passes a time once its callback ran
            probe = result if isinstance(result, naiad.ProbeHandle) else spread.probe()
            return handle, result, probe

        df = rt.dataflow(built)
        for epoch, records in enumerate(epochs):
            for w, (handle, _, _) in df.by_worker.items():
                handle.send(records[w :: rt.peers])
                handle.advance_to(epoch + 1)
            for _, _, probe in df.results:
                await probe.wait(epoch)
    return [result for _, result, _ in df.results], df.workers


@settings(max_examples=15, deadline=None)
@given(epochs_of_ints, configs)
def test_collect_gather_holds_every_record_at_worker_0_in_time_order(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    results, workers = asyncio.run(
        fed_live(config, epochs, lambda _s, stream: stream.collect(gather=True))
    )
    assert workers == list(range(peers(config)))
    assert Counter(results[0]) == Counter((t, r) for t, rs in enumerate(epochs) for r in rs)
    assert in_time_order(results[0])
    for w, result in enumerate(results[1:], 1):
        assert_refused(result, w, "collect 'collect'")


@settings(max_examples=15, deadline=None)
@given(epochs_of_ints, configs)
def test_subscribe_gather_calls_back_at_worker_0_once_per_time_with_every_record(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    calls: list[tuple[int, int, list[int]]] = []

    def build(scope: naiad.Scope, stream: naiad.Stream) -> naiad.ProbeHandle:
        def seen(t: int, records: list[int]) -> None:
            calls.append((scope.index, t, sorted(records)))

        return stream.subscribe(seen, gather=True)

    asyncio.run(fed_live(config, epochs, build))
    # every epoch once, in order, at worker 0, empty ones too
    assert calls == [(0, t, sorted(rs)) for t, rs in enumerate(epochs)]


@settings(max_examples=15, deadline=None)
@given(epochs_of_ints, configs, configs)
def test_capture_gather_logs_the_whole_stream_at_worker_0_and_replays_it(
    epochs: list[list[int]], config: dict[str, int], again: dict[str, int]
) -> None:
    results, _ = asyncio.run(
        fed_live(config, epochs, lambda _s, stream: stream.capture(gather=True))
    )
    log = results[0]
    everything = Counter((t, r) for t, rs in enumerate(epochs) for r in rs)
    assert Counter(log.records()) == everything
    # the global frontier: from 0, only forward, to empty; no message after its time passed
    steps = [f[0] if f else len(epochs) + 1 for f in log.frontiers()]
    assert steps[0] == 0 and steps[-1] == len(epochs) + 1
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    frontier = 0
    for event in log:
        if event[0] == "progress":
            frontier = next(iter(t for t, d in event[1] if d > 0), len(epochs) + 1)
        else:
            assert event[1] >= frontier
    for w, result in enumerate(results[1:], 1):
        assert_refused(result, w, "capture 'capture'")
    replayed = naiad.run(lambda s: s.replay([log]).collect(gather=True), **again)[0]
    assert Counter(replayed) == everything
    if len(results) > 1:
        with pytest.raises(ValueError, match="logs\\[1\\] is worker 1's share of a gathered"):
            naiad.run(lambda s: s.replay(results).collect(), **again)


changes_epochs = st.lists(
    st.lists(st.tuples(st.sampled_from("abcd"), st.integers(-2, 2)), max_size=8),
    min_size=1,
    max_size=5,
)


def net_changes(epochs: list[list[tuple[str, int]]]) -> list[tuple[str, int, int]]:
    """The changes of each epoch, consolidated over the whole collection."""
    out = []
    for t, changes in enumerate(epochs):
        net: Counter[str] = Counter()
        for record, diff in changes:
            net[record] += diff
        out.extend(sorted((r, t, d) for r, d in net.items() if d))
    return out


@settings(max_examples=15, deadline=None)
@given(changes_epochs, configs)
def test_changes_gather_consolidates_every_workers_changes_at_worker_0(
    epochs: list[list[tuple[str, int]]], config: dict[str, int]
) -> None:
    """from_epochs leaves ``+a`` and ``-a`` of one epoch on different workers: each worker's
    changes hold them, the gathered changes cancel them, as the whole collection does."""

    def build(scope: naiad.Scope) -> tuple[Any, Any]:
        c = Collection.from_epochs(scope, epochs)
        return c.changes(gather=True), c.changes()

    results = naiad.run(build, **config)
    gathered = results[0][0]
    assert gathered == net_changes(epochs)  # in time order, sorted within a time
    shares: Counter[tuple[str, int]] = Counter()
    for _, share in results:
        for r, t, d in share:
            shares[(r, t)] += d
    assert +shares == Counter({(r, t): d for r, t, d in gathered if d > 0})
    for w, (elsewhere, _) in enumerate(results[1:], 1):
        assert_refused(elsewhere, w, "changes 'changes'")


def test_collect_gather_in_a_loop_reports_its_times_in_order() -> None:
    """Product times: each value counts down on the worker its exchange picks; the gathered
    list has every (outer, round) time, each complete time before those after it."""

    def build(scope: naiad.Scope) -> Any:
        with scope.iterative() as loop:
            handle, cycle = loop.feedback()
            body = scope.from_epochs([[3, 5], [2]]).enter(loop).concat(cycle)
            body = body.exchange(lambda x: x)
            body.map(lambda x: x - 1).filter(lambda x: x >= 0).connect_loop(handle)
            return body.collect(gather=True)

    for config in CONFIGS:
        out = naiad.run(build, **config)[0]
        want = [(naiad.Product(0, k), v - k) for v in (3, 5) for k in range(v + 1)]
        want += [(naiad.Product(1, k), 2 - k) for k in range(3)]
        assert Counter(out) == Counter(want)
        times = [t for t, _ in out]
        # in the partial order, no time comes after a time it precedes (round 5 of epoch 0
        # may come after round 0 of epoch 1, which it does not precede)
        assert not any(
            less_than(times[j], times[i]) for j in range(len(times)) for i in range(j)
        ), out


def test_a_gathered_result_of_a_simulated_process_1_is_refused() -> None:
    """The results a process 1 of a cluster sees: ``df.result(2)`` is its first worker's."""

    async def main() -> None:
        async with naiad.Runtime(workers=2, processes=2) as rt:
            df = rt.dataflow(lambda s: s.from_epochs([[1, 2, 3]]).collect(gather=True, name="c"))
            await df.finished()
        assert sorted(df.result(0)) == [(0, 1), (0, 2), (0, 3)]
        with pytest.raises(ValueError, match=r"collect 'c': this is worker 2's share.*rt.process"):
            len(df.result(2))
        assert repr(df.result(3)) == "<collect 'c' of worker 3: gathered at worker 0>"

    asyncio.run(main())


def test_gather_must_be_a_bool_and_a_callback_a_function() -> None:
    for make, what in (
        (lambda s: s.from_epochs([[1]]).collect(gather="yes"), "collect 'collect'"),
        (lambda s: s.from_epochs([[1]]).subscribe(print, gather=1), "subscribe 'subscribe'"),
        (lambda s: s.from_epochs([[1]]).capture(gather=0), "capture 'capture'"),
        (lambda s: Collection.from_epochs(s, [[(1, 1)]]).changes(gather=None), "changes"),
    ):
        with pytest.raises(TypeError, match=f"{what}.*gather must be True or False"):
            naiad.run(make)
    with pytest.raises(TypeError, match="subscribe 'sub': callback must be a function, not 3"):
        naiad.run(lambda s: s.from_epochs([[1]]).subscribe(3, name="sub"))  # type: ignore[arg-type]
    assert naiad.run(lambda s: s.from_epochs([[1]]).collect(gather=True)) == [[(0, 1)]]


def test_the_methods_of_a_gathered_result_elsewhere_refuse_as_reads_do() -> None:
    """A script reading ``results[0]`` in every process called ``log.records()`` in process 1
    of a cluster and got ``AttributeError: 'GatheredElsewhere' object has no attribute
    'records'``, which did not say why; now every public name refuses with the same message
    as ``len``. Copying and pickling still work, and private names stay AttributeErrors."""
    import copy
    import pickle

    def build(scope: naiad.Scope) -> tuple[Any, Any, Any]:
        stream = scope.from_epochs([[1, 2, 3], [4]])
        changes = Collection.from_epochs(scope, [[("a", 1)]]).changes(gather=True)
        return stream.capture(gather=True), stream.collect(gather=True), changes

    for config in CONFIGS[1:]:
        results = naiad.run(build, **config)
        log, records, changes = results[0]
        assert sorted(log.records()) == sorted(records) == [(0, 1), (0, 2), (0, 3), (1, 4)]
        assert changes == [("a", 0, 1)]
        for w, (log, records, changes) in enumerate(results[1:], 1):
            reads = [
                (log, "capture 'capture'", lambda r: r.records()),
                (log, "capture 'capture'", lambda r: r.frontiers()),
                (log, "capture 'capture'", lambda r: r.events),
                (records, "collect 'collect'", lambda r: r.count((0, 1))),
                (records, "collect 'collect'", lambda r: r.copy()),
                (changes, "changes 'changes'", lambda r: r.index(("a", 0, 1))),
            ]
            for result, what, read in reads:
                with pytest.raises(ValueError, match=f"{what}: this is worker {w}'s share"):
                    read(result)
            for result in (log, records, changes):
                assert not hasattr(result, "_private")
                for twin in (
                    copy.copy(result),
                    copy.deepcopy(result),
                    pickle.loads(pickle.dumps(result)),
                ):
                    assert repr(twin) == repr(result)
                    assert_refused(twin, w, result.what)


def test_a_gathered_capture_keeps_nothing_on_the_other_workers() -> None:
    """The workers other than 0 receive no message of a gathered capture, and their build
    returns a GatheredElsewhere; yet each kept a CaptureLog of its own and appended a
    progress event at every move of the frontier, for as long as the stream ran: memory that
    grew with the number of epochs and that nobody could read."""
    from naiad.operators.capture import CaptureLog

    epochs = 30
    for config in CONFIGS[1:]:

        async def main(config: dict[str, int]) -> tuple[Any, list[tuple[int, int]]]:
            async with naiad.Runtime(**config) as rt:

                def build(scope: naiad.Scope) -> Any:
                    handle, stream = scope.new_input()
                    return handle, stream.capture(gather=True), stream.probe()

                df = rt.dataflow(build)
                for e in range(epochs):
                    for handle, _, _ in df.results:
                        handle.send([e])
                        handle.advance_to(e + 1)
                    for _, _, probe in df.results:
                        await probe.wait(e)  # a move of the frontier per epoch
                held = [
                    (w.index, len(shard.logic.log))
                    for instance in df.instances
                    for w, row in zip(instance.process.workers, instance.shards, strict=True)
                    for shard in row
                    if isinstance(getattr(shard.logic, "log", None), CaptureLog)
                    and shard.logic.log is not df.result(0)[1]
                ]
            return df.result(0)[1], held

        log, held = asyncio.run(main(config))
        assert Counter(log.records()) == Counter(
            (e, e) for e in range(epochs) for _ in range(peers(config))
        )
        assert len(log.frontiers()) > epochs  # worker 0's log has every move
        assert held == []  # no other log, let alone one that grows
