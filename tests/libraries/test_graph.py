"""The graph library against networkx: random graphs, batch and after random sequences of
edge insertions and deletions (every epoch checked), on 1 and 2 workers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naiad
from naiad.differential import Collection
from naiad.differential.arrange import ArrangeVertex
from naiad.differential.lanes import ArrangeLanes
from naiad.libraries import graph

NODES = 8
EDGE = st.tuples(st.integers(0, NODES - 1), st.integers(0, NODES - 1))
FAST = settings(max_examples=12, deadline=None)
layouts = st.sampled_from([1, 2])


@st.composite
def edge_histories(draw: Any) -> list[list[tuple[tuple[int, int], int]]]:
    """Epochs of edge changes: insertions of new edges and deletions of present ones."""
    present: set[tuple[int, int]] = set()
    epochs = []
    for _ in range(draw(st.integers(1, 4))):
        changes = []
        for edge in draw(st.lists(EDGE, max_size=6, unique=True)):
            if edge in present:
                present.discard(edge)
                changes.append((edge, -1))
            else:
                present.add(edge)
                changes.append((edge, 1))
        epochs.append(changes)
    return epochs


NODE_KINDS = st.sampled_from(["int", "str", "tuple", "wide"])


def relabelled(kind: str) -> Any:
    """Node ``n`` as a value of ``kind``: tuples and strings are dictionary-encoded (and a
    collection of tuple nodes, such as the roots, holds them as single values); ints beyond
    int64 are Python objects."""
    if kind == "str":
        return lambda n: f"v{n}"
    if kind == "tuple":
        return lambda n: (n % 3, f"v{n}")
    if kind == "wide":  # small ints, int64's largest, and ints from 2**63 on (uint64's)
        return lambda n: n if n < 2 else 2**63 - n + 1 if n < 5 else 2**63 + n
    return lambda n: n


def relabel_epochs(epochs: Any, node: Any) -> Any:
    return [[((node(a), node(b)), d) for (a, b), d in changes] for changes in epochs]


def graphs_at(epochs: list[list[tuple[tuple[int, int], int]]]) -> list[nx.DiGraph]:
    out, edges = [], set()
    for changes in epochs:
        for edge, diff in changes:
            (edges.add if diff > 0 else edges.discard)(edge)
        g = nx.DiGraph()
        g.add_nodes_from(n for e in edges for n in e)
        g.add_edges_from(edges)
        out.append(g)
    return out


def accumulate(per_worker: list[list[tuple[Any, int, int]]], epochs: int) -> list[Counter[Any]]:
    changes = [c for worker in per_worker for c in worker]
    out = []
    for e in range(epochs):
        total: Counter[Any] = Counter()
        for record, time, diff in changes:
            if time <= e:
                total[record] += diff
        out.append(+total)
    return out


def run(build: Any, epochs: int, workers: int) -> list[Counter[Any]]:
    return accumulate(naiad.run(build, workers=workers), epochs)


def components(g: nx.DiGraph) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for comp in nx.weakly_connected_components(g):
        for node in comp:
            out[(node, min(comp))] = 1
    return out


@FAST
@given(edge_histories(), layouts, st.booleans(), NODE_KINDS)
def test_wcc(epochs: Any, workers: int, prioritized: bool, kind: str) -> None:
    if prioritized and kind in ("str", "tuple"):
        kind = "int"  # priorities are computed from integer labels
    epochs = relabel_epochs(epochs, relabelled(kind))
    got = run(
        lambda s: graph.wcc(Collection.from_epochs(s, epochs), prioritized).changes(),
        len(epochs),
        workers,
    )
    assert got == [components(g) for g in graphs_at(epochs)]


def arrangements(scope: Any) -> int:
    """Arrangements by key or by whole record, and by record (a ``distinct``'s lanes)."""
    kinds = (ArrangeVertex, ArrangeLanes)
    return sum(isinstance(op.logic, kinds) for op in scope.build.operators)


@FAST
@given(edge_histories(), layouts, NODE_KINDS, st.booleans())
def test_reachability_and_bfs(epochs: Any, workers: int, kind: str, shared: bool) -> None:
    """``shared``: both read one index of the edges present (K-Pg's shared index,
    ``graph.edge_index``), built before them: they build only the arrangements of their own
    loops."""
    node = relabelled(kind)
    epochs, root = relabel_epochs(epochs, node), node(0)

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, epochs)
        roots = Collection.from_epochs(scope, [[(root, 1)]])
        index = graph.edge_index(edges) if shared else edges
        before = arrangements(scope)
        out = graph.reachability(index, roots).changes(), graph.bfs(index, roots).changes()
        return *out, arrangements(scope) - before

    results = naiad.run(build, workers=workers)
    # the roots' set, the loop variable's join side and distinct (reach) or min (bfs); and
    # unless shared, each its own presence step's arrangement and index of the edges
    assert {r[2] for r in results} == {6 if shared else 10}
    reach = accumulate([r[0] for r in results], len(epochs))
    hops = accumulate([r[1] for r in results], len(epochs))
    for e, g in enumerate(graphs_at(epochs)):
        dist = nx.single_source_shortest_path_length(g, root) if root in g else {root: 0}
        assert reach[e] == Counter({n: 1 for n in dist})
        assert hops[e] == Counter({(n, d): 1 for n, d in dist.items()})


