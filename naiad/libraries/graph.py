"""Graph algorithms on differential collections, built only on the public API.

Edges are a collection of ``(src, dst)`` records (``(src, dst, weight)`` for weighted
paths); nodes are integers (other hashable values that compare with each other, such as
strings or tuples, work too, through dictionary encoding, more slowly). Every function
returns a collection, so results update incrementally when edges change.

An edge is present while its count (inserted minus removed) is positive, and absent
otherwise: an edge removed more often than it was inserted (a count below zero) counts as
absent, exactly as one never inserted, until insertions bring its count above zero again.
A count above one is parallel copies of the edge, which only ``pagerank`` counts (a copy is
one more out-link). Every function reads the edges through a presence step (a ``distinct``;
``pagerank``'s keeps each count above zero) before its loop: a loop fed a negative count is
no fixed-point computation any more (a node's own label, sent back along a self-loop of count
-2, cancels itself every other round), and ``wcc``, ``reachability``, ``shortest_paths`` and
``propagate_min`` iterated forever on such counts. :func:`edge_index` arranges the edges
present once, for several queries to share.

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
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from naiad.differential import Arranged, Collection


def undirected(edges: Collection | Arranged) -> Collection:
    """Both directions of every edge, with the edge's count (no presence step)."""
    edges = _records(edges, "undirected")
    return edges.concat(edges.map_columns(lambda s, d: (d, s), name="reverse"))


def nodes(edges: Collection | Arranged) -> Collection:
    """The distinct endpoints of the edges present (those of positive count).

    >>> import naiad
    >>> from naiad.differential import Collection
    >>> def build(scope):  # (2, 3) removed once more than inserted: absent, as 3 is
    ...     edges = Collection.from_epochs(scope, [[((1, 2), 1), ((2, 3), -1)]])
    ...     return nodes(edges).changes()
    >>> naiad.run(build)
    [[(1, 0, 1), (2, 0, 1)]]
    """
    return _endpoints(_present(edges, "nodes"), "nodes")


def _endpoints(edges: Collection, name: str) -> Collection:
    """The distinct endpoints of ``edges``, a collection of edges present."""
    ends = edges.map_columns(lambda s, d: s, name="sources").concat(
        edges.map_columns(lambda s, d: d, name="targets")
    )
    return _distinct_values(ends, name)


_PRESENT: weakref.WeakSet[Arranged] = weakref.WeakSet()
"""The arrangements of edges present built here (:func:`edge_index`, and the functions' own):
read as they are, with no second presence step."""


def edge_index(edges: Collection | Arranged, name: str = "edge_index") -> Arranged:
    """The edges present (each edge of positive count, once) arranged by source, for several
    queries to share: ``reachability``, ``bfs``, ``shortest_paths`` and ``propagate_min``
    join it as it is (no index or presence step of their own), the other functions read its
    records. An arrangement of the edges made otherwise (``edges.arrange_by_key()``) may hold
    counts below zero: each function then reads it through a presence step of its own, and
    indexes what that keeps.

    >>> import naiad
    >>> from naiad.differential import Collection
    >>> def build(scope):
    ...     edges = Collection.from_epochs(scope, [[((0, 1), 1), ((1, 2), 2), ((0, 2), -1)]])
    ...     roots = Collection.from_epochs(scope, [[(0, 1)]])
    ...     index = edge_index(edges)
    ...     return reachability(index, roots).changes(), bfs(index, roots).changes()
    >>> reached, hops = naiad.run(build)[0]
    >>> sorted(r for r, _, _ in reached), sorted(r for r, _, _ in hops)
    ([0, 1, 2], [(0, 0), (1, 1), (2, 2)])
    """
    if isinstance(edges, Arranged) and edges in _PRESENT:
        return edges
    return _arrange(_present(edges, name), name)


def _arrange(present: Collection, name: str) -> Arranged:
    """``present`` (edges of positive counts) arranged by source, known as such."""
    index = present.arrange_by_key(name + ".edges")
    _PRESENT.add(index)
    return index


def _present(edges: Collection | Arranged, name: str, copies: bool = False) -> Collection:
    """The edges present: every edge of positive count, once (``copies``: with its count, its
    parallel copies, as ``pagerank`` counts them), an edge whose count is below zero left out
    as one of count zero (see the module docstring). An arrangement is read as it is (by key:
    no second arrangement for the presence step); one of :func:`edge_index` is read as its
    records. One ``distinct`` (``threshold``) over the edges, outside every loop."""
    if isinstance(edges, Arranged) and edges in _PRESENT:
        return _records(edges, name)
    if copies:
        kept = edges.threshold(_copies, name=name + ".present")
    else:
        kept = edges.distinct(name=name + ".present")
    return _fields(edges, kept, name) if isinstance(edges, Arranged) else kept


def _copies(counts: np.ndarray) -> np.ndarray:
    """An edge's parallel copies: its count, none below zero.

    >>> _copies(np.array([2, -1])).tolist()
    [2, 0]
    """
    return np.maximum(counts, 0)


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
    """The edges present arranged by source, once, outside the loops that read them: a
    loop's join enters the arrangement (``Arranged.enter``) instead of indexing the edges
    again inside. An arrangement of :func:`edge_index` is shared as it is; one by source made
    otherwise is read by the presence step, without a second arrangement for it."""
    if isinstance(edges, Arranged) and edges.spine.whole and edges not in _PRESENT:
        raise ValueError(  # the caller meant an index by source, for the joins to share
            f"{name}: the edges are arranged by whole records (arrange_by_self); give an index "
            "by source instead (graph.edge_index(edges))"
        )
    return edge_index(edges, name)


