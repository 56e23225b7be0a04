"""Collections against a from-scratch oracle: random change sequences with retractions over
several epochs, on 1, 2 and 4 workers and on two simulated processes."""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, InputSession

records = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "y", ("p", 1)]))
epochs = st.lists(st.lists(st.tuples(records, st.integers(-2, 2)), max_size=8), max_size=5)
layouts = st.sampled_from([(1, 1), (2, 1), (4, 1), (1, 2), (2, 2)])


def net_changes(per_epoch: list[list[tuple[Any, int]]], f: Any, keep: Any) -> Counter[Any]:
    """Per (record, epoch), the net change of ``f`` of the kept records: the oracle."""
    out: Counter[Any] = Counter()
    for epoch, changes in enumerate(per_epoch):
        for record, diff in changes:
            if keep(record):
                out[(f(record), epoch)] += diff
    return Counter({k: v for k, v in out.items() if v})


def gathered(results: list[list[tuple[Any, Any, int]]]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for part in results:
        for record, time, diff in part:
            assert diff != 0
            out[(record, time)] += diff
    return out


def describe(x: Any) -> str:
    return f"<{x}>"


def is_kept(x: Any) -> bool:
    return not isinstance(x, int) or x % 3 != 0


@settings(max_examples=40, deadline=None)
@given(epochs, layouts)
def test_map_filter_consolidate(per_epoch: list[Any], layout: tuple[int, int]) -> None:
    workers, processes = layout

    def build(scope: naiad.Scope) -> list[Any]:
        c = Collection.from_epochs(scope, per_epoch)
        return c.filter(is_kept).map(describe).consolidate().changes()

    results = naiad.run(build, workers, processes=processes, transport="inproc")
    assert gathered(results) == net_changes(per_epoch, describe, is_kept)
    # consolidated: one change per (record, time) in the whole cluster
    pairs = [(r, t) for part in results for r, t, _ in part]
    assert len(pairs) == len(set(pairs))


@settings(max_examples=30, deadline=None)
@given(epochs, epochs, layouts)
def test_concat_and_negate(a: list[Any], b: list[Any], layout: tuple[int, int]) -> None:
    workers, processes = layout

    def build(scope: naiad.Scope) -> list[Any]:
        ca, cb = Collection.from_epochs(scope, a), Collection.from_epochs(scope, b)
        return ca.concat(cb.negate()).consolidate().changes()

    results = naiad.run(build, workers, processes=processes, transport="inproc")
    want = net_changes(a, repr, lambda _: True)
    want.subtract(net_changes(b, repr, lambda _: True))
    got = Counter({(repr(r), t): d for (r, t), d in gathered(results).items()})
    assert got == Counter({k: v for k, v in want.items() if v})


@pytest.mark.parametrize("workers", [1, 3])
async def test_input_session_insert_remove_update(workers: int) -> None:
    async with naiad.Runtime(workers=workers) as rt:

        def build(scope: naiad.Scope) -> tuple[InputSession, list[Any]]:
            session, collection = Collection.new_input(scope)
            return session, collection.consolidate().changes()

        df = rt.dataflow(build)
        session = df.results[0][0]
        for other, _ in df.results[1:]:
            other.close()
        session.insert("a")
        session.insert("a")
        session.update("b", 3)
        session.advance_to(1)
        session.remove("a")
        session.insert("b")
        session.remove("b")  # cancels within the epoch
        session.advance_to(2)
        with pytest.raises(TypeError, match="integer"):
            session.update("c", 1.5)  # type: ignore[arg-type]
        session.close()
    got = sorted((r, t, d) for _, part in df.results for r, t, d in part)
    assert got == [("a", 0, 2), ("a", 1, -1), ("b", 0, 3)]


def fed(rt: naiad.Runtime, op: Any) -> tuple[InputSession, list[Any]]:
    """The input session of a one-worker dataflow, and the list its collection's changes
    under ``op`` fill as times complete."""

    def build(scope: naiad.Scope) -> tuple[InputSession, list[Any]]:
        session, collection = Collection.new_input(scope)
        return session, op(collection).changes()

    session, changes = rt.dataflow(build).results[0]
    return session, changes


async def test_nan_is_rejected_at_the_input_and_nothing_else_is_lost() -> None:
    """NaN is not equal to itself, so its changes could never cancel: the session refuses the
    record (and a column holding NaN) with a clear error and keeps every other change."""
    async with naiad.Runtime() as rt:
        session, changes = fed(rt, Collection.count)
        session.insert((1.5, 2))
        with pytest.raises(ValueError, match="NaN"):
            session.insert((1.5, float("nan")))
        with pytest.raises(ValueError, match="NaN"):
            session.remove(np.float64("nan"))
        with pytest.raises(ValueError, match=r"NaN \(row 1 of column 1\)"):
            session.send_columns((np.array([2.5, 2.5]), np.array([1.0, np.nan])))
        session.send_columns((np.array([2.5]), np.array([3.0])))
        session.close()
    got = sorted(changes)
    assert got == [((1.5, 2.0, 1), 0, 1), ((2.5, 3.0, 1), 0, 1)]


def test_nan_made_inside_a_dataflow_fails_it_naming_the_operator() -> None:
    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((1, 0.0), 1), ((2, 1.0), 1)]])
        return c.map_columns(lambda k, v: (k, v / v), name="ratio").count().changes()

    with pytest.raises(ValueError, match="NaN") as info, np.errstate(invalid="ignore"):
        naiad.run(build)
    assert "'count" in "".join(getattr(info.value, "__notes__", []))
    assert naiad.run(lambda s: s.from_epochs([[1]]).collect()) == [[(0, 1)]]