@FAST
@given(edge_histories(), layouts, st.sampled_from([1, 2**60]))
def test_shortest_paths(epochs: Any, workers: int, scale: int) -> None:
    """Weights of ``scale`` 2**60 make distances that leave int64."""

    def weight(a: int, b: int) -> int:
        return ((a * 5 + b * 3) % 4 + 1) * scale

    weighted = [[((a, b, weight(a, b)), d) for (a, b), d in changes] for changes in epochs]

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, weighted)
        roots = Collection.from_epochs(scope, [[(0, 1)]])
        return graph.shortest_paths(edges, roots).changes()

    got = run(build, len(epochs), workers)
    for e, g in enumerate(graphs_at(epochs)):
        for a, b in g.edges:
            g.edges[a, b]["weight"] = weight(a, b)
        dist = nx.single_source_dijkstra_path_length(g, 0) if 0 in g else {0: 0}
        assert got[e] == Counter({(n, d): 1 for n, d in dist.items()})


@FAST
@given(edge_histories(), layouts)
def test_scc(epochs: Any, workers: int) -> None:
    got = run(
        lambda s: graph.scc(Collection.from_epochs(s, epochs)).changes(), len(epochs), workers
    )
    for e, g in enumerate(graphs_at(epochs)):
        comp = {n: i for i, c in enumerate(nx.strongly_connected_components(g)) for n in c}
        assert got[e] == Counter({(a, b): 1 for a, b in g.edges if comp[a] == comp[b]})


@FAST
@given(edge_histories(), layouts)
def test_approximate_shortest_paths(epochs: Any, workers: int) -> None:
    landmarks = [0, 3]
    queries = [(1, 2), (4, 5), (0, 7)]

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, epochs)
        marks = Collection.from_epochs(scope, [[(m, 1) for m in landmarks]])
        asks = Collection.from_epochs(scope, [[(q, 1) for q in queries]])
        return graph.approximate_shortest_paths(edges, marks, asks).changes()

    got = run(build, len(epochs), workers)
    for e, g in enumerate(graphs_at(epochs)):
        u = g.to_undirected()
        u.add_nodes_from(landmarks)
        dist = {m: nx.single_source_shortest_path_length(u, m) for m in landmarks}
        want: Counter[Any] = Counter()
        for a, b in queries:
            options = [dist[m][a] + dist[m][b] for m in landmarks if a in dist[m] and b in dist[m]]
            if options:
                want[(a, b, min(options))] = 1
        assert got[e] == want


