"""``InputSession.update_at`` against a from-scratch reference: random sessions stage changes
at the current epoch and at later times, flush now and then, advance by random steps (past
staged times too), and try times before the epoch (refused, nothing lost). At every time up
to the last one, the consolidated collection, a count and a join built on it equal the
reference, on 1 and 2 workers and 2 simulated processes, every worker feeding a share."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.operators.input import InputError
from tests.differential import reference as ref

FAST = settings(max_examples=20, deadline=None)
LAYOUTS = [(1, 1), (2, 1), (2, 2)]
RECORDS = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]))

# a step of a session: ("update", record, delay, diff) stages at epoch + delay (a negative
# delay is before the epoch, and refused); ("flush",); ("advance", step)
steps = st.one_of(
    st.tuples(st.just("update"), RECORDS, st.integers(-2, 4), st.sampled_from([1, 1, 2, -1])),
    st.tuples(st.just("flush")),
    st.tuples(st.just("advance"), st.integers(1, 3)),
)


def accumulated_at(changes: list[tuple[Any, int, int]], time: int) -> Counter:
    out: Counter = Counter()
    for r, t, d in changes:
        if t <= time:
            out[r] += d
    return ref.clean(out)


def counted(a: Counter) -> Counter:
    return ref.count(a)


async def drive(layout: tuple[int, int], scripts: list[list[Any]]) -> tuple[Any, list[Any]]:
    """Runs one script per worker (a worker without one only closes); returns the results
    and the changes the sessions accepted, as ``(record, time, diff)``."""
    workers, processes = layout
    accepted: list[tuple[Any, int, int]] = []

    def build(scope: Any) -> Any:
        session, c = Collection.new_input(scope)
        return session, c.consolidate().changes(), c.count().changes(), c.join(c).changes()

    async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
        df = rt.dataflow(build)
        for w, (session, *_) in enumerate(df.results):
            for op in scripts[w] if w < len(scripts) else []:
                if op[0] == "update":
                    _, record, delay, diff = op
                    time = session.epoch + delay
                    if delay < 0:
                        with pytest.raises(InputError, match="before the session's epoch"):
                            session.update_at(record, time, diff)
                    else:
                        session.update_at(record, time, diff)
                        accepted.append((record, time, diff))
                elif op[0] == "flush":
                    session.flush()
                else:
                    session.advance_to(session.epoch + op[1])
            session.close()
        await df.finished()
    return df.results, accepted


@FAST
@given(st.lists(st.lists(steps, max_size=12), min_size=1, max_size=2), st.sampled_from(LAYOUTS))
def test_update_at_matches_the_reference_at_every_time(scripts: Any, layout: Any) -> None:
    results, accepted = ref.watchdog(drive(layout, scripts))
    last = max((t for _, t, _ in accepted), default=0)
    per_output: list[defaultdict[int, Counter]] = [defaultdict(Counter) for _ in range(3)]
    for part in results:
        for i, changes in enumerate(part[1:]):
            for r, t, d in changes:
                assert isinstance(t, int) and 0 <= t <= last, f"change at time {t}"
                per_output[i][t][r] += d
    references = [lambda a: a, counted, lambda a: ref.join(a, a)]
    for i, (got, reference) in enumerate(zip(per_output, references, strict=True)):
        total: Counter = Counter()
        for t in range(last + 1):
            total.update(got.get(t, Counter()))
            want = reference(accumulated_at(accepted, t))
            assert ref.clean(total) == want, f"output {i} at time {t}"


def test_a_staged_later_update_waits_for_its_time_and_survives_advancing_past_it() -> None:
    async def main() -> Any:
        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            return session, c.view(), c.changes()

        async with naiad.Runtime(1) as rt:
            df = rt.dataflow(build)
            session, view, changes = df.results[0]
            session.update_at("x", 2, 1)
            session.update_at("x", 5, -1)
            session.insert("y")
            session.advance_to(1)  # flushes: sent at epoch 0, holding times 2 and 5
            await view.wait(0)
            assert view.at(0) == {"y": 1}
            session.advance_to(3)
            await view.wait(2)
            assert view.at(2) == {"x": 1, "y": 1}
            session.update_at("z", 3, 1)
            session.advance_to(9)  # past 5: the update at 5 was sent, at its own time
            await view.wait(8)
            assert view.at(4) == {"x": 1, "y": 1, "z": 1}
            assert view.at(8) == {"y": 1, "z": 1}
            session.close()
        return changes

    assert ref.watchdog(main()) == [("y", 0, 1), ("x", 2, 1), ("z", 3, 1), ("x", 5, -1)]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: s.update_at("r", 2, 1), InputError, r"update_at at time 2, before the sess"),
        (lambda s: s.update_at("r", 3.0, 1), TypeError, r"update_at's time must be an integer"),
        (lambda s: s.update_at("r", 2**63, 1), ValueError, r"beyond the int64 range"),
        (lambda s: s.update_at("r", 4, 1.0), TypeError, r"a diff is an integer, not 1\.0"),
        (lambda s: s.update_at(["r"], 4, 1), TypeError, r"is not hashable"),
        (lambda s: s.update_at(float("nan"), 4, 1), ValueError, r"has a NaN field"),
    ],
)
def test_update_at_misuse_is_refused_and_loses_nothing(
    call: Any, error: type, message: str
) -> None:
    async def main() -> Any:
        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            return session, c.changes()

        async with naiad.Runtime(1) as rt:
            session, changes = rt.dataflow(build).results[0]
            session.advance_to(3)
            session.update_at("kept", 3, 1)
            session.update_at("later", 7, 1)
            with pytest.raises(error, match=message):
                call(session)
            session.close()
        return changes

    assert ref.watchdog(main()) == [("kept", 3, 1), ("later", 7, 1)]


@pytest.mark.parametrize(
    "scope_class, other", [(naiad.Product, naiad.Lex), (naiad.Lex, naiad.Product)]
)
def test_a_time_of_the_other_loop_order_is_refused_not_converted(
    scope_class: type, other: type
) -> None:
    """Regression (h23): in a Product loop, update_at took a Lex time and converted it to a
    Product (and the reverse), where advance_to refuses the same time for its shape."""

    async def main() -> Any:
        def build(scope: Any) -> Any:
            with scope.iterative(time_class=scope_class) as loop:
                session, c = Collection.new_input(loop)
                return session, c.changes()

        async with naiad.Runtime(1) as rt:
            session, changes = rt.dataflow(build).results[0]
            session.update_at("kept", scope_class(0, 2), 1)
            for call in (
                lambda: session.update_at("lost", other(0, 2), 1),
                lambda: session.advance_to(other(1, 0)),
            ):
                with pytest.raises(TypeError, match=r"must have the shape of"):
                    call()
            session.close()
        return changes

    assert ref.watchdog(main()) == [("kept", scope_class(0, 2), 1)]