def test_a_reduce_function_returning_no_pairs_gets_a_clear_error() -> None:
    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((1, 2), 1)]])
        return c.reduce(lambda key, values: len(values), name="lengths").changes()

    with pytest.raises(TypeError, match=r"\(value, count\) pairs.*key 1 it returned 1") as info:
        naiad.run(build)
    assert "'lengths'" in "".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_equal_keys_of_different_types_meet_on_any_number_of_workers(workers: int) -> None:
    """An int-keyed collection joined with float keys and with an ``object`` column holding
    numbers: the same matches on every number of workers (``2 == 2.0``)."""

    def build(scope: naiad.Scope) -> Any:
        ints = Collection.from_epochs(scope, [[((k, "i"), 1) for k in range(6)]])
        floats = Collection.from_epochs(scope, [[((float(k), "f"), 1) for k in range(6)]])
        mixed = Collection.from_epochs(scope, [[((k, "m"), 1) for k in ["x", 2.0, 3, 4.5]]])
        keys = Collection.from_epochs(scope, [[(2.0, 1), (4.5, 1), (np.int64(5), 1)]])
        return (
            ints.join(floats).changes(),
            ints.join(mixed).changes(),
            ints.semijoin(keys).changes(),
        )

    results = naiad.run(build, workers=workers)
    got = [sorted((r[0], *r[1:]) for part in results for r, _, _ in part[i]) for i in range(3)]
    assert got[0] == [(k, "i", "f") for k in range(6)]
    assert got[1] == [(2, "i", "m"), (3, "i", "m")]
    assert got[2] == [(2, "i"), (5, "i")]


@pytest.mark.parametrize("vectorized", [False, True])
def test_a_reduce_whose_output_values_turn_from_numbers_to_strings(vectorized: bool) -> None:
    """The output column switches to dictionary codes when strings first appear; the
    retraction of the earlier number must still be that number (it came out as the string
    whose code equalled it)."""
    from tests.differential.reference import vectorized_reduce

    def size(key: Any, values: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        n = sum(c for _, c in values)
        return [(n if n < 2 else f"many{n}", 1)]

    epochs = [[((1, "a"), 1), ((2, "a"), 1)], [((1, "b"), 1)], [((1, "c"), 1), ((2, "q"), 1)]]
    with vectorized_reduce() if vectorized else contextlib.nullcontext():
        results = naiad.run(lambda s: Collection.from_epochs(s, epochs).reduce(size).changes())
    # compared by equality: the process-wide interner gives 1 the form of an equal value it
    # met first (1.0, say, in an earlier test), as a Python dict keeps its first key
    got = Counter((t, r, d) for r, t, d in results[0])
    want = Counter(
        [
            (0, (1, 1), 1),
            (0, (2, 1), 1),
            (1, (1, "many2"), 1),
            (1, (1, 1), -1),
            (2, (1, "many2"), -1),
            (2, (1, "many3"), 1),
            (2, (2, "many2"), 1),
            (2, (2, 1), -1),
        ]
    )
    assert got == want


def test_fractional_diffs_in_static_sources_are_refused_not_rounded() -> None:
    with pytest.raises(TypeError, match="diffs are integers, not float64"):
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1.5)]]).changes())
    with pytest.raises(TypeError, match="diffs are integers"):
        naiad.run(lambda s: Collection.from_columns(s, [(np.array([1]),)], [np.array([0.5])]))


