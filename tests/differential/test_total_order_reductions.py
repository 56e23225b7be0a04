"""``count_total``, ``distinct_total`` and ``threshold_total`` (of collections and of
arrangements) against recomputation from scratch at every time.

Hypothesis draws change histories (insertions, retractions, blind retractions that make
counts negative) of string, tuple, int, float, mixed and beyond-int64 records over several
epochs on 1, 2 and 4 workers and 2 simulated processes; sessions that put many times of one
record into one arranged batch; a batch read after its spine switched a column from numbers
to interned codes; ``Lex`` loops whose updates enter at many counters, compared
inside the loop at every ``Lex`` time; and iterations (a ``Variable`` of a ``Lex`` loop)
whose body uses ``distinct_total``. Partially ordered times (``Product`` loops, and the
prioritized iteration of ``iterate(priority=...)``, in product with the epoch) are refused
when built.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Batch, Collection, Spine, Variable, lattice
from naiad.differential.total import TotalVertex
from naiad.differential.updates import INTERNER
from naiad.progress import Lex
from tests.differential import reference as ref
from tests.differential.reference import histories

FAST = settings(max_examples=20, deadline=None)
layouts = st.sampled_from(ref.LAYOUTS)


def square_capped(counts: np.ndarray) -> np.ndarray:
    """Never given a zero count (as for ``threshold``): it would make it 1."""
    return np.minimum(counts * counts, 5) * np.sign(counts) + 1


def square_capped_ref(a: Counter) -> Counter:
    return ref.threshold(a, lambda c: int(square_capped(np.array([c]))[0]))


OPS: dict[str, tuple[Callable[[Any], Any], Callable[[Counter], Counter]]] = {
    "count": (lambda c: c.count_total(), ref.count),
    "distinct": (lambda c: c.distinct_total(), ref.distinct),
    "threshold": (lambda c: c.threshold_total(square_capped), square_capped_ref),
}


def all_of(c: Any) -> tuple[Any, ...]:
    """The changes of every ``*_total`` operator on ``c`` (a collection or an arrangement)."""
    return tuple(make(c).changes() for make, _ in OPS.values())


@st.composite
def any_records(draw: Any) -> Any:
    """Records of one drawn shape: single values, or ``(key, value)`` pairs."""
    keys = ref.KEY_KINDS[draw(st.sampled_from(sorted(ref.KEY_KINDS)))]
    if draw(st.booleans()):
        return keys
    return st.tuples(keys, ref.VALUE_KINDS[draw(st.sampled_from(sorted(ref.VALUE_KINDS)))])


@FAST
@given(any_records().flatmap(lambda r: histories(r, epochs=(1, 5))), layouts)
def test_total_operators_equal_recomputation_at_every_epoch(epochs: Any, layout: Any) -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs)
        return all_of(c) + all_of(c.arrange_by_key())  # routed by record, then by key

    results = ref.run(build, layout)
    for i, (_, expected) in enumerate([*OPS.values(), *OPS.values()]):
        part = [r[i] for r in results]
        ref.check(part, ref.expect_unary(epochs, expected))
        assert not ref.worker_consolidated(part)


# --- many times in one batch, checked at every time ------------------------------------------
def check_every_time(
    changes: list[tuple[Any, Any, int]],
    inputs: list[tuple[Any, Any, int]],
    expected: Callable[[Counter], Counter],
    order: Callable[[Any], Any] = lambda t: t,
) -> None:
    """At every time of the input and the output (in the total order ``order``), the output
    accumulated up to that time equals ``expected`` of the input accumulated up to it."""

    def upto(updates: list[tuple[Any, Any, int]], time: Any) -> Counter:
        out: Counter = Counter()
        for r, t, d in updates:
            if order(t) <= time:
                out[r] += d
        return ref.clean(out)

    for time in sorted({order(t) for _, t, _ in [*inputs, *changes]}):
        got, want = upto(changes, time), ref.clean(expected(upto(inputs, time)))
        assert got == want, f"at {time}: {ref.diff_text(got, want)}"


async def drive(layout: tuple[int, int], build: Any, feed: Callable[[Any], None]) -> list[Any]:
    """Runs ``build`` on ``layout``; ``feed(session)`` drives worker 0's session (returned
    first by ``build``), every other session just closes, all without yielding to the
    runtime: what was sent reaches the operators at once, in one frontier step."""
    workers, processes = layout
    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df = rt.dataflow(build)
        for w, (session, *_) in enumerate(df.results):
            if w == 0:
                feed(session)
            session.close()
        await df.finished()
    return df.results


def run_sessions(layout: tuple[int, int], build: Any, feed: Callable[[Any], None]) -> list[Any]:
    result: list[Any] = ref.watchdog(drive(layout, build, feed))
    return result


def built_with_session(scope: Any) -> Any:
    session, c = Collection.new_input(scope)
    return (session, *all_of(c))


@FAST
@given(
    st.sampled_from([ref.STR_KEYS, st.tuples(ref.INT_KEYS, ref.FLOAT_VALUES)]).flatmap(
        lambda records: st.lists(
            st.tuples(records, st.integers(0, 6), st.sampled_from([1, 1, 2, -1, -2])),
            max_size=25,
        )
    ),
    layouts,
)
def test_many_times_of_a_record_in_one_batch(updates: Any, layout: Any) -> None:
    """Every change staged ahead at its time and sent at epoch 0: one arranged batch holds
    each record's changes at several times, read in time order against each other."""

    def feed(session: Any) -> None:
        for record, time, diff in updates:
            session.update_at(record, time, diff)
        session.advance_to(7)

    results = run_sessions(layout[:2], built_with_session, feed)
    for i, (_, expected) in enumerate(OPS.values(), 1):
        check_every_time(ref.flatten([r[i] for r in results]), updates, expected)


