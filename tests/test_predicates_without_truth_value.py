"""A predicate that returns something with no truth value (a numpy array of several elements,
an object whose ``bool()`` raises) is refused naming the operator, what the predicate returned
and the record (or time), in every operator that takes a predicate; the predicate's own errors
pass unchanged; truthy results of any kind still split records as ``bool()`` says."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection


class Undecided:
    def __bool__(self) -> bool:
        raise RuntimeError("undecided")

    def __repr__(self) -> str:
        return "Undecided()"


def pair(x: Any) -> Any:
    return np.array([x, 1])


BUILDS: dict[str, tuple[Callable[[naiad.Scope], Any], str]] = {
    "branch of a list": (
        lambda s: s.from_epochs([[5, 6]]).branch(pair, name="split")[0].collect(),
        r"branch 'split': predicate\(record\) .* not array\(\[5, 1\]\) \(ndarray, for record 5\)",
    ),
    "branch of an array": (
        lambda s: s.from_epochs([np.array([5, 6])]).branch(pair, name="split")[0].collect(),
        r"branch 'split': predicate\(record\) .* not array\(\[5, 1\]\) \(ndarray, for record",
    ),
    "filter of a list": (
        lambda s: s.from_epochs([[5, 6]]).filter(lambda x: Undecided(), name="keep").collect(),
        r"filter 'keep': predicate\(record\) .* not Undecided\(\) \(Undecided, for record 5\): "
        r"undecided",
    ),
    "filter of an array": (
        lambda s: s.from_epochs([np.array([5, 6])]).filter(pair, name="keep").collect(),
        r"filter 'keep': predicate\(record\) .* not array\(\[5, 1\]\)",
    ),
    "branch_when": (
        lambda s: s.from_epochs([[5], [6]]).branch_when(pair, name="early")[0].collect(),
        r"branch_when 'early': predicate\(time\) .* not array\(\[0, 1\]\) \(ndarray, for time 0\)",
    ),
    "Collection.filter": (
        lambda s: Collection.from_epochs(s, [[(5, 1)]]).filter(pair, name="keep").changes(),
        r"filter 'keep': predicate\(record\) .* not array\(\[5, 1\]\) \(ndarray, for record 5\)",
    ),
    "Arranged.filter": (
        lambda s: (
            Collection.from_epochs(s, [[((5, "a"), 1)]])
            .arrange_by_key()
            .filter(lambda k, v: pair(k), name="keep")
            .changes()
        ),
        r"filter 'keep': predicate\(key, value\) .* not array\(\[5, 1\]\) \(ndarray, for record "
        r"\(5, 'a'\)\)",
    ),
}


@pytest.mark.parametrize("case", list(BUILDS))
def test_a_result_with_no_truth_value_is_named(case: str) -> None:
    """Regression: numpy's 'The truth value of an array with more than one element is
    ambiguous' (or the object's own error), saying neither what returned it nor for what."""
    build, named = BUILDS[case]
    with pytest.raises(TypeError, match=named) as refused:
        naiad.run(build)
    assert "must return a truth value" in str(refused.value)


def test_the_predicates_own_errors_pass_unchanged() -> None:
    def predicate(x: Any) -> bool:
        raise ValueError(f"no verdict on {x}")

    for build in (
        lambda s: s.from_epochs([[5]]).branch(predicate)[0].collect(),
        lambda s: s.from_epochs([[5]]).filter(predicate).collect(),
    ):
        with pytest.raises(ValueError, match=r"^no verdict on 5\n"):
            naiad.run(build)


TRUTHY = st.one_of(st.integers(-2, 2), st.none(), st.text(max_size=1), st.lists(st.none()))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(), TRUTHY), max_size=20))
def test_any_truthy_result_splits_as_bool_says(records: list[tuple[int, Any]]) -> None:
    def build(s: naiad.Scope) -> Any:
        stream = s.from_epochs([records])
        yes, no = stream.branch(lambda r: r[1])
        return yes.collect(), no.collect(), stream.filter(lambda r: r[1]).collect()

    [(yes, no, kept)] = naiad.run(build)
    assert [r for _, r in yes] == [r for _, r in kept] == [r for r in records if r[1]]
    assert [r for _, r in no] == [r for r in records if not r[1]]
