"""``aggregate`` and ``state_machine`` against plain-Python oracles, on 1 and 2 workers and
2 simulated processes: per time and key folds, and per key states in time order."""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
keys = st.sampled_from(["a", "b", "cc", "ddd", "e"])


def crc(k: str) -> int:
    return zlib.crc32(k.encode())


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.lists(st.tuples(keys, st.integers(-9, 9)), max_size=12), min_size=1, max_size=5),
    configs,
)
def test_aggregate_folds_each_key_at_each_time(
    epochs: list[list[tuple[str, int]]], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> tuple[int, list[Any]]:
        sums = s.from_epochs(epochs).aggregate(
            lambda k, v, acc: (acc[0] + v, acc[1] + 1),
            lambda k, acc: (k, acc[0], acc[1]),
            key=crc,
            init=lambda: (0, 0),
        )
        return s.index, sums.collect()

    results = naiad.run(build, **config)
    want: Counter[Any] = Counter()
    for t, pairs in enumerate(epochs):
        totals: dict[str, list[int]] = {}
        for k, v in pairs:
            acc = totals.setdefault(k, [0, 0])
            acc[0] += v
            acc[1] += 1
        want.update((t, (k, a, n)) for k, (a, n) in totals.items())
    assert Counter(pair for _, got in results for pair in got) == want
    peers = len(results)
    for index, got in results:  # each key folded on the worker its key names
        assert all(crc(k) % peers == index for _, (k, _, _) in got)


def remembering(k: str, v: int, total: int) -> tuple[int | None, list[Any]]:
    total += v
    return (None if total > 20 else total), [(k, total)]  # past 20: forgotten


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.dictionaries(keys, st.integers(0, 9), max_size=5), min_size=1, max_size=8),
    configs,
)
def test_state_machine_applies_each_key_s_values_in_time_order(
    epochs: list[dict[str, int]], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> list[Any]:
        stream = s.from_epochs([sorted(e.items()) for e in epochs])
        return stream.state_machine(remembering, key=crc, init=int).collect()

    results = naiad.run(build, **config)
    states: dict[str, int] = {}
    want: Counter[Any] = Counter()
    for t, values in enumerate(epochs):  # one value per key and time: order within a time
        for k, v in values.items():  # cannot matter
            state, out = remembering(k, v, states.get(k, 0))
            if state is None:
                states.pop(k, None)
            else:
                states[k] = state
            want.update((t, o) for o in out)
    assert Counter(pair for got in results for pair in got) == want


async def test_a_later_time_that_arrives_first_waits_for_the_earlier_one() -> None:
    def history(k: str, v: int, seen: tuple[int, ...]) -> tuple[Any, list[Any]]:
        return (*seen, v), [(k, (*seen, v))]

    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> tuple[Any, Any, list[Any]]:
            (early, a), (late, b) = s.new_input(), s.new_input()
            out = a.concat(b).state_machine(history, key=crc, init=tuple)
            return early, late, out.collect()

        df = rt.dataflow(build)
        ((early, late, out),) = df.results
        early.advance_to(2)
        early.send([("k", 10)])  # at time 2, while the other input is still at time 0
        late.advance_to(1)
        await asyncio.sleep(0.05)
        late.send([("k", 1)])  # at time 1
        early.close()
        late.close()
        await asyncio.wait_for(df.finished(), 10)
    assert out == [(1, ("k", (1,))), (2, ("k", (1, 10)))]


@pytest.mark.parametrize("operator", ["aggregate", "state_machine"])
def test_misuse_names_the_operator(operator: str) -> None:
    def use(stream: naiad.Stream, **changes: Any) -> naiad.Stream:
        if operator == "aggregate":
            args = {"fold": lambda k, v, a: a, "emit": lambda k, a: a, "key": crc, **changes}
            return stream.aggregate(name="Op", **args)
        args = {"f": lambda k, v, s: (s, []), "key": crc, **changes}
        return stream.state_machine(name="Op", **args)

    with pytest.raises(TypeError, match="'Op': records must be \\(key, value\\) pairs, not 5"):
        naiad.run(lambda s: use(s.from_epochs([[5]])).collect())
    with pytest.raises(TypeError, match="'Op': key must be a function of a record's key"):
        naiad.run(lambda s: use(s.from_epochs([[5]]), key=7))
    with pytest.raises(TypeError, match="'Op': init must be a function, not 0"):
        naiad.run(lambda s: use(s.from_epochs([[5]]), init=0))


def test_a_transition_that_returns_no_pair_is_refused() -> None:
    with pytest.raises(TypeError, match="state_machine 'M': f must return \\(new state, outputs"):
        naiad.run(
            lambda s: (
                s.from_epochs([[("k", 1)]])
                .state_machine(lambda k, v, st: v, key=crc, name="M")
                .collect()
            )
        )


def test_outputs_that_are_no_iterable_are_named() -> None:
    """A transition returning ``(state, None)`` failed with a bare "'NoneType' object is not
    iterable"; a TypeError raised while its outputs are iterated is still the user's own."""

    def run(outputs: Any) -> Any:
        return naiad.run(
            lambda s: (
                s.from_epochs([[("k", 1)]])
                .state_machine(lambda k, v, st: (st, outputs()), key=crc, name="M")
                .collect()
            )
        )

    says = (
        "state_machine 'M': f('k', value, state) (its outputs, second in the pair) must "
        "return an iterable, not "
    )
    for outputs, shown in [(None, "None"), (5, "5")]:
        with pytest.raises(TypeError) as info:
            run(lambda outputs=outputs: outputs)
        assert str(info.value) == says + shown

    def failing() -> Any:
        yield 1
        raise TypeError("the user's own")

    with pytest.raises(TypeError) as info:
        run(failing)
    assert str(info.value) == "the user's own"


async def test_a_frontier_move_costs_the_times_it_releases_not_every_stashed_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One input runs N times ahead of the other, then the other catches up one time at a
    # time. The stash used to be scanned whole (a less_than per stashed time) at every move:
    # N**2 / 2 tests. The answer is checked against a plain-Python oracle too.
    n = 400
    tests = 0
    less_than = naiad.MutableAntichain.less_than

    def counted(self: naiad.MutableAntichain, t: Any) -> bool:
        nonlocal tests
        tests += 1
        return less_than(self, t)

    monkeypatch.setattr(naiad.MutableAntichain, "less_than", counted)

    def total(k: int, v: int, state: int) -> tuple[int, list[int]]:
        return state + v, [state + v]

    async with naiad.Runtime() as rt:

        def build(s: naiad.Scope) -> tuple[Any, Any, Any, list[Any]]:
            (ahead, a), (behind, b) = s.new_input(), s.new_input()
            out = a.concat(b).state_machine(total, key=lambda k: 0, init=int)
            return ahead, behind, out.probe(), out.collect()

        ((ahead, behind, probe, out),) = rt.dataflow(build).results
        for t in range(n):
            ahead.send([(0, 1)])
            ahead.advance_to(t + 1)
        ahead.close()
        await asyncio.sleep(0.05)  # all of it stashed
        for t in range(n):
            behind.send([(0, 1000)])  # after the stashed value of its time
            behind.advance_to(t + 1)
            await probe.wait(t)
        behind.close()
    want = [(t, v) for t in range(n) for v in (1001 * t + 1, 1001 * (t + 1))]
    assert sorted(out) == want
    assert tests < 20 * n


@pytest.mark.parametrize("operator", ["aggregate", "state_machine"])
@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (2, 2)])
def test_a_send_holding_a_record_that_is_no_pair_is_refused_on_every_layout(
    operator: str, layout: tuple[int, int]
) -> None:
    """The pairs are checked by the channel at the sender, on one worker as on several:
    the send raises naming the operator and the record, nothing of it is delivered (to the
    input's other consumer either), and later sends apply. (On one worker the operator used
    to fail the dataflow instead.)"""

    def use(stream: naiad.Stream) -> naiad.Stream:
        if operator == "aggregate":
            return stream.aggregate(
                lambda k, v, a: a + v, lambda k, a: (k, a), key=crc, init=int, name="Op"
            )
        return stream.state_machine(lambda k, v, s: (s + v, [(k, s + v)]), crc, int, name="Op")

    async def main() -> tuple[list[Any], list[Any]]:
        workers, processes = layout
        async with naiad.Runtime(workers, processes=processes) as rt:

            def build(s: naiad.Scope) -> Any:
                handle, stream = s.new_input()
                return handle, stream.collect(), use(stream).collect()

            df = rt.dataflow(build)
            handle = df.results[0][0]
            for h, *_ in df.results[1:]:
                h.close()
            handle.send([("a", 1), ("b", 2)])
            with pytest.raises(TypeError, match="'Op': records must be \\(key, value\\) pairs"):
                handle.send([("a", 10), ("a", 3, 4), ("b", 20)])
            handle.advance_to(1)
            handle.send([("a", 5)])
            handle.close()
            await asyncio.wait_for(df.finished(), 30)
        return [r for _, raw, _ in df.results for r in raw], [
            r for *_, out in df.results for r in out
        ]

    raw, out = asyncio.run(main())
    assert Counter(raw) == Counter([(0, ("a", 1)), (0, ("b", 2)), (1, ("a", 5))])
    if operator == "aggregate":
        assert Counter(out) == Counter([(0, ("a", 1)), (0, ("b", 2)), (1, ("a", 5))])
    else:
        assert Counter(out) == Counter([(0, ("a", 1)), (0, ("b", 2)), (1, ("a", 6))])