@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (2, 2)])
def test_integer_keys_then_strings(layout: Any) -> None:
    """Integer keys at epochs 0 and 1, then strings with them at epoch 2: the spine's key
    column switches to codes."""
    inputs = [(1, 0, 2), (3, 0, 1), (1, 1, -1), (5, 1, 1), ("a", 2, 1), (1, 2, 1), (3, 2, -1)]

    def feed(session: Any) -> None:
        for epoch in range(3):
            for r, t, d in inputs:
                if t == epoch:
                    session.update(r, d)
            session.advance_to(epoch + 1)

    results = run_sessions(layout, built_with_session, feed)
    for i, (_, expected) in enumerate(OPS.values(), 1):
        check_every_time(ref.flatten([r[i] for r in results]), inputs, expected)


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_batch_written_before_its_spine_switched_to_codes(op: str) -> None:
    """A batch on its way to the operator when the spine switched a column to codes (a later
    batch brought strings) is read against the recoded trace before it: its records are
    recoded and re-sorted to be found there. (The operator's read of one batch, driven here
    by hand: in a dataflow, when it happens depends on scheduling.)"""
    spine = Spine(depth=0)
    handle = spine.reader()

    def insert(keys: list[Any], diffs: list[int], epoch: int) -> Batch:
        column = np.array(keys, dtype=object if any(isinstance(k, str) for k in keys) else None)
        times = np.full((len(keys), 1), epoch, dtype=np.int64)
        upper = np.array([[epoch + 1]])
        return spine.insert_updates(column, (), times, np.array(diffs), upper)

    # keys whose codes sort otherwise than the numbers: the greatest is interned first
    a, b, c = 424_241, 424_242, 424_243
    INTERNER.encode(np.array([c], dtype=object))
    insert([c, a, b], [1, 2, 1], 0)
    in_flight = insert([a, b, c], [-1, 1, 2], 1)
    insert(["s", a], [1, 1], 2)
    assert spine.encoded[0] and not in_flight.is_encoded(0)
    make, expected = {
        "count": (lambda: TotalVertex(handle, None, True, "count_total"), ref.count),
        "distinct": (lambda: TotalVertex(handle, None, False, "distinct_total"), ref.distinct),
        "threshold": (
            lambda: TotalVertex(handle, square_capped, False, "threshold_total"),
            square_capped_ref,
        ),
    }[op]
    out = make()._changes(in_flight, spine.batches_through(in_flight.seq_lo - 1))
    got = Counter()
    for record, time, diff in out.to_records():
        assert time == 1
        got[record] += diff
    before, after = Counter({c: 1, a: 2, b: 1}), Counter({c: 3, a: 1, b: 2})
    want = expected(after)
    want.subtract(expected(before))
    assert ref.clean(got) == ref.clean(want)


# --- Lex loops -----------------------------------------------------------------------------------
def lex_order(t: Any) -> tuple[int, ...]:
    return tuple(lattice.time_row(t, 1))


@FAST
@given(histories(st.tuples(ref.INT_KEYS, st.integers(0, 3)), epochs=(1, 4)), layouts)
def test_inside_a_lex_loop_at_every_lex_time(epochs: Any, layout: Any) -> None:
    """Records enter a ``Lex`` loop at counter ``value``: their times are ``(epoch, value)``,
    and the output inside the loop is compared at every one of them (not only after
    ``leave``, where any order of a record's changes would sum to the same), for a collection
    and for an outer arrangement entered at the same counters."""

    def build(scope: Any) -> Any:
        loop = scope.iterative("lex", time_class=Lex)
        c = Collection.from_epochs(scope, epochs)
        inside = c.enter_at(loop, lambda k, v: v)
        entered = c.arrange_by_key().enter_at(loop, lambda k, v: v)
        left = inside.count_total().leave().changes()
        return (*all_of(inside), *all_of(entered), left)

    results = ref.run(build, layout)
    inputs = [(r, Lex(e, r[1]), d) for e, changes in enumerate(epochs) for r, d in changes]
    for i, (_, expected) in enumerate([*OPS.values(), *OPS.values()]):
        check_every_time(ref.flatten([r[i] for r in results]), inputs, expected, lex_order)
    ref.check([r[-1] for r in results], ref.expect_unary(epochs, ref.count))


