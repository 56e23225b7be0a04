"""``Arranged.enter(loop)``: an arrangement built outside a loop, read inside it without a
second index (K-Pg §4). Graph loops that join an entered edge index must equal both a
from-scratch fixed point and the same loop that arranges the entered edge collection again;
so must every keyed operator reading an entered arrangement in ``Product`` and ``Lex`` loops,
nested loops, a trace imported from another dataflow, and a trace compacted as far as its
other readers allow."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection, import_trace, trace
from naiad.differential.arrange import Arranged, ArrangeVertex
from naiad.differential.entered import EnteredBatch, EnteredSpine
from naiad.differential.join import JoinVertex
from naiad.differential.lanes import ArrangeLanes
from naiad.progress import Lex, Product
from tests.differential import reference as ref

FAST = settings(max_examples=10, deadline=None)
NODES = st.integers(0, 5)
EDGES = st.tuples(NODES, NODES)
# (workers, processes, small): 1 and 2 workers, and 2 simulated processes
layouts = st.tuples(st.sampled_from([(1, 1), (2, 1), (2, 2)]), st.booleans()).map(
    lambda p: (*p[0], p[1])
)


@st.composite
def graph_history(draw: Any, epochs: tuple[int, int] = (1, 4)) -> Any:
    """Root and edge sets that change (insertions and retractions) over a few epochs."""
    n = draw(st.integers(*epochs))
    edges = draw(ref.set_histories(EDGES, count=n, size=(0, 6)))
    return draw(ref.set_histories(NODES, count=n, size=(0, 2))), edges


def second(record: Any) -> Any:
    return record[1]


def reachable(roots: Collection, edges: Collection | Arranged) -> Collection:
    """Reachability joining ``edges`` inside the loop: an arrangement enters it (the join
    enters it), a collection is entered and arranged again there."""

    def body(reach: Collection) -> Collection:
        e = edges if isinstance(edges, Arranged) else edges.enter(reach.scope)
        return reach.join(e).map(second).concat(roots.enter(reach.scope)).distinct()

    return roots.iterate(body)


def arrangements(scope: Any) -> int:
    # (count, distinct and threshold arrange records in lanes, one spine per record width)
    return sum(isinstance(op.logic, ArrangeVertex | ArrangeLanes) for op in scope.build.operators)


@FAST
@given(graph_history(), layouts)
def test_reachability_over_an_entered_edge_index(graph: Any, layout: Any) -> None:
    roots, edges = graph

    def build(scope: Any) -> Any:
        r, e = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)
        entered = reachable(r, e.arrange_by_key("edges")).changes()
        return entered, reachable(r, e).changes()

    results = ref.run(build, layout)
    want = ref.expect_binary(roots, edges, ref.reach)
    ref.check([r[0] for r in results], want)
    ref.check([r[1] for r in results], want)  # the re-arranging loop agrees


def components(edges: Collection, index: Arranged | None, priority: Any = None) -> Collection:
    """Min-label propagation over symmetric edges; with ``index`` (those edges arranged
    outside), the loop reads it instead of arranging the entered edges."""
    sym = edges.concat(edges.map(lambda e: (e[1], e[0])))
    labels = sym.map(lambda e: e[0]).distinct().map(lambda n: (n, n))

    def body(current: Collection) -> Collection:
        inner = index if index is not None else sym.enter(current.scope)
        spread = current.join(inner).map(lambda r: (r[2], r[1]))
        return spread.concat(
            labels.enter_prioritized(current.scope, priority)
            if priority
            else labels.enter(current.scope)
        ).min()

    return labels.iterate(body, priority=priority)


@FAST
@given(graph_history(), layouts, st.booleans())
def test_label_propagation_over_an_entered_edge_index(
    graph: Any, layout: Any, prioritized: bool
) -> None:
    """Connected components; ``prioritized``: iterate(priority=label), whose loop counter packs
    (priority, iteration): the entered index sits at priority 0, iteration 0."""
    _, edges = graph
    priority = (lambda *columns: columns[-1]) if prioritized else None

    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, edges)
        index = e.concat(e.map(lambda x: (x[1], x[0]))).arrange_by_key("symmetric")
        return components(e, index, priority).changes(), components(e, None, priority).changes()

    results = ref.run(build, layout)
    want = ref.expect_unary(edges, ref.components)
    ref.check([r[0] for r in results], want)
    ref.check([r[1] for r in results], want)


RECORDS = st.tuples(ref.INT_KEYS, st.integers(0, 3))


def pad(*histories: ref.Epochs) -> list[ref.Epochs]:
    n = max(len(h) for h in histories)
    return [h + [[] for _ in range(n - len(h))] for h in histories]


@FAST
@given(
    ref.histories(RECORDS),
    ref.histories(RECORDS),
    ref.set_histories(ref.INT_KEYS, count=3),
    layouts,
    st.sampled_from([Product, Lex]),
)
def test_keyed_operators_read_an_entered_arrangement_as_if_arranged_inside(
    a: Any, b: Any, keys: Any, layout: Any, time_class: Any
) -> None:
    """join, semijoin, antijoin (arrangements entered by the join), count, distinct and reduce
    (of an entered arrangement) in a loop of either time class, left again: the outer
    results."""
    a, b, keys = pad(a, b, keys)

    def build(scope: Any) -> Any:
        loop = scope.iterative("loop", time_class=time_class)
        left = Collection.from_epochs(scope, a).enter(loop)
        right = Collection.from_epochs(scope, b).arrange_by_key()
        present = Collection.from_epochs(scope, keys).arrange_by_self()
        inside = right.enter(loop)
        outputs = [
            left.join(right),
            left.semijoin(present),
            left.antijoin(present),
            inside.count(),
            inside.distinct(),
            inside.reduce(lambda k, vs: [(sum(v * c for v, c in vs), 1)]).as_collection(),
        ]
        # inside the loop, at the very times Collection.enter gives the records
        as_entered = inside.as_collection().changes(), right.as_collection().enter(loop).changes()
        return [o.leave().changes() for o in outputs], as_entered

    runs = ref.run(build, layout)
    for _, (entered, reference) in runs:
        assert sorted(entered, key=repr) == sorted(reference, key=repr)
    results = [r[0] for r in runs]

    def total(_key: Any, values: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return [(sum(v * c for v, c in values), 1)]

    wants = [
        ref.expect_binary(a, b, ref.join),
        ref.expect_binary(a, keys, ref.semijoin),
        ref.expect_binary(a, keys, ref.antijoin),
        ref.expect_unary(b, ref.count),
        ref.expect_unary(b, ref.distinct),
        ref.expect_unary(b, lambda m: ref.reduce(m, total)),
    ]
    for i, want in enumerate(wants):
        ref.check([r[i] for r in results], want)


@FAST
@given(graph_history(), layouts, st.booleans())
def test_nested_loops_read_an_index_entered_twice(graph: Any, layout: Any, via: bool) -> None:
    """Components by an outer loop (one step backwards) around an inner loop (forwards to a
    fixed point), both reading one edge index of the root scope: entered into the inner loop
    directly, or (``via``) from its entered form in the outer loop."""
    _, edges = graph

    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, edges)
        forward = e.arrange_by_key("forward")
        backward = e.map(lambda x: (x[1], x[0])).arrange_by_key("backward")
        labels = e.concat(e.map(lambda x: (x[1], x[0]))).map(lambda x: (x[0], x[0])).distinct()

        def outer(current: Collection) -> Collection:
            entered = forward.enter(current.scope)

            def inner(x: Collection) -> Collection:
                index = entered.enter(x.scope) if via else forward.enter(x.scope)
                return x.join(index).map(lambda r: (r[2], r[1])).concat(x).min()

            spread = current.iterate(inner)
            hop = spread.join(backward).map(lambda r: (r[2], r[1]))
            return hop.concat(spread).min()

        return labels.iterate(outer).changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(edges, ref.components))


def test_an_entered_index_is_not_arranged_again() -> None:
    """The entered loop builds one arrangement fewer than the re-arranging one, and its join
    reads the outer spine's own batches: their key columns are the outer arrays."""
    edges = [[((1, 2), 1), ((2, 3), 1)], [((3, 4), 1), ((1, 2), -1)]]
    roots = [[(1, 1), (2, 1)], []]
    seen: dict[str, Any] = {}

    def build(scope: Any, entered: bool) -> Any:
        r, e = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)
        index = e.arrange_by_key("edges")
        before = arrangements(scope)
        out = reachable(r, index if entered else e).changes()
        joins = [op.logic for op in scope.build.operators if isinstance(op.logic, JoinVertex)]
        seen[f"{entered} {scope.index}"] = (index.spine, joins)
        return out, arrangements(scope) - before

    with_index = naiad.run(lambda s: build(s, True), workers=2)
    rearranged = naiad.run(lambda s: build(s, False), workers=2)
    # the loop's own arrangements: its variable's (join and distinct); the re-arranging loop
    # also arranges the entered edges
    assert [r[1] for r in with_index] == [2, 2]
    assert [r[1] for r in rearranged] == [3, 3]
    assert sorted(c for r in with_index for c in r[0]) == sorted(
        c for r in rearranged for c in r[0]
    )
    for worker in (0, 1):
        outer, (join,) = seen[f"True {worker}"]
        view = join.spines[1]
        assert isinstance(view, EnteredSpine) and view.outer is outer
        assert view.total() == outer.total() and view.nbytes() == 0
        for mine, theirs in zip(view.batches, outer.batches, strict=True):
            assert isinstance(mine, EnteredBatch) and mine.keys is theirs.keys
            assert mine.times.shape[1] == theirs.times.shape[1] + 1
            assert not mine.times[:, -1].any()  # iteration 0
        assert outer.total() > 0


