"""``Scope``: the user-facing scope: inputs, sources, loop contexts, regions and feedback."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from naiad.dataflow.scope import ScopeCore
from naiad.operators import capture, input, loops, unordered_input
from naiad.operators.stream import Stream
from naiad.progress.summary import TimeClass
from naiad.progress.timestamp import Product


class Scope(ScopeCore):
    """The root scope of a dataflow, a loop context or a region (usable as a ``with`` block).

    >>> import naiad
    >>> def build(scope):                       # count down from each number to 0
    ...     nums = scope.from_epochs([[3]])
    ...     with scope.iterative() as loop:
    ...         handle, cycle = loop.feedback()
    ...         body = nums.enter(loop).concat(cycle)
    ...         body.map(lambda x: x - 1).filter(lambda x: x >= 0).connect_loop(handle)
    ...     return body.leave().collect()
    >>> sorted(naiad.run(build)[0])       # records within one time have no order
    [(0, 0), (0, 1), (0, 2), (0, 3)]
    """

    stream_class = Stream

    def new_input(self, name: str = "input") -> tuple[input.InputHandle, Stream]:
        """An input handle for this worker, and the stream of every worker's input."""
        return input.new_input(self, name)

    def new_unordered_input(
        self, name: str = "unordered_input"
    ) -> tuple[unordered_input.UnorderedInputHandle, Stream]:
        """An unordered input's handle for this worker (its ``capability`` is at the scope's
        least time; ``delayed``, ``downgrade``, ``drop`` and ``send`` at any time at or after
        a held one's), and the stream of what every worker sends."""
        return unordered_input.new_unordered_input(self, name)

    def from_epochs(self, epochs: Iterable[Any], name: str = "from_epochs") -> Stream:
        """A stream whose epoch ``i`` is the ``i``-th batch of ``epochs`` (split among workers)."""
        return input.from_epochs(self, epochs, name)

    def replay(self, logs: Any, name: str = "replay", split: bool = True) -> Stream:
        """A stream replaying captured logs (``stream.capture()``'s, or lists of their events):
        the same records at the same times, the frontier moving as it did. Worker ``w`` replays
        ``logs[w::peers]``; with ``split=False``, every log its build gives. In a loop
        context the logs' times are the loop's (see :func:`naiad.operators.capture.replay`)."""
        return capture.replay(self, logs, name, split)

    def iterative(self, name: str = "loop", time_class: TimeClass = Product) -> Scope:
        """A loop context nested in this scope; ``time_class`` is ``Product`` or ``Lex``."""
        return Scope(self.build, parent=self, time_class=time_class, name=name)

    def region(self, name: str = "region") -> Scope:
        """A region nested in this scope (timely's ``region``): a child scope with this
        scope's times, to group operators under one name (its path, ``dataflow/name``, is
        the scope of every operator built in it). Streams and collections go in with
        ``.enter(region)`` and out with ``.leave()`` unchanged: no operator, no re-timing, so
        the dataflow runs exactly as it would without the region. An arrangement entered into
        a region is the same arrangement (one index). Loops and regions nest inside it.

        >>> import naiad
        >>> def build(scope):
        ...     nums = scope.from_epochs([[1, 2], [3]])
        ...     with scope.region("squares") as r:
        ...         squares = nums.enter(r).map(lambda x: x * x)
        ...     return squares.leave().collect()
        >>> sorted(naiad.run(build)[0])
        [(0, 1), (0, 4), (1, 9)]
        """
        return Scope(self.build, parent=self, name=name)

    def feedback(
        self, step: int = 1, name: str = "feedback"
    ) -> tuple[loops.FeedbackHandle, Stream]:
        """A feedback vertex advancing the loop counter by ``step``: ``(handle, stream)``."""
        return loops.feedback(self, step, name)

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
