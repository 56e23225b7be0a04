"""One naiad process: its workers, their driver task, its progress actor, its transport end,
and the local part of every dataflow (Naiad §3, Figure 5).

Workers of the same process exchange messages through shared memory (the shard's mailbox);
messages for workers of other processes are encoded and sent as DATA frames, progress batches
as PROGRESS frames, and the processes check with CONTROL frames that they run as many workers
each and built the same dataflows. Frames are validated as they arrive: anything that does not
fit (a dataflow, channel or worker that cannot be, a location out of range, a data frame out
of sequence) is logged and stops the runtime with an error that names the peer, instead of
being applied. Frames for a dataflow this process has not built yet are kept until it is
(workers may build at different moments).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import reprlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.supervision import DataflowDropped, interrupted
from naiad.actors.vertex import Vertex, VertexShard, waits_on_nothing
from naiad.actors.worker import Worker, WorkerGroup
from naiad.dataflow.channels import (
    Broadcast,
    BroadcastPusher,
    CheckedPusher,
    Exchange,
    ExchangePusher,
    LocalPusher,
    Pipeline,
)
from naiad.dataflow.scope import BuildError, DataflowBuild
from naiad.operators.input import ImportVertex, InputHandle, InputVertex
from naiad.operators.probe import ProbeHandle
from naiad.operators.unordered_input import UnorderedInputHandle, UnorderedInputVertex
from naiad.progress.change_batch import ChangeBatch
from naiad.progress.progress_actor import Changes, ProgressActor, UnappliableBatch
from naiad.progress.reachability import Reachability
from naiad.transport.base import Transport
from naiad.transport.codec import (
    FrameError,
    Header,
    Kind,
    decode_changes,
    decode_message,
    encode_changes,
    encode_message,
    packb,
    unpackb,
)

if TYPE_CHECKING:
    from naiad.runtime.runtime import Runtime

log = logging.getLogger(__name__)


class _Raised(str):
    """A process's entry in a dataflow's build announcements when its build raised: the
    cause, where the others' entries are digests of what they built."""


def _raised(entry: str) -> bool:
    """Whether a process's build announcement says its build raised."""
    return isinstance(entry, _Raised)


class ClusterError(RuntimeError):
    """A peer process failed, left, or sent something that cannot be applied."""

    def __init__(self, message: str, peer: int | None = None) -> None:
        super().__init__(message)
        self.peer = peer
        """The process that caused this error, if it names one."""


class PeerFailed(ClusterError):
    """Another process stopped the cluster and said why."""


