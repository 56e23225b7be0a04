"""Keyed operators over records whose widths differ: the same answer on every layout.

A keyed arrangement (``arrange_by_key``: the first field the key, the others the value) that
meets a second record width packs its values (``Spine.pack``: one column of value tuples), so
``1`` beside ``(1, "a")`` beside ``(1, "a", "b")`` are all held, whether they share a batch or
come in different ones, on one worker or apart. Before, one worker refused the second width
("same number of fields") while two workers answered when the records landed apart, and a
batch that mixed widths was refused on every layout. Checked here against plain-Python
recomputation at every epoch (``tests.differential.reference``) on 1, 2 and 4 workers and on
2 simulated processes: join (both sides), join_map, semijoin, antijoin, reduce, sum, min,
max, count / distinct / threshold and their ``_total`` forms of an arrangement, its
collection, filter and flat_map, an arrangement entered into a loop (iterate, enter_at) and
one imported into another dataflow.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.differential.arrange import batch_updates, import_trace
from naiad.differential.reduce import ExtremeLogic, ThresholdLogic
from naiad.differential.trace import Spine
from naiad.differential.updates import Updates
from naiad.progress.timestamp import Product
from tests.differential import reference as ref
from tests.differential.test_mixed_shape_counts import closure, step
from tests.differential.test_sharing import check_from, shared_join

LAYOUTS = [(1, 1), (2, 1), (4, 1), (2, 2)]  # (workers per process, processes)

keys = st.integers(0, 3)
atoms = st.one_of(st.integers(0, 2), st.sampled_from(["a", "b"]), st.none())
# never a 1-tuple or (): those are one value, their own key (reference.fields splits them)
records = st.one_of(
    keys,  # a key only
    st.tuples(keys, atoms),
    st.tuples(keys, atoms, atoms),
    st.tuples(keys, atoms, atoms, atoms),
    st.tuples(keys, st.tuples(atoms, atoms)),  # a pair whose value is a pair: not a triple
)
numbers = st.integers(0, 3)
valued = st.one_of(st.tuples(keys, numbers), st.tuples(keys, numbers, numbers))


def histories(elements: Any, count: int | None = None) -> Any:
    changes = st.lists(st.tuples(elements, st.sampled_from([-1, 1, 2])), max_size=8)
    if count is not None:
        return st.lists(changes, min_size=count, max_size=count)
    return st.lists(changes, min_size=1, max_size=3)


def rest(record: Any) -> tuple[Any, ...]:
    return ref.fields(record)[1:]


def pairs(records: Counter) -> Counter:
    """``(key, repr(value), repr(other value))`` of join_map's function, from scratch."""
    out: Counter = Counter()
    for a, n in records.items():
        for b, m in records.items():
            if ref.key_of(a) == ref.key_of(b):
                out[(ref.key_of(a), repr(ref.value_of(a)), repr(ref.value_of(b)))] += n * m
    return ref.clean(out)


