"""Records come back as the values that went in, type included: a bool stays a bool (not
an equal 0 or 1), on every layout and on both of reduce's paths. Counters compare
``False == 0``, so the oracle here compares records with their types."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.differential import Collection
from tests.differential import reference as ref

# one type per column (a column mixing numbers of several types holds them as one type)
VALUE_KINDS = {
    "bool": st.booleans(),
    "str": st.sampled_from(["", "a", "é"]),
    "bytes": st.sampled_from([b"", b"\x00", b"z"]),
    # ints no float equals: the process's dictionary of Python values merges equal values
    # (an earlier test's 3.0 would turn -3 into a float here, whatever this test does)
    "huge": st.sampled_from([-(2**70) - 1, -(2**53) - 1, 2**63 + 1, 2**64 + 1]),
}
OPERATORS = {
    "distinct": (Collection.distinct, ref.distinct),
    "count": (Collection.count, ref.count),
    "min": (Collection.min, lambda m: ref.extreme(m, False)),
    "max": (Collection.max, lambda m: ref.extreme(m, True)),
}


def typed(record: Any) -> Any:
    """A record with the type of every field beside it (``True`` and ``1`` differ)."""
    return tuple((type(f).__name__, f) for f in ref.fields(record))


def typed_counts(c: Counter) -> Counter:
    return Counter({typed(r): n for r, n in c.items()})


@settings(max_examples=25, deadline=None)
@given(
    st.data(),
    st.sampled_from(sorted(OPERATORS)),
    st.sampled_from([(1, 1), (2, 1), (1, 2)]),
    st.booleans(),
)
def test_reduce_outputs_keep_the_types_of_their_values(
    data: Any, op: str, layout: tuple[int, int], small: bool
) -> None:
    """Regression: a key whose output was empty so far (its count negative, or retracted)
    came back with a bool value as an int: distinct of (False, False) retracted at epoch 0
    and inserted at epoch 1 gave (False, 0) (the empty output history's int64 placeholder
    columns widened the bool column)."""
    values = VALUE_KINDS[data.draw(st.sampled_from(sorted(VALUE_KINDS)))]
    epochs = data.draw(ref.histories(st.tuples(st.booleans(), values)))
    operator, oracle = OPERATORS[op]
    results = ref.run(
        lambda s: operator(Collection.from_epochs(s, epochs)).changes(), (*layout, small)
    )
    got = ref.accumulate_changes(results, len(epochs))
    for e, g in enumerate(got):
        want = oracle(ref.accumulated(epochs, e))
        assert typed_counts(g) == typed_counts(ref.clean(want)), f"epoch {e}"


def test_a_retracted_bool_record_comes_back_as_a_bool() -> None:
    epochs = [[((False, False), -1)], [((False, False), 2)]]
    results = ref.run(lambda s: Collection.from_epochs(s, epochs).distinct().changes(), (1, 1))
    assert [typed(r) for r, _, _ in ref.flatten(results)] == [typed((False, False))]
