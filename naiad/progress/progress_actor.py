"""The progress actor: one per process, owner of the trackers of its dataflows.

Workers do not touch a tracker. Each worker accumulates the count changes of a callback (and
of everything delivered on its stack) in a :class:`ChangeBatch` and submits the batch when the
callback returns; the progress actor applies it whole (invariant 1), recomputes the frontiers
it moved, and tells the runtime which input ports moved so that it can wake their vertices.

Because a worker's batch carries both the decrement for the message it consumed and the
increments for what it produced, and no frontier is recomputed in the middle of a batch, the
applied counts never show a hole where a message could still appear (invariant 2). With one
process every worker's batch reaches the same tracker synchronously, so the local view is the
global view; the distributed exchange between processes (Naiad §3.3) extends :meth:`submit`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from naiad.progress.reachability import Reachability, Tracker

FrontierListener = Callable[[list[int]], None]


@dataclass
class _Registered:
    tracker: Tracker
    on_change: FrontierListener


class ProgressActor:
    """Applies progress batches to per-dataflow trackers and reports moved frontiers.

    >>> from naiad.progress.reachability import GraphBuilder
    >>> g = GraphBuilder(); a = g.add_node("in", 0, 1); b = g.add_node("out", 1, 0)
    >>> g.add_edge((a, 0), (b, 0)); r = g.build()
    >>> moved = []
    >>> actor = ProgressActor()
    >>> actor.register(0, r, [((r.source(a, 0), 0), 1)], moved.extend)
    >>> actor.submit(0, [((r.source(a, 0), 1), 1), ((r.source(a, 0), 0), -1)])
    >>> moved == [r.target(b, 0)], actor.tracker(0).frontier(r.target(b, 0)).frontier
    (True, [1])
    """

    def __init__(self, process: int = 0, processes: int = 1) -> None:
        self.process = process
        self.processes = processes
        self._dataflows: dict[int, _Registered] = {}
        self.batches_applied = 0

    def register(
        self,
        dataflow: int,
        reachability: Reachability,
        initial: Iterable[tuple[tuple[int, Any], int]],
        on_change: FrontierListener,
    ) -> None:
        """Starts tracking a dataflow from its initial capability counts."""
        if dataflow in self._dataflows:
            raise ValueError(f"dataflow {dataflow} is already registered")
        tracker = Tracker(reachability)
        tracker.update_iter(initial)
        tracker.propagate()
        self._dataflows[dataflow] = _Registered(tracker, on_change)

    def unregister(self, dataflow: int) -> None:
        self._dataflows.pop(dataflow, None)

    def tracker(self, dataflow: int) -> Tracker:
        return self._dataflows[dataflow].tracker

    def submit(self, dataflow: int, changes: Iterable[tuple[tuple[int, Any], int]]) -> None:
        """Applies one worker's progress batch whole, then reports the moved frontiers."""
        registered = self._dataflows[dataflow]
        tracker = registered.tracker
        for (loc, time), delta in changes:
            tracker.update(loc, time, delta)
        self.batches_applied += 1
        moved = tracker.propagate()
        if moved or tracker.active == 0:
            registered.on_change(moved)
