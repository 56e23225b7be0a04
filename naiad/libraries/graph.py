"""Graph algorithms on differential collections, built only on the public API.

Edges are a collection of ``(src, dst)`` records (``(src, dst, weight)`` for weighted
paths); nodes are integers (other hashable values that compare with each other, such as
strings or tuples, work too, through dictionary encoding, more slowly). Every function
returns a collection, so results update incrementally when edges change.

An edge's multiplicity is its number of parallel copies (only ``pagerank`` counts them: a
copy is one more out-link) and must never go negative: retracting an edge more often than it
was inserted is not checked, gives meaningless answers, and may keep ``wcc`` (label
propagation) iterating forever, as a negative self-loop cancels its node's label every other
round.

>>> import naiad
>>> from naiad.differential import Arranged, Collection
>>> from naiad.libraries import graph
>>> def build(scope):
...     edges = Collection.from_epochs(scope, [[((1, 2), 1), ((3, 4), 1)], [((2, 3), 1)]])
...     return graph.wcc(edges).changes()
>>> for change in sorted(naiad.run(build)[0], key=lambda c: (c[1], c[0])):
...     print(change)
((1, 1), 0, 1)
((2, 1), 0, 1)
((3, 3), 0, 1)
((4, 3), 0, 1)
((3, 1), 1, 1)
((3, 3), 1, -1)
((4, 1), 1, 1)
((4, 3), 1, -1)
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from naiad.differential import Arranged, Collection


def undirected(edges: Collection | Arranged) -> Collection:
    """Both directions of every edge."""
    edges = _records(edges, "undirected")
    return edges.concat(edges.map_columns(lambda s, d: (d, s), name="reverse"))


def nodes(edges: Collection | Arranged) -> Collection:
    """The distinct endpoints of the edges."""
    edges = _records(edges, "nodes")
    ends = edges.map_columns(lambda s, d: s, name="sources").concat(
        edges.map_columns(lambda s, d: d, name="targets")
    )
    return _distinct_values(ends, "nodes")


def _distinct_values(values: Collection, name: str) -> Collection:
    """The distinct records of a collection of nodes, each whole (a record of several fields
    becomes one tuple value): a keyed ``distinct`` would take a tuple node's first field as
    its key, and refuse tuple node ids of different lengths."""
    return values.arrange_by_self(name + ".arrange").distinct(name)


def _records(edges: Collection | Arranged, name: str) -> Collection:
    """The edges as a collection: an arrangement given where no join reads it by source (the
    algorithm needs both directions, or whole edges) is read as the records it holds. Its
    methods are not a collection's: ``wcc(edges.arrange_by_key())`` failed with "'Arranged'
    object has no attribute 'concat'"."""
    if not isinstance(edges, Arranged):
        return edges
    return _fields(edges, edges.as_collection(name + ".edges"), name)


def _fields(edges: Arranged, records: Collection, name: str) -> Collection:
    """``records`` read from ``edges`` as ``(src, dst)`` fields: an arrangement by whole
    records (``arrange_by_self``) gives each edge as one value."""
    if edges.spine.whole:
        return records.map(lambda edge: edge, name=name + ".fields")
    return records


def _index(edges: Collection | Arranged, name: str) -> Arranged:
    """The edges arranged by source, once, outside the loops that read them: a loop's join
    enters the arrangement (``Arranged.enter``) instead of indexing the edges again inside.
    An arrangement given by the caller (``edges.arrange_by_key()``) is shared as it is."""
    if not isinstance(edges, Arranged):
        return edges.arrange_by_key(name + ".edges")
    if edges.spine.whole:  # its keys are whole (src, dst) tuples: no join would match
        raise ValueError(
            f"{name}: the edges are arranged by whole records (arrange_by_self); arrange them "
            "by source instead (edges.arrange_by_key())"
        )
    return edges