@contextmanager
def merging_at_once() -> Any:
    """Spines merge every batch as it comes (no small batches wait): compaction applies
    at once, so a trace compacted too far would show it."""
    saved = trace.TAIL_ROWS, trace.TAIL_BATCHES
    trace.TAIL_ROWS, trace.TAIL_BATCHES = -1, 0
    try:
        yield
    finally:
        trace.TAIL_ROWS, trace.TAIL_BATCHES = saved


async def reach_with_compaction(
    roots: ref.Epochs, edges: ref.Epochs, workers: int, processes: int, settle: bool = False
) -> tuple[list[Any], list[list[list[int]]]]:
    """Reachability over an entered edge index fed epoch by epoch; the edge trace's other
    reader gives up all history at once, so only the loop's readers hold it back. Returns the
    changes and, per epoch, the outer spine's compaction frontier on worker 0 once the epoch
    is complete (``settle``: once it reached the next epoch, or after a second: the probe
    may pass an epoch before the join has heard of the same frontier move)."""
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

        def build(scope: Any) -> Any:
            r_in, r = Collection.new_input(scope)
            e_in, e = Collection.new_input(scope)
            index = e.arrange_by_key("edges")
            out = reachable(r, index)
            return r_in, e_in, out.changes(), out.probe(), index.spine, index.trace

        df = rt.dataflow(build)
        results = df.results
        for *_, other_reader in results:
            other_reader.set_logical_compaction([1000])  # done with history
        sinces = []
        for epoch, (root_changes, edge_changes) in enumerate(zip(roots, edges, strict=True)):
            for w, (r_in, e_in, *_) in enumerate(results):
                for session, changes in ((r_in, root_changes), (e_in, edge_changes)):
                    for i, (record, diff) in enumerate(changes):
                        if i % len(results) == w:
                            session.update(record, diff)
                    session.advance_to(epoch + 1)
            await results[0][3].wait(epoch)
            spine = results[0][4]
            for _ in range(200 if settle else 0):
                if spine.since()[0, 0] > epoch:
                    break
                await asyncio.sleep(0.005)
            sinces.append(spine.since().tolist())
        df.close_inputs()
        await asyncio.wait_for(df.finished(), 30)
    return [r[2] for r in results], sinces


