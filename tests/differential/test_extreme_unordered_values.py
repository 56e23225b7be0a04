"""min and max over values Python cannot order name the operator, the key and the values.

A key's values in an ``object`` column are compared in Python; ``None`` beside an int, or an
int beside a string, failed with a bare "'<' not supported between instances of 'int' and
'NoneType'" that named neither the key nor the values (the operator only in a note). The error
now names them, on that failure path only.
"""

from __future__ import annotations

from typing import Any

import pytest

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

UNORDERED = [
    ([1, None], "1 and None|None and 1"),
    (["a", 2], "'a' and 2|2 and 'a'"),
    ([(1, None), (1, 2)], r"\(1, None\) and \(1, 2\)|\(1, 2\) and \(1, None\)"),
]


@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (4, 1)])
@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize(("values", "pair"), UNORDERED)
def test_unordered_values_name_the_key_and_two_of_them(
    values: list[Any], pair: str, op: str, layout: tuple[int, int]
) -> None:
    epochs = [
        [(("ok", 3), 1), (("ok", 4), 1)]
        + [((("k", 7), *v) if isinstance(v, tuple) else (("k", 7), v), 1) for v in values]
    ]
    with pytest.raises(
        TypeError,
        match=rf"^{op}: the values of key \('k', 7\) cannot be ordered: "
        rf"({pair}) \('[<>]' not supported",
    ) as info:
        ref.run(lambda s: getattr(Collection.from_epochs(s, epochs), op)().changes(), layout)
    assert f"operator '{op}'" in "".join(getattr(info.value, "__notes__", []))
    assert naiad.run(lambda s: s.from_epochs([[1]]).collect()) == [[(0, 1)]]  # runs on


@pytest.mark.parametrize("layout", [(1, 1), (2, 1), (4, 1)])
@pytest.mark.parametrize("op", ["min", "max"])
def test_ordered_python_values_still_meet_the_oracle(op: str, layout: tuple[int, int]) -> None:
    epochs = [
        [(("a", "x"), 1), (("a", "y"), 1), (("b", "p", 2), 1), (("b", "p", 3), 1)],
        [(("a", "x"), -1), (("b", "p", 3), -1)],
    ]
    results = ref.run(lambda s: getattr(Collection.from_epochs(s, epochs), op)().changes(), layout)
    ref.check(results, ref.expect_unary(epochs, lambda c: ref.extreme(c, op == "max")))