async def test_fractional_diffs_sent_as_columns_are_refused_and_nothing_is_lost() -> None:
    async with naiad.Runtime() as rt:
        session, changes = fed(rt, lambda c: c)
        session.insert(7)
        with pytest.raises(TypeError, match="diffs are integers, not float64"):
            session.send_columns((np.array([1, 2]),), np.array([1.5, 2.0]))
        session.send_columns((np.array([1, 2]),), np.array([3, -1]))
        session.close()
    got = sorted(changes)
    assert got == [(1, 0, 3), (2, 0, -1), (7, 0, 1)]


def test_a_threshold_function_must_return_integer_counts() -> None:
    def halves(counts: np.ndarray) -> np.ndarray:
        return counts / 2

    with pytest.raises(TypeError, match="integer counts, not float64") as info:
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)]]).threshold(halves).changes())
    assert "'threshold" in "".join(getattr(info.value, "__notes__", []))

    def positive(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[(1, 2), (2, -1)]])
        return c.threshold(lambda counts: counts > 0).changes()  # booleans count as 0 and 1

    assert naiad.run(positive) == [[(1, 0, 1)]]


def test_records_of_different_shapes_are_keyed_by_first_field_and_can_be_whole_keys() -> None:
    """A tuple's first field is its key: records mixing tuple lengths, within one batch or
    across batches, are keyed so (the arrangement packs their values: see
    test_keyed_mixed_widths); as the keys of a semijoin (whole records) they are fine."""
    right = [[((1, "x"), 1)]]
    for epochs in ([[((1, "a"), 1), ((1, "b", "c"), 1)]], [[((1, "a"), 1)], [((1, "b", "c"), 1)]]):
        got = naiad.run(
            lambda s, e=epochs: (
                Collection.from_epochs(s, e).join(Collection.from_epochs(s, right)).changes()
            )
        )
        assert sorted(r for part in got for r, _, _ in part) == [(1, "a", "x"), (1, "b", "c", "x")]

    def paths(scope: naiad.Scope) -> Any:
        records = Collection.from_epochs(scope, [[(((1, 2, 3), "p"), 1), (((4, 5), "q"), 1)]])
        keys = Collection.from_epochs(scope, [[((1, 2, 3), 1), (7, 1), ((4, 6), 1)]])
        return records.semijoin(keys).changes()

    results = naiad.run(paths, workers=2)
    assert [c for part in results for c in part] == [(((1, 2, 3), "p"), 0, 1)]


def test_consolidate_meets_a_record_batched_whole_and_by_fields() -> None:
    """On worker 0 of 4 the second source's batch mixes shapes (one column of whole records);
    the first holds ('q', 1) as two fields: the two changes must still cancel."""

    def build(scope: naiad.Scope) -> Any:
        a = Collection.from_epochs(scope, [[(("q", 1), 1)]])
        b = Collection.from_epochs(scope, [[(("q", 1), -1), (10, 1), (11, 1), (12, 1), (5, 1)]])
        return a.concat(b).consolidate().changes()

    results = naiad.run(build, workers=4)
    assert sorted(c for part in results for c in part) == [
        (5, 0, 1),
        (10, 0, 1),
        (11, 0, 1),
        (12, 0, 1),
    ]


def test_a_variable_never_set_is_a_build_error_that_says_so() -> None:
    from naiad.differential.iterate import Variable

    def build(scope: naiad.Scope) -> Any:
        loop = scope.iterative()
        v = Variable(loop, Collection.from_epochs(scope, [[(1, 1)]]).enter(loop), name="v")
        return v.collection.leave().changes()

    with pytest.raises(naiad.BuildError, match=r"'v' was never connected.*variable\.set"):
        naiad.run(build)


