"""Sums that are not results never refuse: a spine's or a view's merge sums a record's rows
over a run of compacted times (a change between two of its counts), which may leave int64
while every count fits; such a sum is held as several rows of its sign (``pieces``), and
only a result beyond int64 (an epoch's consolidated change, a count, an output change) is
refused, with a ``DiffOverflowError`` naming the record.

Histories here mix signs near ``+-2**62`` and ``+-2**63``: an epoch 0 with many filler
records keeps the first batch apart, so later merges cover runs of epochs that do not start
at the beginning (their sums are changes, not counts). Everything is compared with Python
ints recomputed from scratch at every epoch."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings

import naiad
from naiad.differential import Collection
from naiad.differential.diff_arithmetic import (
    DIFF_MAX,
    DIFF_MIN,
    DiffOverflowError,
    pieces,
    split_sums,
)
from naiad.differential.trace import Spine, TraceHandle
from naiad.differential.updates import Updates, merge_updates
from tests.differential.reference import watchdog
from tests.differential.test_diff_overflow import outcome

M = DIFF_MAX
HUGE = [M, -M, DIFF_MIN, 2**62, -(2**62), 3 * 2**61, -(3 * 2**61), 1, -1]
huge = st.one_of(st.sampled_from(HUGE), st.integers(DIFF_MIN, DIFF_MAX))
FILLER = 80  # records of epoch 0: a batch at least twice the merges of later epochs
LAYOUTS = [(1, 1), (2, 1), (2, 2)]
FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fits(value: int) -> bool:
    return DIFF_MIN <= value <= DIFF_MAX


def history(draw: Any, epochs: int = 9) -> list[list[tuple[str, int]]]:
    """Huge changes of 'a' and 'b' epoch by epoch, each epoch's change of a record within
    int64 (anything else is a result beyond int64 at once, refused where it is arranged)."""
    out: list[list[tuple[str, int]]] = []
    for _ in range(epochs):
        changes = draw(st.lists(st.tuples(st.sampled_from("ab"), huge), max_size=2))
        out.append(changes or [("c", 1)])  # (an empty epoch makes no batch)
    return out


def counts_by_epoch(epochs: list[list[tuple[Any, int]]]) -> list[Counter]:
    """The accumulated count of every record after each epoch (Python ints), the filler
    records of an epoch before them included."""
    return accumulations([[(f, 1) for f in range(FILLER)], *epochs])[1:]


def first_beyond(epochs: list[list[tuple[Any, int]]]) -> tuple[int, Any] | None:
    """The first (epoch, record) whose epoch change or count leaves int64."""
    for e, (changes, counts) in enumerate(zip(epochs, counts_by_epoch(epochs), strict=True)):
        change: Counter = Counter()
        for record, d in changes:
            change[record] += d
        for record in sorted({r for r, _ in changes}):
            if not fits(change[record]) or not fits(counts[record]):
                return e, record
    return None


# --- the arithmetic ------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(huge, min_size=1, max_size=12), st.data())
def test_split_sums_are_the_exact_sums_in_rows_that_fit(values: list[int], data: Any) -> None:
    cuts = data.draw(st.sets(st.integers(1, max(1, len(values) - 1)), max_size=3))
    starts = np.array(sorted({0} | {c for c in cuts if c < len(values)}), dtype=np.int64)
    bounds = [*starts.tolist(), len(values)]
    groups, sums = split_sums(np.array(values, dtype=np.int64), starts)
    got: Counter = Counter()
    for g, d in zip(groups.tolist(), sums.tolist(), strict=True):
        got[g] += d
    exact = [sum(values[a:b]) for a, b in itertools.pairwise(bounds)]
    assert got == Counter({g: s for g, s in enumerate(exact) if s})
    assert groups.tolist() == sorted(groups.tolist())
    for g, s in enumerate(exact):  # the fewest rows, all of the sum's sign
        rows = [d for h, d in zip(groups.tolist(), sums.tolist(), strict=True) if h == g]
        fewest = 0 if s == 0 else 1 if fits(s) else -(-abs(s) // M)
        assert len(rows) == fewest and all(d * s > 0 for d in rows)
    assert pieces(2 * M + 1) == [M, M, 1] and pieces(-(2**64)) == [-M, -M, -2]


# --- a spine, merged by hand ---------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.data())
def test_spine_merges_hold_changes_beyond_int64_and_counts_stay_exact(data: Any) -> None:
    """The spine refuses only an epoch's change beyond int64 (a result); the pieces keep
    every accumulation exact, even one beyond int64 (refusing a count is its readers' job)."""
    epochs = history(data.draw, 12)
    spine = Spine(depth=0, name="huge")
    reader = TraceHandle(spine)
    keys = {"a": 1000, "b": 1001, "c": 1002}
    spine.insert_updates(
        np.arange(FILLER),
        (),
        np.zeros((FILLER, 1), np.int64),
        np.ones(FILLER, np.int64),
        upper=np.array([[1]]),
    )
    counts = counts_by_epoch(epochs)
    merged = False
    for e, changes in enumerate(epochs, 1):
        reader.set_logical_compaction([e])  # merges compact every time before e into e
        k = np.array([keys[r] for r, _ in changes])
        d = np.array([x for _, x in changes], dtype=np.int64)
        change = Counter()
        for r, x in changes:
            change[r] += x
        if not all(fits(v) for v in change.values()):
            with pytest.raises(DiffOverflowError, match=r"sum to -?\d+ \(record 10\d\d at time"):
                spine.insert_updates(k, (), np.full((len(k), 1), e), d, np.array([[e + 1]]))
            return
        spine.insert_updates(k, (), np.full((len(k), 1), e), d, np.array([[e + 1]]))
        merged |= len(spine.batches) < e + 1
        if any(len(b.keys) > len(set(b.keys.tolist())) for b in spine.batches):
            event("a merged batch holds pieces")
        got: Counter = Counter()
        for b in spine.batches:
            assert b.diffs.dtype == np.int64
            for key, x in zip(b.keys.tolist(), b.diffs.tolist(), strict=True):
                got[key] += x
        want = {keys.get(r, r): n for r, n in counts[e - 1].items()}
        assert {key: n for key, n in got.items() if n} == want
        # a cursor reads each record's compacted history, a change per time, exactly
        cursor = reader.cursor()
        for key in ("a", "b"):
            if cursor.seek_key(keys[key]):
                ((_, history_),) = cursor.values()
                assert sum(x for _, x in history_) == counts[e - 1][key]
                assert len({t for t, _ in history_}) == len(history_)
    assert merged


def test_the_documented_merge_refusal_is_gone() -> None:
    """Counts ``M, 0, -M, ..., -M, 0`` fit; the merge of epochs 1..5 sums 'a' to ``-2M``
    (it refused: "the diffs sum to -18446744073709551614 (record 1000 at time 6)")."""
    spine = Spine(depth=0)
    TraceHandle(spine).set_logical_compaction([6])
    spine.insert_updates(
        np.arange(101),
        (),
        np.zeros((101, 1), np.int64),
        np.array([1] * 100 + [M]),
        upper=np.array([[1]]),
    )
    for e, d in enumerate([-M, -M, 0, 0, 0, M], 1):
        spine.insert_updates(
            np.array([100 if d else 7]),
            (),
            np.array([[e]]),
            np.array([d or 1]),
            upper=np.array([[e + 1]]),
        )
    assert [len(b) for b in spine.batches] == [101, 3, 1]
    assert spine.batches[1].diffs.tolist() == [3, -M, -M]  # key 7, then key 100's pieces


# --- operators in dataflows fed epoch by epoch ---------------------------------------------
Epochs = list[list[tuple[Any, int]]]


def changes_by_epoch(outputs: list[Counter]) -> list[Counter]:
    out, before = [], Counter()
    for now in outputs:
        change = Counter(now)
        change.subtract(before)
        out.append(Counter({r: d for r, d in change.items() if d}))
        before = now
    return out


def accumulations(epochs: Epochs) -> list[Counter]:
    out, acc = [], Counter()
    for changes in epochs:
        acc = Counter(acc)
        for record, d in changes:
            acc[record] += d
        out.append(Counter({r: n for r, n in acc.items() if n}))
    return out


RIGHT = [(("a", "x"), 1), (("b", "x"), 1)]  # the join's other side at epoch 0; ('a', 'y') last


def reference(op: str, epochs: Epochs) -> tuple[list[Counter], list[int]]:
    """The operator's exact output changes per epoch, and every result it must represent
    (epoch changes of its input, counts, output changes), as Python ints."""
    counts = accumulations(epochs)
    inputs = changes_by_epoch(counts)
    results = [d for c in inputs for d in c.values()]
    if op == "consolidate":
        return inputs, results
    if op == "join":
        right = accumulations([RIGHT] + [[]] * (len(epochs) - 2) + [[(("a", "y"), 1)]])
        outputs = [
            Counter({(k, w): n * m for k, n in c.items() for (k2, w), m in r.items() if k == k2})
            for c, r in zip(counts, right, strict=True)
        ]
        changes = changes_by_epoch(outputs)
        return changes, results + [d for c in changes for d in c.values()]
    results += [n for c in counts for n in c.values()]
    if op == "distinct":
        positive = [Counter({r: 1 for r, n in c.items() if n > 0}) for c in counts]
        return changes_by_epoch(positive), results
    per_count = [Counter({(r, n): 1 for r, n in c.items()}) for c in counts]
    return changes_by_epoch(per_count), results


OPS: dict[str, Any] = {
    "consolidate": lambda c, s: c.consolidate("huge_consolidate"),
    "count": lambda c, s: c.count("huge_count"),
    "distinct": lambda c, s: c.distinct("huge_distinct"),
    "count_total": lambda c, s: c.count_total("huge_count_total"),
    "join": lambda c, s: (
        c.map(lambda r: (r, 0), "huge_key")
        .join(s, "huge_join")
        .map(lambda r: (r[0], r[2]), "huge_unkey")
    ),
}


def run_fed(op: str, layout: tuple[int, int], epochs: Epochs) -> Any:
    """``op`` over ``epochs`` fed one epoch at a time (each sealed before the next, so every
    epoch is a batch of the arrangements): the changes per epoch, or the error."""
    workers, processes = layout

    async def main() -> Any:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

            def build(scope: Any) -> Any:
                session, collection = Collection.new_input(scope)
                other, right = Collection.new_input(scope, "right")
                out = OPS[op](collection, right)
                return session, other, out.changes(), out.probe()

            df = rt.dataflow(build)
            try:
                for e, changes in enumerate(epochs):
                    for w, (session, other, _, _) in enumerate(df.results):
                        for i, (record, d) in enumerate(changes):
                            if i % len(df.results) == w:
                                session.update(record, d)
                        if w == 0 and e in (0, len(epochs) - 1):
                            for record, d in RIGHT if e == 0 else [(("a", "y"), 1)]:
                                other.update(record, d)
                        session.advance_to(e + 1)
                        other.advance_to(e + 1)
                    await df.results[0][3].wait(e)
                for session, other, _, _ in df.results:
                    session.close()
                    other.close()
                await df.finished()
            except OverflowError as error:
                return error
            got = [Counter() for _ in epochs]
            for _, _, changes, _ in df.results:
                for record, time, d in changes:
                    got[time][record] += d
            return [Counter({r: d for r, d in c.items() if d}) for c in got]

    try:
        return watchdog(main())
    except OverflowError as error:  # (raised as the runtime closes)
        return error


def fed_history(draw: Any) -> Epochs:
    return [[(f, 1) for f in range(FILLER)], *history(draw, 8)]


@pytest.mark.parametrize("op", sorted(OPS))
@FEW
@given(layout=st.sampled_from(LAYOUTS), data=st.data())
def test_operators_fed_epoch_by_epoch_are_exact_or_refuse_a_result_beyond_int64(
    op: str, layout: tuple[int, int], data: Any
) -> None:
    epochs = fed_history(data.draw)
    expected, results = reference(op, epochs)
    got = run_fed(op, layout, epochs)
    if all(fits(v) for v in results):
        assert not isinstance(got, OverflowError), f"{op} refused results that fit: {got}"
        assert got == expected
    else:
        assert isinstance(got, DiffOverflowError), f"{op} gave {got} for a result beyond int64"
        assert re.search(r"\((record|key) \(?'[ab]'", str(got)), got


def test_counts_that_fit_after_changes_that_do_not_are_exact() -> None:
    """The documented case: 'a' counts ``M, 0, -M, -M, ..., 0``; each merge of epochs 1..5
    sums it to ``-2M``. count, distinct, count_total and the join answer exactly now."""
    epochs: Epochs = [[(f, 1) for f in range(FILLER)] + [("a", M)]]
    epochs += [[("a", -M)], [("a", -M)], *[[("c", 1)]] * 4, [("a", M)], [("b", 1)]]
    for op in OPS:
        expected, results = reference(op, epochs)
        assert all(fits(v) for v in results)
        for layout in LAYOUTS:
            assert run_fed(op, layout, epochs) == expected, (op, layout)


def read_view(layout: tuple[int, int], epochs: Epochs, read: set[int]) -> list[Any]:
    """A ``history=False`` view (its runs merge compacted, following the input) read at the
    epochs ``read`` once complete: the contents, or the error of that read (a read merges
    every run, so the runs of the epochs between reads merge as they come, partially)."""
    workers, processes = layout

    async def main() -> list[Any]:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

            def build(scope: Any) -> Any:
                session, collection = Collection.new_input(scope)
                return session, collection.view(history=False, name="huge_view")

            df = rt.dataflow(build)
            reads: list[Any] = []
            for e, changes in enumerate(epochs):
                for w, (session, _) in enumerate(df.results):
                    for i, (record, d) in enumerate(changes):
                        if i % len(df.results) == w:
                            session.update(record, d)
                    session.advance_to(e + 1)
                view = df.results[0][1]
                await view.wait(e)
                if e not in read:
                    continue
                try:
                    reads.append(Counter(view.at(e)))
                except OverflowError as error:
                    reads.append(error)
            for session, _ in df.results:
                session.close()
            await df.finished()
            return reads

    result: list[Any] = watchdog(main())
    return result


@FEW
@given(layout=st.sampled_from(LAYOUTS), data=st.data())
def test_a_view_reads_every_count_that_fits_and_refuses_the_others(
    layout: tuple[int, int], data: Any
) -> None:
    """Only the counts read are results: changes of an epoch beyond int64 do not matter."""
    epochs = fed_history(data.draw)
    epochs[-1] = epochs[-1] + [("a", -M), ("a", -M), ("a", M)]  # a change of 'a' beyond int64
    read = data.draw(st.sets(st.integers(0, len(epochs) - 1)))
    counts_read = [(e, c) for e, c in enumerate(accumulations(epochs)) if e in read]
    for (e, counts), got in zip(counts_read, read_view(layout, epochs, read), strict=True):
        if all(fits(n) for n in counts.values()):
            assert got == counts
        else:  # named at the time read
            assert isinstance(got, DiffOverflowError), got
            assert re.search(rf"\(record '[ab]' at time {e}\)", str(got)), got


def test_a_view_holds_runs_whose_sums_leave_int64() -> None:
    """Counts of 'a': ``M, 0, -M, -M, -M, -M, 0, 0``; the runs of epochs 1..5 sum to ``-2M``."""
    epochs: Epochs = [[(f, 1) for f in range(FILLER)] + [("a", M)]]
    epochs += [[("a", -M)], [("a", -M)], *[[("c", 1)]] * 4, [("a", M)], [("b", 1)]]
    for layout in LAYOUTS:
        assert read_view(layout, epochs, {0, 8}) == accumulations(epochs)[::8], layout
    u = Updates.from_records([("a", 0, -M), ("a", 1, -M), ("b", 1, 1)])
    merged = merge_updates([u], since=np.array([[1]]), split=True)
    assert merged.to_records() == [("a", 1, -M), ("a", 1, -M), ("b", 1, 1)]
    with pytest.raises(DiffOverflowError, match=r"sum to -18446744073709551614 \(record 'a'"):
        merge_updates([u], since=np.array([[1]]))  # a result (a consolidated change) refuses


# --- negation of -2**63 --------------------------------------------------------------------
NEGATIONS: dict[str, Any] = {
    "cancel": lambda c: c.concat(c.negate()).consolidate(),
    # (the antijoin's two halves of a record may lie on two workers: consolidate joins them)
    "antijoin": lambda c: c.antijoin(
        Collection.from_epochs(c.scope, [[("k", 1), ("j", 1)]])
    ).consolidate(),
    "iterate": lambda c: c.iterate(lambda inner: inner.map(lambda r: r)),
    "negate": lambda c: c.negate().consolidate("huge_sum_of_negation"),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", sorted(NEGATIONS))
def test_a_diff_of_minus_two_to_the_63_negated(op: str, layout: tuple[int, int]) -> None:
    """Negating, concatenating and cancelling (``concat``, ``antijoin``'s negate, a loop's
    feedback) works for -2**63 (it raised "the negation of diff -9223372036854775808"); the
    negation alone, consolidated, is 2**63: a result beyond int64, refused naming it."""
    epochs: Epochs = [[(("k", 1), DIFF_MIN), (("j", 2), 3)], [(("k", 1), 1), (("j", 2), DIFF_MIN)]]
    got = outcome(epochs, NEGATIONS[op], layout)
    if op == "negate":
        assert isinstance(got, DiffOverflowError), got
        # (both records' negations are 2**63; on two workers either may be summed first)
        pattern = r"sum to 9223372036854775808 \(record \(('k', 1\) at time 0|'j', 2\) at time 1)\)"
        assert re.search(pattern, str(got)), got
        assert any("huge_sum_of_negation" in note for note in got.__notes__)
    elif op == "iterate":
        assert got == [Counter({("k", 1): DIFF_MIN, ("j", 2): 3}), Counter(dict(epochs[1]))]
    else:
        assert got == [Counter(), Counter()]