def propagate_min(
    labels: Collection,
    edges: Collection | Arranged,
    priority: Callable[..., Any] | None = None,
    name: str = "propagate",
) -> Collection:
    """Each node's least label reachable along ``edges`` (those present: see the module
    docstring) from ``(node, label)`` seeds: label propagation to a fixed point (seed 002
    Figure 3). ``edges`` may be an arrangement by source (:func:`edge_index`) shared with
    other queries."""
    return _propagate_min(labels, _index(edges, name), priority, name)


def _propagate_min(
    labels: Collection, index: Arranged, priority: Callable[..., Any] | None, name: str
) -> Collection:
    """:func:`propagate_min` along ``index``, edges present arranged by source."""

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
    label versions, more rounds. ``edges``: a collection, or an arrangement read as one; an
    edge removed more often than inserted is absent (see the module docstring).

    >>> import naiad
    >>> from naiad.differential import Collection
    >>> def build(scope):  # (2, 3) was removed twice after one insertion: 3 is alone
    ...     edges = Collection.from_epochs(scope, [[((1, 2), 1), ((2, 3), 1), ((3, 3), 1)],
    ...                                             [((2, 3), -2)]])
    ...     return wcc(edges).view()
    >>> sorted(r for r, n in naiad.run(build)[0].at(1).items() if n)
    [(1, 1), (2, 1), (3, 3)]
    """
    present = _present(edges, "wcc")
    labels = _endpoints(present, "nodes").map_columns(lambda n: (n, n), name="self_labels")
    priority = (lambda n, label: _log_priority(label)) if prioritized else None
    return _propagate_min(labels, _arrange(undirected(present), "wcc"), priority, "wcc")


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
    present (a collection, or one arranged by source, :func:`edge_index`'s to share it with
    other queries)."""
    index = _index(edges, "reach")

    def body(reached: Collection) -> Collection:
        step = reached.map_columns(lambda n: (n, n)).join(index, name="reach.join")
        return _distinct_values(
            step.map_columns(lambda n, _, dst: dst).concat(reached), "reach.distinct"
        )

    return _node_set(roots, "roots").iterate(body, name="reach")


def bfs(edges: Collection | Arranged, roots: Collection) -> Collection:
    """``(node, hops)``: the least number of directed edges present from any root
    (``edges``: a collection, or one arranged by source, as for :func:`reachability`)."""
    start = _at_zero(_node_set(roots, "roots"))
    index = _index(edges, "bfs")

    def body(dist: Collection) -> Collection:
        step = dist.join(index, name="bfs.join").map_columns(lambda n, d, dst: (dst, d + 1))
        return step.concat(dist).min(name="bfs.min")

    return start.iterate(body, name="bfs")


def shortest_paths(edges: Collection | Arranged, roots: Collection) -> Collection:
    """``(node, distance)`` over weighted ``(src, dst, weight)`` edges (weights >= 0), from any
    root (Bellman-Ford, seed 002 Figure 19), along the edges present: ``(src, dst, weight)``
    records of positive count (each weight of an edge apart). Not prioritized: a priority
    orders only what enters the loop, and here only the roots enter, all at distance 0
    (delta-stepping would need the priorities of the distances found inside the loop).
    ``edges``: a collection, or one arranged by source, as for :func:`reachability`."""
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
    a landmark lies on a shortest path), from one BFS per landmark run together. ``edges``
    (those present): a collection, or an arrangement read as one."""
    both = _arrange(undirected(_present(edges, "asp")), "asp")
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
    backward, label propagation, to a fixed point (a nested iteration). ``edges`` (those
    present): a collection, or an arrangement."""

    def trim(current: Collection) -> Collection:
        forward = _trim(current)
        reverse = forward.map_columns(lambda s, d: (d, s), name="scc.reverse")
        return _trim(reverse).map_columns(lambda s, d: (d, s), name="scc.unreverse")

    return _present(edges, "scc").iterate(trim, name="scc")


def _trim(edges: Collection) -> Collection:
    """The edges ``(s, d)`` whose endpoints reach equal least labels along ``edges`` (a set:
    no presence step)."""
    labels = _endpoints(edges, "nodes").map_columns(lambda n: (n, n), name="trim.labels")
    index = _arrange(edges, "trim")  # read by the propagation's loop and by trim.src
    reached = _propagate_min(labels, index, None, "trim.propagate")  # (node, least label)
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
    one; an edge's count is its parallel copies, none when the count is below zero."""
    if not isinstance(iterations, numbers.Integral) or isinstance(iterations, bool):
        raise TypeError(f"pagerank: iterations is a number of steps, an int, not {iterations!r}")
    if iterations < 0:
        raise ValueError(f"pagerank: iterations must be >= 0, not {iterations}")
    if not 0 <= alpha <= 1:  # False for NaN too
        raise ValueError(f"pagerank: alpha (the damping factor) must lie in [0, 1], not {alpha!r}")
    edges = _present(edges, "pr", copies=True)
    verts = _endpoints(edges, "nodes")
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