def values_seen(k: Any, vs: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [(repr(sorted(map(repr, vs))), 1)]


def summed(pairs: Any) -> Counter:
    """The counts of ``(record, count)`` pairs summed per record (zeros dropped)."""
    out: Counter = Counter()
    for r, n in pairs:
        out[r] += n
    return ref.clean(out)


def keys_of(c: Counter) -> Counter:
    return ref.distinct(summed((ref.key_of(r), n) for r, n in c.items()))


def extreme(c: Counter, largest: bool) -> Counter:
    """min / max per key of the value fields compared as tuples (as columns sort them)."""
    out: Counter = Counter()
    for k in {ref.key_of(r) for r in c}:
        found = [rest(r) for r, n in c.items() if n > 0 and ref.key_of(r) == k]
        if found:
            out[ref.record_of((k, *(max(found) if largest else min(found))))] = 1
    return out


def key_set(c: Collection) -> Collection:
    return c.map(lambda r: r[0] if isinstance(r, tuple) else r).distinct()


OUTPUTS: dict[str, tuple[Any, Any]] = {
    # name: (naiad collection from the input, reference from the input's Counter)
    "join": (lambda c: c.join(c.flat_map(tagged)), lambda c: ref.join(c, tag(c))),
    "join.reversed": (lambda c: c.flat_map(tagged).join(c), lambda c: ref.join(tag(c), c)),
    "arranged.join": (
        lambda c: c.arrange_by_key().join(c.flat_map(tagged).arrange_by_key()),
        lambda c: ref.join(c, tag(c)),
    ),
    "join_map": (
        lambda c: c.arrange_by_key().join_map(c, lambda k, a, b: (k, repr(a), repr(b))),
        pairs,
    ),
    "semijoin": (
        lambda c: c.semijoin(key_set(c).filter(lambda k: k % 2 == 0)),
        lambda c: ref.semijoin(c, Counter({k: 1 for k in keys_of(c) if k % 2 == 0})),
    ),
    "antijoin": (
        lambda c: c.antijoin(key_set(c).filter(lambda k: k % 2 == 0)),
        lambda c: ref.antijoin(c, Counter({k: 1 for k in keys_of(c) if k % 2 == 0})),
    ),
    "reduce": (lambda c: c.reduce(values_seen), lambda c: ref.reduce(c, values_seen)),
    # a reduction's output arrangement (packed as its input is) read by a join
    "distinct.join": (
        lambda c: c.arrange_by_key().reduce(ThresholdLogic(None)).join(c.flat_map(tagged)),
        lambda c: ref.join(ref.distinct(c), tag(c)),
    ),
    # the generic reduce (at the root the default is the total one, as the *_total below)
    "count": (lambda c: c.arrange_by_key().count(total=False), ref.count),
    "distinct": (lambda c: c.arrange_by_key().distinct(total=False), ref.distinct),
    "threshold": (
        lambda c: c.arrange_by_key().threshold(ref.capped, total=False),
        ref.capped_threshold,
    ),
    "count_total": (lambda c: c.arrange_by_key().count_total(), ref.count),
    "distinct_total": (lambda c: c.arrange_by_key().distinct_total(), ref.distinct),
    "threshold_total": (
        lambda c: c.arrange_by_key().threshold_total(ref.capped),
        ref.capped_threshold,
    ),
    "as_collection": (lambda c: c.arrange_by_key().as_collection(), lambda c: c),
    "filter": (
        lambda c: c.arrange_by_key().filter(lambda k, v: k % 2 == 1 or v == ()),
        lambda c: Counter({r: n for r, n in c.items() if ref.key_of(r) % 2 or not rest(r)}),
    ),
    "flat_map": (
        lambda c: c.arrange_by_key().flat_map(lambda k, v: [(k, repr(v))]),
        lambda c: summed(((ref.key_of(r), repr(ref.value_of(r))), n) for r, n in c.items()),
    ),
    # the count of counts: a packed count's output (records of several widths) keyed again
    "count.count": (
        lambda c: c.arrange_by_key().count().arrange_by_key().count(),
        lambda c: ref.count(ref.count(c)),
    ),
}


def tagged(r: Any) -> list[Any]:
    """The other side of a join: each record but those of key 0, one field wider."""
    return [(*ref.fields(r), "t")] if ref.key_of(r) != 0 else []


def tag(c: Counter) -> Counter:
    return Counter({t: n for r, n in c.items() for t in tagged(r)})


def check_outputs(epochs: Any, layout: tuple[int, ...], outputs: dict[str, Any]) -> None:
    def build(scope: naiad.Scope) -> list[Any]:
        c = Collection.from_epochs(scope, epochs)
        return [make(c).changes() for make, _ in outputs.values()]

    results = ref.run(build, layout)
    for i, (name, (_, expect)) in enumerate(outputs.items()):
        try:
            ref.check([part[i] for part in results], ref.expect_unary(epochs, expect))
        except AssertionError as e:
            raise AssertionError(f"{name} on {layout}: {e}") from None


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=10, deadline=None)
@given(epochs=histories(records), small=st.booleans())
def test_keyed_operators_of_records_of_any_widths(
    layout: tuple[int, int], epochs: Any, small: bool
) -> None:
    """Widths differ within batches and between them; ``small`` False makes reduce take its
    vectorized path for these few rows (else its Python one)."""
    check_outputs(epochs, (*layout, small), OUTPUTS)


