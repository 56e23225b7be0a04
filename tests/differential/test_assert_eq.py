"""The testing helpers ``assert_eq`` and ``assert_empty``, and ``inspect_batch``, on random
histories: equal collections (the same changes split and ordered differently) pass; one
extra change fails at the epoch where the collections first differ, naming it and the
record; on 1 and 2 workers and 2 simulated processes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from tests.differential import reference as ref

FAST = settings(max_examples=15, deadline=None)
layouts = st.sampled_from([(1, 1), (2, 1), (2, 2)])
RECORDS = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]))


def rearranged(epochs: ref.Epochs) -> ref.Epochs:
    """The same changes per epoch, reversed, with every diff of 2 split in two."""
    out = []
    for changes in epochs:
        split = []
        for r, d in reversed(changes):
            split += [(r, 1), (r, 1)] if d == 2 else [(r, d)]
        out.append(split)
    return out


@FAST
@given(ref.histories(RECORDS, count=3), layouts)
def test_equal_collections_pass(epochs: Any, layout: Any) -> None:
    def build(scope: Any) -> Any:
        a = Collection.from_epochs(scope, epochs)
        b = Collection.from_epochs(scope, rearranged(epochs))
        a.assert_eq(b)
        a.concat(b.negate()).assert_empty()
        return a.changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(epochs, lambda a: a))


@FAST
@given(ref.histories(RECORDS, count=3), st.integers(0, 2), RECORDS, layouts)
def test_the_first_difference_is_named(epochs: Any, at: int, extra: Any, layout: Any) -> None:
    """``other`` gains one more ``extra`` at epoch ``at`` (and keeps it): the collections
    differ from ``at`` on, and the changes only at ``at``."""
    other = rearranged(epochs)
    other[at] = [*other[at], (extra, 1)]

    def build(scope: Any) -> None:
        Collection.from_epochs(scope, epochs).assert_eq(Collection.from_epochs(scope, other))

    with pytest.raises(AssertionError) as caught:
        ref.run(build, layout)
    message = str(caught.value)
    assert message.startswith(f"assert_eq: at time {at}, the collections differ: ")
    assert f"{extra!r}: -1}}" in message


@FAST
@given(ref.histories(RECORDS, count=3), layouts)
# on 4 workers, one whose records differ only at time 1 named it before the one at time 0
@example(
    epochs=[[((2, "b"), 1), ((0, "a"), -1), ((0, "b"), 2)], [((3, "b"), 1)], []], layout=(2, 2)
)
def test_assert_empty_fails_at_the_first_time_the_collection_is_not_empty(
    epochs: Any, layout: Any
) -> None:
    first = next(
        (e for e in range(len(epochs)) if ref.accumulated(epochs, e)), None
    )  # the first epoch after which the collection holds something

    def build(scope: Any) -> None:
        Collection.from_epochs(scope, epochs).assert_empty()

    if first is None:
        ref.run(build, layout)
        return
    with pytest.raises(AssertionError, match=f"^assert_empty: at time {first}, the collection"):
        ref.run(build, layout)


def test_a_long_difference_is_cut_short() -> None:
    def build(scope: Any) -> None:
        Collection.from_epochs(scope, [[(i, 1) for i in range(8)]]).assert_empty()

    with pytest.raises(AssertionError, match=r"\{0: \+1, 1: \+1, 2: \+1, 3: \+1, 4: \+1, \.\.\. "):
        naiad.run(build)


def test_assert_eq_refuses_what_is_not_a_collection() -> None:
    def build(scope: Any) -> None:
        c = Collection.from_epochs(scope, [[(1, 1)]])
        c.assert_eq(c.arrange_by_key())  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="assert_eq: other must be a Collection, not Arranged"):
        naiad.run(build)


@FAST
@given(ref.histories(RECORDS, count=3), layouts)
def test_inspect_batch_sees_every_update_once_at_or_after_its_message(
    epochs: Any, layout: Any
) -> None:
    seen: list[tuple[Any, list[Any]]] = []

    def build(scope: Any) -> Any:
        c = Collection.from_epochs(scope, epochs)
        later = c.map(lambda r: r).inspect_batch(lambda t, batch: seen.append((t, batch)))
        return later.changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_unary(epochs, lambda a: a))
    total: Counter = Counter()
    for message_time, batch in seen:
        assert batch, "an empty batch was inspected"
        for r, t, d in batch:
            assert t == message_time  # from_epochs sends each epoch's updates at that epoch
            total[(r, t)] += d
    want: Counter = Counter()
    for e, changes in enumerate(epochs):
        for r, d in changes:
            want[(r, e)] += d
    assert ref.clean(total) == ref.clean(want)


def test_inspect_batch_shows_update_times_after_the_message_time() -> None:
    async def main() -> Any:
        seen: list[Any] = []

        def build(scope: Any) -> Any:
            session, c = Collection.new_input(scope)
            c.inspect_batch(lambda t, batch: seen.append((t, batch)))
            return session

        async with naiad.Runtime(1) as rt:
            session = rt.dataflow(build).results[0]
            session.advance_to(2)
            session.update_at("b", 4, 2)
            session.insert("a")
            session.close()
        return seen

    assert ref.watchdog(main()) == [(2, [("b", 4, 2), ("a", 2, 1)])]


@pytest.mark.parametrize(
    ("f", "message"),
    [
        (5, r"inspect_batch: f must be a function, not 5"),
        (lambda x: x, r"inspect_batch: f\(time, updates\) is called with 2 arguments"),
    ],
)
def test_inspect_batch_checks_its_function_when_built(f: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        naiad.run(lambda s: Collection.from_epochs(s, [[(1, 1)]]).inspect_batch(f))