@FAST
@given(graph_history(epochs=(3, 6)), st.sampled_from([(1, 1), (2, 1), (2, 2)]))
def test_compaction_allowed_by_the_loop_never_changes_its_results(graph: Any, layout: Any) -> None:
    roots, edges = graph
    with merging_at_once():
        results, sinces = ref.watchdog(reach_with_compaction(roots, edges, *layout))
    ref.check(results, ref.expect_binary(roots, edges, ref.reach))
    # never compacted past what the loop still reads: epochs after the one complete
    assert all(since[0][0] <= e + 1 for e, since in enumerate(sinces)), sinces


def test_the_loop_holds_the_outer_trace_back_in_outer_terms_only() -> None:
    """With edges every epoch, the loop's join lets the outer trace compact up to the next
    epoch, whatever its iteration counters."""
    roots = [[(0, 1)], [], [(3, 1)], []]
    edges = [[((e, e + 1), 1)] for e in range(4)]
    with merging_at_once():
        results, sinces = ref.watchdog(reach_with_compaction(roots, edges, 1, 1, settle=True))
    ref.check(results, ref.expect_binary(roots, edges, ref.reach))
    assert sinces == [[[1]], [[2]], [[3]], [[4]]]


async def reach_over_an_import(
    roots: ref.Epochs, edges: ref.Epochs, workers: int, processes: int
) -> list[Any]:
    """Dataflow 1 arranges the edges; dataflow 2 imports the arrangement and runs
    reachability in a loop that reads the import entered into it."""
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

        def source(scope: Any) -> Any:
            e_in, e = Collection.new_input(scope)
            index = e.arrange_by_key("edges")
            return e_in, index.trace

        df1 = rt.dataflow(source)

        def reader(scope: Any) -> Any:
            r_in, r = Collection.new_input(scope)
            imported = import_trace(df1.results[scope.index][1], scope)
            out = reachable(r, imported)
            return r_in, out.changes(), out.probe()

        df2 = rt.dataflow(reader)
        for _, handle in df1.results:
            handle.close()  # the importing loop's readers hold the trace now
        peers = len(df1.results)
        for epoch, (root_changes, edge_changes) in enumerate(zip(roots, edges, strict=True)):
            for w in range(peers):
                for session, changes in (
                    (df2.results[w][0], root_changes),
                    (df1.results[w][0], edge_changes),
                ):
                    for i, (record, diff) in enumerate(changes):
                        if i % peers == w:
                            session.update(record, diff)
                    session.advance_to(epoch + 1)
            await df2.results[0][2].wait(epoch)
        for (e_in, _), (r_in, *_) in zip(df1.results, df2.results, strict=True):
            e_in.close()
            r_in.close()
        await asyncio.wait_for(df2.finished(), 30)
        await asyncio.wait_for(df1.finished(), 30)
    return [r[1] for r in df2.results]


