"""``delay`` and ``delay_batch``: records re-timed to a later time (timely's ``delay``).

Each record (or each batch) gets a new time at or after its own, and is delivered at that
time once the input can no longer produce anything at or before it: the operator buffers
what waits per new time and holds one notification (so one capability) per pending time;
the worker's notification machinery indexes many pending times (a ``TimeQueue``) and
delivers them least first as the frontier passes. So the output frontier never passes a
time that records still wait for, and every time's records leave together, at its
notification: ``delay`` sends the records that came in lists as one list, and the rows that
came in numpy batches as one array per dtype and row shape (one message per time, then, unless
lists and arrays, or arrays of several dtypes, wait for it); ``delay_batch`` sends every batch
whole, as it came, one message per batch (as timely's ``delay_batch``: batches are not copied
together).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Pipeline
from naiad.operators.aggregate import checked_functions
from naiad.progress.antichain import le
from naiad.progress.capability import Capability
from naiad.progress.timestamp import as_time_like, same_shape

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class DelayVertex(Vertex):
    """Buffers records (per record: ``f(record, time)``) or batches (``f(time)``) until their
    new times complete, then sends them at those times."""

    def __init__(self, f: Callable[..., Any], per_record: bool) -> None:
        self.f = f
        self.per_record = per_record
        # new time -> what waits for it: records (per record) or whole batches
        self.waiting: dict[Any, list[Any]] = {}
        # per record, from numpy batches: new time -> the arrays of rows that wait for it (a
        # numpy batch stays arrays of its dtype, which cross processes as their bytes)
        self.arrays: dict[Any, list[np.ndarray]] = {}

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        time, waiting, f = cap.time, self.waiting, self.f
        if not self.per_record:
            self._hold(self._checked(f(time), time, None)).append(batch)
            return
        if isinstance(batch, np.ndarray):
            self._delay_rows(batch, time)
            return
        for record in batch:
            new = f(record, time)
            if new.__class__ is not int or time.__class__ is not int or new < time:
                new = self._checked(new, time, record)  # integer epochs: one comparison
            records = waiting.get(new)
            if records is None:
                records = self._hold(new)
            records.append(record)

    def _delay_rows(self, batch: np.ndarray, time: Any) -> None:
        """Per record, a numpy batch: its rows grouped by new time, each group one array."""
        f = self.f
        rows: dict[Any, list[int]] = {}
        for n, record in enumerate(batch):
            new = f(record, time)
            if new.__class__ is not int or time.__class__ is not int or new < time:
                new = self._checked(new, time, record)
            group = rows.get(new)
            if group is None:
                rows[new] = [n]
            else:
                group.append(n)
        for new, group in rows.items():
            self._hold(new, self.arrays).append(batch if len(group) == len(batch) else batch[group])

    def _hold(self, new: Any, table: dict[Any, list[Any]] | None = None) -> list[Any]:
        """The list of what waits for ``new`` (in ``waiting``, or ``table``), requesting its
        notification if nothing waited for it yet."""
        table = self.waiting if table is None else table
        held = table.get(new)
        if held is None:
            held = table[new] = []
            other = self.arrays if table is self.waiting else self.waiting
            if new not in other:  # the first to wait
                self.notify_at(new)  # holds the capability for ``new`` until on_notify
        return held

    def _checked(self, new: Any, time: Any, record: Any) -> Any:
        what = "f(time)" if record is None else f"f(record, time) for record {record!r:.80}"
        return delayed_time(new, time, f"{self.kind} {self.name!r}", what)

    @property
    def kind(self) -> str:
        return "delay" if self.per_record else "delay_batch"

    def on_notify(self, cap: Capability) -> None:
        held = self.waiting.pop(cap.time, [])
        if self.per_record:
            self.send(cap, held)
            # one array per dtype and row shape: arrays of one kind concatenate losslessly
            kinds: dict[tuple[Any, ...], list[np.ndarray]] = {}
            for array in self.arrays.pop(cap.time, []):
                kinds.setdefault((array.dtype, array.shape[1:]), []).append(array)
            for arrays in kinds.values():
                self.send(cap, np.concatenate(arrays) if len(arrays) > 1 else arrays[0])
        else:
            for batch in held:
                self.send(cap, batch)


def delayed_time(new: Any, time: Any, operator: str, what: str) -> Any:
    """``new``, what ``what`` returned for ``time``, checked as a time of ``time``'s shape at
    or after it; an error naming ``operator`` otherwise.

    >>> delayed_time(5, 3, "delay 'd'", "f(time)")
    5
    >>> delayed_time(2, 3, "delay 'd'", "f(time)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: delay 'd': f(time) at time 3 returned 2, which is not at or after 3; ...
    """
    if not same_shape(new, time):
        new = as_time_like(new, time, f"{operator}: {what}")
    if not le(time, new):
        raise ValueError(
            f"{operator}: {what} at time {time!r} returned {new!r}, which is not at or after "
            f"{time!r}; a record can only be delayed to a later time"
        )
    return new


def _build(stream: Stream, f: Any, per_record: bool, name: str) -> Stream:
    checked_functions("delay" if per_record else "delay_batch", name, f=f)
    node = stream.scope.add_operator(name, DelayVertex(f, per_record), [(stream, Pipeline())])
    return stream.derive(node)


def delay(stream: Stream, f: Callable[[Any, Any], Any], name: str = "delay") -> Stream:
    """Each record re-timed to ``f(record, time)``, which must be at or after ``time`` (else a
    ``ValueError`` naming the operator and the record); records are delivered at their new
    time once the input has passed it.

    >>> import naiad
    >>> late = lambda s: s.from_epochs([[1, 5], [2]]).delay(lambda r, t: max(r, t))
    >>> naiad.run(lambda s: late(s).collect())
    [[(1, 1), (2, 2), (5, 5)]]
    """
    return _build(stream, f, True, name)


def delay_batch(stream: Stream, f: Callable[[Any], Any], name: str = "delay_batch") -> Stream:
    """Each batch re-timed, whole, to ``f(time)`` (one call per batch: numpy batches stay
    arrays), delivered once the input has passed the new time, one message per batch.

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([[7], [8]]).delay_batch(lambda t: 2 * t + 1).collect())
    [[(1, 7), (3, 8)]]
    """
    return _build(stream, f, False, name)
