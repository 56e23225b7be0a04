"""The runtime: the processes of a cluster, dataflows built on every worker, supervision.

``Runtime(workers=W)`` runs W workers in this process, on this event loop, with one
progress actor. ``Runtime(workers=W, processes=P, transport="tcp")`` makes this process one
of P that run the same program (launching the other P - 1 itself unless ``naiad run`` or the
environment already did: ``launch.py``); ``transport="inproc"`` simulates P processes inside
this one, through the same codec and protocol, which is how a cluster is tested without
sockets. ``rt.dataflow(build)`` calls ``build(scope)`` once per local worker, checks that
every worker (and every process) declared the same graph, and starts it. It is asyncio-native
(``async with``, awaitable probes); :func:`run` serves synchronous scripts.

Supervision: the first exception raised in a callback, or a peer's failure, stops every
worker; it is re-raised, as the same object with the user's own line in its traceback, to
whoever awaits the runtime (``__aexit__``, ``Dataflow.finished``, a probe).
"""

from __future__ import annotations

import asyncio
import logging
import numbers
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from naiad.actors.loop_thread import check_loop_thread
from naiad.actors.supervision import DataflowDropped, DataflowStopped, interrupted, stopped
from naiad.dataflow.scope import BuildError, DataflowBuild
from naiad.operators.scope import Scope
from naiad.runtime import launch, memory
from naiad.runtime.process import ClusterError, Instance, Process
from naiad.transport.base import Transport
from naiad.transport.inproc import InProcNetwork

Build = Callable[[Scope], Any]
TRANSPORTS = ("inproc", "tcp")


@dataclass(frozen=True)
class Holder:
    """A pointstamp that holds a dataflow back (see :meth:`Dataflow.holders`)."""

    operator: str
    port: int
    kind: str  # "capability" (held on an output) or "messages" (waiting at an input)
    time: Any
    count: int

    def __str__(self) -> str:
        if self.kind == "capability":
            what = "capability" if self.count == 1 else f"{self.count} capabilities"
            return f"{what} at time {self.time!r} on output {self.port} of {self.operator!r}"
        what = "message batch" if self.count == 1 else f"{self.count} message batches"
        return f"{what} at time {self.time!r} waiting at input {self.port} of {self.operator!r}"