def graphs() -> Any:
    """Growing ``(roots, edges)`` histories over 1 to 3 epochs (insertions only: a
    ``Lex`` loop starts each epoch from the last one's fixed point, right when monotone)."""

    @st.composite
    def growing(draw: Any, items: Any, epochs: int) -> Any:
        chosen = draw(st.lists(items, unique=True, max_size=8))
        at = [draw(st.integers(0, epochs - 1)) for _ in chosen]
        return [[(x, 1) for x, e in zip(chosen, at, strict=True) if e == i] for i in range(epochs)]

    nodes = st.integers(0, 5)
    return st.integers(1, 3).flatmap(
        lambda n: st.tuples(growing(nodes, n), growing(st.tuples(nodes, nodes), n))
    )


@FAST
@given(graphs(), layouts)
def test_reachability_iterated_with_distinct_total(graph: Any, layout: Any) -> None:
    """``distinct_total`` in the body of an iteration: a ``Variable`` of a ``Lex`` loop (its
    times ``(epoch, iteration)`` totally ordered), next to the same body with the generic
    ``distinct`` (``total=False``: in a ``Lex`` loop ``distinct()`` takes the total one too)."""
    roots, edges = graph

    def build(scope: Any) -> Any:
        r, e = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)
        loop = scope.iterative("lex", time_class=Lex)
        r_in, e_in = r.enter(loop), e.enter(loop)
        out = []
        generic = partial(Collection.distinct, total=False)
        for distinct in (Collection.distinct_total, generic):
            var = Variable(loop, r_in)
            step = distinct(var.collection.join(e_in).map(lambda rec: rec[1]).concat(r_in))
            out.append(var.set(step).leave().changes())
        return tuple(out)

    results = ref.run(build, layout)
    expected = ref.expect_binary(roots, edges, ref.reach)
    ref.check([r[0] for r in results], expected)
    ref.check([r[1] for r in results], expected)


# --- refusals --------------------------------------------------------------------------------
def loops_refused() -> list[Callable[[Any], Any]]:
    def product(scope: Any) -> Any:
        return scope.iterative("loop")

    def lex_in_product(scope: Any) -> Any:
        return scope.iterative("loop").iterative("inner", time_class=Lex)

    def product_in_lex(scope: Any) -> Any:
        return scope.iterative("lex", time_class=Lex).iterative("loop")

    def prioritized(scope: Any) -> Any:
        loops: list[Any] = []
        Collection.from_epochs(scope, [[(1, 1)]]).iterate(
            lambda x: loops.append(x.scope) or x, priority=lambda k, v: k
        )
        return loops[0]

    return [product, lex_in_product, product_in_lex, prioritized]


@pytest.mark.parametrize("loop_of", loops_refused())
@pytest.mark.parametrize("op", ["count", "distinct", "threshold"])
@pytest.mark.parametrize("arranged", [False, True])
def test_partially_ordered_times_are_refused_when_built(
    loop_of: Any, op: str, arranged: bool
) -> None:
    def build(scope: Any) -> Any:
        loop = loop_of(scope)
        c = Collection.from_epochs(scope, [[(1, 1)]])
        inside = c.arrange_by_key().enter(loop) if arranged else c.enter(loop)
        OPS[op][0](inside)

    with pytest.raises(ValueError) as info:
        naiad.run(build)
    message = str(info.value)
    assert f"{op}_total: needs totally ordered times" in message
    assert re.search(r"'dataflow/(lex/)?(loop|iterate)' is a Product loop", message)
    assert ("threshold(f)" if op == "threshold" else f"{op}()") in message
    naiad.run(lambda s: OPS[op][0](Collection.from_epochs(s, [[(1, 1)]])).changes())


def test_threshold_total_misuse_names_the_operator() -> None:
    with pytest.raises(TypeError, match="threshold_total: f must be a function"):
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)]]).threshold_total(3))
    with pytest.raises(TypeError, match=r"threshold_total: f\(counts\) is called with 1 arg"):
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)]]).threshold_total(lambda a, b: a))
    with pytest.raises(TypeError, match="threshold_total: f must return integer counts") as info:
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)]]).threshold_total(lambda c: c / 2))
    assert "'threshold_total'" in "".join(getattr(info.value, "__notes__", []))

    def fails(counts: np.ndarray) -> np.ndarray:
        raise KeyError("no threshold here")

    with pytest.raises(KeyError) as failed:
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)]]).threshold_total(fails))
    assert "'threshold_total'" in "".join(getattr(failed.value, "__notes__", []))
    got = naiad.run(
        lambda s: (
            Collection.from_epochs(s, [[(1, 2), (2, -1)]])
            .threshold_total(lambda c: c > 0)
            .changes()
        )
    )
    assert got == [[(1, 0, 1)]]  # booleans count as 0 and 1, as for threshold
