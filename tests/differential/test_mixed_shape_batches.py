"""Records of mixed shapes (pairs beside triples and single values) in one batch.

A batch that mixes shapes is one column of whole records (``Updates.mixed``); a record must
mean the same whatever shared its batch. So pairs filtered out of a mixed collection are
pairs again (keyed by their first field, counted as ``(k, v, n)``), a keyed operator keys
each record of a batch that still mixes shapes by its first field (it refused such a batch
before keyed arrangements held several widths: ``test_keyed_mixed_widths``), and
whole-record operators give the answers of recomputation from scratch. Checked with hypothesis over
epochs mixing shapes, on one and two workers and two simulated processes (the mixed flag
crosses processes).
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
from naiad.differential.updates import Updates, shaped_columns
from naiad.transport.codec import decode_message, encode_message
from tests.differential import reference as ref

LAYOUTS = [(1, 1), (2, 1), (1, 2), (2, 2)]  # (workers per process, processes)

keys = st.integers(0, 3)
words = st.sampled_from(["a", "b"])
records = st.one_of(
    st.tuples(keys, words),  # pairs
    st.tuples(keys, words, st.integers(0, 1)),  # triples
    keys,  # single values, equal to some pairs' keys
    words,
)
epochs_of = st.lists(
    st.lists(st.tuples(records, st.sampled_from([-1, 1, 2])), max_size=8), min_size=1, max_size=3
)


def is_pair(r: Any) -> bool:
    return isinstance(r, tuple) and len(r) == 2


def is_triple(r: Any) -> bool:
    return isinstance(r, tuple) and len(r) == 3


OTHER = [[((k, "x"), 1) for k in range(3)], [((1, "y"), 1), ((0, "x"), -1)]]


def kept(c: Counter, keep: Any) -> Counter:
    return Counter({r: n for r, n in c.items() if keep(r)})


def added(a: Counter, b: Counter) -> Counter:
    """The sum of two multisets whose counts may be negative (``+`` drops those)."""
    out = Counter(a)
    out.update(b)
    return ref.clean(out)


def packed_count(c: Counter) -> Counter:
    """``count`` of records kept whole: ``(record, n)``, the record one field."""
    return Counter({(r, n): 1 for r, n in c.items() if n})


OUTPUTS: dict[str, tuple[Any, Any]] = {
    # name: (naiad collection from (mixed, other), reference from (mixed, other) Counters)
    "consolidate": (lambda c, o: c.consolidate(), lambda c, o: c),
    "concat": (
        lambda c, o: c.map(lambda r: r).concat(c.negate(), c, c.filter(is_pair)).consolidate(),
        lambda c, o: added(c, kept(c, is_pair)),
    ),
    "pairs.count": (
        lambda c, o: c.filter(is_pair).count(),
        lambda c, o: ref.count(kept(c, is_pair)),
    ),
    "pairs.distinct": (
        lambda c, o: c.filter(is_pair).distinct(),
        lambda c, o: ref.distinct(kept(c, is_pair)),
    ),
    "pairs.join": (
        lambda c, o: c.filter(is_pair).join(o),
        lambda c, o: ref.join(kept(c, is_pair), o),
    ),
    "pairs.by_key.count": (
        lambda c, o: c.filter(is_pair).arrange_by_key().count(),
        lambda c, o: ref.count(kept(c, is_pair)),
    ),
    # consolidated first: the mixed parts of each batch cross processes as they are
    "consolidated.pairs.join": (
        lambda c, o: c.consolidate().filter(is_pair).join(o),
        lambda c, o: ref.join(kept(c, is_pair), o),
    ),
    "triples.reduce": (
        lambda c, o: c.filter(is_triple).reduce(lambda k, vs: [(len(vs), 1)]),
        lambda c, o: ref.reduce(kept(c, is_triple), lambda k, vs: [(len(vs), 1)]),
    ),
    "packed.count": (lambda c, o: c.packed().count(), lambda c, o: packed_count(c)),
    "packed.distinct": (lambda c, o: c.packed().distinct(), lambda c, o: ref.distinct(c)),
    "semijoin": (
        lambda c, o: o.semijoin(c.filter(lambda r: not isinstance(r, str))),
        lambda c, o: ref.semijoin(o, kept(c, lambda r: not isinstance(r, str))),
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=8, deadline=None)
@given(epochs=epochs_of)
def test_mixed_batches_against_recomputation(layout: tuple[int, int], epochs: Any) -> None:
    def build(scope: naiad.Scope) -> list[Any]:
        c = Collection.from_epochs(scope, epochs)
        o = Collection.from_epochs(scope, OTHER)
        return [make(c, o).changes() for make, _ in OUTPUTS.values()]

    results = ref.run(build, layout)
    n = max(len(epochs), len(OTHER))
    padded = epochs + [[]] * (n - len(epochs))
    for i, (name, (_, want)) in enumerate(OUTPUTS.items()):
        expected = [want(ref.accumulated(padded, e), ref.accumulated(OTHER, e)) for e in range(n)]
        try:
            ref.check([part[i] for part in results], expected)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pytest.mark.parametrize("workers", [1, 2])
def test_pairs_filtered_from_a_mixed_batch_are_counted_beside_pure_ones(workers: int) -> None:
    """The reproduction (/tmp/s17/h22/bug1.py): one batch of a pair beside a single value,
    then one of a pair only; counting the pairs failed with 'records must all have the same
    number of fields (had 1, now 2)'."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((1, 2), 1), (5, 1)], [((3, 4), 1)]])
        return c.filter(lambda r: isinstance(r, tuple)).count().changes()

    out = sorted(u for part in naiad.run(build, workers=workers) for u in part)
    assert out == [((1, 2, 1), 0, 1), ((3, 4, 1), 1, 1)]