class Dataflow:
    """One dataflow, running on every local worker: what ``build`` returned, and completion."""

    def __init__(
        self,
        ident: int,
        name: str,
        results: list[Any],
        instances: list[Instance],
        workers: list[int] | None = None,
    ) -> None:
        self.id = ident
        self.name = name
        self.results = results
        """What the build function returned, per local worker (in global worker order)."""
        self.instances = instances
        self.workers = list(range(len(results))) if workers is None else workers
        """The global index of each local worker, as ``results`` lists them."""
        self.dropped = False
        """Whether :meth:`drop` ended it."""
        self._thread = threading.get_ident()  # the runtime's event loop's (it was built there)

    @property
    def by_worker(self) -> dict[int, Any]:
        """What the build function returned, by global worker index (this process's
        workers only): ``results`` paired with ``workers``.

        >>> import naiad
        >>> async def main():
        ...     async with naiad.Runtime(workers=2) as rt:
        ...         df = rt.dataflow(lambda scope: f"built on worker {scope.index}")
        ...     return df.by_worker
        >>> import asyncio; asyncio.run(main())
        {0: 'built on worker 0', 1: 'built on worker 1'}
        """
        return dict(zip(self.workers, self.results, strict=True))

    def result(self, worker: int) -> Any:
        """What the build function returned on global worker ``worker``, one of this
        process's. ``results`` lists only this process's workers, so in a cluster
        ``results[scope.index]`` is another worker's (or none) outside process 0: share an
        arrangement with ``import_trace(source.result(scope.index).trace, scope)``."""
        if worker not in self.workers:
            raise LookupError(
                f"dataflow {self.name!r}: worker {worker} is not one of this process's "
                f"(workers {self.workers})"
            )
        return self.results[self.workers.index(worker)]

    @property
    def done(self) -> bool:
        """Whether the dataflow has ended, so that nothing can happen in it any more: it
        completed (every pointstamp retired), or it failed (``finished()`` raises why)."""
        return all(i.complete.done() for i in self.instances)

    async def finished(self, timeout: float | None = None) -> None:
        """Waits until the dataflow completes (all inputs closed and drained). With a
        ``timeout`` (seconds), raises ``TimeoutError`` naming what still holds it
        (:meth:`holders`) if it has not completed by then; the dataflow goes on running.
        Raises ``DataflowDropped`` once it is dropped (:meth:`drop`), while waiting too."""
        if timeout is None or self.done:
            # an ended dataflow answers at once: on Python 3.11, wait_for with a timeout of 0
            # cancels the wait before it runs, and timed out a dataflow that had completed
            await self._completion()
            return
        try:
            await asyncio.wait_for(self._completion(), timeout)
        except TimeoutError:
            raise TimeoutError(
                f"dataflow {self.name!r} did not complete within {timeout} s; "
                + self._describe_holders()
            ) from None

    async def _completion(self) -> None:
        for instance in self.instances:
            await asyncio.shield(instance.complete)

    def holders(self) -> list[Holder]:
        """What keeps this dataflow from completing, as this process's progress tracker sees
        it: the pointstamps that nothing else in the dataflow could still precede -- a
        capability some operator (or an input handle, or a ``retain``\\ ed capability)
        holds, or messages waiting for an operator. Empty once it has ended. For diagnosing a
        dataflow that does not finish, e.g. a capability kept past the end of its input:

        >>> import asyncio, naiad
        >>> class Keeper(naiad.Vertex):
        ...     def on_start(self, cap):
        ...         self.kept = cap.retain()  # never dropped
        ...     def on_recv(self, port, cap, batch):
        ...         pass
        >>> keeper = Keeper()
        >>> async def main():
        ...     async with naiad.Runtime() as rt:
        ...         df = rt.dataflow(lambda s: s.from_epochs([[1]]).unary(keeper, name="keeper"))
        ...         await asyncio.sleep(0.05)
        ...         print([str(h) for h in df.holders()])
        ...         keeper.kept.drop()  # else the runtime would wait for it for ever
        >>> asyncio.run(main())
        ["capability at time 0 on output 0 of 'keeper'"]
        """
        if self.done:
            return []
        progress = self.instances[0].process.progress
        if progress.finished(self.id):
            return []
        tracker = progress.tracker(self.id)
        locations = tracker.reachability.locations
        names = tracker.reachability.node_names
        found = []
        for loc, time, count in tracker.holders():
            node, port, is_source = locations[loc]
            kind = "capability" if is_source else "messages"
            found.append(Holder(names[node], port, kind, time, count))
        return found

    def _check_thread(self, method: str, example: str) -> None:
        check_loop_thread(self._thread, lambda: f"dataflow {self.name!r}: {method}()", example)

    def _describe_holders(self, found: list[Holder] | None = None) -> str:
        """``found`` (by default, the holders now) for an error or a warning."""
        if found is None:
            found = self.holders()
        if not found:
            return "nothing holds it any more"
        return "held by: " + "; ".join(map(str, found))

    def drop(self) -> None:
        """Ends the dataflow at once, on every worker of this process, whatever holds it
        (timely's ``drop_dataflow``): none of its operators runs again, what waits in their
        mailboxes and their pending notifications is discarded, its progress tracking is
        forgotten, and what it holds outside itself is released (an import's hold on its
        source's trace, so the source compacts again; its stream on a shared probe handle).
        The runtime goes on running every other dataflow.

        Afterwards ``finished()``, its own probes, subscriptions and views (waits and
        reads), its trace handles' ``wait`` and its inputs' ``send`` raise
        :class:`~naiad.DataflowDropped`, naming it; what it had produced stays readable
        (``collect`` lists, a ``trace.cursor()`` at complete times). Dropping a dataflow
        that has ended (completed, failed or dropped) does nothing.

        Refused (``RuntimeError``, naming them, nothing dropped) while another dataflow
        follows one of its arrangements (``import_trace``) or live capture logs
        (``replay``): they would wait for ever for what it no longer produces; drop them
        (or ``close_inputs()`` them) first. Refused (``RuntimeError``) from another thread
        than the runtime's event loop: pass the call to the loop.

        In a cluster every process builds the same dataflows and drops this one too (each
        its own part); what peers still send for it is ignored. In a simulated cluster
        (``transport="inproc"``) one call drops it in every process.

        >>> import asyncio, naiad
        >>> async def main():
        ...     async with naiad.Runtime() as rt:
        ...         def build(s):
        ...             handle, stream = s.new_input()
        ...             return handle, stream.probe()
        ...         df = rt.dataflow(build, name="query")
        ...         handle, probe = df.results[0]
        ...         df.drop()  # its input is never closed: it would run until the runtime stops
        ...         try:
        ...             handle.send([1])
        ...         except naiad.DataflowDropped as e:
        ...             print(e)
        >>> asyncio.run(main())
        input 'input': dataflow 'query' was dropped (Dataflow.drop)
        """
        self._check_thread("drop", "loop.call_soon_threadsafe(dataflow.drop)")
        if self.done:
            return
        followers = [
            instance.process.owner(v) for instance in self.instances for v in instance.followers()
        ]
        if followers:
            raise RuntimeError(
                f"dataflow {self.name!r} cannot be dropped: "
                + ", ".join(dict.fromkeys(followers))
                + " follows what it produces (an import of its arrangement, or a replay of "
                "its capture) and would wait for it for ever; drop that dataflow (or "
                "close_inputs() it) first"
            )
        error = DataflowDropped(f"dataflow {self.name!r} was dropped (Dataflow.drop)")
        self.dropped = True
        for instance in self.instances:
            instance.process.drop(instance, error)
            instance.process.runtime.dataflows.pop(self.id, None)

    def close_inputs(self, imports: bool = True) -> None:
        """Closes every input handle of every local worker that is still open, and (with
        ``imports``) stops every import of another dataflow's arrangement at what it has sent
        so far: the dataflow can then complete while its sources keep running. Refused
        (``RuntimeError``, nothing closed) from another thread than the runtime's event loop."""
        self._check_thread("close_inputs", "loop.call_soon_threadsafe(dataflow.close_inputs)")
        for instance in self.instances:
            instance.close_inputs(imports)


