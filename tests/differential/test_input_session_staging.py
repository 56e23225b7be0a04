"""The per-record input path (``InputSession.update`` / ``insert`` / ``remove`` /
``update_at``), whose checks take shortcuts for the common types: an int record, a str one in
one process, a tuple of such fields, an int diff within int64; and one epoch's times become
one repeated row. Random sessions of every record shape, with Python and numpy diffs, at the
epoch and at later times, against a from-scratch reference at every time, on 1 and 2 workers
and 2 simulated processes; and every refusal still made where the record is given, after a
record of the same type has passed a shortcut."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

FAST = settings(max_examples=15, deadline=None)
LAYOUTS = [(1, 1), (2, 1), (2, 2)]
SHAPES = {
    "int": st.integers(-3, 3) | st.sampled_from([2**62, -(2**63), 2**70]),
    "str": st.sampled_from(["a", "b", "é", ""]),
    "pair": st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"])),
    "mixed pair": st.tuples(st.integers(0, 2), st.sampled_from([0.5, 1.5, 2])),
    "float": st.sampled_from([0.5, -1.25, 3.0]),
    "nested": st.tuples(st.integers(0, 2), st.tuples(st.integers(0, 1), st.just("x"))),
}
DIFFS = st.sampled_from([1, -1, 2, np.int64(3), np.int32(-2), np.uint8(1), 2**40])


def steps(records: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A step of a session: ("update", record, diff), ("insert", record), ("remove",
    record), ("at", record, delay, diff) (``update_at`` epoch + delay), ("flush",),
    ("advance", step)."""
    return st.one_of(
        st.tuples(st.just("update"), records, DIFFS),
        st.tuples(st.just("insert"), records),
        st.tuples(st.just("remove"), records),
        st.tuples(st.just("at"), records, st.integers(0, 3), DIFFS),
        st.tuples(st.just("flush")),
        st.tuples(st.just("advance"), st.integers(1, 2)),
    )


async def drive(layout: tuple[int, int], scripts: list[list[Any]]) -> tuple[Any, list[Any]]:
    """Runs one script per worker; returns the results and the accepted changes."""
    workers, processes = layout
    accepted: list[tuple[Any, int, int]] = []

    def build(scope: Any) -> Any:
        session, c = Collection.new_input(scope)
        return session, c.consolidate().changes()

    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df = rt.dataflow(build)
        for w, (session, _) in enumerate(df.results):
            for op in scripts[w] if w < len(scripts) else []:
                kind, epoch = op[0], session.epoch
                if kind == "update":
                    session.update(op[1], op[2])
                    accepted.append((op[1], epoch, int(op[2])))
                elif kind == "insert":
                    session.insert(op[1])
                    accepted.append((op[1], epoch, 1))
                elif kind == "remove":
                    session.remove(op[1])
                    accepted.append((op[1], epoch, -1))
                elif kind == "at":
                    session.update_at(op[1], epoch + op[2], op[3])
                    accepted.append((op[1], epoch + op[2], int(op[3])))
                elif kind == "flush":
                    session.flush()
                else:
                    session.advance_to(epoch + op[1])
            session.close()
        await df.finished()
    return df.results, accepted


@FAST
@given(st.data(), st.sampled_from(sorted(SHAPES)), st.sampled_from(LAYOUTS))
def test_staged_records_of_every_shape_match_the_reference_at_every_time(
    data: Any, shape: str, layout: tuple[int, int]
) -> None:
    scripts = data.draw(
        st.lists(st.lists(steps(SHAPES[shape]), max_size=14), min_size=1, max_size=2)
    )
    results, accepted = ref.watchdog(drive(layout, scripts))
    last = max((t for _, t, _ in accepted), default=0)
    got: defaultdict[int, Counter] = defaultdict(Counter)
    for _, changes in results:
        for r, t, d in changes:
            assert type(d) is int and isinstance(t, int) and 0 <= t <= last
            got[t][r] += d
    total: Counter = Counter()
    for t in range(last + 1):
        total.update(got.get(t, Counter()))
        want: Counter = Counter()
        for r, at, d in accepted:
            if at <= t:
                want[r] += d
        assert ref.clean(total) == ref.clean(want), f"time {t}"
    # values come back in the type they were given (an int is no float, a str no bytes)
    types = {type(r) for r, _, _ in accepted}
    assert {type(r) for _, changes in results for r, _, _ in changes} <= types


# (record or diff given after a good one of the same type has passed, error, message, where)
REFUSALS = [
    (("insert", (1, float("nan"))), ValueError, r"has a NaN field", "both"),
    (("insert", (1, ["x"])), TypeError, r"is not hashable", "both"),
    (("insert", (1, ("a", {}))), TypeError, r"is not hashable", "both"),
    (("insert", float("nan")), ValueError, r"has a NaN field", "both"),
    (("update", 1, True), TypeError, r"a diff is an integer, not True", "both"),
    (("update", 1, 1.0), TypeError, r"a diff is an integer, not 1\.0", "both"),
    (("update", 1, 2**63), OverflowError, r"diff 9223372036854775808 is beyond int64", "both"),
    (("update", 1, -(2**63) - 1), OverflowError, r"is beyond int64", "both"),
    (("update", 1, np.uint64(2**63)), OverflowError, r"is beyond int64", "both"),
    (("insert", frozenset({1})), TypeError, r"cannot go to another process", "processes"),
    (("insert", (1, 2, frozenset({2}))), TypeError, r"cannot go to another process", "processes"),
    (("insert", (1, frozenset())), TypeError, r"cannot go to another process", "processes"),
]


@pytest.mark.parametrize(("call", "error", "message", "where"), REFUSALS)
@pytest.mark.parametrize("processes", [1, 2])
def test_a_bad_update_is_refused_after_good_ones_of_its_type_and_loses_nothing(
    call: Any, error: type, message: str, where: str, processes: int
) -> None:
    good = [1, "s", (2, "t"), (3, ("u", 4)), 0.5]  # every shortcut taken once before

    async def main() -> list[Any]:
        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            return session, c.consolidate().changes()

        async with naiad.Runtime(1, processes=processes, transport="inproc") as rt:
            df = rt.dataflow(build)
            (session, _), *others = df.results
            for other, _ in others:
                other.close()
            for record in good:
                session.insert(record)
            kind, *args = call
            if where == "both" or processes == 2:
                with pytest.raises(error, match=message):
                    getattr(session, kind)(*args)
            else:  # in one process nothing is encoded: the record is one like any other
                getattr(session, kind)(*args)
                session.remove(args[0])
            session.insert("after")
            session.close()
            await df.finished()
        return sorted((repr(r), t, d) for _, out in df.results for r, t, d in out)

    want = sorted((repr(r), 0, 1) for r in [*good, "after"])
    assert ref.watchdog(main()) == want


def test_a_session_refuses_updates_once_closed_or_stopped() -> None:
    """The epoch's shortcut keeps the refusals of a closed input."""

    async def main() -> None:
        async with naiad.Runtime(1) as rt:
            session, _ = rt.dataflow(lambda s: Collection.new_input(s)).results[0]
            session.insert(1)
            session.close()
            for call in (lambda: session.insert(2), lambda: session.update("x", 1)):
                with pytest.raises(naiad.InputError, match="is closed"):
                    call()

    ref.watchdog(main())