@pytest.mark.parametrize("arranged", [False, True])
def test_joining_an_outer_collection_inside_a_loop_says_to_enter_it(arranged: bool) -> None:
    """Differential dataflow's usual slip: the body of ``iterate`` joins a collection of the
    enclosing scope. The error names both scopes and the remedy. An arrangement of the
    enclosing scope enters the loop by itself (``Arranged.enter``)."""

    def build(scope: naiad.Scope) -> Any:
        edges = Collection.from_epochs(scope, [[((1, 2), 1)]])
        other = edges.arrange_by_key() if arranged else edges
        roots = Collection.from_epochs(scope, [[(1, 1)]])
        reach = roots.iterate(lambda r: r.join(other).map(lambda t: t[1]).concat(r).distinct())
        return reach.changes()

    if arranged:
        assert naiad.run(build) == [[(1, 0, 1), (2, 0, 1)]]
        return
    with pytest.raises(ValueError, match=r"'dataflow/iterate'.*'dataflow'.*\.enter\(loop\)"):
        naiad.run(build)


async def test_unhashable_records_are_refused_at_the_input_and_nothing_else_is_lost() -> None:
    """A record no arrangement could hold fails where it is given, not later inside the
    dataflow (which would end the computation): the session keeps every other change."""
    async with naiad.Runtime() as rt:
        session, changes = fed(rt, Collection.distinct)
        session.insert((1, "a"))
        with pytest.raises(TypeError, match=r"record \(2, \['b'\]\) is not hashable"):
            session.insert((2, ["b"]))
        column = np.empty(2, dtype=object)
        column[:] = ["c", {"d": 1}]
        unhashable = r"row 1 of column 1: record \{'d': 1\} is not hashable"
        with pytest.raises(TypeError, match=unhashable):
            session.send_columns((np.array([3, 4]), column))
        with pytest.raises(ValueError, match=r"column 0 has shape \(2, 2\)"):
            session.send_columns((np.zeros((2, 2)),))
        session.send_columns((np.array([5]), np.array(["e"], dtype=object)))
        session.close()
    got = sorted(changes)
    assert got == [((1, "a"), 0, 1), ((5, "e"), 0, 1)]


def test_static_sources_check_their_records_when_the_dataflow_is_built() -> None:
    with pytest.raises(TypeError, match=r"record \[1, 2\] is not hashable"):
        naiad.run(lambda s: Collection.from_epochs(s, [[([1, 2], 1)]]).changes())
    with pytest.raises(TypeError, match=r"epoch 1 must hold \(record, diff\) pairs, not 3"):
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)], [3]]).changes())
    with pytest.raises(ValueError, match="NaN"):
        naiad.run(lambda s: Collection.from_columns(s, [(np.array([1.0, np.nan]),)]).changes())
    with pytest.raises(ValueError, match=r"column 1 has shape \(3,\)"):
        naiad.run(lambda s: Collection.from_columns(s, [(np.zeros(2), np.zeros(3))]).changes())


def test_filter_columns_needs_one_boolean_per_record() -> None:
    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[(1, 1), (2, 1)]])
        return c.filter_columns(lambda a: np.array([True]), name="odd").changes()

    with pytest.raises(ValueError, match=r"one boolean per record \(2\)") as info:
        naiad.run(build)
    assert "'odd'" in "".join(getattr(info.value, "__notes__", []))


async def test_a_view_reads_at_integer_times_only() -> None:
    async with naiad.Runtime() as rt:

        def build(scope: naiad.Scope) -> tuple[InputSession, Any, Any]:
            session, collection = Collection.new_input(scope)
            return session, collection.view(), collection.probe()

        session, view, probe = rt.dataflow(build).results[0]
        session.insert("a")
        session.advance_to(2)
        await probe.wait(1)
        assert view.at(np.int64(1)) == {"a": 1}
        with pytest.raises(TypeError, match=r"a view's time must be an integer, not 0\.5"):
            view.at(0.5)
        session.close()
        await view.wait()
        assert view.at(2**63 - 1) == {"a": 1}
        for beyond in (2**63, -(2**70)):  # was numpy's bare OverflowError
            with pytest.raises(ValueError, match="beyond the int64 range of a collection's"):
                view.at(beyond)


