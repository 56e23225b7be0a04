"""A reduction whose output is NaN is refused by the reduction itself, on both of reduce's
paths: NaN is not equal to itself, so such an output could never be retracted. The Python
path for few rows let it out (to an ``inspect``, say) without a word. A count a reduce function
returns beyond int64 is named as such."""

from __future__ import annotations

from typing import Any

import pytest

from naiad.differential import Collection
from tests.differential import reference as ref


def nan_for_key_1(key: Any, values: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [(float("nan") if key == 1 else 0.5, 1)]


@pytest.mark.parametrize("layout", [(1, 1), (1, 1, False), (2, 1), (1, 2)])
@pytest.mark.parametrize(
    "reduction",
    [
        lambda c: c.reduce(nan_for_key_1, name="nan_reduce"),
        lambda c: c.reduce(lambda k, vs: [((k, float("nan")), 1)], name="nan_reduce"),
        lambda c: c.sum(name="nan_reduce"),  # inf + -inf
    ],
    ids=["float", "tuple", "sum"],
)
def test_a_nan_output_is_refused_by_the_reduction(reduction: Any, layout: Any) -> None:
    epochs = [[((1, 1e308), 2), ((1, -1e308), 2), ((2, 1.0), 1)]]
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        reduction(Collection.from_epochs(scope, epochs)).inspect(seen.append)

    with pytest.raises(ValueError, match="NaN") as info:
        ref.run(build, layout)
    assert any("nan_reduce" in note for note in getattr(info.value, "__notes__", []))
    assert not any(r[1] != r[1] for r, _, _ in seen), seen


@pytest.mark.parametrize("layout", [(1, 1), (1, 1, False), (1, 2)])
def test_a_count_beyond_int64_is_named(layout: Any) -> None:
    """A reduce function's count beyond int64 failed with numpy's bare 'Python int too large
    to convert to C long'."""

    def build(scope: Any) -> Any:
        Collection.from_epochs(scope, [[((1, "v"), 1)]]).reduce(lambda k, vs: [("a", 2**64)])

    with pytest.raises(OverflowError, match="reduce: f returned count 18446744073709551616"):
        ref.run(build, layout)


@pytest.mark.parametrize("layout", [(1, 1), (1, 1, False), (1, 2)])
@pytest.mark.parametrize(
    ("f", "error", "message"),
    [
        (lambda k, vs: [([k], 1)], TypeError, r"f returned the value \[1\] for key 1: .*hashable"),
        (lambda k, vs: [(float("nan"), 1)], ValueError, "f returned the value nan for key 1"),
        (lambda k, vs: [((k, float("nan")), 1)], ValueError, r"the value \(1, nan\) for key 1"),
    ],
    ids=["list", "nan", "nan-in-tuple"],
)
def test_a_bad_value_from_f_names_f_and_the_key(
    layout: Any, f: Any, error: Any, message: str
) -> None:
    """f's unhashable or NaN output was refused by the column built from it, naming neither
    f nor the key ('records in a collection must be hashable', 'a record field is NaN')."""

    def build(scope: Any) -> Any:
        Collection.from_epochs(scope, [[((1, "v"), 1)]]).reduce(f, name="bad_f")

    with pytest.raises(error, match=message) as info:
        ref.run(build, layout)
    assert any("bad_f" in note for note in getattr(info.value, "__notes__", []))