@pytest.mark.parametrize("workers", [1, 2])
def test_pairs_filtered_from_a_mixed_batch_join_by_their_key(workers: int) -> None:
    """The reproduction (/tmp/s17/h22/bug1c.py): the filtered pairs joined on nothing on one
    worker (keyed by the whole tuple), and arrange_by_key().count() counted ((1, 'a'), 1)."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((1, "a"), 1), (5, 1)]])
        pairs = c.filter(lambda r: isinstance(r, tuple))
        other = Collection.from_epochs(scope, [[((1, "x"), 1)]])
        return pairs.join(other).changes(), pairs.arrange_by_key().count().changes()

    out = naiad.run(build, workers=workers)
    assert [u for part in out for u in part[0]] == [((1, "a", "x"), 0, 1)]
    assert [u for part in out for u in part[1]] == [((1, "a", 1), 0, 1)]


MIXED = [[((1, "a"), 1), ((2, "b"), 1), (5, 1), (6, 1)]]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (lambda c, o: c.join(o), ref.expect_binary(MIXED, OTHER, ref.join)),
        (lambda c, o: c.arrange_by_key("by_key").count(), ref.expect_unary(MIXED, ref.count)),
        (
            lambda c, o: c.reduce(lambda k, vs: [(len(vs), 1)]),
            ref.expect_unary(MIXED, lambda c: ref.reduce(c, lambda k, vs: [(len(vs), 1)])),
        ),
    ],
)
def test_a_batch_still_mixed_is_keyed_by_first_fields(
    layout: tuple[int, int], op: Any, expected: list[Counter]
) -> None:
    """A keyed operator takes a batch that mixes shapes (it refused it, by name, before
    keyed arrangements held records of several widths): each record keyed by its first
    field, as in a batch of its shape alone, on every layout."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, MIXED)
        return op(c, Collection.from_epochs(scope, OTHER)).changes()

    ref.check(ref.run(build, layout), expected)


def test_the_mixed_flag_crosses_processes() -> None:
    """Encoded and decoded (as between processes), a mixed batch is still mixed, and a batch
    of one column of tuples (packed) is still packed."""
    times, diffs = np.zeros((2, 1), np.int64), np.ones(2, np.int64)
    mixed = Updates.of_values([(1, "a"), 5], times, diffs)
    packed = Updates.of_values([(1, "a"), (2, "b")], times, diffs).as_one_column()
    for batch, flag in ((mixed, True), (packed, False)):
        _, back = decode_message(b"".join(encode_message(0, batch)))
        assert back.mixed is flag and back.to_records() == batch.to_records()
    one = decode_message(b"".join(encode_message(0, mixed)))[1].take(np.array([0]))
    assert [c.tolist() for c in one.data] == [[1], ["a"]]  # a pair: its fields again