@pytest.mark.parametrize("layout", [(2, 1), (1, 2), (2, 2)])
async def test_a_gathered_view_is_read_at_worker_0_and_refused_elsewhere(
    layout: tuple[int, int],
) -> None:
    """Regression: another worker's share of a gathered view answered ``{}``, so a script
    reading ``df.results[0]``'s view was right on one process and read nothing in process 1
    of a cluster (whose ``results[0]`` is worker W's). Views made with ``gather=False``
    hold every worker's share and are read on every worker."""
    workers, processes = layout
    async with naiad.Runtime(workers, processes=processes) as rt:

        def build(scope: naiad.Scope) -> tuple[InputSession, Any, Any]:
            session, collection = Collection.new_input(scope)
            return session, collection.view(), collection.view(gather=False)

        df = rt.dataflow(build)
        want: Counter[Any] = Counter()
        for w, (session, _, _) in enumerate(df.results):
            for record in (w, "shared", ("p", w % 2)):
                session.insert(record)
                want[record] += 1
            session.advance_to(1)
        for _, gathered_view, share in df.results:
            await gathered_view.wait(0)
            await share.wait(0)
        assert df.results[0][1].at(0) == dict(want)
        shares: Counter[Any] = Counter()
        for _, _, share in df.results:
            shares.update(share.at(0))
        assert shares == want
        for w, (_, gathered_view, _) in enumerate(df.results[1:], 1):
            with pytest.raises(ValueError, match=f"this is worker {w}'s share of a gathered"):
                gathered_view.at(0)


@pytest.mark.parametrize("layout", [(2, 1), (1, 2)])
async def test_a_view_can_be_awaited_until_it_can_be_read(layout: tuple[int, int]) -> None:
    """Regression: a view had no way to wait for a time; after awaiting a probe on the very
    collection it views, ``at`` raised 'not complete yet' for about one epoch in three on 2
    workers (changes gathered from another worker were still on their way). ``wait`` waits
    for the view's own input."""
    workers, processes = layout
    history: list[Counter[int]] = []
    total: Counter[int] = Counter()
    async with naiad.Runtime(workers, processes=processes) as rt:

        def build(scope: naiad.Scope) -> tuple[InputSession, Any, Any]:
            session, collection = Collection.new_input(scope)
            return session, collection.distinct().view(), collection.count().view()

        df = rt.dataflow(build)
        distinct, count = df.results[0][1], df.results[0][2]
        for epoch in range(12):
            for w, (session, _, _) in enumerate(df.results):
                for k in range(3):
                    record, diff = (epoch * 7 + w * 3 + k) % 5, 1 if (epoch + k) % 3 else -1
                    session.update(record, diff)
                    total[record] += diff
                session.advance_to(epoch + 1)
            history.append(Counter({r: n for r, n in total.items() if n}))
            await distinct.wait(epoch)
            await count.wait(epoch)
            assert distinct.at(epoch) == {r: 1 for r, n in history[-1].items() if n > 0}
            assert count.at(epoch) == {(r, n): 1 for r, n in history[-1].items()}
        for session, _, _ in df.results:
            session.close()
        await distinct.wait()  # every time
        assert all(distinct.complete(t) for t in range(100))


async def test_staged_updates_are_sent_when_the_runtime_closes_the_input() -> None:
    """Regression: the runtime's exit closed the input under the session, and the updates
    the session had staged (inserted, not yet flushed) were lost."""
    async with naiad.Runtime() as rt:
        session, changes = fed(rt, lambda c: c)
        session.insert(("a", 1))
        session.insert(("b", 2))
    assert sorted(changes) == [(("a", 1), 0, 1), (("b", 2), 0, 1)]


