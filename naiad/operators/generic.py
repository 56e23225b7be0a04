"""``unary`` and ``binary``: operators whose logic is a user :class:`~naiad.Vertex`.

The logic gets ``on_recv`` / ``on_notify`` / ``notify_at`` and explicit capabilities
(``naiad/actors/vertex.py``). An ``exchange`` key per input routes records by key first,
so a stateful vertex sees every record of a key on one worker.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import Vertex
from naiad.dataflow.channels import Exchange, Pact, Pipeline

if TYPE_CHECKING:
    from naiad.operators.stream import Stream

Key = Callable[[Any], int]


def _pact(key: Key | Pact | None, name: str) -> Pact:
    if key is None:
        return Pipeline()
    if isinstance(key, Pact):
        return key
    if not callable(key):
        # checked here: on one worker an exchange is never called, so a wrong key would
        # surface only on several, as "not callable" raised in the operator upstream
        raise TypeError(
            f"operator {name!r}: exchange must be a key function, a Pact or None, not {key!r}"
        )
    return Exchange(key=key)


def _checked(logic: Vertex, name: str | None, outputs: int) -> tuple[str, int]:
    """The operator's name and its number of outputs, once ``logic`` and ``outputs`` are
    known to be usable."""
    if isinstance(logic, type) and issubclass(logic, Vertex):
        raise TypeError(
            f"operator {name or logic.__name__!r}: logic is the class {logic.__name__}; pass an "
            f"instance ({logic.__name__}(...)), one per worker"
        )
    if not isinstance(logic, Vertex):
        raise TypeError(
            f"operator {name or type(logic).__name__!r}: logic must be a naiad.Vertex, not "
            f"{type(logic).__name__}"
        )
    name = name or type(logic).__name__
    if isinstance(outputs, bool) or not isinstance(outputs, numbers.Integral) or outputs < 0:
        raise TypeError(
            f"operator {name!r}: outputs must be a non-negative integer, not {outputs!r}"
        )
    return name, int(outputs)


def unary(
    stream: Stream,
    logic: Vertex,
    name: str | None = None,
    exchange: Key | Pact | None = None,
    outputs: int = 1,
) -> Any:
    """Applies ``logic`` to ``stream``; returns its output stream (a tuple if ``outputs > 1``).

    >>> import naiad
    >>> class Sum(naiad.Vertex):           # one sum per epoch, once the epoch is complete
    ...     def __init__(self): self.sums = {}
    ...     def on_recv(self, port, cap, batch):
    ...         if cap.time not in self.sums:
    ...             self.notify_at(cap)
    ...         self.sums[cap.time] = self.sums.get(cap.time, 0) + sum(batch)
    ...     def on_notify(self, cap):
    ...         self.send(cap, [self.sums.pop(cap.time)])
    >>> naiad.run(lambda s: s.from_epochs([[1, 2], [3]]).unary(Sum()).collect())
    [[(0, 3), (1, 3)]]
    """
    name, outputs = _checked(logic, name, outputs)
    node = stream.scope.add_operator(
        name, logic, [(stream, _pact(exchange, name))], outputs=outputs
    )
    if outputs == 1:
        return stream.derive(node)
    return tuple(stream.derive(node, p) for p in range(outputs))


def binary(
    left: Stream,
    right: Stream,
    logic: Vertex,
    name: str | None = None,
    exchange: tuple[Key | Pact | None, Key | Pact | None] = (None, None),
    outputs: int = 1,
) -> Any:
    """Applies ``logic`` to two streams (input ports 0 and 1)."""
    name, outputs = _checked(logic, name, outputs)
    if not isinstance(exchange, tuple | list) or len(exchange) != 2:
        raise TypeError(
            f"operator {name!r}: exchange must be a pair, one per input (a key function, a "
            f"Pact or None each), not {exchange!r}"
        )
    node = left.scope.add_operator(
        name,
        logic,
        [(left, _pact(exchange[0], name)), (right, _pact(exchange[1], name))],
        outputs=outputs,
    )
    if outputs == 1:
        return left.derive(node)
    return tuple(left.derive(node, p) for p in range(outputs))