def propagate_min(
    labels: Collection,
    edges: Collection | Arranged,
    priority: Callable[..., Any] | None = None,
    name: str = "propagate",
) -> Collection:
    """Each node's least label reachable along ``edges`` from ``(node, label)`` seeds: label
    propagation to a fixed point (seed 002 Figure 3). ``edges`` may be an arrangement by
    source shared with other queries."""
    index = _index(edges, name)

    def body(current: Collection) -> Collection:
        loop = current.scope
        proposals = current.join(index, name=name + ".join").map_columns(
            lambda node, label, dst: (dst, label), name=name + ".send"
        )
        # The least of a node's seeds and its neighbours' labels: the same values as the
        # least of its own label and theirs (its label is the least seed within i hops), but
        # the min's input then holds no history of the node's own label changes: 25% less
        # CPU per incremental change here. With priorities the node's own label stays in
        # (measured 10% faster there: a prioritized batch run's min input was smaller).
        own = labels.enter(loop, name + ".seeds") if priority is None else current
        return proposals.concat(own).min(name=name + ".min")

    return labels.iterate(body, priority=priority, name=name)


def wcc(edges: Collection | Arranged, prioritized: bool = False) -> Collection:
    """``(node, label)``: weakly connected components, labelled by their least node.

    ``prioritized`` introduces labels in order of ``log2(1 + label)`` (seed 002 §2.6): fewer
    label versions, more rounds. ``edges``: a collection, or an arrangement read as one."""
    edges = _records(edges, "wcc")
    both = undirected(edges)
    labels = nodes(edges).map_columns(lambda n: (n, n), name="self_labels")
    priority = (lambda n, label: _log_priority(label)) if prioritized else None
    return propagate_min(labels, both, priority, name="wcc")


def _log_priority(labels: np.ndarray) -> np.ndarray:
    """``floor(log2(1 + label))`` for non-negative labels (0 for negative ones; float64 may
    round it near powers of two beyond 2**53, which only reorders work): a label's priority
    in prioritized WCC, for int64 labels and Python ints beyond them.

    >>> _log_priority(np.array([0, 1, 2**63 - 1])).tolist()
    [0, 1, 63]
    """
    if labels.dtype.kind in "iu":
        # bit_length of 1 + label, in float64 without the int64 overflow of 1 + (2**63 - 1)
        ones = np.log2(1.0 + np.maximum(labels, 0).astype(np.float64))
        return np.floor(ones).astype(np.int64)
    values = labels.tolist()
    if not all(isinstance(v, int) for v in values):
        raise TypeError("wcc(prioritized=True): node ids must be integers")
    return np.array([(1 + max(v, 0)).bit_length() - 1 for v in values], dtype=np.int64)


def _node_set(nodes: Collection, name: str) -> Collection:
    """A collection of nodes as a set of one-field records (a tuple node id stays whole)."""
    return _distinct_values(nodes, name)


def _at_zero(nodes: Collection) -> Collection:
    """``(node, 0)`` for every node."""
    return nodes.map_columns(lambda n: (n, np.zeros(len(n), np.int64)))


def reachability(edges: Collection | Arranged, roots: Collection) -> Collection:
    """The nodes reachable from ``roots`` (a collection of nodes) along directed edges
    (a collection, or one arranged by source, shared with other queries)."""
    index = _index(edges, "reach")

    def body(reached: Collection) -> Collection:
        step = reached.map_columns(lambda n: (n, n)).join(index, name="reach.join")
        return _distinct_values(
            step.map_columns(lambda n, _, dst: dst).concat(reached), "reach.distinct"
        )

    return _node_set(roots, "roots").iterate(body, name="reach")


def bfs(edges: Collection | Arranged, roots: Collection) -> Collection:
    """``(node, hops)``: the least number of directed edges from any root (``edges``: a
    collection, or one arranged by source)."""
    start = _at_zero(_node_set(roots, "roots"))
    index = _index(edges, "bfs")

    def body(dist: Collection) -> Collection:
        step = dist.join(index, name="bfs.join").map_columns(lambda n, d, dst: (dst, d + 1))
        return step.concat(dist).min(name="bfs.min")

    return start.iterate(body, name="bfs")


