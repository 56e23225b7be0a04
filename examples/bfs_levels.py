"""Breadth-first search levels in a loop, one notification per iteration (Naiad §2.1-2.3).

A timely dataflow loop (§2.1): the root enters ``scope.iterative()``, where times are
``naiad.Product(epoch, iteration)``; a feedback edge adds one to the iteration. Inside, the
frontier is exchanged by node to a :class:`BFSLevels` vertex (§2.2): each worker holds the
adjacency of its own nodes (``node % peers == index``, every worker filtering the same seeded
edge list) and the set of nodes it has visited. ``on_recv`` only collects the nodes reached at
an iteration and asks for a notification at that time; ``on_notify``, delivered once no node
can still arrive at that iteration (§2.3), settles them: their level is the iteration number,
they are emitted on output 0, and their neighbours are sent on output 1, around the feedback
edge, to the next iteration. So every worker gets at most one notification per iteration,
and one iteration is exactly one BFS level. When no node is new the loop drains and stops.

The settled nodes and every worker's notified iterations (a third output) are gathered on
worker 0 for printing, so the script runs the same on one process or on a cluster: ``python
examples/bfs_levels.py [--workers N] [--nodes N] [--edges M]``, or ``naiad run
examples/bfs_levels.py -w W -n P`` (process 0 reports).
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict, deque
from typing import Any

import naiad
from naiad.runtime.launch import script_workers, worker_count

Edge = tuple[int, int]


def random_graph(nodes: int = 30, edges: int = 36, seed: int = 10) -> list[Edge]:
    """A seeded random undirected graph as a list of distinct ``(u, v)`` edges, ``u != v``."""
    most = nodes * (nodes - 1) // 2
    if edges > most:
        raise ValueError(f"{nodes} nodes hold at most {most} distinct edges, not {edges}")
    rng = random.Random(seed)
    chosen: set[Edge] = set()
    while len(chosen) < edges:
        u, v = rng.sample(range(nodes), 2)
        chosen.add((min(u, v), max(u, v)))
    return sorted(chosen)


def plain_bfs(edges: list[Edge], root: int) -> dict[int, int]:
    """The oracle: node -> level by an ordinary queue-based BFS."""
    adjacency: dict[int, list[int]] = defaultdict(list)
    for u, v in edges:
        adjacency[u].append(v)
        adjacency[v].append(u)
    levels = {root: 0}
    queue = deque([root])
    while queue:
        node = queue.popleft()
        for other in adjacency[node]:
            if other not in levels:
                levels[other] = levels[node] + 1
                queue.append(other)
    return levels


def node_key(node: int) -> int:
    """Routes a node to worker ``node % peers``, the owner of its adjacency."""
    return node


class BFSLevels(naiad.Vertex):
    """Settles the nodes reached at each iteration once that iteration is complete."""

    def __init__(self, adjacency: dict[int, list[int]]) -> None:
        self.adjacency = adjacency  # only this worker's nodes
        self.visited: set[int] = set()
        self.reached: dict[Any, set[int]] = {}  # iteration time -> nodes reached then

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        reached = self.reached.get(cap.time)
        if reached is None:
            reached = self.reached[cap.time] = set()
            self.notify_at(cap)  # one notification per iteration with any arrival
        reached.update(n for n in batch if n not in self.visited)

    def on_notify(self, cap: naiad.Capability) -> None:
        level = cap.time.inner
        self.send(cap, [(self.index, level)], port=2)  # for the report: who was notified when
        # Nodes settled at an earlier level on this worker may have arrived again since.
        fresh = sorted(self.reached.pop(cap.time) - self.visited)
        self.visited.update(fresh)
        self.send(cap, [(node, level) for node in fresh], port=0)
        self.send(cap, [m for node in fresh for m in self.adjacency.get(node, ())], port=1)


def to_first(record: Any) -> int:
    """Routes every record to worker 0, which gathers the outputs for the report."""
    return 0


def build(scope: naiad.Scope, edges: list[Edge], root: int) -> tuple[list[Any], list[Any], int]:
    """The BFS dataflow on one worker: the collected ``(epoch, (node, level))`` and
    ``(epoch, (worker, notified iteration))`` of every worker (on worker 0, empty elsewhere),
    and the number of workers."""
    adjacency: dict[int, list[int]] = defaultdict(list)
    for u, v in edges:
        for a, b in ((u, v), (v, u)):
            if a % scope.peers == scope.index:
                adjacency[a].append(b)
    vertex = BFSLevels(dict(adjacency))
    roots = scope.from_epochs([[root]])  # epoch 0: the root, on worker 0
    with scope.iterative() as loop:
        handle, cycle = loop.feedback()
        frontier = roots.enter(loop).concat(cycle)
        settled, neighbours, notes = frontier.unary(vertex, exchange=node_key, outputs=3)
        neighbours.connect_loop(handle)
    gathered = [s.leave().exchange(to_first).collect() for s in (settled, notes)]
    return gathered[0], gathered[1], scope.peers


def bfs_levels(
    edges: list[Edge], root: int = 0, workers: int = 1
) -> tuple[dict[int, int], list[list[int]]]:
    """Runs the dataflow; returns (node -> level, each worker's notified iterations in the
    order of its notifications): complete in the process of worker 0, empty in the other
    processes of a cluster."""
    results = naiad.run(lambda scope: build(scope, edges, root), workers=workers)
    settled, notes, peers = results[0]
    levels: dict[int, int] = {}
    notified: list[list[int]] = [[] for _ in range(peers)] if settled else []
    for _, (node, level) in settled:
        assert node not in levels, f"node {node} settled twice"
        levels[node] = level
    for _, (worker, level) in notes:
        notified[worker].append(level)
    return levels, notified


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers",
        type=worker_count,
        help="workers per process (default: naiad run's -w, else 2)",
    )
    parser.add_argument("--nodes", type=int, default=30, help="number of nodes (default 30)")
    parser.add_argument("--edges", type=int, default=36, help="number of edges (default 36)")
    parser.add_argument("--seed", type=int, default=10, help="random seed for the graph")
    parser.add_argument("--root", type=int, default=0, help="the BFS root (default 0)")
    args = parser.parse_args(argv)
    workers = script_workers(args.workers)
    cluster = naiad.Runtime(workers=workers)  # not started: its place in a `naiad run` cluster
    try:
        edges = random_graph(args.nodes, args.edges, args.seed)
    except ValueError as exc:
        parser.error(str(exc))
    if not 0 <= args.root < args.nodes:  # (it would be reported as a level-0 node of its own)
        parser.error(
            f"argument --root: the graph's nodes are 0 to {args.nodes - 1}, not {args.root}"
        )
    levels, notified = bfs_levels(edges, args.root, workers)
    if cluster.process_index != 0:
        return  # the process of worker 0 reports
    processes = f" x {cluster.process_count} processes" if cluster.process_count > 1 else ""
    print(
        f"BFS from node {args.root} on a random graph: {args.nodes} nodes, {len(edges)} edges,"
        f" {workers} workers{processes}\n"
    )
    by_level: dict[int, list[int]] = defaultdict(list)
    for node, level in levels.items():
        by_level[level].append(node)
    for level in sorted(by_level):
        print(f"level {level}: {' '.join(map(str, sorted(by_level[level])))}")
    unreached = sorted(set(range(args.nodes)) - set(levels))
    print(f"unreached: {' '.join(map(str, unreached)) or 'none'}")
    print("\nnotifications per worker (iterations at which some of its nodes arrived):")
    for index, its in enumerate(notified):
        print(f"  worker {index}: {its}")
    agrees = levels == plain_bfs(edges, args.root)
    print(f"\nmatches a plain queue-based BFS: {agrees}")


if __name__ == "__main__":
    main()