STALL_WARNING = 10.0
logger = logging.getLogger("naiad.runtime")

CLOSED = "this runtime has stopped (its 'async with' block ended): a runtime runs once"


class Runtime:
    """The workers of this process (or of a simulated cluster), and the dataflows they run.

    ``workers`` per process, ``processes`` in the cluster, ``transport`` ``"inproc"`` (one OS
    process; several simulated processes if ``processes > 1``) or ``"tcp"`` (real processes,
    launched from here or by ``naiad run``). ``accumulate`` turns Naiad's local accumulation
    of progress updates on (the default) or off; ``central`` routes progress through process
    0 as a central accumulator (which accumulates whatever ``accumulate`` says);
    ``connect_timeout`` bounds cluster start-up, in seconds (by default
    ``NAIAD_CONNECT_TIMEOUT``, else 30).

    >>> import asyncio, naiad
    >>> async def main():
    ...     async with naiad.Runtime(workers=2) as rt:
    ...         df = rt.dataflow(lambda s: s.from_epochs([[1, 2, 3, 4]]).map(abs).collect())
    ...         await df.finished()
    ...     return sorted(r for part in df.results for _, r in part)
    >>> asyncio.run(main())
    [1, 2, 3, 4]
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        processes: int | None = None,
        transport: str | None = None,
        accumulate: bool = True,
        central: bool = False,
        connect_timeout: float | None = None,
    ) -> None:
        member = launch.member_from_env()
        if connect_timeout is None:
            connect_timeout = launch.connect_timeout()
        elif isinstance(connect_timeout, bool) or not isinstance(connect_timeout, numbers.Real):
            raise TypeError(f"connect_timeout must be a number of seconds, not {connect_timeout!r}")
        else:
            connect_timeout = launch.checked_timeout(connect_timeout, "connect_timeout")
        if member is not None:
            for given, known, what in (
                (workers, member.workers, "workers"),
                (processes, member.processes, "processes"),
            ):
                if given is not None and given != known:
                    raise launch.LaunchError(
                        f"Runtime({what}={given}) disagrees with the cluster this process "
                        f"was launched into ({what}={known})"
                    )
            if transport not in (None, "tcp"):
                raise launch.LaunchError(f"a launched cluster member uses tcp, not {transport!r}")
            workers, processes, transport = member.workers, member.processes, "tcp"
        workers = 1 if workers is None else workers
        processes = 1 if processes is None else processes
        transport = "inproc" if transport is None else transport
        for what, n in (("workers", workers), ("processes", processes)):
            if not isinstance(n, numbers.Integral) or isinstance(n, bool):
                raise TypeError(f"{what} must be an integer, not {n!r}")
        workers, processes = int(workers), int(processes)
        if workers < 1 or processes < 1:
            raise ValueError(
                f"workers and processes must be at least 1 (got {workers}, {processes})"
            )
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
        self.worker_count = workers
        self.process_count = processes
        self.transport = transport
        self.accumulate = accumulate
        self.central = central
        self.connect_timeout = connect_timeout
        self._member = member
        self.processes: list[Process] = []
        self.dataflows: dict[int, Dataflow] = {}
        self._next_id = 0  # dataflows are numbered in build order, the same in every process
        self._failure: BaseException | None = None
        self._started = False
        self._thread: int | None = None  # the thread of its event loop, once started
        self._closed = False  # stopped: a runtime runs once
        self._children: list[subprocess.Popen[bytes]] = []
        self._stall_warning: float | None = STALL_WARNING

    @property
    def stall_warning(self) -> float | None:
        """Seconds without progress after which waiting for dataflows at exit warns (None:
        never); see :meth:`wait_idle`. A positive finite number, or None."""
        return self._stall_warning

    @stall_warning.setter
    def stall_warning(self, seconds: float | None) -> None:
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
                raise TypeError(
                    f"stall_warning must be a number of seconds or None, not {seconds!r}"
                )
            if not 0 < seconds < float("inf"):  # 0 would poll without pause; NaN never waits
                raise ValueError(
                    f"stall_warning must be a positive, finite number of seconds (or None to "
                    f"turn the warning off), not {seconds!r}"
                )
            seconds = float(seconds)
        self._stall_warning = seconds

    @property
    def peers(self) -> int:
        """The number of workers in the whole cluster (``scope.peers`` in a build)."""
        return self.worker_count * self.process_count

    @property
    def process_index(self) -> int:
        """The index of this process in the cluster, from 0 to ``process_count - 1``: 0 in
        the process that launched the others (and when there are none), ``p`` in member
        ``p`` of a ``naiad run`` cluster. A simulated cluster (``transport="inproc"``) runs
        every process in this one, so it is 0 there, and :attr:`workers` lists every worker:
        a script that reads gathered results where ``rt.process_index == 0`` runs unchanged
        on one process, simulated processes and real ones. Known before the runtime starts.

        >>> import naiad
        >>> rt = naiad.Runtime(workers=2, processes=3, transport="inproc")
        >>> rt.process_index, rt.process_count, rt.worker_count, rt.peers, rt.workers
        (0, 3, 2, 6, [0, 1, 2, 3, 4, 5])
        """
        member = self._member
        return 0 if member is None else member.process

    @property
    def workers(self) -> list[int]:
        """The global indices of the workers this runtime runs, in order (what
        ``scope.index`` is in their builds, and what ``Dataflow.workers`` lists): worker
        ``w`` of process ``p`` is ``p * worker_count + w``."""
        local = self.peers if self.transport == "inproc" else self.worker_count
        first = self.process_index * self.worker_count
        return list(range(first, first + local))

    # --- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None and self._failure is None and self._started:
            self._fail(interrupted(exc))  # the peers hear why this process stops
        try:
            if exc_type is None:
                for dataflow in list(self.dataflows.values()):
                    # imports follow their sources to the end: those close here too
                    dataflow.close_inputs(imports=False)
                await self.wait_idle()
        except BaseException as error:
            # Cancelled (a timeout) while waiting for the dataflows: they will not finish, so
            # stop as after an error; a graceful leave would wait for goodbyes that peers
            # still running them never send.
            if self._failure is None and self._started:
                self._fail(interrupted(error))
            raise
        finally:
            await self.stop(graceful=exc_type is None and self._failure is None)
        if exc_type is None and self._failure is not None:
            raise self._failure

    async def start(self) -> None:
        if self._closed:
            raise RuntimeError(CLOSED)
        if self._started:
            return
        self._started = True
        self._thread = threading.get_ident()  # its event loop's: see naiad.actors.loop_thread
        memory.keep_freed_memory()
        transports = self._transports()
        self.processes = [
            Process(
                self, index, self.process_count, self.worker_count, t, self.accumulate, self.central
            )
            for index, t in transports
        ]
        try:
            await self._connect()
        except BaseException:
            await self._reap_children(kill=True)
            raise
        for process in self.processes:
            process.start(self._fail)

    async def _connect(self) -> None:
        """Connects the local processes; fails as soon as a process this runtime launched
        exits before it connected (it never will: waiting for connect_timeout would only
        delay the error and name no cause)."""
        connecting = asyncio.ensure_future(asyncio.gather(*(p.connect() for p in self.processes)))
        if not self._children:
            await connecting
            return
        watching = asyncio.ensure_future(self._watch_children())
        try:
            await asyncio.wait((connecting, watching), return_when=asyncio.FIRST_COMPLETED)
            if not connecting.done():
                connecting.cancel()
                await asyncio.gather(connecting, return_exceptions=True)
                watching.result()  # raises why
            await connecting
        finally:
            watching.cancel()
            await asyncio.gather(connecting, watching, return_exceptions=True)

    async def _watch_children(self) -> None:
        """Raises once a launched process has exited (polled: only while connecting)."""
        while True:
            for index, child in enumerate(self._children, start=1):
                code = child.poll()
                if code is not None:
                    raise ClusterError(
                        f"process {index} {launch.exit_description(code)} before the cluster "
                        f"connected",
                        index,
                    )
            await asyncio.sleep(0.05)

    def _transports(self) -> list[tuple[int, Transport | None]]:
        if self.process_count == 1:
            return [(0, None)]
        if self.transport == "inproc":
            network = InProcNetwork(self.process_count)
            return list(enumerate(network.endpoints))
        from naiad.transport.tcp import TcpTransport

        member = self._member
        listen: socket.socket | None = None
        global _self_launched
        # the launching process and those it launched run the script side by side: once
        if (member is None or member.self_launched) and _self_launched:
            raise launch.LaunchError(launch.ONE_SELF_LAUNCH)
        if member is not None and member.self_launched:
            _self_launched = True
        if member is None:  # launch the other processes of the cluster ourselves
            # (what can fail first: a runtime that launched nothing leaves nothing behind, and
            # is not counted as this script's one self-launching runtime)
            argv = launch.script_argv()
            secret = launch.read_secret() or launch.new_secret()
            listeners = launch.bind_listeners(self.process_count)
            try:
                self._children = launch.spawn(
                    argv,
                    self.process_count,
                    self.worker_count,
                    listeners,
                    secret,
                    range(1, self.process_count),
                    self_launched=True,
                )
            except BaseException:
                for s in listeners:
                    s.close()
                raise
            _self_launched = True
            addresses = [s.getsockname()[:2] for s in listeners]
            for s in listeners[1:]:
                s.close()
            index, listen = 0, listeners[0]
        else:
            index, addresses, secret = member.process, member.addresses, member.secret
            if member.listen_fd is not None:
                # a duplicate: the transport closes it, and a later runtime of this script
                # listens on the launcher's socket again
                listen = socket.socket(fileno=os.dup(member.listen_fd))
        transport = TcpTransport(
            index,
            self.process_count,
            addresses,
            secret,
            listen_sock=listen,
            connect_timeout=self.connect_timeout,
            max_payload=launch.max_payload(),
            # the launcher bound every process's socket before starting any of them
            peers_listening=member is None or member.listen_fd is not None,
        )
        return [(index, transport)]

    async def stop(self, graceful: bool = False) -> None:
        """Stops every worker, fails the dataflows still running, leaves the cluster
        (``graceful``: says goodbye and waits, at most ``connect_timeout``, for the peers'),
        closes the connections and waits for the processes this runtime launched.

        Cancelled meanwhile (a timeout, Ctrl-C), it still closes every connection and its
        listening socket, and kills and reaps the processes it launched, before the
        ``CancelledError`` goes on: nothing waits for the peers any more.
        """
        self._closed = True
        try:
            for process in self.processes:
                await process.stop()
                for instance in list(process.instances.values()):
                    # nothing will complete it now: its handles must not wait forever
                    instance.fail(DataflowStopped(f"dataflow {instance.name!r}: {CLOSED}"))
            if graceful:
                await asyncio.gather(*(p.leave(self.connect_timeout) for p in self.processes))
            else:
                await self._close_transports()
            await self._reap_children(kill=not graceful)
        except BaseException:
            for child in self._children:  # first, and at once: a second cancel may follow
                if child.poll() is None:
                    child.kill()
            await self._close_transports()
            await self._reap_children(kill=True)
            raise

    async def _close_transports(self) -> None:
        for process in self.processes:
            if process.transport is not None:
                await process.transport.close()  # (again: a no-op once closed)

    async def _reap_children(self, kill: bool) -> None:
        failed = []
        for index, child in enumerate(self._children, start=1):
            if kill and child.poll() is None:
                child.kill()
            code = await asyncio.to_thread(child.wait)
            if code != 0:
                failed.append(f"process {index} {launch.exit_description(code)}")
        self._children = []
        if failed and self._failure is None and not kill:
            self._failure = ClusterError("; ".join(failed))
            raise self._failure

    async def wait_idle(self) -> None:
        """Waits until every dataflow has completed; raises the first failure. A dataflow
        whose :meth:`Dataflow.holders` stay the same for ``stall_warning`` seconds of this
        wait is reported in a warning (logger ``naiad.runtime``) naming them, once per
        change of holders: the ``async with`` block's exit waits for every dataflow, which
        never completes while a capability is kept past the end of its input."""
        while self.dataflows:
            dataflow = next(iter(self.dataflows.values()))
            try:
                await self._finished_or_warn(dataflow)
            except DataflowDropped:
                if not dataflow.dropped:  # (dropped while waited for: it ended)
                    raise
            self.dataflows.pop(dataflow.id, None)
        if self._failure is not None:
            raise self._failure

    async def _finished_or_warn(self, dataflow: Dataflow) -> None:
        interval = self._stall_warning
        if interval is None:
            await dataflow.finished()
            return
        completion = asyncio.ensure_future(dataflow._completion())
        try:
            seen: list[Holder] | None = None
            warned: list[Holder] | None = None
            waited = 0.0
            while not (await asyncio.wait({completion}, timeout=interval))[0]:
                waited += interval
                held = dataflow.holders()
                if held and held == seen and held != warned:
                    logger.warning(
                        "dataflow %r has not completed after %.3g s and nothing has moved "
                        "for %.3g s; %s",
                        dataflow.name,
                        waited,
                        interval,
                        dataflow._describe_holders(held),  # not searched again
                    )
                    warned = held
                seen = held
            completion.result()
        finally:
            completion.cancel()

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
            if self._member is not None:  # before the peers hear of it: causes come first
                peer = exc.peer if isinstance(exc, ClusterError) else None
                launch.report_failure(self._member, exc, peer)
        for process in self.processes:
            process.fail(exc)
        self.dataflows.clear()

    def _instance_complete(self, instance: Instance) -> None:
        dataflow = self.dataflows.get(instance.id)
        if dataflow is not None and dataflow.done:
            self.dataflows.pop(instance.id, None)

    # --- building --------------------------------------------------------------------------
    def dataflow(self, build: Build, name: str = "dataflow") -> Dataflow:
        """Builds ``build(scope)`` on every local worker and starts it; returns the dataflow."""
        if not self._started:
            raise RuntimeError("use the runtime inside 'async with Runtime(...)'")
        if self._closed:
            raise RuntimeError(CLOSED)
        if self._failure is not None:
            raise stopped(f"cannot build dataflow {name!r}", self._failure)
        check_loop_thread(  # (from another thread it would stop the runtime half-built)
            self._thread,
            lambda: f"runtime.dataflow({name!r})",
            "asyncio.run_coroutine_threadsafe(coro, loop) of a coroutine that builds it",
        )
        # taken once every worker has built the dataflow: a build that raises leaves no gap in
        # the numbering (the progress actors tell finished dataflows by it), unless processes
        # elsewhere may have built it (_build_raised)
        ident = self._next_id
        per_process: list[list[DataflowBuild]] = []
        results: list[Any] = []
        indices: list[int] = []
        made: list[DataflowBuild] = []  # every worker's build so far, the one that raised too
        try:
            for process in self.processes:
                builds = []
                for worker in process.workers:
                    spec = DataflowBuild(ident, name, worker.index, self.peers)
                    made.append(spec)
                    results.append(build(Scope(spec, name=name)))
                    indices.append(worker.index)
                    spec.check_complete()
                    builds.append(spec)
                per_process.append(builds)
            _check_same([b for builds in per_process for b in builds])
            reachability = per_process[0][0].graph().build()
        except BaseException as exc:
            # no vertex of this dataflow will run: what they registered outside it (a shared
            # probe handle's stream, readers of an imported trace) must not stay behind
            for spec in made:
                spec.build_failed()
            if len(self.processes) < self.process_count:  # processes elsewhere
                self._build_raised(ident, name, exc)
            raise
        self._next_id += 1
        instances: list[Instance] = []
        try:
            for process, builds in zip(self.processes, per_process, strict=True):
                process.announce(ident, name, builds[0])
                instances.append(process.instantiate(ident, name, builds, reachability))
        except BaseException as exc:
            # (a peer left without building it, built another dataflow, or an on_start
            # raised) other processes, and this one's shards started before the error, may
            # run the dataflow already, and the rest of it never will: nothing could complete
            # it, so the runtime stops, as for any callback's error; the builds that never
            # ran undo their holds, as a build that raises does
            for builds in per_process[len(instances) :]:
                for spec in builds:
                    spec.build_failed()
            if self._failure is None:
                self._fail(interrupted(exc))
            raise
        for spec in made:
            spec.undo.clear()  # running: the handles taken in the build are the user's
        dataflow = Dataflow(ident, name, results, instances, indices)
        if not dataflow.done:
            self.dataflows[ident] = dataflow
        return dataflow

    def _build_raised(self, ident: int, name: str, exc: BaseException) -> None:
        """After the build of dataflow ``ident`` raised here, with processes elsewhere: they
        may have built it (a build that depends on the process), so it takes its number
        here too (the next dataflow is numbered as theirs), and they hear that it raised.
        Where it was built, or once that is known here, the cluster stops with an error
        naming the cause (nothing could complete the dataflow); where the build raised on
        every process, they all go on."""
        self._next_id += 1
        try:
            for process in self.processes:
                process.announce_raised(ident, name, exc)
        except BuildError as error:
            if self._failure is None:
                self._fail(error)


_self_launched = False
"""Whether this process already ran a self-launching cluster runtime (as its launcher, or as
a member that one launched)."""


def _check_same(builds: list[DataflowBuild]) -> None:
    """Every worker must have declared the same operators and edges, in the same order, each
    operator with its own logic object."""
    owners: dict[int, tuple[int, int, str]] = {}
    for spec in builds:
        for op in spec.operators:
            first = owners.setdefault(id(op.logic), (spec.index, op.node, op.name))
            if first[:2] != (spec.index, op.node):
                raise BuildError(
                    f"one {type(op.logic).__name__} object is operator {first[2]!r} on worker "
                    f"{first[0]} and operator {op.name!r} on worker {spec.index}: a vertex "
                    f"holds one shard's state, so create one per operator and worker (inside "
                    f"the build function)"
                )
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
    """Runs ``coro`` to completion on a fresh event loop (uvloop where available); refused
    inside a running event loop, which a second one cannot run in."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        # asyncio.Runner would fail here too, but closing its loop then raises a second,
        # unrelated error that hides the first, and warns that coro was never awaited
        coro.close()
        raise RuntimeError(
            "naiad.run() runs its own event loop, so it cannot be called from async code "
            "(a coroutine, or a Jupyter notebook, which runs one): there, use "
            "'async with naiad.Runtime(workers) as rt: df = rt.dataflow(build)', then "
            "'await df.finished()' and read df.results"
        )
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(coro)


def run(
    build: Build,
    workers: int | None = None,
    name: str = "dataflow",
    *,
    processes: int | None = None,
    transport: str | None = None,
) -> list[Any]:
    """Builds ``build(scope)`` on every worker, runs it to completion, and returns what
    ``build`` returned on each local worker. Inputs left open are closed first.

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([["x", "y"]]).map(str.upper).collect())
    [[(0, 'X'), (0, 'Y')]]
    """

    async def main() -> list[Any]:
        async with Runtime(workers, processes=processes, transport=transport) as rt:
            dataflow = rt.dataflow(build, name)
        return dataflow.results

    result: list[Any] = run_coroutine(main())
    return result