@pytest.mark.parametrize("workers", [1, 2])
def test_pagerank_equals_networkx(workers: int) -> None:
    edges = [(i, (i * 3 + 1) % 7) for i in range(7)] + [(i, (i + 2) % 7) for i in range(7)]
    got = naiad.run(
        lambda s: graph.pagerank(Collection.from_epochs(s, [[(e, 1) for e in edges]]), 60).view(),
        workers=workers,
    )[0].at(0)
    ranks = {node: rank for (node, rank), count in got.items() if count}
    want = nx.pagerank(nx.DiGraph(edges), alpha=0.85, tol=1e-12, max_iter=500)
    assert ranks.keys() == want.keys()
    for node, rank in want.items():
        assert ranks[node] == pytest.approx(rank, abs=1e-6)


def test_distances_beyond_int64_are_exact() -> None:
    """Two hops of weight 2**62: the int64 sum wrapped to -2**63."""
    heavy = 2**62

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, [[((0, 1, heavy), 1), ((1, 2, heavy), 1)]])
        roots = Collection.from_epochs(scope, [[(0, 1)]])
        return graph.shortest_paths(edges, roots).changes()

    assert sorted(r for r, _, _ in naiad.run(build)[0]) == [(0, 0), (1, heavy), (2, 2 * heavy)]


@pytest.mark.parametrize("big", [2**63 - 1, 2**63 + 1, 2**64])
def test_prioritized_wcc_takes_ids_at_and_beyond_int64s_end(big: int) -> None:
    """1 + (2**63 - 1) wrapped (a NaN priority), and log2 failed on Python ints."""

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, [[((big, 5), 1), ((5, 6), 1)]])
        return graph.wcc(edges, prioritized=True).changes()

    assert sorted(r for r, _, _ in naiad.run(build)[0]) == [(5, 5), (6, 5), (big, 5)]


def test_tuple_node_ids_of_different_lengths() -> None:
    """Tuples of different lengths compare with each other, as node ids must; every keyed
    ``distinct`` and ``count`` of nodes (nodes, roots, reached sets, out-degrees) refused them:
    "records of different shapes (tuples of 2 and 3 fields, and single values) cannot be
    keyed". The answers must be the integer graph's, relabelled."""

    def ragged(n: int) -> tuple[int, ...]:
        return (n,) * (1 + n % 3)  # the order of the ints, as ids 0..9 are below 10

    changes = [[((0, 1), 1), ((1, 2), 1), ((2, 0), 1), ((3, 4), 1), ((4, 5), 1)], [((4, 5), -1)]]

    def algorithms(node: Any) -> Any:
        def build(scope: Any) -> Any:
            edges = Collection.from_epochs(scope, relabel_epochs(changes, node))
            roots = Collection.from_epochs(scope, [[(node(0), 1), (node(4), 1), (node(8), 1)]])
            asks = Collection.from_epochs(scope, [[((node(1), node(2)), 1)]])
            weighted = edges.map(lambda e: (e[0], e[1], 1))
            return [
                graph.wcc(edges).changes(),
                graph.reachability(edges, roots).changes(),
                graph.bfs(edges, roots).changes(),
                graph.shortest_paths(weighted, roots).changes(),
                graph.scc(edges).changes(),
                graph.approximate_shortest_paths(edges, roots, asks).changes(),
                graph.pagerank(edges, 3).changes(),
            ]

        return build

    def relabel(record: Any, nodes: int) -> Any:  # the first ``nodes`` fields are nodes
        if nodes == 0:
            return ragged(record)
        return tuple(ragged(x) if i < nodes else x for i, x in enumerate(record))

    for workers in (1, 2):
        got = naiad.run(algorithms(ragged), workers=workers)
        want = naiad.run(algorithms(lambda n: n), workers=workers)
        for i, nodes in enumerate([2, 0, 1, 1, 2, 2, 1]):  # node fields per algorithm's record
            g = accumulate([r[i] for r in got], len(changes))
            w = accumulate([r[i] for r in want], len(changes))
            assert g == [Counter({relabel(k, nodes): c for k, c in e.items()}) for e in w], i


