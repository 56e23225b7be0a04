"""Gathered outputs: a sink that reads every worker's records at worker 0.

``collect(gather=True)``, ``subscribe(f, gather=True)``, ``Collection.changes(gather=True)``
and ``Collection.view()`` send every record to worker 0 (:func:`to_worker_zero`), whose
sink sees the whole stream, in time order, with the global frontier. The sinks of the other
workers receive nothing; what their builds return is :class:`GatheredElsewhere` (or, for a
view, a view that refuses :meth:`~naiad.differential.view.View.at`), which refuses to be
read: in process 1 of a cluster ``df.results[0]`` is worker W's, and an empty list there
would read as an empty result without any error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np

from naiad.dataflow.channels import Exchange


def _zeros(batch: Any) -> np.ndarray:
    return np.zeros(len(batch), dtype=np.int64)


def to_worker_zero() -> Exchange:
    """The pact that sends every record to worker 0 (one call per batch).

    >>> to_worker_zero().partition(["a", "b"], 2)
    [(0, ['a', 'b'])]
    """
    return Exchange(keys=_zeros)


def refusal(what: str, worker: int, method: str) -> str:
    """Why worker ``worker``'s share of a gathered ``what`` (made by ``method``) is not read."""
    return (
        f"{what}: this is worker {worker}'s share of a gathered {what.split()[0]}, which is "
        f"empty: {method} gathers every worker's records at worker 0; read worker 0's "
        f"(dataflow.result(0), in the process whose rt.process_index is 0 in a cluster), or "
        f"make it with gather=False and read every worker's share"
    )


class GatheredElsewhere:
    """What a gathered sink's build returns on a worker other than 0: every read of it
    (``len``, iteration, indexing, ``in``, truth, and the methods of what it stands for, such
    as a capture log's ``records()``) raises a ``ValueError`` that says to read worker 0's
    result instead.

    >>> import naiad
    >>> results = naiad.run(lambda s: s.from_epochs([[1, 2, 3]]).collect(gather=True), workers=2)
    >>> sorted(results[0])
    [(0, 1), (0, 2), (0, 3)]
    >>> results[1]
    <collect 'collect' of worker 1: gathered at worker 0>
    >>> len(results[1])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: collect 'collect': this is worker 1's share of a gathered collect, ...
    >>> results[1].count((0, 1))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: collect 'collect': this is worker 1's share of a gathered collect, ...
    """

    __slots__ = ("method", "what", "worker")

    def __init__(self, what: str, worker: int, method: str) -> None:
        self.what = what
        self.worker = worker
        self.method = method

    def __repr__(self) -> str:
        return f"<{self.what} of worker {self.worker}: gathered at worker 0>"

    def _refuse(self, *_: Any) -> NoReturn:
        raise ValueError(refusal(self.what, self.worker, self.method))

    def __getattr__(self, name: str) -> Any:
        # only for names the object lacks: a list's count() or a CaptureLog's records() and
        # frontiers() failed with a bare AttributeError that did not say why. Private and
        # special names stay AttributeErrors (copy, pickle and hasattr probe those).
        if name.startswith("_") or name in GatheredElsewhere.__slots__:  # (unset: no loop)
            raise AttributeError(name)
        self._refuse(name)

    def __len__(self) -> int:
        self._refuse()

    def __iter__(self) -> Iterator[Any]:
        self._refuse()

    def __getitem__(self, index: Any) -> Any:
        self._refuse(index)

    def __contains__(self, item: Any) -> bool:
        self._refuse(item)

    def __bool__(self) -> bool:
        self._refuse()

    def __reversed__(self) -> Iterator[Any]:
        self._refuse()
