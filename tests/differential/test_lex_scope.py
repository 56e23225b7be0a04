"""Collections inside a loop scope whose time is ``Lex`` (lexicographic, seed 002 §5.1.2):
arrangements hold capabilities, bucket pending updates and seal batches by ``Lex``
timestamps, and reduce takes its vectorized path (its Python path is for product times
only). Entering at counter 0 and leaving again must change nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from naiad.differential import Collection, Variable
from naiad.progress import Lex
from tests.differential import reference as ref
from tests.differential.reference import histories, layouts

RECORDS = st.tuples(ref.INT_KEYS, st.integers(0, 3))


@settings(max_examples=25, deadline=None)
@given(histories(RECORDS), histories(RECORDS), layouts)
def test_count_min_and_join_inside_a_lex_scope(a: Any, b: Any, layout: Any) -> None:
    epochs = max(len(a), len(b))
    a = a + [[] for _ in range(epochs - len(a))]
    b = b + [[] for _ in range(epochs - len(b))]

    def build(scope: Any) -> Any:
        loop = scope.iterative("lex", time_class=Lex)
        left = Collection.from_epochs(scope, a).enter(loop)
        right = Collection.from_epochs(scope, b).enter(loop)
        return (
            left.count().leave().changes(),
            left.min().leave().changes(),
            left.join(right).leave().changes(),
        )

    results = ref.run(build, layout)
    ref.check([r[0] for r in results], ref.expect_unary(a, ref.count))
    ref.check([r[1] for r in results], ref.expect_unary(a, lambda m: ref.extreme(m, False)))
    ref.check([r[2] for r in results], ref.expect_binary(a, b, ref.join))


@st.composite
def growing(draw: Any, items: Any, epochs: int) -> Any:
    """Insertions only: each item added once, at a drawn epoch."""
    chosen = draw(st.lists(items, unique=True, max_size=8))
    at = [draw(st.integers(0, epochs - 1)) for _ in chosen]
    return [[(x, 1) for x, e in zip(chosen, at, strict=True) if e == i] for i in range(epochs)]


def graphs(min_epochs: int) -> Any:
    """Growing ``(roots, edges)`` histories over ``min_epochs`` to 3 epochs."""
    return st.integers(min_epochs, 3).flatmap(
        lambda n: st.tuples(
            growing(st.integers(0, 5), n),
            growing(st.tuples(st.integers(0, 5), st.integers(0, 5)), n),
        )
    )


@settings(max_examples=25, deadline=None)
@given(graphs(1), layouts)
def test_reachability_iterated_in_a_lex_loop(graph: Any, layout: Any) -> None:
    """Insertions only: with (epoch, iteration) ordered lexicographically, each epoch starts
    from the previous epoch's fixed point, which for a monotone fixed point is correct (so
    are product times: this checks that the ``Lex`` code paths of capabilities, arrangements,
    reduce and compaction run and agree, not which order is used; a wrong ``Lex`` comparison
    in the lattice fails it)."""
    roots, edges = graph

    def build(scope: Any) -> Any:
        r, e = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)
        loop = scope.iterative("lex", time_class=Lex)
        r_in, e_in = r.enter(loop), e.enter(loop)
        var = Variable(loop, r_in)
        step = var.collection.join(e_in).map(lambda rec: rec[1]).concat(r_in).distinct()
        return var.set(step).leave().changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_binary(roots, edges, ref.reach))


@settings(max_examples=25, deadline=None)
@given(graphs(2), layouts)
def test_a_lex_loop_nested_in_a_product_loop(graph: Any, layout: Any) -> None:
    """Regression: inside an ordinary loop a ``Lex`` time's outer part is a ``Product``, and
    two of them can be incomparable; compacting to a frontier holding both took their meet,
    which does not exist (ValueError in the arrangement, once two epochs were in flight)."""
    roots, edges = graph

    def build(scope: Any) -> Any:
        r, e = Collection.from_epochs(scope, roots), Collection.from_epochs(scope, edges)

        def outer(x: Collection) -> Collection:
            inner = x.scope.iterative("lex", time_class=Lex)
            x_in, e_in = x.enter(inner), e.enter(inner)
            var = Variable(inner, x_in)
            step = var.collection.join(e_in).map(lambda rec: rec[1]).concat(x_in).distinct()
            return var.set(step).leave()

        return r.iterate(outer).changes()

    results = ref.run(build, layout)
    ref.check(results, ref.expect_binary(roots, edges, ref.reach))