class RemotePusher:
    """Pushes to a worker of another process: counts the message, then sends a DATA frame."""

    __slots__ = ("buffer", "channel", "dataflow", "location", "peer", "process", "source", "target")

    def __init__(
        self,
        process: Process,
        peer: int,
        dataflow: int,
        channel: int,
        source: int,
        target: int,
        location: int,
        buffer: ChangeBatch,
    ) -> None:
        self.process = process
        self.peer = peer
        self.dataflow = dataflow
        self.channel = channel
        self.source = source
        self.target = target
        self.location = location
        self.buffer = buffer

    stages = True  # the codec may refuse a record
    shares = False  # the batch is encoded: the receiver gets a copy

    def push(self, time: Any, batch: Any) -> None:
        self.send_encoded(time, self.encoded(time, batch))

    def stage(self, time: Any, batch: Any) -> Callable[[], None]:
        frames = self.encoded(time, batch)
        return functools.partial(self.send_encoded, time, frames)

    def encoded(self, time: Any, batch: Any) -> list[tuple[list[bytes | memoryview], int]]:
        """The frames of a message (parts and size): one, or more if the batch had to be
        split to fit the frame limit. Raises if the codec refuses a record, or if one record
        alone does not fit (naming it, its place in ``batch`` and the limit); nothing is sent."""
        return self._split(time, batch, len(batch) if hasattr(batch, "__len__") else 0, 0)

    def _split(
        self, time: Any, batch: Any, total: int, start: int
    ) -> list[tuple[list[bytes | memoryview], int]]:
        """:meth:`encoded` for ``batch``, the records from index ``start`` on of the ``total``
        the operator sent."""
        parts = encode_message(time, batch)
        size = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
        limit = self.process.max_payload
        if size <= limit:
            return [(parts, size)]
        # the peer would refuse the frame: send the batch in pieces, each a message. Pieces
        # of about half the limit, not halves: halving a batch k times the limit encoded it
        # again at each of log2(k) levels (7 times over for k = 64); pieces this size are
        # encoded once more, and only a piece of records larger than most is split again.
        n = len(batch) if hasattr(batch, "__len__") else 0
        count = min(n, max(2, -(-2 * size // limit)))
        try:
            pieces = [
                (i * n // count, batch[i * n // count : (i + 1) * n // count]) for i in range(count)
            ]
        except (TypeError, KeyError):
            pieces = []
        if n < 2 or not pieces:
            raise ValueError(self._too_large(time, batch, total, start, size, limit))
        return [
            frame for lo, piece in pieces for frame in self._split(time, piece, total, start + lo)
        ]

    def _too_large(
        self, time: Any, batch: Any, total: int, start: int, size: int, limit: int
    ) -> str:
        """The error for a message over the frame limit that cannot be split: the record
        itself when it is one of the ``total`` the operator sent, else the batch."""
        setting = f"the frame limit of {limit} bytes (NAIAD_MAX_PAYLOAD)"
        try:
            # a differential batch (Updates) is columnar: its one update as a triple
            only = batch.to_records()[0] if hasattr(batch, "to_records") else batch[0]
            record = f"{reprlib.repr(only)} ({type(only).__name__})" if len(batch) == 1 else None
        except Exception:  # a batch that cannot be indexed: described as a batch below
            record = None
        if record is None:
            return (
                f"a message of {size} bytes at time {time!r} for worker {self.target} exceeds "
                f"{setting} and cannot be split (a {type(batch).__name__} batch of "
                f"{total} records)"
            )
        return (
            f"record {start} of the {total} bound for worker {self.target} at time {time!r}, "
            f"{record}, needs a message of {size} bytes, over "
            f"{setting}: a record is never split across frames; make it smaller or raise "
            f"the limit"
        )

    def send_encoded(self, time: Any, frames: list[tuple[list[bytes | memoryview], int]]) -> None:
        for parts, size in frames:
            self.buffer.update((self.location, time), 1)  # counted once per message sent
            self.process.send_data(
                self.peer, self.dataflow, self.channel, self.source, self.target, parts, size
            )


class Instance:
    """The part of one dataflow that runs in one process."""

    def __init__(
        self,
        process: Process,
        ident: int,
        name: str,
        builds: list[DataflowBuild],
        reachability: Reachability,
    ) -> None:
        self.process = process
        self.id = ident
        self.name = name
        self.builds = builds
        self.reachability = reachability
        self.shards: list[list[VertexShard]] = []  # [local worker][node]
        self.complete: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def frontier_moved(self, moved: list[int]) -> None:
        locations = self.reachability.locations
        for target in moved:
            for row in self.shards:
                shard = row[locations[target][0]]
                if shard.pending or shard.wants_frontier:
                    shard.worker.schedule_notify(shard)
        if self.process.progress.tracker(self.id).is_idle():
            self.process.maybe_complete.add(self)
            self.process.group.wake()  # the check runs after the driver's next round

    def try_complete(self) -> bool:
        """Completes if nothing is left: no pointstamp, and no shard with a queued activation
        or a pending notification (a sink's notifications hold no count, and the shards woken
        by the last frontier move must still run)."""
        if self.complete.done():
            return True
        if not self.process.progress.tracker(self.id).is_idle():
            return True  # busy again: a later frontier move re-registers it
        for row in self.shards:
            for shard in row:
                if shard.msg_queued or shard.notify_queued or shard.pending or shard.mailbox:
                    return False
        self.complete.set_result(None)
        self.process.instance_complete(self)
        return True

    def close_inputs(self, imports: bool = True) -> None:
        for row in self.shards:
            for shard in row:
                if isinstance(shard.logic, InputVertex | UnorderedInputVertex):
                    shard.logic.handle.close()
                elif imports and isinstance(shard.logic, ImportVertex):
                    shard.logic.close()

    def fail(self, exc: BaseException) -> None:
        if not self.complete.done():
            self.complete.set_exception(exc)
            self.complete.exception()  # retrieved here; re-raised by whoever awaits
        for row in self.shards:
            for shard in row:
                if shard.failure is None:
                    shard.failure = exc
                handle = getattr(shard.logic, "handle", None)
                if isinstance(handle, ProbeHandle | InputHandle | UnorderedInputHandle):
                    handle._fail(exc)
                # vertices whose state other dataflows follow (arrangements imported
                # elsewhere) tell them that it will not change any more
                stopped = getattr(shard.logic, "dataflow_stopped", None)
                if stopped is not None:
                    stopped(exc)

    def followers(self) -> list[Vertex]:
        """The vertices of other dataflows that follow one of this one's (imports of its
        arrangements, replays of its live capture logs): they wait for what it produces."""
        mine = {id(shard.logic) for row in self.shards for shard in row}
        found: list[Vertex] = []
        for row in self.shards:
            for shard in row:
                follows = getattr(shard.logic, "followers", None)
                if follows is not None:
                    found.extend(v for v in follows() if id(v) not in mine)
        return found

    def drop(self, error: DataflowDropped) -> None:
        """Ends this part of the dataflow at once (its progress already forgotten): no shard
        runs again, mailboxes and pending notifications are discarded, each vertex releases
        what it holds outside the dataflow, and every handle refuses with ``error``."""
        if not self.complete.done():
            self.complete.set_exception(error)
            self.complete.exception()  # retrieved here; re-raised by whoever awaits
        shards = [shard for row in self.shards for shard in row]
        self.shards = []  # (close_inputs, frontier moves: nothing left to reach)
        for shard in shards:
            # set first: a shard on the stack (the drop came from its callback) or in a run
            # queue stops at its next step, and what is sent to it is discarded
            shard.failure = error
            shard.mailbox.clear()
            shard.pending.clear()
            shard.waiting = None
        for shard in shards:
            stopped = getattr(shard.logic, "dataflow_stopped", None)
            if stopped is not None:  # a trace's or log's waits raise instead of hanging
                stopped(error)
            shard.logic.dropped(error)

    # --- frames ---------------------------------------------------------------------------------
    def deliver(self, peer: int, header: Header, payload: memoryview) -> None:
        """Hands a DATA frame to the shard it is for, after checking it can be."""
        process = self.process
        edges = self.builds[0].edges
        if header.channel >= len(edges) or not isinstance(
            edges[header.channel].pact, Exchange | Broadcast
        ):
            raise FrameError(f"dataflow {self.id} has no exchange channel {header.channel}")
        local = header.target - process.first
        if not 0 <= local < process.local:
            raise FrameError(f"worker {header.target} is not a worker of process {process.index}")
        if not peer * process.local <= header.source < (peer + 1) * process.local:
            raise FrameError(f"worker {header.source} is not a worker of process {peer}")
        time, batch = decode_message(payload)
        edge = edges[header.channel]
        node, port = edge.target
        self.shards[local][node].receive(port, time, batch, False)

    def check_changes(self, changes: Changes) -> None:
        count = len(self.reachability.locations)
        for (loc, _), _ in changes:
            if not 0 <= loc < count:
                raise FrameError(f"progress update for location {loc} of dataflow {self.id}")


class Process:
    """One process of a cluster (or the only one)."""

    def __init__(
        self,
        runtime: Runtime,
        index: int,
        processes: int,
        local_workers: int,
        transport: Transport | None,
        accumulate: bool = True,
        central: bool = False,
    ) -> None:
        self.runtime = runtime
        self.index = index
        self.processes = processes
        self.local = local_workers
        self.peers = processes * local_workers
        self.first = index * local_workers
        self.transport = transport
        self.group = WorkerGroup(self._check_completions)
        self.progress = ProgressActor(
            index,
            processes,
            self._broadcast if processes > 1 else None,
            accumulate,
            hub=0 if central else None,
        )
        self.workers = [
            Worker(self.first + w, self.peers, self.progress.submit, self.group)
            for w in range(local_workers)
        ]
        self.group.workers = self.workers
        for worker in self.workers:
            worker.transport = transport
        self.instances: dict[int, Instance] = {}
        self.maybe_complete: set[Instance] = set()
        self._early: dict[int, list[tuple[int, Header, memoryview]]] = {}
        # dataflow -> process -> build digest, kept until the dataflow finished here and
        # every process's digest was compared (nothing stays behind per finished dataflow)
        self._digests: dict[int, dict[int, str]] = {}
        self._data_out = [0] * processes
        self._data_in = [0] * processes
        self.goodbyes: set[int] = set()
        self._lost: set[int] = set()  # peers whose connection closed without a goodbye
        self._goodbye_event = asyncio.Event()  # set on every goodbye, loss or failure
        self._task: asyncio.Task[None] | None = None
        self._connected = False  # to every peer: the transport's start returned

    # --- lifecycle ------------------------------------------------------------------------------
    async def connect(self) -> None:
        if self.transport is not None:
            await self.transport.start(self._on_frame, self._on_lost)
            # the first frame to every peer: a peer with another number of workers per
            # process would disagree on where every worker is, and wait forever for progress
            self.send_control({"hello": {"workers": self.local}})
        self._connected = True

    def start(self, on_error: Callable[[BaseException], None]) -> None:
        async def drive() -> None:
            try:
                await self.group.run()
            except Exception as exc:
                on_error(exc)
            except (KeyboardInterrupt, SystemExit) as exc:
                # raised in a callback: asyncio ends the event loop with it and cancels the
                # runtime's task, so record it (and the operator its notes name) first; the
                # peers hear it, not the CancelledError that follows
                on_error(interrupted(exc))
                raise

        self._task = asyncio.get_running_loop().create_task(drive())

    async def stop(self) -> None:
        self.group.stop()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def leave(self, timeout: float) -> None:
        """Says goodbye to every peer and waits for theirs (so that no peer mistakes a
        finished process for a dead one), then closes the transport, also if cancelled while
        it waits. A peer lost meanwhile, or a failure, ends the wait at once: no goodbye will
        come."""
        if self.transport is None:
            return
        self.send_control({"goodbye": True})
        try:
            async with asyncio.timeout(timeout):
                while (
                    len(self.goodbyes | self._lost) < self.processes - 1
                    and self.runtime._failure is None
                ):
                    self._goodbye_event.clear()
                    await self._goodbye_event.wait()
        except TimeoutError:
            missing = sorted(set(range(self.processes)) - self.goodbyes - {self.index})
            log.warning("process %d: no goodbye from processes %s", self.index, missing)
        finally:  # cancelled too (a timeout, Ctrl-C): no connection stays open
            await self.transport.close()

    def fail(self, exc: BaseException) -> None:
        """Stops this process's work; tells the peers why (before the connections close),
        so that every member reports the cause, not the member that merely stopped next."""
        self.group.stop()
        self._goodbye_event.set()  # a leave() under way stops waiting
        # (not while connecting: a peer not yet connected cannot be told; start fails anyway)
        if self.transport is not None and self._connected and not isinstance(exc, PeerFailed):
            # the notes name the operator, worker and time where it was raised
            notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
            cause = f"{type(exc).__name__}: {exc}{notes}"
            self.send_control({"failed": cause[:2000]})
        if self.transport is not None:
            # every process stops now and closes its connections: not a loss to warn about
            for peer in range(self.processes):
                if peer != self.index:
                    self.transport.expect_close(peer)
        for instance in list(self.instances.values()):
            instance.fail(exc)

    # --- dataflows ------------------------------------------------------------------------------
    def instantiate(
        self, ident: int, name: str, builds: list[DataflowBuild], reachability: Reachability
    ) -> Instance:
        """Creates this process's shards and channels for a dataflow and starts them."""
        instance = Instance(self, ident, name, builds, reachability)
        spec0 = builds[0]
        minimum = {op.node: op.scope.minimum() for op in spec0.operators}
        initial = [
            ((reachability.source(op.node, p), minimum[op.node]), self.peers)
            for op in spec0.operators
            if op.initial_capability
            for p in range(op.outputs)
        ]
        mine = [(key, self.local) for key, _ in initial]  # this process's workers' share
        unwatched = [  # (the same operators on every worker: each built the same graph)
            reachability.target(ops[0].node, i)
            for ops in zip(*(spec.operators for spec in builds), strict=True)
            if all(waits_on_nothing(op.logic) for op in ops)
            for i in range(ops[0].inputs)
        ]
        try:
            self.progress.register(
                ident, reachability, initial, instance.frontier_moved, mine, unwatched
            )
        except UnappliableBatch as exc:  # received before this build: rejected only now
            error = self._rejected(exc.sender, exc)
            self.runtime._fail(error)
            raise error from None
        tracker = self.progress.tracker(ident)
        resident = self.progress.resident(ident)
        for worker, spec in zip(self.workers, builds, strict=True):
            buffer = worker.buffer_for(ident)
            row = []
            for op in spec.operators:
                targets = [reachability.target(op.node, i) for i in range(op.inputs)]
                sources = [reachability.source(op.node, p) for p in range(op.outputs)]
                frontiers = [tracker.frontier(t) for t in targets]
                shard = VertexShard(worker, op.name, op.logic, targets, sources, frontiers, buffer)
                shard.resident = resident
                row.append(shard)
            instance.shards.append(row)
        self._wire(instance)
        self.instances[ident] = instance

        for spec, row in zip(builds, instance.shards, strict=True):
            for op, shard in zip(spec.operators, row, strict=True):
                if op.initial_capability:
                    shard.start(minimum[op.node])
                if shard.wants_frontier:
                    shard.worker.schedule_notify(shard)
        for worker in self.workers:
            # (built from a callback, that worker's activation submits its batches whole)
            worker.flush_outside_activation()
        if not initial:  # nothing holds a pointstamp, now or ever: no frontier will move
            self.maybe_complete.add(instance)
            self.group.wake()
        for peer, header, payload in self._early.pop(ident, []):
            self._guarded(peer, instance.deliver, peer, header, payload)
        return instance

    def _wire(self, instance: Instance) -> None:
        reach = instance.reachability
        for local, (worker, spec) in enumerate(zip(self.workers, instance.builds, strict=True)):
            buffer = worker.buffer_for(instance.id)
            for channel, edge in enumerate(spec.edges):
                (src, out_port), (dst, in_port) = edge.source, edge.target
                location = reach.target(dst, in_port)
                output = instance.shards[local][src].outputs[out_port]
                if isinstance(edge.pact, Pipeline) or self.peers == 1:
                    target = instance.shards[local][dst]
                    pusher = LocalPusher(target, in_port, location, buffer, True)
                    check = edge.pact.check if isinstance(edge.pact, Exchange) else None
                    output.pushers.append(
                        pusher if check is None else CheckedPusher(check, pusher, target.name)
                    )
                elif isinstance(edge.pact, Exchange | Broadcast):
                    pushers: list[Any] = []
                    for g in range(self.peers):
                        owner = g // self.local
                        if owner == self.index:
                            shard = instance.shards[g - self.first][dst]
                            pushers.append(
                                LocalPusher(shard, in_port, location, buffer, g == worker.index)
                            )
                        else:
                            pushers.append(
                                RemotePusher(
                                    self,
                                    owner,
                                    instance.id,
                                    channel,
                                    worker.index,
                                    g,
                                    location,
                                    buffer,
                                )
                            )
                    into = instance.shards[local][dst].name
                    if isinstance(edge.pact, Broadcast):
                        output.pushers.append(BroadcastPusher(pushers, into))
                    else:
                        output.pushers.append(ExchangePusher(edge.pact, pushers, into))
                else:
                    raise BuildError(f"unknown channel kind {edge.pact!r}")

    def drop(self, instance: Instance, error: DataflowDropped) -> None:
        """Drops this process's part of a running dataflow (see :meth:`Instance.drop`): its
        progress is forgotten first, unbroadcast updates included, so that frames and
        progress batches peers still send for it are ignored as a finished dataflow's."""
        ident = instance.id
        self.instances.pop(ident, None)
        self.maybe_complete.discard(instance)
        self._early.pop(ident, None)
        self.progress.unregister(ident)
        self._forget_digests(ident)
        for worker in self.workers:
            worker.forget(ident)  # what a driver-held capability changes now goes nowhere
        instance.drop(error)

    def owner(self, vertex: Vertex) -> str:
        """``"operator 'op' of dataflow 'name'"`` for a vertex of a dataflow running here."""
        for instance in self.instances.values():
            for row in instance.shards:
                for shard in row:
                    if shard.logic is vertex:
                        return f"operator {shard.name!r} of dataflow {instance.name!r}"
        return f"operator {vertex.name!r}"  # pragma: no cover - followers run here

    def instance_complete(self, instance: Instance) -> None:
        self.instances.pop(instance.id, None)
        self.progress.unregister(instance.id)
        self._forget_digests(instance.id)
        for worker in self.workers:
            worker.forget(instance.id)
        self.runtime._instance_complete(instance)

    def _check_completions(self) -> None:
        if self.maybe_complete:
            self.maybe_complete = {i for i in self.maybe_complete if not i.try_complete()}

    # --- build agreement across processes -------------------------------------------------------
    def announce(self, ident: int, name: str, build: DataflowBuild) -> None:
        """Tells every peer what this process built, and checks what they said so far."""
        departed = self._departed_without(ident)
        if departed:
            raise self._departure(departed[0], ident, name)
        digest = hashlib.sha256(repr(build.fingerprint()).encode()).hexdigest()
        self._digests.setdefault(ident, {})[self.index] = digest
        if self.transport is not None:
            self.send_control({"dataflow": ident, "name": name, "digest": digest})
        self._compare_digests(ident)

    def announce_raised(self, ident: int, name: str, error: BaseException) -> None:
        """Tells every peer that the build of dataflow ``ident`` raised ``error`` here, and
        checks what they said so far: a process that built it stops rather than wait for
        this one's workers; where the build raised on every process, they all go on."""
        cause = f"{type(error).__name__}: {error}, in the build of {name!r}"
        self._digests.setdefault(ident, {})[self.index] = _Raised(cause)
        if self.transport is not None:
            self.send_control({"dataflow": ident, "name": name, "raised": cause})
        self._compare_digests(ident)
        self._forget_digests(ident)

    def _forget_digests(self, ident: int) -> None:
        """Drops the digests of a dataflow that finished here once every process's has been
        compared (or whose build raised on every process): no later announcement of it can
        come."""
        digests = self._digests.get(ident)
        if (
            digests is not None
            and len(digests) == self.processes
            and (self.progress.finished(ident) or all(map(_raised, digests.values())))
        ):
            del self._digests[ident]

    def _departed_without(self, ident: int) -> list[int]:
        """The peers that said goodbye without having announced dataflow ``ident`` (their
        announcements come before their goodbye on the same connection): it can never
        complete without their workers."""
        built = self._digests.get(ident, {})
        return sorted(p for p in self.goodbyes if p not in built)

    def _departure(self, peer: int, ident: int, name: str) -> ClusterError:
        return ClusterError(
            f"process {peer} left the cluster without building dataflow {ident} ({name!r}), "
            f"which process {self.index} built; every process must build the same dataflows",
            peer,
        )

    def _compare_digests(self, ident: int) -> None:
        digests = self._digests.get(ident, {})
        mine = digests.get(self.index)
        if mine is None:
            return
        for peer, theirs in digests.items():
            if _raised(theirs) != _raised(mine):
                built, raised, error = (
                    (peer, self.index, mine) if _raised(mine) else (self.index, peer, theirs)
                )
                raise BuildError(
                    f"dataflow {ident}: its build raised on process {raised} "
                    f"({error}) and not on process {built}, which runs it; "
                    f"every process must build the same dataflows, so a build that raises on "
                    f"some processes only stops the cluster"
                )
            if theirs != mine and not _raised(mine):
                raise BuildError(
                    f"dataflow {ident}: process {peer} built a different dataflow than process "
                    f"{self.index}; build the dataflow the same way in every process"
                )

    # --- sending --------------------------------------------------------------------------------
    @property
    def max_payload(self) -> int:
        """The largest data frame the peers accept."""
        assert self.transport is not None
        return self.transport.max_payload

    def send_data(
        self,
        peer: int,
        dataflow: int,
        channel: int,
        source: int,
        target: int,
        parts: list[Any],
        length: int,
    ) -> None:
        assert self.transport is not None
        seq = self._data_out[peer]
        self._data_out[peer] = seq + 1
        self.transport.send(
            peer, Header(Kind.DATA, dataflow, channel, source, target, length, seq), parts
        )

    def _broadcast(self, peer: int, dataflow: int, seq: int, changes: Changes) -> None:
        """Sends a progress batch to ``peer``. One the transport would refuse stops the
        runtime with an error that says so, before anything is sent or numbered: the batch
        cannot be applied whole anywhere (invariant 1), and the peers must not wait for it."""
        assert self.transport is not None
        payload = encode_changes(changes)
        limit = self.transport.max_message
        if len(payload) > limit:
            instance = self.instances.get(dataflow)
            name = f" ({instance.name!r})" if instance is not None else ""
            error = ValueError(
                f"process {self.index}: a progress batch of dataflow {dataflow}{name} has "
                f"{len(changes)} updates, {len(payload)} bytes encoded, more than the "
                f"{limit} bytes a message between processes may carry: too many "
                f"(location, time) pointstamps changed at once (keep fewer times in flight, or "
                f"raise NAIAD_MAX_PAYLOAD on every process)"
            )
            self.runtime._fail(error)
            raise error
        header = Header(Kind.PROGRESS, dataflow, 0, self.index, peer, len(payload), seq)
        self.transport.send(peer, header, [payload])

    def send_control(self, message: dict[str, Any]) -> None:
        assert self.transport is not None
        payload = packb(message)
        for peer in range(self.processes):
            if peer != self.index:
                header = Header(Kind.CONTROL, 0, 0, self.index, peer, len(payload), 0)
                self.transport.send(peer, header, [payload])

    # --- receiving ------------------------------------------------------------------------------
    def _on_frame(self, peer: int, header: Header, payload: memoryview) -> None:
        self._guarded(peer, self._handle, peer, header, payload)

    def _guarded(self, peer: int, handle: Callable[..., None], *args: Any) -> None:
        try:
            handle(*args)
        except BuildError as exc:
            log.error("process %d: rejected a frame from process %d: %s", self.index, peer, exc)
            self.runtime._fail(exc)
        except FrameError as exc:
            self.runtime._fail(self._rejected(peer, exc))
        except Exception as exc:  # a bug here must stop the runtime, not vanish in a callback
            self.runtime._fail(exc)

    def _rejected(self, peer: int, exc: Exception) -> ClusterError:
        """Logs a frame from ``peer`` that cannot be applied; the error that stops the
        runtime for it."""
        log.error("process %d: rejected a frame from process %d: %s", self.index, peer, exc)
        return ClusterError(
            f"process {peer} sent a frame process {self.index} cannot apply: {exc}", peer
        )

    def _handle(self, peer: int, header: Header, payload: memoryview) -> None:
        if not 0 <= peer < self.processes or peer == self.index:
            raise FrameError(f"frame from unknown process {peer}")
        kind = header.kind
        if kind == Kind.DATA:
            if header.seq != self._data_in[peer]:
                raise FrameError(
                    f"data frame {header.seq} out of sequence (expected {self._data_in[peer]})"
                )
            self._data_in[peer] += 1
            instance = self.instances.get(header.dataflow)
            if instance is not None:
                instance.deliver(peer, header, payload)
            elif not self.progress.finished(header.dataflow):
                self._early.setdefault(header.dataflow, []).append((peer, header, payload))
        elif kind == Kind.PROGRESS:
            changes = decode_changes(payload)
            instance = self.instances.get(header.dataflow)
            if instance is not None:
                instance.check_changes(changes)
            self.progress.receive(peer, header.seq, header.dataflow, changes)
        elif kind == Kind.CONTROL:
            message = unpackb(payload)
            if not isinstance(message, dict):
                raise FrameError("malformed control message")
            if message.get("goodbye"):
                self.goodbyes.add(peer)
                # it closes once it has every goodbye, maybe before this process has them
                assert self.transport is not None
                self.transport.expect_close(peer)
                self._goodbye_event.set()
                for instance in list(self.instances.values()):
                    if peer in self._departed_without(instance.id):
                        raise self._departure(peer, instance.id, instance.name)
            elif isinstance(message.get("hello"), dict):
                workers = message["hello"].get("workers")
                if workers != self.local:
                    raise ClusterError(
                        f"process {peer} runs -w {workers}, process {self.index} runs "
                        f"-w {self.local}: start every process of the cluster with the same -w "
                        f"(workers per process)",
                        peer,
                    )
            elif isinstance(message.get("failed"), str):
                self.runtime._fail(
                    PeerFailed(f"process {peer} stopped the cluster: {message['failed']}", peer)
                )
            elif "dataflow" in message:
                ident = message["dataflow"]
                digest, raised = message.get("digest"), message.get("raised")
                if not isinstance(ident, int) or not isinstance(digest or raised, str):
                    raise FrameError("malformed dataflow announcement")
                entry = digest if isinstance(digest, str) else _Raised(raised)
                self._digests.setdefault(ident, {})[peer] = entry
                self._compare_digests(ident)
                self._forget_digests(ident)
            else:
                raise FrameError(f"unknown control message {sorted(message)!r}")

    def _on_lost(self, peer: int, exc: BaseException) -> None:
        self._goodbye_event.set()
        if peer in self.goodbyes:
            return
        self._lost.add(peer)
        self.runtime._fail(
            ClusterError(
                f"process {peer} disconnected from process {self.index} ({exc}); "
                f"the cluster cannot continue without it",
                peer,
            )
        )