@settings(max_examples=8, deadline=None)
@given(graph_history(epochs=(2, 4)), st.sampled_from([(1, 1), (2, 1), (2, 2)]))
def test_an_imported_index_entered_into_a_loop(graph: Any, layout: Any) -> None:
    roots, edges = graph
    results = ref.watchdog(reach_over_an_import(roots, edges, *layout))
    ref.check(results, ref.expect_binary(roots, edges, ref.reach))


# --- misuse ------------------------------------------------------------------------------------
def build_error(build: Any) -> str:
    with pytest.raises((ValueError, TypeError, naiad.BuildError)) as info:
        naiad.run(build)
    return str(info.value)


def test_an_arrangement_of_a_sibling_loop_is_refused_with_the_way_in() -> None:
    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, [[((1, 2), 1)]])
        first, other = scope.iterative("first"), scope.iterative("other")
        index = e.enter(first).arrange_by_key()
        e.enter(other).join(index)

    message = build_error(build)
    assert message.startswith("join: ") and "'dataflow/first'" in message
    assert ".enter(loop)" in message


def test_an_outer_collection_still_needs_enter() -> None:
    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, [[((1, 2), 1)]])
        e.iterate(lambda x: x.join(e).map(lambda r: (r[0], r[1])))

    message = build_error(build)
    assert "'dataflow/iterate'" in message and "side in 'dataflow'" in message


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("own", "'dataflow' is the arrangement's own scope 'dataflow'"),
        ("inner", "'dataflow' is not nested inside the arrangement's own scope 'dataflow/loop'"),
        ("number", "expected a loop scope to enter, not int"),
        ("other dataflow", "is not nested inside"),
    ],
)
def test_entering_anything_but_an_inner_loop_is_refused(where: str, expected: str) -> None:
    elsewhere: list[Any] = []
    naiad.run(lambda s: elsewhere.append(s.iterative("elsewhere")))

    def build(scope: Any) -> Any:
        loop = scope.iterative("loop")
        outer = Collection.from_epochs(scope, [[((1, 2), 1)]]).arrange_by_key()
        inner = Collection.from_epochs(scope, [[((1, 2), 1)]]).enter(loop).arrange_by_key()
        arranged, target = {
            "own": (outer, scope),
            "inner": (inner, scope),
            "number": (outer, 3),
            "other dataflow": (outer, elsewhere[0]),
        }[where]
        arranged.enter(target, name="into")

    message = build_error(build)
    assert message.startswith("into: ") and expected in message


