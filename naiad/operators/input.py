"""Inputs: epochs fed from outside the dataflow (Naiad §2.1), and sources over iterables.

An :class:`InputHandle` belongs to one worker and holds that worker's capability at the
current epoch: ``send`` emits at that epoch, ``advance_to`` downgrades it (everything before
the new epoch becomes complete once every worker's input has advanced), ``close`` drops it.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from naiad.actors.loop_thread import check_loop_thread
from naiad.actors.supervision import DataflowDropped, stopped
from naiad.actors.vertex import Vertex
from naiad.dataflow.scope import NEVER_RUNS, BuildError
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time, depth

if TYPE_CHECKING:
    from naiad.dataflow.scope import ScopeCore
    from naiad.operators.probe import ProbeHandle
    from naiad.operators.stream import Stream


class InputError(ValueError):
    """Misuse of an input handle."""


class InputVertex(Vertex):
    """Holds the input's capability; receives nothing."""

    def __init__(self, name: str) -> None:
        self.cap: Capability | None = None
        self.started = False
        self.close_on_start = False  # closed while the dataflow was being built
        self.build_raised = False  # it never starts: its handle says so
        self.handle = InputHandle(self, name)

    def on_start(self, cap: Capability) -> None:
        self.started = True
        if not self.close_on_start:
            self.cap = cap.retain()

    def build_failed(self) -> None:
        self.build_raised = True

    def dropped(self, error: DataflowDropped) -> None:
        self.handle._fail(error)  # send, advance_to and feed refuse, naming the drop


class ImportVertex(Vertex):
    """An input fed by another dataflow (such as an import of a shared arrangement): it
    follows its source until the source ends, or until ``close`` (``Dataflow.close_inputs``)
    stops it, so that its own dataflow can complete first."""

    def close(self) -> None:
        """Stops following the source: what was sent stands, nothing later is sent."""
        raise NotImplementedError