def shortest_paths(edges: Collection | Arranged, roots: Collection) -> Collection:
    """``(node, distance)`` over weighted ``(src, dst, weight)`` edges (weights >= 0), from any
    root (Bellman-Ford, seed 002 Figure 19). Not prioritized: a priority orders only what
    enters the loop, and here only the roots enter, all at distance 0 (delta-stepping would
    need the priorities of the distances found inside the loop). ``edges``: a collection, or
    one arranged by source."""
    start = _at_zero(_node_set(roots, "roots"))
    index = _index(edges, "sp")

    def body(dist: Collection) -> Collection:
        step = dist.join(index, name="sp.join").map_columns(
            lambda n, d, dst, w: (dst, _plus(d, _nonnegative(n, dst, w))), name="sp.send"
        )
        return step.concat(dist).min(name="sp.min")

    return start.iterate(body, name="sp")


def _nonnegative(src: np.ndarray, dst: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``weights``, refused if one is negative: a cycle of negative weight lowers its
    distances every round, so the loop would never reach a fixed point (it hung).

    >>> _nonnegative(np.array([0]), np.array([1]), np.array([-2]))
    Traceback (most recent call last):
    ...
    ValueError: shortest_paths: edge (0, 1) has weight -2; weights must be >= 0
    """
    negative = np.flatnonzero(weights < 0)
    if len(negative):
        at = slice(negative[0], negative[0] + 1)  # Python values, not numpy scalars
        (s, d, w) = (column[at].tolist()[0] for column in (src, dst, weights))
        raise ValueError(
            f"shortest_paths: edge ({s!r}, {d!r}) has weight {w!r}; weights must be >= 0"
        )
    return weights


def _plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b``, exactly: where int64 sums would wrap, the column holds Python ints.

    >>> _plus(np.array([2**62]), np.array([2**62])).tolist()
    [9223372036854775808]
    """
    total = a + b
    ints = total.dtype.kind == "i" and a.dtype.kind == "i" and b.dtype.kind == "i"
    if ints and (((a ^ total) & (b ^ total)) < 0).any():  # a wrapped sum has the wrong sign
        exact = np.empty(len(total), dtype=object)
        exact[:] = [x + y for x, y in zip(a.tolist(), b.tolist(), strict=True)]
        return exact
    return total


def approximate_shortest_paths(
    edges: Collection | Arranged, landmarks: Collection, queries: Collection
) -> Collection:
    """``(src, dst, estimate)`` for ``(src, dst)`` queries on the undirected graph: the least
    ``d(src, L) + d(L, dst)`` over landmarks ``L`` (an upper bound on the distance, exact when
    a landmark lies on a shortest path), from one BFS per landmark run together. ``edges``: a
    collection, or an arrangement read as one."""
    both = _index(undirected(edges), "asp")
    start = _node_set(landmarks, "landmarks").map_columns(
        lambda n: (_pairs(n, n), np.zeros(len(n), np.int64))
    )

    def body(dist: Collection) -> Collection:  # ((node, landmark), hops)
        by_node = dist.map(lambda r: (r[0][0], r[0][1], r[1]), name="asp.by_node")
        step = by_node.join(both, name="asp.join").map(
            lambda r: ((r[3], r[1]), r[2] + 1), name="asp.send"
        )
        return step.concat(dist).min(name="asp.min")

    dist = start.iterate(body, name="asp").map(lambda r: (r[0][1], r[0][0], r[1]))  # (L, n, d)
    from_src = queries.map(lambda q: (q[0], q[1])).join(
        dist.map(lambda r: (r[1], r[0], r[2])), name="asp.src"
    )  # (src, dst, L, d1)
    via = from_src.map(lambda r: ((r[1], r[2]), (r[0], r[3])), name="asp.via")
    to_dst = dist.map(lambda r: ((r[1], r[0]), r[2]), name="asp.to_dst")  # ((n, L), d)
    total = via.join(to_dst, name="asp.dst").map(
        lambda r: ((r[1][0], r[0][0]), r[1][1] + r[2]), name="asp.total"
    )
    return total.min(name="asp.best").map(lambda r: (r[0][0], r[0][1], r[1]))


def _pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(len(a), dtype=object)
    out[:] = list(zip(a.tolist(), b.tolist(), strict=True))
    return out


def scc(edges: Collection | Arranged) -> Collection:
    """The edges whose endpoints lie in one strongly connected component (seed 001 Figure
    7): alternately keep the edges whose endpoints get equal labels from forward, then
    backward, label propagation, to a fixed point (a nested iteration). ``edges``: a
    collection, or an arrangement."""

    def trim(current: Collection) -> Collection:
        forward = _trim(current)
        reverse = forward.map_columns(lambda s, d: (d, s), name="scc.reverse")
        return _trim(reverse).map_columns(lambda s, d: (d, s), name="scc.unreverse")

    edges_set = edges.distinct(name="scc.edges")
    if isinstance(edges, Arranged):  # read as it is, without arranging the edges again
        edges_set = _fields(edges, edges_set, "scc")
    return edges_set.iterate(trim, name="scc")


def _trim(edges: Collection) -> Collection:
    """The edges ``(s, d)`` whose endpoints reach equal least labels along ``edges``."""
    labels = nodes(edges).map_columns(lambda n: (n, n), name="trim.labels")
    index = _index(edges, "trim")  # read by the propagation's loop and by trim.src
    reached = propagate_min(labels, index, name="trim.propagate")  # (node, least label)
    by_node = reached.arrange_by_key("trim.reached")  # read twice
    with_src = index.join(by_node, name="trim.src")  # (s, d, ls)
    keyed = with_src.map_columns(lambda s, d, ls: (d, s, ls), name="trim.by_dst")
    both = keyed.join(by_node, name="trim.dst")  # (d, s, ls, ld)
    same = both.filter_columns(lambda d, s, ls, ld: ls == ld, name="trim.same")
    return same.map_columns(lambda d, s, ls, ld: (s, d), name="trim.edge")


def pagerank(edges: Collection | Arranged, iterations: int = 20, alpha: float = 0.85) -> Collection:
    """``(node, rank)`` after ``iterations`` synchronous PageRank steps from the uniform
    distribution: ``r'(v) = (1 - alpha) / N + alpha * sum(r(u) / outdeg(u) for u -> v)``.
    Every node needs an outgoing edge (a dangling node's rank would leak); the steps are
    unrolled, one join and one sum each. ``edges``: a collection, or an arrangement read as
    one."""
    if not isinstance(iterations, numbers.Integral) or isinstance(iterations, bool):
        raise TypeError(f"pagerank: iterations is a number of steps, an int, not {iterations!r}")
    if iterations < 0:
        raise ValueError(f"pagerank: iterations must be >= 0, not {iterations}")
    if not 0 <= alpha <= 1:  # False for NaN too
        raise ValueError(f"pagerank: alpha (the damping factor) must lie in [0, 1], not {alpha!r}")
    edges = _records(edges, "pr")
    verts = nodes(edges)
    count = verts.map_columns(lambda n: np.zeros(len(n), np.int64)).count(name="pr.n")  # (0, N)
    sources = edges.map_columns(lambda s, d: s, name="pr.sources")
    degree = sources.arrange_by_self("pr.degree.arrange").count("pr.degree")  # (src, outdeg)
    share = edges.join(degree, name="pr.share")  # (src, dst, deg)
    base = verts.map_columns(lambda n: (np.zeros(len(n), np.int64), n)).join(count, name="pr.base")
    teleport = base.map_columns(lambda _, n, total: (n, (1 - alpha) / total), name="pr.teleport")
    ranks = base.map_columns(lambda _, n, total: (n, 1.0 / total), name="pr.start")
    for step in range(iterations):
        sent = ranks.join(share, name=f"pr.join{step}").map_columns(
            lambda s, r, d, deg: (d, alpha * r / deg), name=f"pr.send{step}"
        )
        ranks = sent.concat(teleport).sum(name=f"pr.sum{step}")
    return ranks
