"""count, distinct and threshold (and their ``_total`` forms) of records of any shapes.

Ints beside pairs beside triples, strings, ``None``, 1-tuples (single values) and nested
tuples, mixed in one batch or differing between batches: each width of record is arranged
in its own lane (``naiad.differential.lanes``), so the answers are those of a plain Python
``Counter`` per time on 1, 2 and 4 workers and on 2 simulated processes alike (before, a
batch that mixed shapes was refused, and shapes that differed between batches were refused
on one worker only). Also through a loop (``distinct`` in ``iterate``), as values of keyed
operators, and once over TCP between two real processes.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.differential.updates import fields_of
from tests.cluster.test_departures import naiad_run
from tests.differential import reference as ref

LAYOUTS = [(1, 1), (2, 1), (4, 1), (1, 2)]  # (workers per process, processes)

small = st.integers(0, 3)
words = st.sampled_from(["a", "b"])
atoms = st.one_of(small, words, st.none())
records = st.one_of(
    small,
    words,
    st.none(),
    st.tuples(atoms),  # a 1-tuple: one value
    st.tuples(small, atoms),
    st.tuples(small, atoms, atoms),
    st.tuples(st.tuples(small, words), small),  # a pair whose first field is a pair
    st.tuples(small, st.tuples(words, small), words),  # a triple with a nested pair
)
epochs_of = st.lists(
    st.lists(st.tuples(records, st.sampled_from([-1, 1, 2])), max_size=8), min_size=1, max_size=3
)


def fields(record: Any) -> tuple[Any, ...]:
    """A record's fields as naiad splits them: a tuple of two or more, else the value."""
    return record if fields_of(record) > 1 else (record,)


def count(c: Counter) -> Counter:
    return Counter({(*fields(r), n): 1 for r, n in c.items() if n})


def capped(c: Counter) -> Counter:
    return ref.threshold(c, lambda n: min(n, 2))


def keyed(r: Any) -> tuple[Any, Any]:
    """A pair whose value is the whole record (of any shape): what keyed operators take."""
    return (fields(r)[0], r)


def keyed_counter(c: Counter) -> Counter:
    return ref.clean(Counter({keyed(r): n for r, n in c.items()}))


def first_fields(c: Counter) -> Counter:
    out: Counter = Counter()
    for r, n in c.items():
        out[fields(r)[0]] += n
    return ref.clean(out)


def step(r: Any) -> list[Any]:
    """A loop body's growth that changes shapes: k -> (k, k) -> (k, k, 0), for k < 3."""
    if isinstance(r, int) and r < 3:
        return [(r, r)]
    if isinstance(r, tuple) and len(r) == 2 and r[0] == r[1] and isinstance(r[0], int):
        return [(*r, 0)]
    return []


def closure(c: Counter) -> Counter:
    """``distinct`` of the input, grown by ``step`` until nothing changes."""
    found = {r for r, n in c.items() if n > 0}
    while True:
        more = found | {s for r in found for s in step(r)}
        if more == found:
            return Counter(dict.fromkeys(found, 1))
        found = more


OUTPUTS: dict[str, tuple[Any, Any]] = {
    # name: (naiad collection from the input, reference from the input's Counter)
    # the generic reduce (at the root the default is the total one, as the *_total below)
    "count": (lambda c: c.count(total=False), count),
    "distinct": (lambda c: c.distinct(total=False), ref.distinct),
    "threshold": (lambda c: c.threshold(ref.capped, total=False), capped),
    "count_total": (lambda c: c.count_total(), count),
    "distinct_total": (lambda c: c.distinct_total(), ref.distinct),
    "threshold_total": (lambda c: c.threshold_total(ref.capped), capped),
    # records made by a map mix shapes too; the count of a count's records (widths + 1)
    "map.count": (lambda c: c.map(lambda r: r).count(), count),
    "count.count": (lambda c: c.count().count(), lambda c: count(count(c))),
    "iterate.distinct": (
        lambda c: c.distinct().iterate(
            lambda x: c.enter(x.scope).distinct().concat(x.flat_map(step)).distinct()
        ),
        closure,
    ),
    # records of any shape as the value of a pair: keyed operators take them
    "keyed.reduce": (
        lambda c: c.map(keyed).reduce(lambda k, vs: [(sum(n for _, n in vs), 1)]),
        lambda c: ref.reduce(keyed_counter(c), lambda k, vs: [(sum(n for _, n in vs), 1)]),
    ),
    "keyed.join": (
        lambda c: c.map(keyed).join(c.map(keyed)),
        lambda c: ref.join(keyed_counter(c), keyed_counter(c)),
    ),
    "keyed.arrange.distinct": (
        lambda c: c.map(keyed).arrange_by_key().distinct(),
        lambda c: ref.distinct(keyed_counter(c)),
    ),
    "semijoin": (
        lambda c: c.map(keyed).semijoin(c.map(lambda r: fields(r)[0]).distinct()),
        lambda c: ref.semijoin(keyed_counter(c), ref.distinct(first_fields(c))),
    ),
}


