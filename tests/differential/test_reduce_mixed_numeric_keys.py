"""Reductions whose keys are numbers of several types in different batches: a float key
``2.5`` (or an int ``2``) evaluated beside keys whose output history was written as ints (or
bools) keeps its value.

A spine holds integer and float batches side by side in one numeric column (exact up to
2**53), so a reduce's new output keys can be floats while the output history gathered
beside them holds ints. The vectorized path cast the new keys to the history's type: ``2.5``
became ``2`` and ``2`` became ``True``, so the change for the new key cancelled the
retraction of another key's old output (``count`` read ``(2, 1)`` and ``(2, 2)`` both at
once, and ``2.5`` was never counted). Checked against plain-Python recomputation at every
epoch, on both of reduce's paths (``reference.layouts``' small flag) and on the default path
with enough rows to take the vectorized one.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

# keys of one numeric type per epoch (a batch of one type), the types differing by epoch
KEY_TYPES = st.sampled_from([int, float, bool])
NUMBERS = st.sampled_from([0, 1, 2, 2.5])


def typed(kind: type, x: float) -> Any:
    """``x`` as a ``kind`` (a bool: whether it is positive), or as it is if it is no int."""
    if kind is bool:
        return x > 0
    return kind(x) if x == int(x) else x


@st.composite
def histories(draw: Any) -> ref.Epochs:
    """Epochs of ``((key, value), diff)`` changes, each epoch's keys of one numeric type."""
    out: ref.Epochs = []
    for _ in range(draw(st.integers(2, 4))):
        kind = draw(KEY_TYPES)
        changes = draw(
            st.lists(
                st.tuples(st.tuples(NUMBERS, st.integers(0, 1)), st.sampled_from([1, 1, -1])),
                max_size=6,
            )
        )
        out.append([((typed(kind, k), v), d) for (k, v), d in changes])
    return out


def total_per_key(a: Counter) -> Counter:
    return Counter({(k, sum(c for _, c in vs)): 1 for k, vs in ref.by_key(a).items()})


def per_key(key: Any, values: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    return [(sum(c for _, c in values), 1)]


@settings(max_examples=60, deadline=None)
@given(histories(), ref.layouts)
@example([[((2, 0), 1)], [((2.0, 0), 1), ((2.5, 0), 1)]], (1, 1, False))  # 2.5 read as 2
@example([[((True, 0), 1)], [((1, 0), 1), ((2, 0), 1)]], (1, 1, False))  # 2 read as True
def test_reductions_keep_keys_of_a_type_their_output_history_lacks(
    history: ref.Epochs, layout: Any
) -> None:
    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, history)
        return (
            c.count().changes(),
            c.distinct().changes(),
            c.threshold(ref.capped).changes(),
            c.sum().changes(),
            c.max().changes(),
            c.reduce(per_key).changes(),
        )

    results = ref.run(build, layout)
    expected = [
        ref.count,
        ref.distinct,
        ref.capped_threshold,
        ref.sum_,
        lambda a: ref.extreme(a, True),
        total_per_key,
    ]
    for i, f in enumerate(expected):
        ref.check([r[i] for r in results], ref.expect_unary(history, f))


def test_a_float_key_beside_an_int_history_on_the_default_path() -> None:
    """The case found, with no setting changed: 100 int keys counted, then counted again
    beside the float key 2.5 (more rows than reduce evaluates in Python, SMALL_ROWS)."""
    history: ref.Epochs = [
        [(i, 1) for i in range(100)],
        [(i, 1) for i in range(100)] + [(2.5, 1)],
    ]
    for build, f in [
        (lambda s: Collection.from_epochs(s, history).count().changes(), ref.count),
        (lambda s: Collection.from_epochs(s, history).distinct().changes(), ref.distinct),
    ]:
        ref.check(naiad.run(build), ref.expect_unary(history, f))