def test_the_entered_times_are_only_made_for_the_rows_taken() -> None:
    """A reader that takes a few rows of a large entered batch widens only those."""
    from naiad.differential.trace import Batch

    n = 10_000
    base = Batch(
        np.arange(n),
        (np.zeros(n, np.int64),),
        np.arange(n)[:, None] % 3,
        np.ones(n, np.int64),
        *[np.zeros((1, 1), np.int64)] * 3,
    )
    entered = EnteredBatch(base, 2)
    rows = np.array([5, 7])
    assert entered.take_times(rows).tolist() == [[2, 0, 0], [1, 0, 0]]
    keys, _, times, _ = entered.take(slice(3, 5))
    assert keys.tolist() == [3, 4] and times.tolist() == [[0, 0, 0], [1, 0, 0]]
    assert entered.rows_for(np.array([9])) == slice(9, 10)
    assert Counter(map(tuple, entered.times.tolist()))[(0, 0, 0)] == (n + 2) // 3


def test_an_entered_trace_reads_the_outer_history_at_loop_counter_zero() -> None:
    """``entered.trace`` is a reader inside the loop: its cursor shows the outer updates at
    the loop's times, and it holds the outer trace back until closed."""

    def inner(scope: Any) -> Any:
        index = Collection.from_epochs(scope, [[((1, "a"), 1)], [((1, "b"), 1)]]).arrange_by_key()
        outer_loop = scope.iterative("outer")
        inner_loop = outer_loop.iterative("inner")
        entered = index.enter(outer_loop).enter(inner_loop)
        return entered.trace, index.spine

    handle, spine = naiad.run(inner)[0]
    cursor = handle.cursor()
    # (interned values come in code order, which depends on what the process saw before)
    assert [(cursor.key(), sorted(cursor.values())) for _ in cursor] == [
        (1, [("a", [(Product(Product(0, 0), 0), 1)]), ("b", [(Product(Product(1, 0), 0), 1)])])
    ]
    assert any(h is handle.base for h in spine.handles)  # the outer spine's own reader
    handle.close()
    assert not any(h is handle.base for h in spine.handles)