class InputHandle:
    """Feeds one worker's share of an input, epoch by epoch.

    >>> import asyncio, naiad
    >>> async def main():
    ...     async with naiad.Runtime(workers=1) as rt:
    ...         df = rt.dataflow(lambda s: (lambda h, st: (h, st.collect()))(*s.new_input()))
    ...         handle, out = df.results[0]
    ...         handle.send(["a", "b"]); handle.advance_to(1); handle.send(["c"])
    ...     return out
    >>> asyncio.run(main())
    [(0, 'a'), (0, 'b'), (1, 'c')]
    """

    def __init__(self, vertex: InputVertex, name: str) -> None:
        self._vertex = vertex
        self.name = name
        # run before the input closes, however it is closed (a session's staged updates)
        self.before_close: list[Callable[[], None]] = []
        self._failure: BaseException | None = None  # what stopped the runtime, if anything
        # the thread of the runtime's event loop (where dataflows are built): its workers'
        # state is not locked, and what another thread changes does not wake the loop
        self._thread = threading.get_ident()

    @property
    def epoch(self) -> Any:
        """The epoch at which ``send`` emits."""
        cap = self._vertex.cap
        if self._failure is None and cap is not None and cap.valid:  # (per record: no call)
            return cap.time
        return self._live().time  # raises why not

    @property
    def closed(self) -> bool:
        return self._vertex.cap is None or not self._vertex.cap.valid

    def _check_thread(self) -> None:
        check_loop_thread(
            self._thread,
            lambda: f"input {self.name!r}",
            "loop.call_soon_threadsafe(handle.advance_to, epoch)",
            InputError,
        )

    def _live(self) -> Capability:
        self._check_thread()
        if self._failure is not None:  # what is sent now would go nowhere
            raise stopped(f"input {self.name!r}", self._failure)
        cap = self._vertex.cap
        if cap is None or not cap.valid:
            if self._vertex.build_raised:
                raise InputError(f"input {self.name!r}: {NEVER_RUNS}")
            if not self._vertex.started:
                raise InputError(
                    f"input {self.name!r}: the dataflow is still being built; send once "
                    f"rt.dataflow(...) has returned (or use from_epochs for fixed data)"
                )
            raise InputError(f"input {self.name!r} is closed")
        return cap

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:  # the first failure, not a peer's echo of it
            self._failure = exc

    def _flush(self) -> None:
        self._vertex.shard.worker.flush_outside_activation()

    @property
    def spans_processes(self) -> bool:
        """Whether the dataflow runs in several processes: what is sent may be encoded."""
        return self._vertex.shard.worker.transport is not None

    def send(self, batch: Iterable[Any]) -> None:
        """Emits ``batch`` (a list, or a numpy array) at the current epoch. A list is copied
        (the caller may reuse it); an array is not: the dataflow owns it once sent, so do not
        write to it afterwards."""
        cap = self._live()
        self._vertex.shard.outputs[0].send(cap, prepared_batch(batch, f"input {self.name!r}"))
        self._flush()

    def advance_to(self, epoch: Any) -> None:
        """Promises that no more records will be sent at epochs before ``epoch``."""
        cap = self._live()
        epoch = as_time(epoch, depth(cap.time), f"input {self.name!r}: an epoch")
        if not cap.try_downgrade(epoch):
            raise InputError(
                f"input {self.name!r}: cannot advance from epoch {cap.time!r} to {epoch!r} "
                f"(advancing an input backwards)"
            )
        self._flush()

    async def feed(
        self,
        batches: Iterable[Any] | AsyncIterable[Any],
        *,
        probe: ProbeHandle | None = None,
        lag: int = 1,
        close: bool = True,
    ) -> None:
        """Sends each batch of ``batches`` (an iterable or an async iterable) as one epoch,
        advancing after each. With ``probe``, waits before sending epoch ``e`` until epoch
        ``e - lag`` is complete there (at most ``lag`` epochs in flight); it also waits while
        the transport holds too much unsent data. Closes the input at the end unless told not.

        >>> import asyncio, naiad
        >>> async def main():
        ...     async with naiad.Runtime() as rt:
        ...         def build(s):
        ...             handle, stream = s.new_input()
        ...             return handle, stream.map(lambda x: x * x).collect()
        ...         handle, out = rt.dataflow(build).results[0]
        ...         await handle.feed([[1, 2], [3]])
        ...     return out
        >>> asyncio.run(main())
        [(0, 1), (0, 4), (1, 9)]
        """
        if lag < 1:
            # lag 0 would wait for epoch e to complete before sending it: never, while this
            # handle holds it
            raise InputError(f"input {self.name!r}: lag must be >= 1, got {lag}")
        transport = self._vertex.shard.worker.transport

        async def one(batch: Any) -> None:
            epoch = self.epoch
            if probe is not None and epoch - lag >= 0:
                await probe.wait(epoch - lag)
            if transport is not None:
                await transport.drain()
            self.send(batch)
            self.advance_to(epoch + 1)

        if isinstance(batches, AsyncIterable):
            async for batch in batches:
                await one(batch)
        else:
            for batch in batches:
                await one(batch)
        if close:
            self.close()

    def close(self) -> None:
        """No more records at any epoch (idempotent; during the build, from the start)."""
        self._check_thread()
        if not self._vertex.started:
            self._vertex.close_on_start = True
            return
        cap = self._vertex.cap
        if cap is not None and cap.valid:
            for hook in self.before_close:
                hook()
            cap.drop()
            self._flush()


def new_input(scope: ScopeCore, name: str = "input") -> tuple[InputHandle, Stream]:
    """An input handle for this worker and the stream of what all workers send."""
    vertex = InputVertex(name)
    node = scope.add_operator(name, vertex, [])
    return vertex.handle, scope.stream(node)