@pytest.mark.parametrize("workers", [1, 2])
def test_a_mixed_batch_is_routed_by_its_records_keys(workers: int) -> None:
    """One worker's batch of a pair and a single value: routed by each record's first field
    (as a batch of one column would be by whole record, which sent (2, "a") and 4 to
    different workers), so every key meets its partners, on any number of workers."""

    mixed = [[((2, "a"), 1), ((3, "b"), 1), (4, 1), ((5, "c"), 1), (1, 1)]]

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, mixed)
        return c.join(Collection.from_epochs(scope, OTHER)).changes()

    ref.check(naiad.run(build, workers=workers), ref.expect_binary(mixed, OTHER, ref.join))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_mixed_part_keeps_its_meaning_between_processes(layout: tuple[int, int]) -> None:
    """Worker 0 of 2 holds (2, "a") and 4, which ``consolidate`` routes (by whole record)
    to worker 1, in the other process: the part arrives mixed, alone beside single values.
    Decoded without its flag it would be one column of single values, and the pair,
    filtered out after, would be keyed whole and join nothing."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((2, "a"), 1), (7, 1), (4, 1), (9, 1)]])
        return c.consolidate().filter(is_pair).join(Collection.from_epochs(scope, OTHER))

    def changes(scope: naiad.Scope) -> Any:
        return build(scope).changes()

    got = sorted(u for part in ref.run(changes, layout) for u in part)
    assert got == [((2, "a", "x"), 0, 1)]


@pytest.mark.parametrize("workers", [1, 2])
def test_map_columns_of_a_mixed_batch_keeps_its_records_meaning(workers: int) -> None:
    """The identity ``map_columns`` on a mixed batch made its pairs one field each (packed),
    those of a pure batch stayed pairs: on 1 worker the pairs' join and count then failed
    with 'records must all have the same number of fields (had 1, now 2)'
    (/tmp/s17/h24/bug2.py); on 2 workers, where no batch mixed, they answered."""

    def identity(*columns: np.ndarray) -> Any:
        return columns if len(columns) > 1 else columns[0]

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[((1, "a"), 1), (5, 1)], [((2, "b"), 1)]])
        o = Collection.from_epochs(scope, OTHER)
        pairs = c.map_columns(identity).filter(is_pair)
        return pairs.join(o).changes(), pairs.count().changes(), c.map_columns(identity).changes()

    out = naiad.run(build, workers=workers)
    assert sorted(u for part in out for u in part[0]) == [
        ((1, "a", "x"), 0, 1),
        ((1, "a", "y"), 1, 1),
        ((2, "b", "x"), 1, 1),
    ]
    assert sorted(u for part in out for u in part[1]) == [((1, "a", 1), 0, 1), ((2, "b", 1), 1, 1)]
    assert sorted((u for part in out for u in part[2]), key=repr) == [
        ((1, "a"), 0, 1),
        ((2, "b"), 1, 1),
        (5, 0, 1),
    ]


short_or_long = st.sampled_from(["a", "b" * 70])  # a first string up to 64 long is joined


@settings(max_examples=40, deadline=None)
@given(
    short_or_long,
    st.lists(
        st.one_of(short_or_long, st.tuples(keys, words), st.tuples(keys), st.just(5)),
        max_size=5,
    ),
)
def test_a_column_led_by_a_string_is_mixed_exactly_when_it_holds_a_tuple_of_fields(
    first: str, rest: list[Any]
) -> None:
    """The shape check of a column of single values led by a string (joined when short,
    its types scanned otherwise): mixed when some value is a tuple of 2 or more fields."""
    values = [first, *rest]
    columns, mixed = shaped_columns(values)
    assert mixed == any(isinstance(v, tuple) and len(v) > 1 for v in values)
    assert [c.tolist() for c in columns] == [values]