@pytest.mark.parametrize("workers", [1, 2])
def test_parallel_edges_count_only_in_pagerank(workers: int) -> None:
    """As the module docstring says: a multiplicity above one is parallel edges, ignored by
    the other algorithms (partly retracted, or inserted and retracted in one epoch) and one
    more out-link each for pagerank."""
    changes = [
        [((0, 1), 3), ((1, 2), 2), ((2, 0), 2), ((1, 3), 1), ((3, 3), 2)],
        [((0, 1), -2), ((1, 2), -1), ((3, 4), 1), ((3, 4), -1), ((3, 3), -1), ((3, 1), 1)],
    ]

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, changes)
        roots = Collection.from_epochs(scope, [[(0, 1)]])
        return [
            graph.wcc(edges).changes(),
            graph.bfs(edges, roots).changes(),
            graph.scc(edges).changes(),
            graph.pagerank(edges, 8).changes(),
        ]

    results = naiad.run(build, workers=workers)
    wcc, hops, strong, ranks = (accumulate([r[i] for r in results], 2) for i in range(4))
    counts: Counter[Any] = Counter()
    for e, epoch in enumerate(changes):
        for edge, n in epoch:
            counts[edge] += n
        multi = nx.MultiDiGraph([edge for edge, n in counts.items() for _ in range(n)])
        simple = nx.DiGraph(multi)
        assert wcc[e] == components(simple)
        dist = nx.single_source_shortest_path_length(simple, 0)
        assert hops[e] == Counter({(n, d): 1 for n, d in dist.items()})
        comp = {n: i for i, c in enumerate(nx.strongly_connected_components(simple)) for n in c}
        assert strong[e] == Counter({(a, b): 1 for a, b in simple.edges if comp[a] == comp[b]})
        want = {n: 1 / len(multi) for n in multi}  # the docstring's 8 steps, parallel links
        for _ in range(8):
            step = {n: 0.15 / len(multi) for n in multi}
            for a, b in multi.edges():
                step[b] += 0.85 * want[a] / multi.out_degree(a)
            want = step
        got = {node: rank for node, rank in ranks[e]}
        assert got.keys() == want.keys()
        for node, rank in want.items():
            assert got[node] == pytest.approx(rank, rel=1e-12)


@pytest.mark.parametrize("algorithm", ["reachability", "bfs", "shortest_paths"])
def test_edges_arranged_by_whole_records_are_refused(algorithm: str) -> None:
    """Keys that are whole (src, dst) tuples match no node: the result was silently empty."""

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, [[((0, 1), 1)]])
        roots = Collection.from_epochs(scope, [[(0, 1)]])
        return getattr(graph, algorithm)(edges.arrange_by_self(), roots).changes()

    with pytest.raises(ValueError, match=r"arranged by whole records \(arrange_by_self\)"):
        naiad.run(build)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("edges", "named"),
    [
        ([(0, 1, 1), (1, 0, -2)], r"edge \(1, 0\) has weight -2"),  # a cycle of weight -1
        ([(0, 1, 5), (1, 2, -3), (0, 2, 4)], r"edge \(1, 2\) has weight -3"),
        ([(0, 1, 2**70), (1, 2, -(2**70))], r"edge \(1, 2\) has weight -1180591620717411303424"),
    ],
)
def test_negative_weights_are_refused_naming_the_edge(
    edges: list[tuple[int, int, int]], named: str, workers: int
) -> None:
    """The docstring asks for weights >= 0, but nothing checked it: a negative cycle lowered
    its distances every round and the loop never ended (the run hung), and a negative edge
    elsewhere gave distances silently."""

    def build(scope: Any) -> Any:
        weighted = Collection.from_epochs(scope, [[(e, 1) for e in edges]])
        roots = Collection.from_epochs(scope, [[(0, 1)]])
        return graph.shortest_paths(weighted, roots).changes()

    with pytest.raises(ValueError, match="shortest_paths: " + named + "; weights must be >= 0"):
        naiad.run(build, workers=workers)


