"""``branch`` and ``branch_when``: split a stream in two by a predicate on records, or on
times (timely's ``Branch`` and ``BranchWhen``)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from itertools import compress
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.actors.vertex import StatelessVertex
from naiad.dataflow.channels import Pipeline
from naiad.operators.aggregate import checked_functions
from naiad.operators.filter import no_truth_value, verdicts
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class Branch(StatelessVertex):
    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = predicate

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        predicate = self.predicate
        outputs = self.shard.outputs
        what = f"branch {self.name!r}: predicate(record)"
        if isinstance(batch, np.ndarray):
            # the parts stay arrays of the batch's dtype: a list of its elements (np.void
            # records, rows) would not cross processes as the array's bytes
            mask = verdicts(predicate, batch, len(batch), what)
            outputs[0].send(cap, batch[mask])
            outputs[1].send(cap, batch[~mask])
            return
        # the results first, so that an error of bool() is told from the predicate's own
        found = [predicate(record) for record in batch]
        try:
            yes = list(compress(batch, found))
            no = list(compress(batch, map(operator.not_, found)))
        except Exception:  # a result bool() refuses
            raise no_truth_value(found, batch, what) from None
        outputs[0].send(cap, yes)
        outputs[1].send(cap, no)


def branch(
    stream: Stream, predicate: Callable[[Any], bool], name: str = "branch"
) -> tuple[Stream, Stream]:
    """``(records where predicate holds, the others)``.

    >>> import naiad
    >>> def build(s):
    ...     evens, odds = s.from_epochs([[1, 2, 3]]).branch(lambda x: x % 2 == 0)
    ...     return evens.collect(), odds.collect()
    >>> naiad.run(build)
    [([(0, 2)], [(0, 1), (0, 3)])]
    """
    checked_functions("branch", name, predicate=predicate)
    node = stream.scope.add_operator(name, Branch(predicate), [(stream, Pipeline())], outputs=2)
    return stream.derive(node, 0), stream.derive(node, 1)


class BranchWhen(StatelessVertex):
    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = predicate

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        # the batch itself, not a copy: each goes to one output
        verdict = self.predicate(cap.time)
        try:
            holds = bool(verdict)
        except Exception:  # a result bool() refuses
            what = f"branch_when {self.name!r}: predicate(time)"
            raise no_truth_value([verdict], [cap.time], what, "time") from None
        self.shard.outputs[0 if holds else 1].send(cap, batch)


def branch_when(
    stream: Stream, predicate: Callable[[Any], bool], name: str = "branch_when"
) -> tuple[Stream, Stream]:
    """``(batches at times where predicate(time) holds, the others)``: one call per batch,
    and batches pass whole (numpy ones stay arrays). The order is ``branch``'s; timely's
    ``branch_when`` returns the times where the predicate holds second.

    >>> import naiad
    >>> def build(s):
    ...     early, late = s.from_epochs([["a"], ["b"], ["c"]]).branch_when(lambda t: t < 2)
    ...     return early.collect(), late.collect()
    >>> naiad.run(build)
    [([(0, 'a'), (1, 'b')], [(2, 'c')])]
    """
    checked_functions("branch_when", name, predicate=predicate)
    node = stream.scope.add_operator(name, BranchWhen(predicate), [(stream, Pipeline())], outputs=2)
    return stream.derive(node, 0), stream.derive(node, 1)
