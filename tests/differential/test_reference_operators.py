"""Every collection operator against a from-scratch reference, at every epoch.

Hypothesis draws change histories (insertions, retractions of present records, blind
retractions that make counts negative) over 1-4 epochs, with integer and float keys (the
numeric paths; integers up to int64's ends), string keys and integers beyond 64 bits
(dictionary encoding), keys of both kinds in one column, booleans and tuples (composite keys),
and runs them on 1, 2 and 4 workers and on 2 simulated processes of 2 workers.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref
from tests.differential.reference import histories, layouts

FAST = settings(max_examples=25, deadline=None)


def keyed(keys: str, values: str) -> st.SearchStrategy[Any]:
    return st.tuples(ref.KEY_KINDS[keys], ref.VALUE_KINDS[values])


key_kinds = st.sampled_from(sorted(ref.KEY_KINDS))
value_kinds = st.sampled_from(sorted(ref.VALUE_KINDS))


@st.composite
def keyed_history(draw: Any, negative: bool = True, value_kinds: Any = value_kinds) -> Any:
    records = keyed(draw(key_kinds), draw(value_kinds))
    return draw(histories(records, negative=negative))


@st.composite
def two_keyed_histories(draw: Any) -> Any:
    keys = draw(key_kinds)
    n = draw(st.integers(1, 4))
    left = draw(histories(keyed(keys, draw(value_kinds)), count=n))
    right_records = draw(
        st.sampled_from(["pair", "key"])
    )  # right records (key, value) or keys only
    if right_records == "pair":
        right = draw(histories(keyed(keys, draw(value_kinds)), count=n))
    else:
        right = draw(histories(ref.KEY_KINDS[keys], count=n))
    return left, right


# --- stateless -------------------------------------------------------------------------------
def tag(r: Any) -> Any:
    return (ref.key_of(r), f"<{r}>")


def explode(r: Any) -> list[Any]:
    k, v = r
    return [(k, v), (k, "dup")] if isinstance(v, int) and v % 2 else []


@FAST
@given(keyed_history(), layouts)
def test_map_flat_map_filter_negate(epochs: Any, layout: Any) -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs)
        return (
            c.map(tag).changes(),
            c.flat_map(explode).changes(),
            c.filter(lambda r: isinstance(r[1], str) or r[1] > 1).negate().changes(),
        )

    results = ref.run(build, layout)

    def mapped(f: Any) -> Any:
        def go(a: Counter) -> Counter:
            out: Counter = Counter()
            for r, c in a.items():
                for y in f(r):
                    out[y] += c
            return ref.clean(out)

        return go

    keep = [(lambda r: [r] if isinstance(r[1], str) or r[1] > 1 else [])]
    ref.check([r[0] for r in results], ref.expect_unary(epochs, mapped(lambda r: [tag(r)])))
    ref.check([r[1] for r in results], ref.expect_unary(epochs, mapped(explode)))
    negated = ref.expect_unary(
        epochs, lambda a: Counter({r: -c for r, c in mapped(keep[0])(a).items()})
    )
    ref.check([r[2] for r in results], negated)


@FAST
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            histories(keyed("int", "int"), count=n), histories(keyed("int", "int"), count=n)
        )
    ),
    layouts,
)
def test_map_columns_concat_consolidate_inspect(ab: Any, layout: Any) -> None:
    a, b = ab
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        ca, cb = Collection.from_epochs(scope, a), Collection.from_epochs(scope, b)
        swapped = ca.map_columns(lambda k, v: (v * 10 + k, k))
        out = swapped.concat(cb, cb.negate(), cb).inspect(seen.append).consolidate()
        return out.changes()

    results = ref.run(build, layout)

    def expect(x: Counter, y: Counter) -> Counter:
        out: Counter = Counter()
        for (k, v), c in x.items():
            out[(v * 10 + k, k)] += c
        out.update(y)
        return ref.clean(out)

    ref.check(results, ref.expect_binary(a, b, expect))
    # inspect saw every update that passed (before consolidation)
    total: Counter = Counter()
    for r, _, d in seen:
        total[r] += d
    assert ref.clean(total) == expect(ref.accumulated(a, len(a)), ref.accumulated(b, len(b)))


# --- join family -------------------------------------------------------------------------------
@FAST
@given(two_keyed_histories(), layouts)
# an int key column joined with one switched to interned codes came out as codes
@example(ab=([[((2, 0), 1)]], [[((2, 0), 1), (("a", 0), 1)]]), layout=(1, 1))
def test_join(ab: Any, layout: Any) -> None:
    check_join(*ab, layout)


def check_join(a: Any, b: Any, layout: Any) -> None:
    results = ref.run(
        lambda s: Collection.from_epochs(s, a).join(Collection.from_epochs(s, b)).changes(), layout
    )
    ref.check(results, ref.expect_binary(a, b, ref.join))


@FAST
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            histories(st.tuples(ref.INT_KEYS, ref.STR_VALUES, ref.INT_VALUES), count=n),
            histories(st.tuples(ref.INT_KEYS, ref.INT_VALUES, ref.STR_VALUES), count=n),
        )
    ),
    layouts,
)
def test_join_multi_column_values(ab: Any, layout: Any) -> None:
    check_join(*ab, layout)


@FAST
@given(st.data(), layouts)
def test_arrangements_shared_by_several_readers(data: Any, layout: Any) -> None:
    keys = data.draw(key_kinds)
    n = data.draw(st.integers(1, 4))
    a = data.draw(histories(keyed(keys, "int"), count=n))
    b = data.draw(histories(keyed(keys, "str"), count=n))
    key_set = data.draw(ref.set_histories(ref.KEY_KINDS[keys], count=n))

    def build(scope: Any) -> Any:
        arranged = Collection.from_epochs(scope, a).arrange_by_key()
        other = Collection.from_epochs(scope, b).arrange_by_key()
        selected = Collection.from_epochs(scope, key_set).arrange_by_self()
        return (
            arranged.join(other).changes(),
            other.join(arranged).changes(),
            arranged.count().changes(),
            arranged.as_collection().changes(),
            arranged.distinct().changes(),
            arranged.reduce(summary).as_collection().changes(),
            other.semijoin(selected).changes(),
        )

    results = ref.run(build, layout)
    ref.check([r[0] for r in results], ref.expect_binary(a, b, ref.join))
    ref.check([r[1] for r in results], ref.expect_binary(b, a, ref.join))
    ref.check([r[2] for r in results], ref.expect_unary(a, ref.count))
    ref.check([r[3] for r in results], ref.expect_unary(a, lambda x: x))
    ref.check([r[4] for r in results], ref.expect_unary(a, ref.distinct))
    ref.check([r[5] for r in results], ref.expect_unary(a, lambda x: ref.reduce(x, summary)))
    ref.check([r[6] for r in results], ref.expect_binary(b, key_set, ref.semijoin))


@st.composite
def records_and_key_set(draw: Any) -> Any:
    keys = draw(key_kinds)
    n = draw(st.integers(1, 4))
    records = draw(histories(keyed(keys, draw(value_kinds)), count=n))
    key_set = draw(ref.set_histories(ref.KEY_KINDS[keys], count=n))
    return records, key_set


@FAST
@given(records_and_key_set(), layouts)
def test_semijoin_and_antijoin(ab: Any, layout: Any) -> None:
    a, keys = ab

    def build(scope: Any) -> Any:
        ca, ck = Collection.from_epochs(scope, a), Collection.from_epochs(scope, keys)
        return ca.semijoin(ck).changes(), ca.antijoin(ck).changes()

    results = ref.run(build, layout)
    ref.check([r[0] for r in results], ref.expect_binary(a, keys, ref.semijoin))
    ref.check([r[1] for r in results], ref.expect_binary(a, keys, ref.antijoin))


@FAST
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            histories(keyed("int", "int"), count=n), histories(ref.INT_KEYS, count=n)
        )
    ),
    layouts,
)
def test_semijoin_multiplies_counts(ab: Any, layout: Any) -> None:
    a, keys = ab  # keys with multiplicities (and negative ones)
    results = ref.run(
        lambda s: Collection.from_epochs(s, a).semijoin(Collection.from_epochs(s, keys)).changes(),
        layout,
    )
    ref.check(results, ref.expect_binary(a, keys, ref.semijoin))


# --- reduce family -------------------------------------------------------------------------------
def summary(key: Any, values: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """Order-insensitive, and shows every (value, count) the reduce was given."""
    listed = ",".join(sorted(f"{v!r}:{c}" for v, c in values))
    return [(listed, 1), (len(values), 2)]


@FAST
@given(keyed_history(), layouts)
def test_reduce(epochs: Any, layout: Any) -> None:
    results = ref.run(lambda s: Collection.from_epochs(s, epochs).reduce(summary).changes(), layout)
    ref.check(results, ref.expect_unary(epochs, lambda a: ref.reduce(a, summary)))


@FAST
@given(
    st.one_of(
        histories(ref.INT_KEYS),
        histories(ref.STR_KEYS),
        histories(keyed("str", "int")),
        histories(st.tuples(ref.INT_KEYS, ref.INT_VALUES, ref.STR_VALUES)),
    ),
    layouts,
)
def test_reduce_of_key_only_and_wide_records(epochs: Any, layout: Any) -> None:
    results = ref.run(lambda s: Collection.from_epochs(s, epochs).reduce(summary).changes(), layout)
    ref.check(results, ref.expect_unary(epochs, lambda a: ref.reduce(a, summary)))


@FAST
@given(st.one_of(keyed_history(), histories(ref.INT_KEYS), histories(ref.STR_KEYS)), layouts)
def test_count_and_distinct(epochs: Any, layout: Any) -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs)
        return c.count().changes(), c.distinct().changes()

    results = ref.run(build, layout)
    ref.check([r[0] for r in results], ref.expect_unary(epochs, ref.count))
    ref.check([r[1] for r in results], ref.expect_unary(epochs, ref.distinct))


def square_capped(counts: np.ndarray) -> np.ndarray:
    return np.minimum(counts * counts, 5) * np.sign(counts)


@FAST
@given(keyed_history(), layouts)
def test_threshold(epochs: Any, layout: Any) -> None:
    results = ref.run(
        lambda s: Collection.from_epochs(s, epochs).threshold(square_capped).changes(), layout
    )
    want = ref.expect_unary(
        epochs, lambda a: ref.threshold(a, lambda c: int(square_capped(np.array([c]))[0]))
    )
    ref.check(results, want)


# summands: small ints, int64's ends (whose sums leave int64) and ints beyond it
SUMMANDS = {"small": st.integers(-3, 3), "edge": ref.EDGE_INTS, "huge": ref.HUGE_INTS}


@FAST
@given(
    st.tuples(st.sampled_from(sorted(ref.KEY_KINDS)), st.sampled_from(sorted(SUMMANDS))).flatmap(
        lambda kv: histories(st.tuples(ref.KEY_KINDS[kv[0]], SUMMANDS[kv[1]]))
    ),
    layouts,
)
def test_sum(epochs: Any, layout: Any) -> None:
    results = ref.run(lambda s: Collection.from_epochs(s, epochs).sum().changes(), layout)
    ref.check(results, ref.expect_unary(epochs, ref.sum_))


@FAST
@given(
    st.one_of(
        keyed_history(),
        histories(st.tuples(ref.INT_KEYS, ref.INT_VALUES, ref.STR_VALUES)),
        histories(st.tuples(ref.STR_KEYS, ref.INT_VALUES, ref.INT_VALUES)),
    ),
    layouts,
)
def test_min_and_max(epochs: Any, layout: Any) -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs)
        return c.min().changes(), c.max().changes()

    results = ref.run(build, layout)
    ref.check([r[0] for r in results], ref.expect_unary(epochs, lambda a: ref.extreme(a, False)))
    ref.check([r[1] for r in results], ref.expect_unary(epochs, lambda a: ref.extreme(a, True)))


# --- outputs ---------------------------------------------------------------------------------
@FAST
@given(two_keyed_histories(), layouts)
def test_view_at_every_epoch(ab: Any, layout: Any) -> None:
    a, b = ab

    def build(scope: Any) -> Any:
        return Collection.from_epochs(scope, a).join(Collection.from_epochs(scope, b)).view()

    views = ref.run(build, layout)
    for e, want in enumerate(ref.expect_binary(a, b, ref.join)):
        assert ref.clean(Counter(views[0].at(e))) == want, f"epoch {e}"
    for other in views[1:]:  # they hold nothing: worker 0's view has every record
        for e in range(len(a)):
            with pytest.raises(ValueError, match="share of a gathered view, which is empty"):
                other.at(e)


@pytest.mark.parametrize("layout", ref.LAYOUTS)
async def test_input_session_feeds_join_and_max(layout: Any) -> None:
    """The same operators fed by input sessions, every worker inserting a share, with the
    join's view checked as each epoch completes (a view knows when its own input is
    complete; a probe on the stream may run before the sinks beside it)."""
    a = [[((k, k % 3), 1) for k in range(6)], [((1, 1), -1), ((2, 5), 1)], [((0, 0), -1)]]
    b = [[((k, "v"), 1) for k in range(0, 6, 2)], [((2, "w"), 2)], [((4, "v"), -1)]]
    workers, processes = layout

    def build(scope: Any) -> Any:
        sa, ca = Collection.new_input(scope)
        sb, cb = Collection.new_input(scope)
        joined, largest = ca.join(cb), ca.max()
        return sa, sb, joined.changes(), largest.changes(), joined.view()

    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df = rt.dataflow(build)
        view = df.results[0][4]
        for e in range(3):
            for w, (sa, sb, *_) in enumerate(df.results):
                for session, epochs in ((sa, a), (sb, b)):
                    for i, (r, d) in enumerate(epochs[e]):
                        if i % len(df.results) == w:
                            session.update(r, d)
                    session.advance_to(e + 1)
            for _ in range(30_000):
                if view.complete(e):
                    break
                await asyncio.sleep(0.001)
            want = ref.join(ref.accumulated(a, e), ref.accumulated(b, e))
            assert ref.clean(Counter(view.at(e))) == want, f"epoch {e}"
        for sa, sb, *_ in df.results:
            sa.close()
            sb.close()
    ref.check([r[2] for r in df.results], ref.expect_binary(a, b, ref.join))
    ref.check([r[3] for r in df.results], ref.expect_unary(a, lambda x: ref.extreme(x, True)))


@pytest.mark.parametrize("layout", [(1, 1), (2, 1)])
def test_changes_and_consolidate_are_consolidated_per_time(layout: Any) -> None:
    a_epochs = [[(("k", "v"), 1)], [], [(("k", "v"), -1)]]
    key_epochs = [[], [("k", 1)], []]

    def build(scope: Any) -> Any:
        a = Collection.from_epochs(scope, a_epochs)
        keys = Collection.from_epochs(scope, key_epochs)
        anti = a.antijoin(keys)
        return anti.changes(), anti.consolidate().changes()

    results = ref.run(build, layout)
    for part in range(2):
        ref.check([r[part] for r in results], ref.expect_binary(a_epochs, key_epochs, ref.antijoin))
    # the epoch-2 changes cancel: neither output may show them
    assert ref.worker_consolidated([r[0] for r in results]) == []
    assert ref.worker_consolidated([r[1] for r in results]) == []
