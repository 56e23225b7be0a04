"""``ok_err`` and ``branch_when`` against plain-Python oracles, on 1 and 2 workers and 2
simulated processes: every record on exactly one of the two outputs, at its own time."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}]
configs = st.sampled_from(CONFIGS)
epochs_of_ints = st.lists(st.lists(st.integers(-50, 50), max_size=12), min_size=1, max_size=6)


def checked(x: int) -> tuple[str, Any]:
    return ("ok", x * 2) if x % 3 else ("err", f"bad {x}")


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, configs)
def test_ok_err_sends_values_and_errors_apart(
    epochs: list[list[int]], config: dict[str, int]
) -> None:
    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        oks, errs = s.from_epochs(epochs).exchange(lambda x: x).ok_err(checked)
        return oks.collect(), errs.collect()

    results = naiad.run(build, **config)
    oks = Counter(pair for got, _ in results for pair in got)
    errs = Counter(pair for _, got in results for pair in got)
    assert oks == Counter((t, x * 2) for t, xs in enumerate(epochs) for x in xs if x % 3)
    assert errs == Counter((t, f"bad {x}") for t, xs in enumerate(epochs) for x in xs if not x % 3)


@settings(max_examples=20, deadline=None)
@given(epochs_of_ints, st.sets(st.integers(0, 5)), configs)
def test_branch_when_splits_whole_batches_by_their_time(
    epochs: list[list[int]], chosen: set[int], config: dict[str, int]
) -> None:
    calls: list[int] = []

    def when(t: int) -> bool:
        calls.append(t)
        return t in chosen

    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        yes, no = s.from_epochs(epochs).exchange(lambda x: x).branch_when(when)
        return yes.collect(), no.collect()

    results = naiad.run(build, **config)
    yes = Counter(pair for got, _ in results for pair in got)
    no = Counter(pair for _, got in results for pair in got)
    everything = Counter((t, x) for t, xs in enumerate(epochs) for x in xs)
    assert yes == Counter({p: n for p, n in everything.items() if p[0] in chosen})
    assert no == Counter({p: n for p, n in everything.items() if p[0] not in chosen})
    assert len(calls) <= sum(1 for xs in epochs if xs) * len(results) ** 2  # per batch


def test_branch_when_passes_arrays_whole_and_sees_loop_times() -> None:
    kinds: list[type] = []

    def build(s: naiad.Scope) -> tuple[list[Any], list[Any]]:
        nums = s.from_epochs([np.array([3, 1])])
        with s.iterative() as loop:
            handle, cycle = loop.feedback()
            body = nums.enter(loop).concat(cycle)
            body.map_batch(lambda b: b[b > 0] - 1).connect_loop(handle)
            even, odd = body.branch_when(lambda t: t.inner % 2 == 0)
            even.inspect_batch(lambda t, b: kinds.append(type(b)))
        return even.leave().map(int).collect(), odd.leave().map(int).collect()

    ((even, odd),) = naiad.run(build)
    assert sorted(even) == [(0, 1), (0, 1), (0, 3)]  # iterations 0 ([3, 1]) and 2 ([1])
    assert sorted(odd) == [(0, 0), (0, 0), (0, 2)]  # iterations 1 ([2, 0]) and 3 ([0])
    assert set(kinds) == {np.ndarray}


@pytest.mark.parametrize(
    ("result", "says"),
    [(5, "not 5"), (("fine", 5), "not ('fine', 5)"), (("ok", 1, 2), "not ('ok', 1, 2)")],
)
def test_ok_err_names_a_result_that_is_not_a_tagged_pair(result: Any, says: str) -> None:
    with pytest.raises(TypeError) as info:
        naiad.run(lambda s: s.from_epochs([[7]]).ok_err(lambda x: result, name="Parse")[0])
    message = str(info.value)
    assert "ok_err 'Parse'" in message and says in message and "for record 7" in message


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: s.ok_err("f"), r"ok_err 'ok_err': f must be a function, not 'f'"),
        (lambda s: s.branch_when(1), r"branch_when 'branch_when': predicate must be a function"),
        (lambda s: s.branch(None), r"branch 'branch': predicate must be a function, not None"),
    ],
)
def test_arguments_that_are_not_functions_are_refused_while_building(
    build: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        naiad.run(lambda s: build(s.from_epochs([[1]])))


def test_raising_functions_are_named() -> None:
    def boom(x: Any) -> Any:
        raise ZeroDivisionError("boom")

    for build in (
        lambda s: s.ok_err(boom, name="Named")[0].collect(),
        lambda s: s.branch_when(boom, name="Named")[0].collect(),
    ):
        with pytest.raises(ZeroDivisionError) as info:
            naiad.run(lambda s, build=build: build(s.from_epochs([[1]])))
        assert any("'Named'" in note for note in info.value.__notes__)