class EpochSource(Vertex):
    """Emits one batch per epoch from an iterable: its share ``batch[index::peers]``.

    It drives itself with notifications: having no inputs, a notification at the next epoch
    is deliverable at once, and the scheduler runs queued messages first, so a source never
    races far ahead of the operators that consume it on the same worker.
    """

    def __init__(self, epochs: Iterable[Any]) -> None:
        self._epochs = iter(epochs)

    def on_start(self, cap: Capability) -> None:
        self.notify_at(cap)

    def on_notify(self, cap: Capability) -> None:
        batch: Any = next(self._epochs, _END)
        if batch is _END:
            return
        if batch is None:
            raise TypeError(f"epoch {cap.time} is None: an epoch without records is []")
        check_ordered(batch, cap.time, self.name)
        peers = self.peers
        if peers > 1:
            part = batch[self.index :: peers]
        else:  # the caller's own list must not reach an operator that may modify it
            part = batch.copy() if batch.__class__ is list else batch
        self.send(cap, part)
        self.notify_at(cap.delayed(cap.time + 1))


def from_epochs(scope: ScopeCore, epochs: Iterable[Any], name: str = "from_epochs") -> Stream:
    """A stream whose epoch ``i`` holds the ``i``-th batch of ``epochs``, split among workers."""
    if scope.depth:
        raise ValueError("from_epochs creates root-scope epochs; call it on the dataflow's scope")
    check_reiterable(epochs, scope.peers, name)
    node = scope.add_operator(name, EpochSource(epochs), [])
    return scope.stream(node)


_END = object()

NOT_BATCHES = (Mapping, str, bytes, bytearray)
"""Sized and iterable, but not batches: a dict iterates over its keys alone, a string over
its characters."""


def prepared_batch(batch: Any, what: str) -> Any:
    """``batch`` as an input sends it: a list copied (the caller may reuse it), an iterable
    without a length listed, an array as it is; a dict or a string refused (iterating one
    yields its keys or characters: the values would be lost)."""
    if isinstance(batch, NOT_BATCHES):
        raise _not_a_batch(batch, what)
    if isinstance(batch, list):
        return batch.copy()
    if not hasattr(batch, "__len__"):
        try:
            return list(batch)
        except TypeError:
            if hasattr(batch, "__iter__"):
                raise  # raised by the iterable itself: its own error
            raise _not_a_batch(batch, what) from None
    if getattr(batch, "ndim", 1) == 0:
        raise TypeError(
            f"{what}: a 0-d numpy array is one value, not a batch of records: send "
            f"[value] or numpy.atleast_1d(value)"
        )
    return batch


def _not_a_batch(batch: Any, what: str) -> TypeError:
    return TypeError(
        f"{what}: a batch is a list or a numpy array of records, not a "
        f"{type(batch).__name__} (to send one record, send [record])"
    )


def check_ordered(batch: Any, epoch: int, name: str) -> None:
    """Refuses an epoch that is not a sequence (a list, a tuple, a numpy array): worker ``w``
    takes ``batch[w::workers]``, and a set cannot be sliced, nor is its order the same in
    every process (strings hash differently in each), so records would be lost or
    duplicated across a cluster. Refused on any number of workers, to fail the same way; so
    are a dict and a string, which would be split into their keys or characters.

    >>> check_ordered({"a", "b"}, 3, "from_epochs")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: from_epochs: epoch 3 is a set, not a sequence of records: give a list, a tuple...
    """
    if isinstance(batch, NOT_BATCHES) or not hasattr(batch, "__getitem__"):
        raise TypeError(
            f"{name}: epoch {epoch} is a {type(batch).__name__}, not a sequence of records: "
            f"give a list, a tuple or a numpy array (the workers split it by position)"
        )
    if getattr(batch, "ndim", 1) == 0:
        raise TypeError(
            f"{name}: epoch {epoch} is a 0-d numpy array, one value, not a sequence of "
            f"records: give [value] or numpy.atleast_1d(value)"
        )


def check_reiterable(epochs: Iterable[Any], peers: int, name: str) -> None:
    """Refuses a one-shot iterator given to several workers: each worker reads its share of
    every epoch from its own iteration, and a shared iterator would hand them different
    epochs (records lost and misplaced)."""
    if peers > 1 and iter(epochs) is epochs:
        raise BuildError(
            f"{name}: {type(epochs).__name__} is a one-shot iterator, but each of the {peers} "
            f"workers iterates over the epochs: give a list (or another collection)"
        )
