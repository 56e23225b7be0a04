"""The runtime: workers on one event loop, dataflows built on every worker, supervision.

``Runtime(workers=N)`` runs N workers (one asyncio task each) in this process with one
progress actor. ``rt.dataflow(build)`` calls ``build(scope)`` once per worker, checks that
every worker declared the same graph, registers the logical graph with the progress actor,
creates every worker's vertex shards and channels, and starts them. It is asyncio-native
(``async with``, awaitable probes); :func:`run` serves synchronous scripts.

Supervision: the first exception raised in a callback stops every worker; it is re-raised,
as the same object with the user's own line in its traceback, to whoever awaits the runtime
(``__aexit__``, ``Dataflow.finished``, a probe).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from typing import Any

from naiad.actors.supervision import DataflowStopped
from naiad.actors.vertex import VertexShard
from naiad.actors.worker import Worker, WorkerGroup
from naiad.dataflow.channels import Exchange, ExchangePusher, LocalPusher, Pipeline
from naiad.dataflow.scope import BuildError, DataflowBuild
from naiad.operators.input import InputVertex
from naiad.operators.probe import ProbeHandle
from naiad.operators.scope import Scope
from naiad.progress.progress_actor import ProgressActor
from naiad.progress.reachability import Reachability

Build = Callable[[Scope], Any]


class Dataflow:
    """One dataflow, running on every worker: what ``build`` returned, and its completion."""

    def __init__(
        self,
        runtime: Runtime,
        ident: int,
        name: str,
        results: list[Any],
        reachability: Reachability,
        shards: list[list[VertexShard]],
    ) -> None:
        self.runtime = runtime
        self.id = ident
        self.name = name
        self.results = results
        """What the build function returned, per worker index."""
        self.reachability = reachability
        self.shards = shards  # [worker][node]
        self._by_node = [[shards[w][n] for w in range(len(shards))] for n in range(len(shards[0]))]
        self._complete: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def done(self) -> bool:
        """Whether every pointstamp is retired: nothing can happen in this dataflow any more."""
        return self._complete.done()

    async def finished(self) -> None:
        """Waits until the dataflow completes (all inputs closed and drained)."""
        await asyncio.shield(self._complete)

    def close_inputs(self) -> None:
        """Closes every input handle of every worker that is still open."""
        for per_worker in self.shards:
            for shard in per_worker:
                if isinstance(shard.logic, InputVertex):
                    shard.logic.handle.close()

    def _frontier_moved(self, moved: list[int]) -> None:
        locations = self.reachability.locations
        for target in moved:
            for shard in self._by_node[locations[target][0]]:
                if shard.pending or shard.wants_frontier:
                    shard.worker.schedule_notify(shard)
        if self.runtime.progress.tracker(self.id).is_idle():
            self.runtime._maybe_complete.add(self)
            self.runtime.group.wake()  # the check runs after the driver's next round

    def _try_complete(self) -> bool:
        """Completes the dataflow if nothing is left: no pointstamp, and no shard with a
        queued activation or a pending notification (a sink's notifications hold no count,
        and the shards woken by the last frontier move must still run)."""
        if self._complete.done():
            return True
        if not self.runtime.progress.tracker(self.id).is_idle():
            return True  # became busy again: a later frontier move re-registers it
        for per_worker in self.shards:
            for shard in per_worker:
                if shard.msg_queued or shard.notify_queued or shard.pending or shard.mailbox:
                    return False
        self._complete.set_result(None)
        self.runtime._dataflow_complete(self)
        return True

    def _fail(self, exc: BaseException) -> None:
        if not self._complete.done():
            self._complete.set_exception(exc)
            self._complete.exception()  # retrieved here; re-raised by finished()
        for per_worker in self.shards:
            for shard in per_worker:
                handle = getattr(shard.logic, "handle", None)
                if isinstance(handle, ProbeHandle):
                    handle._fail(exc)


class Runtime:
    """N workers on this event loop, and the dataflows they run.

    >>> import asyncio, naiad
    >>> async def main():
    ...     async with naiad.Runtime(workers=2) as rt:
    ...         df = rt.dataflow(lambda s: s.from_epochs([[1, 2, 3, 4]]).map(abs).collect())
    ...         await df.finished()
    ...     return sorted(r for part in df.results for _, r in part)
    >>> asyncio.run(main())
    [1, 2, 3, 4]
    """

    def __init__(self, workers: int = 1, *, processes: int = 1, transport: str = "inproc") -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if processes != 1 or transport != "inproc":
            raise NotImplementedError(
                f"processes={processes}, transport={transport!r}: this runtime runs one "
                f"process on the in-process transport"
            )
        self.worker_count = workers
        self.progress = ProgressActor()
        self.workers: list[Worker] = []
        self.dataflows: dict[int, Dataflow] = {}
        self._ids = itertools.count()
        self.group = WorkerGroup(self._check_completions)
        self._maybe_complete: set[Dataflow] = set()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._started = False

    # --- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Runtime:
        self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                for dataflow in list(self.dataflows.values()):
                    dataflow.close_inputs()
                await self.wait_idle()
        finally:
            await self.stop()
        if exc_type is None and self._failure is not None:
            raise self._failure

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.workers = [
            Worker(i, self.worker_count, self.progress.submit, self.group)
            for i in range(self.worker_count)
        ]
        self.group.workers = self.workers
        self._task = asyncio.get_running_loop().create_task(self._drive())

    async def _drive(self) -> None:
        try:
            await self.group.run()
        except Exception as exc:
            self._fail(exc)

    async def stop(self) -> None:
        self.group.stop()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def wait_idle(self) -> None:
        """Waits until every dataflow has completed; raises the first failure."""
        while self.dataflows:
            dataflow = next(iter(self.dataflows.values()))
            await dataflow.finished()
        if self._failure is not None:
            raise self._failure

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        self.group.stop()
        for dataflow in list(self.dataflows.values()):
            dataflow._fail(exc)
        self.dataflows.clear()

    def _check_completions(self) -> None:
        if self._maybe_complete:
            self._maybe_complete = {df for df in self._maybe_complete if not df._try_complete()}

    def _dataflow_complete(self, dataflow: Dataflow) -> None:
        self.dataflows.pop(dataflow.id, None)
        self.progress.unregister(dataflow.id)
        for worker in self.workers:
            worker.forget(dataflow.id)

    # --- building --------------------------------------------------------------------------
    def dataflow(self, build: Build, name: str = "dataflow") -> Dataflow:
        """Builds ``build(scope)`` on every worker and starts it; returns the dataflow."""
        if not self._started:
            raise RuntimeError("use the runtime inside 'async with Runtime(...)'")
        if self._failure is not None:
            raise DataflowStopped("the runtime has stopped after an error") from self._failure
        ident = next(self._ids)
        builds, results = [], []
        for worker in self.workers:
            spec = DataflowBuild(ident, name, worker.index, self.worker_count)
            results.append(build(Scope(spec, name=name)))
            spec.check_complete()
            builds.append(spec)
        _check_same(builds)
        reachability = builds[0].graph().build()

        minimum = {op.node: op.scope.minimum() for op in builds[0].operators}
        initial = [
            ((reachability.source(op.node, p), minimum[op.node]), self.worker_count)
            for op in builds[0].operators
            if op.initial_capability
            for p in range(op.outputs)
        ]
        dataflow_ref: list[Dataflow] = []
        self.progress.register(
            ident, reachability, initial, lambda moved: dataflow_ref[0]._frontier_moved(moved)
        )
        tracker = self.progress.tracker(ident)

        shards: list[list[VertexShard]] = []
        for worker, spec in zip(self.workers, builds, strict=True):
            buffer = worker.buffer_for(ident)
            row = []
            for op in spec.operators:
                targets = [reachability.target(op.node, i) for i in range(op.inputs)]
                sources = [reachability.source(op.node, p) for p in range(op.outputs)]
                frontiers = [tracker.frontier(t) for t in targets]
                row.append(
                    VertexShard(worker, op.name, op.logic, targets, sources, frontiers, buffer)
                )
            shards.append(row)
        self._wire(builds, shards, reachability)
        dataflow = Dataflow(self, ident, name, results, reachability, shards)
        dataflow_ref.append(dataflow)
        self.dataflows[ident] = dataflow

        for spec, row in zip(builds, shards, strict=True):
            for op, shard in zip(spec.operators, row, strict=True):
                if op.initial_capability:
                    shard.start(minimum[op.node])
                if shard.wants_frontier:
                    shard.worker.schedule_notify(shard)
        for worker in self.workers:
            worker.flush()
        return dataflow

    def _wire(
        self, builds: list[DataflowBuild], shards: list[list[VertexShard]], reach: Reachability
    ) -> None:
        for w, (worker, spec) in enumerate(zip(self.workers, builds, strict=True)):
            buffer = worker.buffer_for(spec.dataflow)
            for edge in spec.edges:
                (src, out_port), (dst, in_port) = edge.source, edge.target
                location = reach.target(dst, in_port)
                output = shards[w][src].outputs[out_port]
                if isinstance(edge.pact, Pipeline) or self.worker_count == 1:
                    output.pushers.append(
                        LocalPusher(shards[w][dst], in_port, location, buffer, True)
                    )
                elif isinstance(edge.pact, Exchange):
                    pushers = [
                        LocalPusher(shards[v][dst], in_port, location, buffer, v == w)
                        for v in range(self.worker_count)
                    ]
                    output.pushers.append(ExchangePusher(edge.pact, pushers))
                else:
                    raise BuildError(f"unknown channel kind {edge.pact!r}")


def _check_same(builds: list[DataflowBuild]) -> None:
    """Every worker must have declared the same operators and edges, in the same order."""
    reference = builds[0].fingerprint()
    for spec in builds[1:]:
        other = spec.fingerprint()
        if other != reference:
            at = next(
                (i for i, (a, b) in enumerate(zip(reference, other, strict=False)) if a != b),
                min(len(reference), len(other)),
            )
            mine = reference[at] if at < len(reference) else "nothing"
            theirs = other[at] if at < len(other) else "nothing"
            raise BuildError(
                f"dataflow {spec.name!r}: worker {spec.index} built a different dataflow than "
                f"worker 0: at position {at} worker 0 declared {mine!r}, worker {spec.index} "
                f"declared {theirs!r}; build the dataflow the same way on every worker"
            )


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
        return None
    return uvloop.new_event_loop


def run_coroutine(coro: Coroutine[Any, Any, Any]) -> Any:
    """Runs ``coro`` to completion on a fresh event loop (uvloop where available)."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(coro)


def run(build: Build, workers: int = 1, name: str = "dataflow") -> list[Any]:
    """Builds ``build(scope)`` on ``workers`` workers, runs it to completion, and returns
    what ``build`` returned on each worker. Inputs left open are closed first.

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([["x", "y"]]).map(str.upper).collect())
    [[(0, 'X'), (0, 'Y')]]
    """

    async def main() -> list[Any]:
        async with Runtime(workers) as rt:
            dataflow = rt.dataflow(build, name)
        return dataflow.results

    result: list[Any] = run_coroutine(main())
    return result