def outer_batches_alive(rows: int) -> int:
    """How many arrangement batches (not views of them) of at least ``rows`` rows are alive."""
    from naiad.differential.trace import Batch

    gc.collect()
    return sum(
        type(o) is Batch and len(o) >= rows  # an EnteredBatch is a view, not counted
        for o in gc.get_objects()
    )


async def reach_then_retract_every_edge(n: int) -> tuple[list[Any], int, int]:
    """A loop reads an outer index of ``n`` edges once (epoch 0); epoch 1 retracts every
    edge and the root, then the loop stays quiet for a few epochs. The loop's output, the
    outer spine's rows, and the large batches left alive."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            e_in, edges = Collection.new_input(scope)
            r_in, roots = Collection.new_input(scope)
            index = edges.arrange_by_key("edges")
            out = reachable(roots, index)
            return e_in, r_in, out.probe(), out.changes(), index.spine

        df = rt.dataflow(build)
        e_in, r_in, probe, changes, spine = df.results[0]
        src = np.arange(n, dtype=np.int64)
        e_in.send_columns((src, src + n))  # no path longer than one edge
        r_in.insert(0)
        for epoch in range(5):
            if epoch == 1:
                e_in.send_columns((src, src + n), -np.ones(n, np.int64))
                r_in.remove(0)
            for session in (e_in, r_in):
                session.advance_to(epoch + 1)
            await probe.wait(epoch)
        alive = outer_batches_alive(n)
        rows = spine.total()
        e_in.close()
        r_in.close()
        await df.finished()
    return changes, rows, alive


def test_a_quiet_loop_keeps_no_merged_away_outer_batch_alive() -> None:
    """The entered view reuses one wrapper per outer batch; a wrapper holds its batch, so
    wrappers of batches merged away must go, or the outer collection's memory never falls
    while the loop does not read again: retracted entirely, it stayed alive."""
    n = 2000
    changes, rows, alive = ref.watchdog(reach_then_retract_every_edge(n))
    assert sorted(changes) == [(0, 0, 1), (0, 1, -1), (n, 0, 1), (n, 1, -1)]
    assert rows == 0
    assert alive == 0


# --- enter_at / enter_prioritized ----------------------------------------------------------------
def parity(key: Any, value: Any) -> Any:
    return (key + value) % 3


@FAST
@given(
    ref.histories(RECORDS),
    ref.histories(RECORDS),
    layouts,
    st.sampled_from(["loop", "loop, then inner", "inner"]),
)
def test_an_arrangement_entered_at_counters_equals_the_collection_entered_at_them(
    a: Any, b: Any, layout: Any, how: str
) -> None:
    """Inside a loop, the entered arrangement's changes, a join against it and its count
    happen at exactly the times the same operators give on ``Collection.enter_at``: entered
    at counters into a loop; then entered again (at 0) into an inner loop; or entered at
    counters into the inner loop directly from the root (counters in the innermost only)."""
    a, b = pad(a, b)

    def build(scope: Any) -> Any:
        loop = scope.iterative("loop")
        inner = loop if how == "loop" else loop.iterative("inner")
        left = Collection.from_epochs(scope, a).enter(inner)
        plain = Collection.from_epochs(scope, b)
        target = inner if how == "inner" else loop
        index = plain.arrange_by_key().enter_at(target, parity)
        other = plain.enter_at(target, parity)
        if how == "loop, then inner":
            index, other = index.enter(inner), other.enter(inner)
        pairs = [
            (index.as_collection(), other),
            (left.join(index), left.join(other)),
            (index.count(), other.count()),
        ]
        return [(x.changes(), y.changes()) for x, y in pairs]

    results = ref.run(build, layout)
    for i in range(3):  # summed over the workers: the arrangement's records sit by key
        got, want = (summed(r[i][side] for r in results) for side in (0, 1))
        assert got == want


def summed(parts: Any) -> Counter:
    total: Counter = Counter()
    for part in parts:
        for record, time, diff in part:
            total[record, time] += diff
    return ref.clean(total)


@FAST
@given(graph_history(), layouts)
def test_prioritized_label_propagation_with_seeds_from_an_entered_arrangement(
    graph: Any, layout: Any
) -> None:
    """iterate(priority=label) whose seeds come from an arrangement of the labels made
    outside, entered at their priorities (``enter_prioritized``), and whose edges are an
    entered index too."""
    _, edges = graph

    def label(*columns: Any) -> Any:
        return columns[-1]

    def build(scope: Any) -> Any:
        e = Collection.from_epochs(scope, edges)
        sym = e.concat(e.map(lambda x: (x[1], x[0])))
        labels = sym.map(lambda x: x[0]).distinct().map(lambda n: (n, n))
        seeds, index = labels.arrange_by_key("seeds"), sym.arrange_by_key("edges")

        def body(current: Collection) -> Collection:
            own = seeds.enter_prioritized(current.scope, label).as_collection()
            return current.join(index).map(lambda r: (r[2], r[1])).concat(own).min()

        return labels.iterate(body, priority=label).changes()

    ref.check(ref.run(build, layout), ref.expect_unary(edges, ref.components))


async def join_entered_at_one_in_a_lex_loop(arranged: bool, depth: int) -> list[Any]:
    """A join inside a Lex loop against records entered at counter 1, the arrangement made
    in the root scope (``depth`` 0) or in an outer Lex loop (1); the right side's records
    come at epochs 0 to 2 and the left one at epoch 3, when its trace may be compacted."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            l_in, left = Collection.new_input(scope)
            r_in, right = Collection.new_input(scope)
            loop = scope.iterative("loop", time_class=Lex)
            if depth:
                right, left = right.enter(loop), left.enter(loop)
                loop = loop.iterative("inner", time_class=Lex)
            index: Collection | Arranged = right
            if arranged:
                index = right.arrange_by_key().enter_at(loop, lambda k, v: 1)
            else:
                index = right.enter_at(loop, lambda k, v: 1)
            out = left.enter(loop).join(index)
            done = out.leave().leave() if depth else out.leave()
            return l_in, r_in, out.changes(), done.probe()

        df = rt.dataflow(build)
        l_in, r_in, changes, probe = df.results[0]
        for epoch in range(4):
            if epoch < 3:
                r_in.insert((epoch + 1, "r"))  # key 1 first
            else:
                l_in.insert((1, "l"))
            for session in (l_in, r_in):
                session.advance_to(epoch + 1)
            await probe.wait(epoch)
        l_in.close()
        r_in.close()
        await df.finished()
    return changes