def test_priorities_are_one_integer_per_record_or_one_for_all() -> None:
    """Regression: a scalar priority failed with "len() of unsized object", one of the wrong
    length with a numpy reshape error, and 0.5 was truncated to priority 0."""

    def closure(priority: Any, at: bool = False) -> Any:
        def build(scope: naiad.Scope) -> Any:
            edges = Collection.from_epochs(scope, [[((1, 2), 1), ((2, 3), 1), ((5, 6), 1)]])
            starts = Collection.from_epochs(scope, [[(1, 1), (5, 1)]])
            if at:  # enter_at checks its counters the same way
                loop = scope.iterative()
                entered = starts.enter_at(loop, priority)
                return entered.leave().changes()

            def step(reached: Collection) -> Collection:
                later = edges.enter(reached.scope).join(reached.map(lambda n: (n, ())))
                return reached.concat(later.map(lambda r: r[1])).distinct()

            return starts.iterate(step, priority=priority).changes()

        return build

    reached = [(1, 0, 1), (2, 0, 1), (3, 0, 1), (5, 0, 1), (6, 0, 1)]
    for priority in (lambda n: 0, lambda n: n * 2.0, lambda n: n > 2, lambda n: list(n)):
        assert sorted(naiad.run(closure(priority))[0]) == reached
    assert sorted(naiad.run(closure(lambda n: 3, at=True))[0]) == [(1, 0, 1), (5, 0, 1)]
    bad = [
        (lambda n: n[:1], ValueError, r"shape \(1,\) for 2 records: one integer per record"),
        (lambda n: n * 0.5, TypeError, r"must return integers \(or integral floats\), not 0\.5"),
        (lambda n: np.array(["a"] * len(n)), TypeError, "must return integers, not <U1 values"),
        (lambda n: n - 5, ValueError, r"integers in \[0, 2\*\*(30|62)\), not -4"),
    ]
    for priority, error, message in bad:
        with pytest.raises(error, match="enter_at: priority\\(\\*columns\\).*" + message) as info:
            naiad.run(closure(priority))
        assert "iterate.enter_at" in "".join(getattr(info.value, "__notes__", []))
        with pytest.raises(error, match="enter_at: at\\(\\*columns\\).*" + message):
            naiad.run(closure(priority, at=True))
    assert sorted(naiad.run(closure(lambda n: n))[0]) == reached


@pytest.mark.parametrize(
    ("predicate", "dtype"),
    [
        (lambda a: np.flatnonzero(a >= 0), "int64"),  # the indices of every record: 0 first
        (lambda a: (a % 2).astype(np.int8), "int8"),
        (lambda a: a * 0.5, "float64"),
        (lambda a: np.array([x > 5 for x in a], dtype=object), "object"),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_filter_columns_refuses_a_mask_that_is_not_boolean(
    predicate: Any, dtype: str, workers: int
) -> None:
    """An integer array (indices meant, say) was read as truth values: np.flatnonzero(a >= 0),
    the indices of all of [5, 6, 7], dropped 5 (index 0, false) silently: 2 records kept of 3."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_columns(scope, [(np.array([5, 6, 7]),)])
        return c.filter_columns(predicate, name="keep").changes()

    with pytest.raises(TypeError, match=rf"^filter_columns 'keep': .* not an array of {dtype} "):
        naiad.run(build, workers=workers)


@pytest.mark.parametrize("workers", [1, 2])
def test_filter_columns_keeps_what_a_boolean_mask_says(workers: int) -> None:
    """A boolean array, a list of bools and a numpy comparison of object columns, against
    the records filtered one by one in Python."""
    xs = [3, 8, 1, 9, 4, 4, 7]
    words = [f"w{x}" for x in xs]
    predicates = [
        lambda a, w: a > 4,
        lambda a, w: [x % 2 == 0 for x in a],
        lambda a, w: w == np.array(["w4"] * len(w), dtype=object),
    ]
    expected = [
        [(x, w) for x, w in zip(xs, words, strict=True) if x > 4],
        [(x, w) for x, w in zip(xs, words, strict=True) if x % 2 == 0],
        [(x, w) for x, w in zip(xs, words, strict=True) if w == "w4"],
    ]

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_columns(scope, [(np.array(xs), np.array(words, dtype=object))])
        return [c.filter_columns(p).changes() for p in predicates]

    got = naiad.run(build, workers=workers)
    for i, want in enumerate(expected):
        kept = [r for worker in got for r, t, d in worker[i] for _ in range(d)]
        assert sorted(kept) == sorted(want)
