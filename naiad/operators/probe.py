"""``probe``: watch a stream's frontier from outside the dataflow (awaitable)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.progress.antichain import Antichain, MutableAntichain
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class ProbeVertex(Vertex):
    """Consumes and discards; its input frontier is what the handle reports."""

    def __init__(self, levels: int | None = None) -> None:
        self.handle = ProbeHandle(lambda: self.shard.frontiers[0], levels)

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        pass

    def on_frontier(self) -> None:
        self.handle._check_waiters()


class ProbeHandle:
    """A frontier seen from outside the dataflow, and waits on it.

    ``less_equal(t)``: records at ``t`` may still appear; ``less_than(t)``: records at some
    time before ``t`` may still appear (timely's usual step-while condition). A probe tracks
    the frontier only: sinks on the same stream may run after ``wait`` returns (a
    ``subscribe`` handle waits for its own callbacks instead).
    """

    def __init__(
        self, frontier: Callable[[], MutableAntichain | Antichain], levels: int | None = None
    ) -> None:
        self._frontier = frontier
        self._levels = levels  # the scope's loop depth: times given are checked against it
        # pending waits: future -> the time it waits for (a dict: a wait given up leaves at
        # once, in O(1), not at the next frontier move, which an idle input may put off)
        self._waiters: dict[asyncio.Future[None], Any] = {}
        self._failure: BaseException | None = None

    @property
    def frontier(self) -> MutableAntichain | Antichain:
        return self._frontier()

    def _time(self, time: Any) -> Any:
        return time if self._levels is None else as_time(time, self._levels, "a probe's time")

    def less_equal(self, time: Any) -> bool:
        return self.frontier.less_equal(self._time(time))

    def less_than(self, time: Any) -> bool:
        return self.frontier.less_than(self._time(time))

    def done(self) -> bool:
        """Whether no record can ever appear again."""
        return self.frontier.is_empty()

    async def wait(self, time: Any = None) -> None:
        """Returns once time ``time`` is complete (every time, if ``time`` is None)."""
        if time is not None:
            time = self._time(time)
        if self._ready(time):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[future] = time
        try:
            await future
        finally:
            self._waiters.pop(future, None)  # given up (a timeout, say), or already gone

    def _ready(self, time: Any) -> bool:
        if self._failure is not None:
            raise self._failure
        return self.done() if time is None else not self.less_equal(time)

    def _check_waiters(self) -> None:
        keep: dict[asyncio.Future[None], Any] = {}
        for future, time in self._waiters.items():
            if future.done():
                continue
            if self.done() if time is None else not self.less_equal(time):
                future.set_result(None)
            else:
                keep[future] = time
        self._waiters = keep

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:  # the first failure, not a peer's echo of it
            self._failure = exc
        for future in self._waiters:
            if not future.done():
                future.set_exception(exc)
        self._waiters = {}


def probe(stream: Stream, name: str = "probe") -> ProbeHandle:
    """A handle on the frontier of ``stream``.

    >>> import asyncio, naiad
    >>> async def main():
    ...     async with naiad.Runtime() as rt:
    ...         handle, probe = rt.dataflow(lambda s: (lambda h, st: (h, st.probe()))(
    ...             *s.new_input())).results[0]
    ...         handle.send([1]); handle.advance_to(3)
    ...         await probe.wait(2)
    ...         return probe.less_equal(2), probe.less_equal(3)
    >>> asyncio.run(main())
    (False, True)
    """
    vertex = ProbeVertex(stream.scope.depth)
    stream.scope.add_operator(name, vertex, [(stream, Pipeline())], outputs=0)
    return vertex.handle