@pytest.mark.parametrize(
    ("iterations", "alpha", "error", "named"),
    [
        (-1, 0.85, ValueError, r"iterations must be >= 0, not -1"),
        (3, 1.5, ValueError, r"alpha \(the damping factor\) must lie in \[0, 1\], not 1.5"),
        (3, -0.1, ValueError, r"alpha \(the damping factor\) must lie in \[0, 1\], not -0.1"),
        (
            3,
            float("nan"),
            ValueError,
            r"alpha \(the damping factor\) must lie in \[0, 1\], not nan",
        ),
        (2.0, 0.85, TypeError, r"iterations is a number of steps, an int, not 2.0"),
    ],
)
def test_pagerank_refuses_bad_parameters_naming_them(
    iterations: Any, alpha: float, error: type[Exception], named: str
) -> None:
    """A negative number of steps gave the uniform start silently, an alpha outside [0, 1]
    ranks that are no distribution (unnoticed), a NaN alpha an error about a NaN record, and
    a float number of steps Python's "'float' object cannot be interpreted as an integer"."""

    def build(scope: Any) -> Any:
        edges = Collection.from_epochs(scope, [[((0, 1), 1), ((1, 2), 1), ((2, 0), 1)]])
        return graph.pagerank(edges, iterations, alpha).changes()

    with pytest.raises(error, match="pagerank: " + named):
        naiad.run(build)


def test_pagerank_takes_a_numpy_int_number_of_steps() -> None:
    def build(steps: Any) -> Any:
        def dataflow(scope: Any) -> Any:
            edges = Collection.from_epochs(
                scope, [[((0, 1), 1), ((1, 2), 1), ((2, 0), 1), ((0, 2), 1)]]
            )
            return graph.pagerank(edges, steps).changes()

        return dataflow

    assert naiad.run(build(np.int64(3))) == naiad.run(build(3))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("arrange", ["arrange_by_key", "arrange_by_self"])
def test_the_algorithms_without_a_join_by_source_take_an_arrangement(
    arrange: str, workers: int
) -> None:
    """reachability, bfs, shortest_paths and propagate_min take edges arranged by source;
    wcc, pagerank, approximate_shortest_paths, nodes and undirected failed on any arrangement
    with "'Arranged' object has no attribute 'concat'" (or 'map_columns'), and scc on one by
    whole records with "<lambda>() missing 1 required positional argument: 'd'", naming
    neither the algorithm nor the arrangement. They read it as its records (an edge of an
    arrangement by whole records is one value: its fields are split): the collection's answers."""
    changes = [[((0, 1), 1), ((1, 2), 2), ((2, 0), 1), ((3, 4), 1), ((4, 3), 1)], [((1, 2), -2)]]

    def algorithms(arranged: bool) -> Any:
        def build(scope: Any) -> Any:
            given = Collection.from_epochs(scope, changes)
            edges = getattr(given, arrange)() if arranged else given
            marks = Collection.from_epochs(scope, [[(0, 1), (3, 1)]])
            asks = Collection.from_epochs(scope, [[((1, 2), 1), ((4, 0), 1)]])
            return [
                graph.wcc(edges).changes(),
                graph.wcc(edges, prioritized=True).changes(),
                graph.pagerank(edges, 4).changes(),
                graph.approximate_shortest_paths(edges, marks, asks).changes(),
                graph.nodes(edges).changes(),
                graph.undirected(edges).changes(),
                graph.scc(edges).changes(),
            ]

        return build

    got = naiad.run(algorithms(True), workers=workers)
    want = naiad.run(algorithms(False), workers=workers)
    for i in range(7):
        expected = accumulate([w[i] for w in want], len(changes))
        assert expected[0]  # the collection's answers are not empty
        assert accumulate([g[i] for g in got], len(changes)) == expected, i
