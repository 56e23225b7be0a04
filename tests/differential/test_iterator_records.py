"""Records that are iterators are refused wherever records are made, as ``map`` refuses
them (test_map_returning_an_iterator.py): an iterator equals only itself, so the record
made again at its retraction never cancelled it. ``flat_map`` and ``explode`` yielding
iterators, ``join_map`` returning one and ``join_core`` yielding them left 2 records in a
``distinct`` for ever after their inputs were emptied; ``InputSession.insert(iter([1]))``
(iterators are hashable) staged one that no ``remove`` could cancel. Functions are checked
on the first record of each batch; an input's records at each call."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref
from tests.differential.test_map_returning_an_iterator import READS, Counted

PAIRS = [[((1, "a"), 1), ((2, "b"), 1)], [((1, "a"), -1), ((2, "b"), -1)]]
OTHER = [[((1, "x"), 1), ((2, "y"), 1)]]

# operator: (build with a function making iterator records, the same with tuples)
MAKERS: dict[str, Any] = {
    "flat_map": lambda c, o, g: c.flat_map(lambda r: [g(r)], name="op"),
    "explode": lambda c, o, g: c.explode(lambda r: [(g(r), 1)], name="op"),
    "join_map": lambda c, o, g: c.join_map(o, lambda k, a, b: g((k, a, b)), name="op"),
    "join_core": lambda c, o, g: c.join_core(o, lambda k, a, b: [g((k, a, b))], name="op"),
}
VERB = {"flat_map": "yielded", "explode": "yielded", "join_map": "returned", "join_core": "yielded"}


def built(op: str, make: Any) -> Any:
    def build(s: naiad.Scope) -> Any:
        c, o = Collection.from_epochs(s, PAIRS), Collection.from_epochs(s, OTHER)
        return MAKERS[op](c, o, make).distinct().changes()

    return build


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("op", list(MAKERS))
def test_a_function_making_iterator_records_is_refused_by_name(op: str, workers: int) -> None:
    with pytest.raises(
        TypeError, match=rf"^{op} 'op': f\(.*\) {VERB[op]} a tuple_iterator, not a record"
    ):
        naiad.run(built(op, lambda r: iter(r)), workers=workers)
    # the process goes on; the same records as tuples cancel at their retraction, as the
    # from-scratch answer (nothing left at epoch 1) says
    results = ref.run(built(op, tuple), (workers, 1))
    ref.check(results, [expected(op, e) for e in range(len(PAIRS))])


def expected(op: str, epoch: int) -> Counter:
    """From scratch: the distinct records ``op`` makes (as tuples) at ``epoch``."""
    left = [r for r, n in ref.accumulated(PAIRS, epoch).items() if n > 0]
    if not op.startswith("join"):
        return Counter(set(left))
    right = [r for r, n in ref.accumulated(OTHER, 0).items() if n > 0]
    return Counter({(k, a, b) for k, a in left for j, b in right if j == k})


async def session_run(bad: Any) -> tuple[list[str], Counter]:
    """A session given ``1``, then iterator records by each call (all refused), then
    ``2``, ``remove(1)``: the refusals, and what the collection holds at the end."""
    errors: list[str] = []
    async with naiad.Runtime(1) as rt:
        df = rt.dataflow(
            lambda s: (lambda si, c: (si, c.consolidate().changes()))(*Collection.new_input(s))
        )
        session = df.results[0][0]
        session.insert(1)
        for call in (
            lambda: session.insert(bad()),
            lambda: session.remove(bad()),
            lambda: session.update(bad(), 2),
            lambda: session.update_at(bad(), 3, 1),
        ):
            try:
                call()
            except TypeError as e:
                errors.append(str(e))
        session.insert(2)
        session.remove(1)
        session.close()
        await df.finished()
    held: Counter = Counter()
    for record, _, diff in df.results[0][1]:
        held[record] += diff
    return errors, +held


def test_an_input_session_refuses_an_iterator_record_at_the_call() -> None:
    errors, held = asyncio.run(session_run(lambda: iter([1])))
    assert len(errors) == 4, errors
    assert all(e.startswith("record <list_iterator") for e in errors), errors
    assert all("is a list_iterator, not a record" in e for e in errors), errors
    # nothing staged before or after a refusal is lost
    assert held == Counter({2: 1})


def test_from_epochs_refuses_an_iterator_record() -> None:
    with pytest.raises(TypeError, match=r"^record <generator .*> is a generator, not a record"):
        naiad.run(lambda s: Collection.from_epochs(s, [[((x for x in [1]), 1)]]).changes())


@pytest.mark.parametrize("op", list(MAKERS))
@pytest.mark.parametrize("n", [10, 20_000])
def test_the_check_costs_one_test_per_batch_not_per_record(op: str, n: int) -> None:
    READS[0] = 0

    def build(s: naiad.Scope) -> Any:
        keys = np.arange(n)
        c = Collection.from_columns(s, [(keys, keys)])
        o = Collection.from_columns(s, [(keys, keys + 1)])
        return MAKERS[op](c, o, Counted).map(lambda r: r.v, name="back").changes()

    got = naiad.run(build)
    assert len(got[0]) == n
    assert READS[0] <= 8, READS[0]


class Shown:
    """A record that counts how often it is shown (``repr``)."""

    shown = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shown) and other.n == self.n

    def __hash__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        Shown.shown += 1
        return f"Shown({self.n})"


def test_the_checks_show_no_record_unless_they_refuse_it() -> None:
    """The message naming a record is made only to refuse one: a record's repr may cost
    more than the rest of the check (a first version showed every record inserted)."""
    Shown.shown = 0

    def build(s: naiad.Scope) -> Any:
        c = Collection.from_epochs(s, [[(Shown(i), 1) for i in range(200)]])
        made = c.map(lambda r: r).flat_map(lambda r: [r]).explode(lambda r: [(r, 1)])
        return made.map(lambda r: r.n).changes()

    results = ref.run(build, (1, 1))
    assert sorted(r for r, _, _ in ref.flatten(results)) == list(range(200))
    assert Shown.shown == 0