EXTREMES = {
    "min": (lambda c: c.min(), lambda c: extreme(c, False)),
    "max": (lambda c: c.max(), lambda c: extreme(c, True)),
    "arranged.max": (
        lambda c: c.arrange_by_key().reduce(ExtremeLogic(True)).as_collection(),
        lambda c: extreme(c, True),
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=5, deadline=None)
@given(epochs=histories(valued), small=st.booleans())
def test_min_and_max_of_values_of_several_widths(
    layout: tuple[int, int], epochs: Any, small: bool
) -> None:
    """A key's values compare as tuples of their fields, as the columns of one width sort:
    ``(1,)`` before ``(1, 0)`` before ``(2,)``; out comes the key with the least (greatest)
    value's fields, on every layout."""
    check_outputs(epochs, (*layout, small), EXTREMES)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sum_refuses_a_triple_on_every_layout(layout: tuple[int, int]) -> None:
    """The pairs are summed; a triple among them (in its own batch, or beside pairs) is the
    same error on every layout, naming its width."""
    for epochs in ([[((1, 2), 1)], [((1, 2, 3), 1)]], [[((1, 2), 1), ((2, 5, 6), 1)]]):

        def build(scope: naiad.Scope, epochs: Any = epochs) -> Any:
            return Collection.from_epochs(scope, epochs).sum().changes()

        with pytest.raises(ValueError, match=r"sum: records must be \(key, number\) pairs, not 3"):
            ref.run(build, layout)
    pairs_only = [[((1, 2), 1), ((1, 3), 2), ((2, 5), 1)], [((1, 2), -1)]]
    results = ref.run(lambda s: Collection.from_epochs(s, pairs_only).sum().changes(), layout)
    ref.check(results, ref.expect_unary(pairs_only, ref.sum_))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_min_refuses_a_key_only_record_on_every_layout(layout: tuple[int, int]) -> None:
    """A record that is a key only has no value: min refuses it whether it is packed beside
    pairs (one worker) or arranged alone (several)."""

    def build(scope: naiad.Scope) -> Any:
        epochs = [[((1, 2), 1), ((2, 5, 6), 1)], [(3, 1)]]
        return Collection.from_epochs(scope, epochs).min().changes()

    with pytest.raises(ValueError, match=r"min/max: records must be \(key, value\) pairs"):
        ref.run(build, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_reproduction_on_every_layout(layout: tuple[int, int]) -> None:
    """``(1, 'a')`` at epoch 0 and ``(2, 'b', 'c')`` at epoch 1 joined with ``(1, 'x'),
    (2, 'y')``: one worker raised 'same number of fields (had 2, now 3)', two answered."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((1, "a"), 1)], [((2, "b", "c"), 1)]])
        o = Collection.from_epochs(scope, [[((1, "x"), 1), ((2, "y"), 1)]])
        return [c.join(o).changes(), o.join(c).changes()]

    results = ref.run(build, layout)
    assert sorted(u for part in results for u in part[0]) == [
        ((1, "a", "x"), 0, 1),
        ((2, "b", "c", "y"), 1, 1),
    ]
    assert sorted(u for part in results for u in part[1]) == [
        ((1, "x", "a"), 0, 1),
        ((2, "y", "b", "c"), 1, 1),
    ]


def reach(edges: Counter, roots: Counter) -> Counter:
    """Nodes reachable from the roots over edges ``(src, dst, ...)`` (a node alone: none)."""
    found = {r for r, n in roots.items() if n > 0}
    arcs = [(e[0], e[1]) for e, n in edges.items() if n > 0 and isinstance(e, tuple)]
    while True:
        more = found | {d for s, d in arcs if s in found}
        if more == found:
            return Counter(dict.fromkeys(found, 1))
        found = more


edges = st.one_of(keys, st.tuples(keys, keys), st.tuples(keys, keys, st.sampled_from(["w", 1])))


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=5, deadline=None)
@given(epochs=histories(edges))
def test_an_arrangement_of_several_widths_entered_into_a_loop(
    layout: tuple[int, int], epochs: Any
) -> None:
    """Reachability whose edge index (pairs, weighted triples, lone nodes) is arranged once
    outside the loop (a distinct: negative edges could make the loop oscillate) and entered:
    the join in the loop reads the packed spine, and the
    answer leaves the loop at every epoch."""
    roots = [[(0, 1)], [(1, 1)]]

    def build(scope: naiad.Scope) -> Any:
        index = Collection.from_epochs(scope, epochs).distinct().arrange_by_key()
        starts = Collection.from_epochs(scope, roots)

        def step(x: Collection) -> Collection:
            hops = x.join(index.enter(x.scope)).map(lambda r: r[1] if isinstance(r, tuple) else r)
            return starts.enter(x.scope).concat(hops).distinct()

        return starts.iterate(step).changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_binary(epochs, roots, reach))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_enter_at_calls_at_with_the_columns_of_each_width(layout: tuple[int, int]) -> None:
    """``at(*columns)`` gets one column per field, as for records of one width: the records
    of each width apart when the arrangement holds several."""
    epochs = [[((1, 10), 1), ((2, 20, 30), 1), (3, 1)], [((4, 40, 50), 1)]]

    def at(key: np.ndarray, *values: np.ndarray) -> Any:
        return key + 10 * len(values)

    def build(scope: naiad.Scope) -> Any:
        arranged = Collection.from_epochs(scope, epochs).arrange_by_key()
        loop = scope.iterative()
        return arranged.enter_at(loop, at).as_collection().changes()

    got = sorted((u for part in ref.run(build, layout) for u in part), key=repr)
    assert got == [
        ((1, 10), Product(0, 11), 1),
        ((2, 20, 30), Product(0, 22), 1),
        ((4, 40, 50), Product(1, 24), 1),
        (3, Product(0, 3), 1),
    ]


@settings(max_examples=8, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            histories(records, count=n), histories(records, count=n), st.integers(1, n - 1)
        )
    ),
    st.sampled_from([(1, 1), (2, 1), (2, 2)]),
)
def test_an_imported_arrangement_of_several_widths(drawn: Any, layout: Any) -> None:
    """Dataflow 1 arranges records of any widths; dataflow 2 imports the arrangement (its
    history, then the batches sealed later: the spine may pack after the import) and joins,
    counts and count_totals it."""
    a, b, before = drawn
    b = [[] for _ in range(before)] + b[before:]
    _, results = ref.watchdog(shared_join(a, b, before, *layout, False))
    check_from([r[1] for r in results], ref.expect_binary(b, a, ref.join), 0)
    check_from([r[2] for r in results], ref.expect_binary(a, b, ref.join), 0)
    check_from([r[3] for r in results], ref.expect_unary(a, ref.count), 0)
    check_from([r[4] for r in results], ref.expect_unary(a, ref.count), 0)


def test_a_cursor_reads_packed_values_as_reduce_hands_them() -> None:
    """A trace's cursor over a packed spine: each value as ``reduce`` hands it over."""

    def build(scope: naiad.Scope) -> Any:
        epochs = [[((1, "a"), 1), (1, 1), ((1, "b", "c"), 2)]]
        return Collection.from_epochs(scope, epochs).arrange_by_key().trace

    trace = naiad.run(build)[0]
    cursor = trace.cursor()
    assert cursor.seek_key(1)
    assert sorted(cursor.values(), key=repr) == [
        ("a", [(0, 1)]),
        (("b", "c"), [(0, 2)]),
        ((), [(0, 1)]),
    ]
    trace.close()


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=5, deadline=None)
@given(epochs=histories(keys))
def test_a_keyed_distinct_in_a_loop_whose_records_widen(
    layout: tuple[int, int], epochs: Any
) -> None:
    """Each round widens the records (k -> (k, k) -> (k, k, 0)), so the loop's keyed
    arrangement packs while epochs and rounds overlap, with groups pending in its reader."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, epochs)
        return c.iterate(
            lambda x: c.enter(x.scope).concat(x.flat_map(step)).arrange_by_key().distinct()
        ).changes()

    ref.check(ref.run(build, layout), ref.expect_unary(epochs, closure))


def test_a_batch_written_before_its_spine_packed_conforms() -> None:
    """A batch in flight to a reader when its spine packs is read as the packed ones:
    ``Spine.conform`` packs its values (same rows, keys still sorted); the readers of a
    spine (reduce, the ``_total`` forms) conform each batch they receive. (No dataflow here
    was seen to deliver such a batch: readers ran before the next seal every time.)"""
    spine = Spine(depth=0)
    pairs = Updates.from_records([((2, "b"), 0, 1), ((1, "a"), 0, 2)], fields=2)
    stale = spine.insert_records(pairs, np.array([[1]]), np.array([[0]]))
    assert spine.conform(stale) is stale  # not packed yet: as it is
    triples = Updates.from_records([((1, "c", "d"), 1, 1)], fields=3)
    spine.insert_records(triples, np.array([[2]]), np.array([[1]]))
    conformed = spine.conform(stale)
    assert conformed.packed and not stale.packed
    assert batch_updates(conformed).to_records() == batch_updates(stale).to_records()
    assert conformed.keys.tolist() == stale.keys.tolist()
    assert [b.value_fields(slice(None)) for b in spine.batches] == [[("a",), ("b",)], [("c", "d")]]


async def imported_as_of(workers: int, processes: int) -> list[list[Any]]:
    """Dataflow 1 arranges records of three widths over epochs 0..2; dataflow 2 imports the
    arrangement as of frontier [2] (every earlier time advanced to 2) and reads it."""
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

        def first(scope: naiad.Scope) -> Any:
            session, c = Collection.new_input(scope)
            arranged = c.arrange_by_key()
            return session, arranged.trace, arranged.stream.probe()

        df1 = rt.dataflow(first)
        session = df1.results[0][0]
        session.insert((1, "a"))
        for s, _, _ in df1.results:
            s.advance_to(1)
        session.insert((1, "b", "c"))
        session.insert(2)
        for s, _, _ in df1.results:
            s.advance_to(2)
        session.remove((1, "a"))
        for s, _, _ in df1.results:
            s.advance_to(3)
        await df1.results[0][2].wait(2)

        def second(scope: naiad.Scope) -> Any:
            imported = import_trace(df1.results[scope.index][1], scope, frontier=[2])
            other = Collection.from_epochs(scope, [[], [], [((1, "x"), 1), ((2, "y"), 1)]])
            return [c.changes() for c in (imported.as_collection(), imported.join(other))]

        df2 = rt.dataflow(second)
        for s, handle, _ in df1.results:
            s.close()
            handle.close()
        await df1.finished()
        await df2.finished()
        return [sorted((u for r in df2.results for u in r[i]), key=repr) for i in range(2)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_arrangement_of_several_widths_imported_as_of_a_frontier(
    layout: tuple[int, int],
) -> None:
    collection, joined = ref.watchdog(imported_as_of(*layout))
    assert collection == [((1, "b", "c"), 2, 1), (2, 2, 1)]
    assert joined == [((1, "b", "c", "x"), 2, 1), ((2, "y"), 2, 1)]
