"""Cluster member of ``python -m benchmarks progress-traffic`` (Naiad Figure 6c).

``--workload wcc``: connected components by label propagation on a seeded random graph, in a
timely loop, on every process:

    input (v, v) for this worker's nodes -> enter loop -> concat(feedback)
      -> unary(WCC, exchange by node) -> connect_loop(feedback)

Global worker ``w`` of ``peers`` owns the nodes ``v`` with ``v % peers == w`` and their
adjacency (every process draws the same edges from the seed). Records are ``(node, label)``
rows of an ``(k, 2)`` int64 numpy array. :class:`WCC` collects the proposals that arrive at
an iteration and asks for a notification there; ``on_notify`` (the iteration is complete in
the whole cluster) lowers the labels that improved and sends them to the neighbours of those
nodes (in one message, or in messages of ``--chunk`` rows), around the feedback edge, to the
next iteration. When no label changes, the loop drains. Each worker therefore gets one
notification per iteration: every iteration needs a round of the progress protocol between
the processes.

``--workload circulate``: every worker sends ``--batches`` batches of ``(id, value, hop)``
rows into a loop where :class:`Hop` sends each batch on, whole, to a pseudo-random worker
per hop, until it has made ``--hops`` hops; data-driven, no notifications.

``--accumulate on|off`` is ``naiad.Runtime(accumulate=...)`` (``--central``: ``central=True``);
``turn`` and ``resident`` install prototypes of other accumulation policies into this
process's progress actor (:func:`install_turn_policy`, :func:`install_resident_policy`:
patched private hooks, for the analysis; not naiad's behaviour).

Written for the parent: this process's progress statistics (batches and updates it
broadcast) and PROGRESS frames / bytes it sent (``transport.stats``), the answer (labels, or
the circulated batches' counts), and with ``--analyse`` what the flushes held
(:func:`instrument`).
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter, deque
from typing import Any

import numpy as np

import naiad
from benchmarks._cluster import clock, member_run, member_write, peak_rss_mb

NO_LABEL = np.iinfo(np.int64).max


def random_edges(nodes: int, edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``edges`` undirected edges between random nodes (self loops and repeats allowed)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)


def local_adjacency(
    nodes: int, src: np.ndarray, dst: np.ndarray, index: int, peers: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """CSR adjacency ``(indptr, neighbours, local nodes)`` of worker ``index``'s nodes, local
    node ``i`` being the global node ``index + i * peers``."""
    u = np.concatenate([src, dst])
    v = np.concatenate([dst, src])
    mine = u % peers == index
    u, v = u[mine], v[mine]
    order = np.argsort(u, kind="stable")
    local = u[order] // peers
    count = len(range(index, nodes, peers))
    indptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(local, minlength=count), out=indptr[1:])
    return indptr, v[order], count


def node_keys(batch: np.ndarray) -> np.ndarray:
    return batch[:, 0]


class WCC(naiad.Vertex):
    """Label propagation: one notification per iteration with proposals on this worker."""

    def __init__(
        self, indptr: np.ndarray, neighbours: np.ndarray, count: int, chunk: int = 0
    ) -> None:
        self.chunk = chunk
        self.indptr = indptr
        self.neighbours = neighbours
        self.labels = np.full(count, NO_LABEL, dtype=np.int64)
        self.pending: dict[Any, list[np.ndarray]] = {}
        self.iterations: list[int] = []

    def on_recv(self, port: int, cap: naiad.Capability, batch: np.ndarray) -> None:
        pending = self.pending.get(cap.time)
        if pending is None:
            pending = self.pending[cap.time] = []
            self.notify_at(cap)
        pending.append(batch)

    def on_notify(self, cap: naiad.Capability) -> None:
        self.iterations.append(cap.time.inner)
        proposals = np.concatenate(self.pending.pop(cap.time))
        best = np.full(len(self.labels), NO_LABEL, dtype=np.int64)
        np.minimum.at(best, proposals[:, 0] // self.peers, proposals[:, 1])
        changed = np.flatnonzero(best < self.labels)
        if not len(changed):
            return
        self.labels[changed] = best[changed]
        starts, ends = self.indptr[changed], self.indptr[changed + 1]
        degrees = ends - starts
        total = int(degrees.sum())
        if not total:
            return
        # the neighbours of every changed node, each with that node's new label
        offsets = np.repeat(starts - np.cumsum(degrees) + degrees, degrees)
        out = np.empty((total, 2), dtype=np.int64)
        out[:, 0] = self.neighbours[offsets + np.arange(total)]
        out[:, 1] = np.repeat(best[changed], degrees)
        if not self.chunk:
            self.send(cap, out)
            return
        for i in range(0, total, self.chunk):
            self.send(cap, out[i : i + self.chunk])


MIX = np.int64(0x2545F4914F6CDD1D)


def batch_keys(batch: np.ndarray) -> np.ndarray:
    """Routes a whole ``(k, 3)`` batch of ``(batch id, value, hop)`` rows to one worker,
    a different pseudo-random one at every hop."""
    mixed = (batch[:, 0] * np.int64(1_000_003) + batch[:, 2]) * MIX  # wraps: fine
    return (mixed >> np.int64(33)) & np.int64(0x7FFFFFFF)


class Hop(naiad.Vertex):
    """Sends every batch it receives around the loop again, one hop further, until it has
    made ``hops`` hops; counts what finishes and checks that each hop happens at the loop
    iteration of the same number."""

    def __init__(self, hops: int) -> None:
        self.hops = hops
        self.finished_batches = 0
        self.finished_records = 0
        self.checksum = 0
        self.wrong_hop = 0
        self.activations = 0

    def on_recv(self, port: int, cap: naiad.Capability, batch: np.ndarray) -> None:
        self.activations += 1
        hop = int(batch[0, 2])
        if hop != cap.time.inner or np.any(batch[:, 2] != hop):
            self.wrong_hop += 1
        if hop + 1 >= self.hops:
            self.finished_batches += 1
            self.finished_records += len(batch)
            self.checksum = (self.checksum + int(batch[:, 1].sum())) % 2**61
            return
        out = batch.copy()
        out[:, 2] += 1
        self.send(cap, out)


def instrument(process: Any, node_names: dict[int, str]) -> dict[str, Any]:
    """Observes (without changing) this process's progress traffic: the messages its shards
    received, how many batches the workers submitted to the progress actor, and for every
    flush (one broadcast batch) its updates, distinct locations and times, signs, whether a
    local batch or a remote batch triggered it, and the updates per location. Wraps private
    hooks of the actor and the process: a diagnostic, not an API."""
    progress = process.progress
    seen: dict[str, Any] = {
        "submits": 0,
        "submitted_updates": 0,
        "flushes": 0,
        "flush_updates": [],
        "flush_locations": [],
        "flush_times": [],
        "flush_negative": [],
        "flush_trigger": Counter(),
        "updates_by_location": Counter(),
        "flushes_with_location": Counter(),
        "messages": 0,
    }

    def appended(key: tuple[int, Any]) -> None:
        seen["messages"] += 1

    watch_mailboxes(process, appended, lambda key: None)
    context = {"trigger": "other"}
    for worker in process.workers:
        submit = worker._submit

        def counted(dataflow: int, changes: Any, submit: Any = submit) -> None:
            changes = list(changes)
            seen["submits"] += 1
            seen["submitted_updates"] += len(changes)
            context["trigger"] = "local batch"
            try:
                submit(dataflow, changes)
            finally:
                context["trigger"] = "other"

        worker._submit = counted
    receive = progress.receive

    def received(*args: Any) -> None:
        context["trigger"] = "remote batch"
        try:
            receive(*args)
        finally:
            context["trigger"] = "other"

    progress.receive = received
    flush = progress._flush

    def flushed(dataflow: int, registered: Any) -> None:
        changes = list(registered.outgoing)
        if changes:
            seen["flushes"] += 1
            seen["flush_updates"].append(len(changes))
            seen["flush_locations"].append(len({loc for (loc, _), _ in changes}))
            seen["flush_times"].append(len({t for (_, t), _ in changes}))
            seen["flush_negative"].append(sum(1 for _, d in changes if d < 0))
            seen["flush_trigger"][context["trigger"]] += 1
            names = set()
            for (loc, _), _ in changes:
                name = node_names.get(loc, str(loc))
                seen["updates_by_location"][name] += 1
                names.add(name)
            for name in names:
                seen["flushes_with_location"][name] += 1
        flush(dataflow, registered)

    progress._flush = flushed
    return seen


def install_turn_policy(process: Any) -> None:
    """A prototype of another accumulation policy (not naiad's): hold every update and
    broadcast what is held once per event-loop turn (``loop.call_soon``), i.e. after the
    worker group's round and the frames that arrived with it, instead of at the first
    decrement that no other pointstamp dominates. Delaying a broadcast is always safe; the
    delay is bounded by one turn, so liveness holds. Patches the actor's private hook."""
    progress = process.progress
    loop = asyncio.get_running_loop()
    scheduled = [False]

    def flush_all() -> None:
        scheduled[0] = False
        for dataflow in list(progress._dataflows):
            progress.flush(dataflow)

    def must_flush(registered: Any) -> bool:
        if not scheduled[0]:
            scheduled[0] = True
            loop.call_soon(flush_all)
        return False

    progress._must_flush = must_flush


class WatchedMailbox(deque[Any]):
    """A shard's mailbox that reports every message it takes in and gives out, with the
    message's target location and time."""

    def __init__(self, targets: list[int], items: Any, appended: Any, popped: Any) -> None:
        super().__init__()
        self.targets, self.appended, self.popped = targets, appended, popped
        for item in items:
            self.append(item)

    def append(self, item: Any) -> None:
        self.appended((self.targets[item[0]], item[1]))
        super().append(item)

    def popleft(self) -> Any:
        item = super().popleft()
        self.popped((self.targets[item[0]], item[1]))
        return item


def watch_mailboxes(process: Any, appended: Any, popped: Any) -> None:
    """Gives every shard of the dataflows this process builds from now on a
    :class:`WatchedMailbox`. Patches a private hook."""
    instantiate = process.instantiate

    def watching(*args: Any, **kwargs: Any) -> Any:
        instance = instantiate(*args, **kwargs)
        for row in instance.shards:
            for shard in row:
                mailbox = shard.mailbox
                if isinstance(mailbox, WatchedMailbox):  # watched twice: call both
                    mailbox.appended = _both(mailbox.appended, appended)
                    mailbox.popped = _both(mailbox.popped, popped)
                else:
                    shard.mailbox = WatchedMailbox(shard.targets, mailbox, appended, popped)
        return instance

    process.instantiate = watching


def _both(first: Any, second: Any) -> Any:
    def both(key: tuple[int, Any]) -> None:
        first(key)
        second(key)

    return both


def install_resident_policy(process: Any) -> None:
    """A prototype of another accumulation rule (not naiad's; the second condition of Naiad
    §3.3 read as *occurrences resident in this process*): a held decrement of ``p`` may also
    stay held while a mailbox of this process still holds a message at ``p``. Such a
    process must report ``p`` again anyway (when it consumes that message), and it flushes as
    soon as it holds no message at ``p`` any more, so no two processes can wait for each
    other; holding is always safe. Patches private hooks."""
    progress = process.progress
    resident: Counter[tuple[int, Any]] = Counter()

    def appended(key: tuple[int, Any]) -> None:
        resident[key] += 1

    def popped(key: tuple[int, Any]) -> None:
        left = resident[key] - 1
        if left:
            resident[key] = left
        else:
            del resident[key]

    watch_mailboxes(process, appended, popped)
    dominated = progress._dominated

    def must_flush(registered: Any) -> bool:
        tracker = registered.tracker
        for (loc, time), delta in registered.outgoing:
            if delta < 0 and not resident.get((loc, time)) and not dominated(tracker, loc, time):
                return True
        return False

    progress._must_flush = must_flush


def location_names(rt: Any) -> dict[int, str]:
    """Location id -> ``operator.in<port>`` / ``operator.out<port>`` of dataflow 0."""
    instance = rt.processes[0].instances[0]
    reach = instance.reachability
    return {
        loc: f"{reach.node_names[node]}.{'out' if source else 'in'}{port}"
        for loc, (node, port, source) in enumerate(reach.locations)
    }


def circulate_batches(worker: int, batches: int, size: int) -> np.ndarray:
    """Worker ``worker``'s initial batches: ``(batches, size, 3)`` rows of (batch id, value,
    hop 0); values are the record's global number."""
    ids = worker * batches + np.arange(batches, dtype=np.int64)
    out = np.zeros((batches, size, 3), dtype=np.int64)
    out[:, :, 0] = ids[:, None]
    out[:, :, 1] = ids[:, None] * size + np.arange(size, dtype=np.int64)
    return out


def runtime(args: argparse.Namespace) -> naiad.Runtime:
    """``naiad.Runtime(accumulate=..., central=...)``; ``--accumulate turn`` is ``on`` with
    the prototype policy of :func:`install_turn_policy` (installed by :func:`hooks`)."""
    return naiad.Runtime(accumulate=args.accumulate != "off", central=args.central)


def input_through_loop(scope: naiad.Scope, vertex: naiad.Vertex, keys: Any) -> naiad.InputHandle:
    """input -> iterative: enter -> concat(feedback) -> unary(vertex, exchange by keys) ->
    connect_loop; returns the input handle (the graph both workloads use)."""
    handle, initial = scope.new_input()
    with scope.iterative() as loop:
        feedback, cycle = loop.feedback()
        records = initial.enter(loop).concat(cycle)
        records.unary(vertex, exchange=naiad.Exchange(keys=keys)).connect_loop(feedback)
    return handle


async def member(args: argparse.Namespace) -> dict[str, Any]:
    if args.workload == "circulate":
        return await member_circulate(args)
    return await member_wcc(args)


async def member_circulate(args: argparse.Namespace) -> dict[str, Any]:
    async with runtime(args) as rt:
        first = rt.processes[0].first
        vertices: list[Hop] = []

        def build(scope: naiad.Scope) -> Any:
            vertex = Hop(args.hops)
            vertices.append(vertex)
            return input_through_loop(scope, vertex, batch_keys)

        seen, names = hooks(rt, args)
        start = clock()
        df = rt.dataflow(build)
        names.update(location_names(rt) if seen is not None else {})
        for local, handle in enumerate(df.results):
            for batch in circulate_batches(first + local, args.batches, args.batch_size):
                handle.send(batch)
            handle.close()
        await df.finished()
        end = clock()
    result = {
        "finished_batches": sum(v.finished_batches for v in vertices),
        "finished_records": sum(v.finished_records for v in vertices),
        "checksum": sum(v.checksum for v in vertices) % 2**61,
        "wrong_hop": sum(v.wrong_hop for v in vertices),
        "activations": sum(v.activations for v in vertices),
    }
    return traffic(rt, end - start, seen) | {"result": result}


def hooks(rt: Any, args: argparse.Namespace) -> tuple[dict[str, Any] | None, dict[int, str]]:
    """Before the dataflow exists: the prototype policy if asked for, and with ``--analyse``
    :func:`instrument` (so that no batch goes unseen; the location names are filled in once
    the dataflow is built)."""
    names: dict[int, str] = {}
    if args.accumulate == "turn":
        install_turn_policy(rt.processes[0])
    elif args.accumulate == "resident":
        install_resident_policy(rt.processes[0])
    return (instrument(rt.processes[0], names) if args.analyse else None), names


def traffic(rt: Any, seconds: float, seen: dict[str, Any] | None) -> dict[str, Any]:
    process = rt.processes[0]
    transport = process.transport
    out: dict[str, Any] = {
        "seconds": seconds,
        "peak_rss_mb": peak_rss_mb(),
        "progress_frames": transport.stats.frames[2] if transport is not None else 0,
        "progress_bytes": transport.stats.bytes[2] if transport is not None else 0,
        "data_frames": transport.stats.frames[1] if transport is not None else 0,
        "data_bytes": transport.stats.bytes[1] if transport is not None else 0,
        "progress": vars(process.progress.stats),
    }
    if seen is not None:
        out["analysis"] = seen
    return out


async def member_wcc(args: argparse.Namespace) -> dict[str, Any]:
    src, dst = random_edges(args.nodes, args.edges, args.seed)
    async with runtime(args) as rt:
        peers, first = rt.peers, rt.processes[0].first
        vertices: list[WCC] = []

        def build(scope: naiad.Scope) -> Any:
            indptr, neighbours, count = local_adjacency(
                args.nodes, src, dst, scope.index, scope.peers
            )
            vertex = WCC(indptr, neighbours, count, args.chunk)
            vertices.append(vertex)
            return input_through_loop(scope, vertex, node_keys)

        seen, names = hooks(rt, args)
        start = clock()
        df = rt.dataflow(build)
        names.update(location_names(rt) if seen is not None else {})
        for local, handle in enumerate(df.results):
            own = np.arange(first + local, args.nodes, peers, dtype=np.int64)
            handle.send(np.stack([own, own], axis=1))
            handle.close()
        await df.finished()
        end = clock()
    result = {
        "labels": [v.labels.tolist() for v in vertices],
        "iterations": [len(v.iterations) for v in vertices],
    }
    return traffic(rt, end - start, seen) | {"result": result}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=("wcc", "circulate"), default="wcc")
    p.add_argument("--nodes", type=int, default=1000, help="wcc: graph nodes")
    p.add_argument("--edges", type=int, default=2000, help="wcc: graph edges")
    p.add_argument("--chunk", type=int, default=0, help="wcc: rows per message (0: all)")
    p.add_argument("--hops", type=int, default=10, help="circulate: hops per batch")
    p.add_argument("--batches", type=int, default=10, help="circulate: batches per worker")
    p.add_argument("--batch-size", type=int, default=10, help="circulate: records per batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--accumulate", choices=("on", "off", "turn", "resident"), required=True)
    p.add_argument("--central", action="store_true", help="progress through process 0")
    p.add_argument("--analyse", action="store_true")
    args = p.parse_args()
    member_write(member_run(member(args)))


if __name__ == "__main__":
    main()
