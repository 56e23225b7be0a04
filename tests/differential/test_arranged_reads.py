"""``Arranged.filter``, ``Arranged.flat_map`` (read the arranged batches without
re-arranging, out as a collection) and ``Arranged.threshold`` (by key, as the arrangement is
partitioned) against recomputation from scratch at every epoch.

Hypothesis draws change histories (insertions, retractions, blind retractions that make
counts negative) of ``(key, value)`` pairs, key-only records and three-field records, on 1
and 2 workers and 2 simulated processes. Misuse (not a function, the wrong arity, a function
that raises or returns no iterable) is refused naming the operator.
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
from tests.differential import reference as ref

FAST = settings(max_examples=15, deadline=None)
LAYOUTS = st.sampled_from([(1, 1), (2, 1), (2, 2)])
RECORDS = st.sampled_from(
    [
        st.tuples(ref.INT_KEYS, ref.STR_VALUES),
        st.tuples(ref.STR_KEYS, ref.INT_VALUES, ref.FLOAT_VALUES),
        ref.MIXED_KEYS,
    ]
)


def keep(key: Any, value: Any) -> bool:
    """Depends on key and value, whatever their types."""
    return hash((repr(key), repr(value))) % 3 != 0 if value != () else key not in (1, "a")


def spread(key: Any, value: Any) -> list[Any]:
    """None, one or two records per update, of the value's shape as ``reduce`` hands it."""
    n = len(repr(key) + repr(value)) % 3
    return [(key, i, repr(value)) for i in range(n)]


def from_scratch_filter(c: Counter) -> Counter:
    return ref.clean(Counter({r: n for r, n in c.items() if keep(ref.key_of(r), ref.value_of(r))}))


def from_scratch_flat_map(c: Counter) -> Counter:
    out: Counter = Counter()
    for r, n in c.items():
        for y in spread(ref.key_of(r), ref.value_of(r)):
            out[y] += n
    return ref.clean(out)


def capped(counts: np.ndarray) -> np.ndarray:
    return np.minimum(counts, 2) - (counts < 0)


def from_scratch_threshold(c: Counter) -> Counter:
    return ref.threshold(c, lambda n: min(n, 2) - (n < 0))


@FAST
@given(RECORDS.flatmap(lambda r: ref.histories(r, epochs=(1, 5))), LAYOUTS)
def test_filter_flat_map_and_threshold_of_an_arrangement(epochs: Any, layout: Any) -> None:
    def build(scope: Any) -> Any:
        arranged = Collection.from_epochs(scope, epochs).arrange_by_key()
        return (
            arranged.filter(keep).changes(),
            arranged.flat_map(spread).changes(),
            arranged.threshold(capped).changes(),
        )

    results = ref.run(build, layout)
    wanted = [from_scratch_filter, from_scratch_flat_map, from_scratch_threshold]
    for i, expected in enumerate(wanted):
        ref.check([r[i] for r in results], ref.expect_unary(epochs, expected))


def test_threshold_reads_the_arrangement_by_key_without_routing_again() -> None:
    """The arrangement's batches are read where they are: one key's records stay on its
    worker (a collection's threshold spreads them by whole record)."""

    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, [[((0, v), 1) for v in range(40)]])
        seen: list[Any] = []
        c.arrange_by_key().threshold(lambda n: n).inspect(lambda u: seen.append(u))
        return seen

    results = ref.run(build, (2, 1))
    assert sorted(len(r) for r in results) == [0, 40]


def test_filter_inside_a_loop_reads_the_entered_index() -> None:
    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, [[((1, 2), 1), ((2, 3), 1), ((3, 1), 1)]])
        index = edges.arrange_by_key()
        roots = Collection.from_epochs(scope, [[(1, 1)]])

        def step(reach: Collection) -> Collection:
            odd = index.enter(reach.scope).filter(lambda k, v: k % 2 == 1)
            hops = reach.join(odd).map(lambda r: r[1])
            return reach.concat(hops).distinct()

        return roots.iterate(step).changes()

    assert sorted(c for part in ref.run(build, (2, 1)) for c in part) == [(1, 0, 1), (2, 0, 1)]


def arranged(scope: Any) -> Any:
    return Collection.from_epochs(scope, [[((1, "a"), 1)]]).arrange_by_key()


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda a: a.filter(3), TypeError, r"filter: predicate must be a function, not 3"),
        (
            lambda a: a.filter(lambda r: True),
            TypeError,
            r"filter: predicate\(key, value\) is called with 2 arguments",
        ),
        (lambda a: a.flat_map("f"), TypeError, r"flat_map: f must be a function"),
        (
            lambda a: a.flat_map(lambda k, v, w: []),
            TypeError,
            r"flat_map: f\(key, value\) is called with 2 arguments",
        ),
        (lambda a: a.threshold(None), TypeError, r"threshold: f must be a function"),
        (
            lambda a: a.threshold(lambda: 1),
            TypeError,
            r"threshold: f\(counts\) is called with 1 argument",
        ),
    ],
)
def test_misuse_is_refused_while_building(make: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        naiad.run(lambda s: make(arranged(s)).changes())


def test_a_flat_map_that_returns_no_iterable_is_named() -> None:
    with pytest.raises(TypeError, match=r"flat_map: f\(1, 'a'\) must return an iterable, not 5"):
        naiad.run(lambda s: arranged(s).flat_map(lambda k, v: 5).changes())


def test_an_error_of_the_predicate_reaches_the_caller_naming_the_operator() -> None:
    def predicate(k: Any, v: Any) -> bool:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom") as info:
        naiad.run(lambda s: arranged(s).filter(predicate, name="picky").changes())
    assert "'picky'" in "".join(getattr(info.value, "__notes__", []))