def check_outputs(epochs: Any, layout: tuple[int, int], names: list[str]) -> None:
    def build(scope: naiad.Scope) -> list[Any]:
        c = Collection.from_epochs(scope, epochs)
        return [OUTPUTS[name][0](c).changes() for name in names]

    results = ref.run(build, layout)
    for i, name in enumerate(names):
        expected = ref.expect_unary(epochs, OUTPUTS[name][1])
        try:
            ref.check([part[i] for part in results], expected)
        except AssertionError as e:
            raise AssertionError(f"{name} on {layout}: {e}") from None


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=6, deadline=None)
@given(epochs=epochs_of)
def test_records_of_any_shapes_against_a_counter_per_time(
    layout: tuple[int, int], epochs: Any
) -> None:
    check_outputs(epochs, layout, list(OUTPUTS))


SHAPES_BETWEEN_BATCHES = [
    [((1, 2), 1), ((1, 2), 1)],
    [((3, 4, 5), 1), ((1, 2), -1)],
    [(7, 1), ((7,), 1), ((3, 4, 5), 1)],
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shapes_that_differ_between_batches_are_counted_on_every_layout(
    layout: tuple[int, int],
) -> None:
    """One shape per batch: a pair, then a triple, then a single value and a 1-tuple.
    On one worker the spine refused the triple ('same number of fields'); on two workers
    the records could land apart and be counted."""
    check_outputs(SHAPES_BETWEEN_BATCHES, layout, [n for n in OUTPUTS if "." not in n])


def test_a_batch_mixing_shapes_is_counted_on_one_worker() -> None:
    """The reproduction: ``count`` of 1, (1, 2) and (1, 2, 3) in one batch was refused
    with 'records of different shapes ... .packed() the collection first'."""

    def build(scope: naiad.Scope) -> Any:
        c = Collection.from_epochs(scope, [[(1, 1), ((1, 2), 1), ((1, 2, 3), 2)]])
        return c.count().changes(), c.distinct_total().changes()

    ((counted, distinct),) = naiad.run(build)
    assert sorted(counted, key=repr) == [((1, 1), 0, 1), ((1, 2, 1), 0, 1), ((1, 2, 3, 2), 0, 1)]
    assert sorted(distinct, key=repr) == [((1, 2), 0, 1), ((1, 2, 3), 0, 1), (1, 0, 1)]


def test_a_packed_tuple_is_one_field_beside_pairs_of_the_same_values() -> None:
    """A ``packed()`` pair is one value (lane 1), a pair two fields (lane 2): counted
    apart, as ``((1, 2), n)`` and ``(1, 2, n)``, whichever arrives first."""

    def build(scope: naiad.Scope) -> Any:
        pairs = Collection.from_epochs(scope, [[((1, 2), 1)], [((1, 2), 1)]])
        packed = Collection.from_epochs(scope, [[], [((1, 2), 2)]]).packed()
        return pairs.concat(packed).count().changes()

    for workers in (1, 2):
        got = sorted((u for part in naiad.run(build, workers=workers) for u in part), key=repr)
        assert got == [
            (((1, 2), 2), 1, 1),
            ((1, 2, 1), 0, 1),
            ((1, 2, 1), 1, -1),
            ((1, 2, 2), 1, 1),
        ], workers


CLUSTER = """
import asyncio, os, naiad
from naiad.differential import Collection

EPOCHS = {epochs!r}

async def main():
    async with naiad.Runtime() as rt:
        def build(scope):
            c = Collection.from_epochs(scope, EPOCHS)
            return c.count().changes(), c.distinct_total().changes()

        df = rt.dataflow(build)
        df.close_inputs()
        await df.finished()
    for counted, distinct in df.results:
        for change in counted:
            os.write(1, f"count {{change!r}}\\n".encode())
        for change in distinct:
            os.write(1, f"distinct {{change!r}}\\n".encode())

asyncio.run(main())
"""


def test_records_of_mixed_shapes_are_counted_between_two_real_processes(tmp_path: Path) -> None:
    """``naiad run -n 2``: mixed batches cross TCP (the ``mixed`` flag) and each width is
    counted in its own lane on the process its records are routed to."""
    epochs = [
        [(1, 1), ((1, 2), 1), ((1, 2, 3), 2), ("a", 1), (None, 1), (((0, "b"), 1), 1)],
        [((1, 2), -1), ((5,), 1), ((3, 4, 5), 1)],
    ]
    root = str(Path(naiad.__file__).resolve().parents[1])  # this worktree's naiad in members
    done = naiad_run(tmp_path, CLUSTER.format(epochs=epochs), env={"PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    got: dict[str, list[Any]] = {"count": [], "distinct": []}
    for line in done.stdout.splitlines():
        kind, change = line.split(" ", 1)
        got[kind].append(ast.literal_eval(change))
    ref.check([got["count"]], ref.expect_unary(epochs, count))
    ref.check([got["distinct"]], ref.expect_unary(epochs, ref.distinct))


def test_a_reader_makes_one_vertex_per_lane_however_the_lane_is_first_asked_for() -> None:
    # restore asks for a lane whose spine does not exist yet: the spine's announcement makes
    # the reader's vertex, which the outer call must keep instead of making a second one
    from naiad.actors.vertex import Vertex
    from naiad.differential.lanes import Lanes, _ReadLanes

    made: list[Any] = []

    class Inner(Vertex):
        def __init__(self, spine: Any) -> None:
            made.append(spine)

        def restore(self, state: Any) -> None:
            pass

    reader = _ReadLanes(Lanes(0, (), "count.arrange", 0), Inner)
    reader.shard = None  # type: ignore[assignment]  # (not run: no shard needed)
    reader.restore({2: None})
    assert len(made) == 1 and list(reader.inner) == [2]
    assert reader.lane(2) is reader.inner[2] and len(made) == 1
