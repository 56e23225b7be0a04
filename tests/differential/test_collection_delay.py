"""``Collection.delay(f)``: every update at ``f(time)``, against recomputation from scratch.

Hypothesis draws change histories over several epochs (retractions, empty epochs) and a
delay (a shift, windows of a drawn width, or a mixture that sends some epochs further than
later ones), on 1 and 2 workers and 2 simulated processes; updates staged ahead with
``update_at`` (many times in one message) are delayed each by its own time; inside a loop
the loop counter is delayed. A time before the update's own, or of another shape, fails
the dataflow naming the operator; a function that is not one, or of the wrong arity, is
refused when the dataflow is built.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.progress import Product
from tests.differential import reference as ref

FAST = settings(max_examples=15, deadline=None)
LAYOUTS = st.sampled_from([(1, 1), (2, 1), (2, 2)])
SHIFTS: dict[str, Callable[[int], int]] = {
    "none": lambda t: t,
    "plus two": lambda t: t + 2,
    "windows of 3": lambda t: t - t % 3 + 2,
    "odd epochs far": lambda t: t + 4 if t % 2 else t,  # overtakes later epochs
}


def expected_at(epochs: ref.Epochs, f: Callable[[int], int], horizon: int) -> list[Counter]:
    """Per time ``e < horizon``: the input changes whose delayed time is at or before ``e``."""
    out = []
    for e in range(horizon):
        total: Counter = Counter()
        for t, changes in enumerate(epochs):
            if f(t) <= e:
                for record, diff in changes:
                    total[record] += diff
        out.append(ref.clean(total))
    return out


@FAST
@given(
    ref.histories(st.tuples(ref.STR_KEYS, ref.INT_VALUES), epochs=(1, 6)),
    st.sampled_from(sorted(SHIFTS)),
    LAYOUTS,
)
def test_delay_equals_retiming_by_hand(epochs: Any, shift: str, layout: Any) -> None:
    f = SHIFTS[shift]

    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs).delay(f)
        return c.changes(), c.count().changes()

    results = ref.run(build, layout)
    horizon = max(f(t) for t in range(len(epochs))) + 1
    want = expected_at(epochs, f, horizon)
    ref.check([r[0] for r in results], want)
    ref.check([r[1] for r in results], [ref.count(w) for w in want])


@FAST
@given(
    st.lists(st.tuples(ref.INT_KEYS, st.integers(0, 5), st.sampled_from([1, 2, -1])), max_size=12),
    LAYOUTS,
)
def test_many_times_in_one_message_are_delayed_each_by_its_own(updates: Any, layout: Any) -> None:
    def f(t: int) -> int:
        return t + 3 if t < 3 else t

    async def main() -> list[Any]:
        workers, processes = layout
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:

            def build(scope: Any) -> Any:
                session, c = Collection.new_input(scope)
                return session, c.delay(f).changes()

            df = rt.dataflow(build)
            for record, time, diff in updates:
                df.results[0][0].update_at(record, time, diff)
            df.close_inputs()
            await df.finished()
        return [r[1] for r in df.results]

    results = ref.watchdog(main())
    got: Counter = Counter()
    for record, time, diff in ref.flatten(results):
        got[(record, time)] += diff
    want: Counter = Counter()
    for record, time, diff in updates:
        want[(record, f(time))] += diff
    assert ref.clean(got) == ref.clean(want)


def test_delay_inside_a_loop_moves_the_loop_counter() -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, [[("a", 1)], [("b", 1)]])
        with scope.iterative() as loop:
            inside = c.enter(loop).delay(lambda t: Product(t.outer, t.inner + 2))
            return inside.changes(), inside.leave().changes()

    results = ref.run(build, (2, 1))
    assert sorted(c for r in results for c in r[0]) == [
        ("a", Product(0, 2), 1),
        ("b", Product(1, 2), 1),
    ]
    assert sorted(c for r in results for c in r[1]) == [("a", 0, 1), ("b", 1, 1)]


@pytest.mark.parametrize(
    ("f", "error", "message"),
    [
        (
            lambda t: t - 1,
            ValueError,
            r"delay 'late': f\(time\) at time 1 returned 0, which is not",
        ),
        (lambda t: t + 0.5, TypeError, r"delay 'late': f\(time\) must be an integer, not 1.5"),
        (lambda t: 1 // (1 - t), ZeroDivisionError, r"division"),
    ],
)
def test_a_bad_delay_fails_naming_the_operator(f: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as info:
        naiad.run(lambda s: Collection.from_epochs(s, [[], [("a", 1)]]).delay(f, "late").changes())
    assert "'late'" in str(info.value) + "".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize(
    ("f", "message"),
    [
        (5, r"delay: f must be a function, not 5"),
        (lambda t, u: t, r"delay: f\(time\) is called with 1 argument, but <lambda> takes"),
    ],
)
def test_a_delay_that_is_no_function_of_a_time_is_refused_while_building(
    f: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        naiad.run(lambda s: Collection.from_epochs(s, [[("a", 1)]]).delay(f).changes())