@pytest.mark.parametrize("depth", [0, 1])
def test_entered_at_counters_in_a_lex_loop_keep_their_times_under_compaction(depth: int) -> None:
    """In a Lex loop, ``(0, 1)`` is before ``(3, 0)`` but ``(3, 1)`` is not: the loop's
    readers let the outer trace compact to their frontier's epoch, so the record entered at
    epoch 0, counter 1 was read as at ``(3, 1)``, and the join's pair came one round late."""
    with merging_at_once():
        got = ref.watchdog(join_entered_at_one_in_a_lex_loop(True, depth))
        want = ref.watchdog(join_entered_at_one_in_a_lex_loop(False, depth))
    at = Lex(3, 0) if depth == 0 else Lex(Lex(3, 0), 0)
    assert want == [((1, "l", "r"), at, 1)]
    assert got == want


async def lex_counters_under_churn(
    arranged: bool, outer: type, right: ref.Epochs, left: ref.Epochs
) -> tuple[list[Any], int]:
    """A join in a Lex loop nested in an ``outer`` loop, against an arrangement of the outer
    loop entered at counters 0 to 2 (``arranged``) or the collection entered so; fed epoch
    by epoch. Returns the join's changes and the rows left in the outer loop's arrangement."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            l_in, lefts = Collection.new_input(scope)
            r_in, rights = Collection.new_input(scope)
            loop = scope.iterative("loop", time_class=outer)
            rights, lefts = rights.enter(loop), lefts.enter(loop)
            inner = loop.iterative("inner", time_class=Lex)
            index: Collection | Arranged = rights
            arrangement = rights.arrange_by_key()
            if arranged:
                index = arrangement.enter_at(inner, lambda k, v: v % 3)
            else:
                index = rights.enter_at(inner, lambda k, v: v % 3)
            out = lefts.enter(inner).join(index)
            return l_in, r_in, out.changes(), out.leave().leave().probe(), arrangement.spine

        df = rt.dataflow(build)
        l_in, r_in, changes, probe, spine = df.results[0]
        for epoch, (r, lt) in enumerate(zip(right, left, strict=True)):
            for session, epoch_changes in ((r_in, r), (l_in, lt)):
                for record, diff in epoch_changes:
                    session.update(record, diff)
                session.advance_to(epoch + 1)
            await probe.wait(epoch)
        rows = spine.total()
        l_in.close()
        r_in.close()
        await df.finished()
    return changes, rows


def churn(epochs: int, live: int) -> tuple[ref.Epochs, ref.Epochs]:
    """One record in and one out per epoch (the one ``live`` epochs older): a bounded
    collection with an unbounded history."""
    right: ref.Epochs = []
    left: ref.Epochs = []
    for e in range(epochs):
        right.append([((e % 4, e), 1)])
        left.append([((e % 4, "l"), 1)])
        if e >= live:
            right[-1].append((((e - live) % 4, e - live), -1))
        if e:
            left[-1].append((((e - 1) % 4, "l"), -1))
    return right, left


@pytest.mark.parametrize("outer", [Product, Lex])
def test_a_loops_arrangement_entered_at_counters_in_a_lex_loop_is_compacted(outer: type) -> None:
    """Readers in a Lex loop that enter updates at counters above 0 did not let an
    arrangement of an enclosing loop compact at all: its history grew by every epoch's
    updates for ever (here 2 a round, 78 rows for 4 live ones). They now let its times
    advance to the epoch before their frontier's, and the join's changes stay those of the
    entered collection."""
    right, left = churn(40, live=4)
    with merging_at_once():
        got, rows = ref.watchdog(lex_counters_under_churn(True, outer, right, left))
        want, _ = ref.watchdog(lex_counters_under_churn(False, outer, right, left))
    assert sorted(got, key=repr) == sorted(want, key=repr)
    assert len(want) > 40  # pairs came and went
    assert rows <= 12


@FAST
@given(
    st.sampled_from([Product, Lex]),
    ref.set_histories(st.tuples(st.integers(0, 2), st.integers(0, 5)), count=6, size=(0, 3)),
    ref.set_histories(st.tuples(st.integers(0, 2), st.integers(0, 1)), count=6, size=(0, 2)),
)
def test_entered_at_counters_from_a_loops_arrangement_agree_with_the_collection(
    outer: type, right: ref.Epochs, left: ref.Epochs
) -> None:
    with merging_at_once():
        got, _ = ref.watchdog(lex_counters_under_churn(True, outer, right, left))
        want, _ = ref.watchdog(lex_counters_under_churn(False, outer, right, left))
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_counters_that_are_not_integers_are_named_where_they_are_read() -> None:
    def build(scope: Any) -> Any:
        index = Collection.from_epochs(scope, [[((1, 2), 1)]]).arrange_by_key()
        return index.enter_at(scope.iterative("loop"), lambda k, v: k * 0.5, name="late")

    with pytest.raises(TypeError, match=r"late: at\(\*columns\) must return integers"):
        naiad.run(lambda s: build(s).as_collection().changes())
