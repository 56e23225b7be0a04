"""``partition`` and ``partition_batch``: splits a stream into ``parts`` streams by a route.

One operator with ``parts`` outputs (timely's ``partition``): every record goes to exactly one
output, the one its route names, at its own time; an output that receives nothing from a
batch is sent nothing (no empty message). ``branch`` is the two-way case by a predicate.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.actors.vertex import StatelessVertex
from naiad.dataflow.channels import Pipeline, routes_array, split_by_routes
from naiad.dataflow.scope import BuildError
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class Partition(StatelessVertex):
    """Sends each record on output ``route(record)``."""

    def __init__(self, route: Callable[[Any], int], parts: int) -> None:
        self.route = route
        self.parts = parts

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        route, parts = self.route, self.parts
        outputs = self.shard.outputs
        if isinstance(batch, np.ndarray):
            # parts of a numpy batch stay arrays of its dtype and record shape (see branch)
            routes: list[int] = []
            for record in batch:
                i = route(record)
                if i.__class__ is not int or not 0 <= i < parts:
                    i = _checked_part(self.name, i, parts, record)
                routes.append(i)
            for i, part in split_by_routes(batch, np.array(routes, dtype=np.int64), parts):
                outputs[i].send(cap, part)
            return
        # only the parts that receive records: a batch costs its records, not the parts
        out: dict[int, list[Any]] = {}
        for record in batch:
            i = route(record)
            if i.__class__ is not int or not 0 <= i < parts:
                i = _checked_part(self.name, i, parts, record)
            records = out.get(i)
            if records is None:
                out[i] = [record]
            else:
                records.append(record)
        for i in sorted(out):
            outputs[i].send(cap, out[i])


class PartitionBatch(StatelessVertex):
    """Splits each batch by ``routes(batch)``, one part index per record (numpy-friendly)."""

    def __init__(self, routes: Callable[[Any], Any], parts: int) -> None:
        self.routes = routes
        self.parts = parts

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        name, parts = self.name, self.parts
        routes = routes_array(self.routes(batch), batch, f"partition_batch {name!r}: routes(batch)")
        if len(routes) and (routes.min() < 0 or routes.max() >= parts):
            bad = routes[(routes < 0) | (routes >= parts)][0]
            raise ValueError(
                f"partition_batch {name!r}: routes(batch) gave part {int(bad)}, outside "
                f"range({parts}) (one of the {parts} outputs)"
            )
        outputs = self.shard.outputs
        for i, part in split_by_routes(batch, routes, parts):
            outputs[i].send(cap, part)


def _checked_part(name: str, i: Any, parts: int, record: Any) -> int:
    """``i`` as a part index (a numpy integer is one), or the error that names the operator."""
    integer = isinstance(i, numbers.Integral) and not isinstance(i, bool)
    if integer and 0 <= int(i) < parts:
        return int(i)
    raise (ValueError if integer else TypeError)(
        f"partition {name!r}: route(record) must return an integer in range({parts}), not "
        f"{i!r} (for record {record!r:.80})"
    )


def _checked_parts(parts: Any, fn: Any, what: str, name: str) -> int:
    if isinstance(parts, bool) or not isinstance(parts, numbers.Integral):
        raise TypeError(f"{what} {name!r}: parts must be a positive integer, not {parts!r}")
    if parts < 1:
        raise BuildError(f"{what} {name!r}: parts must be at least 1, not {parts}")
    if not callable(fn):
        raise TypeError(f"{what} {name!r}: the route must be a function, not {fn!r}")
    return int(parts)


def partition(
    stream: Stream, parts: int, route: Callable[[Any], int], name: str = "partition"
) -> list[Stream]:
    """``parts`` streams; record ``r`` goes to stream ``route(r)`` (an int in ``range(parts)``;
    anything else raises, naming the operator and the record).

    >>> import naiad
    >>> def build(s):
    ...     parts = s.from_epochs([[1, 5, 6, 9]]).partition(3, lambda x: x % 3)
    ...     return [p.collect() for p in parts]
    >>> naiad.run(build)
    [[[(0, 6), (0, 9)], [(0, 1)], [(0, 5)]]]
    """
    parts = _checked_parts(parts, route, "partition", name)
    node = stream.scope.add_operator(
        name, Partition(route, parts), [(stream, Pipeline())], outputs=parts
    )
    return [stream.derive(node, p) for p in range(parts)]


def partition_batch(
    stream: Stream, parts: int, routes: Callable[[Any], Any], name: str = "partition_batch"
) -> list[Stream]:
    """``parts`` streams split by one call per batch: ``routes(batch)`` returns an array of
    part indices, one per record (numpy batches are split with numpy, and stay arrays).

    >>> import naiad, numpy as np
    >>> def build(s):
    ...     small, big = s.from_epochs([np.arange(6)]).partition_batch(2, lambda b: b >= 4)
    ...     return small.map(int).collect(), big.map(int).collect()
    >>> naiad.run(build)
    [([(0, 0), (0, 1), (0, 2), (0, 3)], [(0, 4), (0, 5)])]
    """
    parts = _checked_parts(parts, routes, "partition_batch", name)
    node = stream.scope.add_operator(
        name, PartitionBatch(routes, parts), [(stream, Pipeline())], outputs=parts
    )
    return [stream.derive(node, p) for p in range(parts)]
