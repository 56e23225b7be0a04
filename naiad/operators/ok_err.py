"""``ok_err``: one function splits a stream into results and errors (timely's ``OkErr``).

``f(record)`` returns a tagged pair, ``("ok", value)`` or ``("err", error)``: the values go to
the first output, the errors to the second, at the record's time. A pipeline that parses or
validates keeps its failures as data (to count, log or repair downstream) instead of raising,
which would stop the dataflow. Anything else ``f`` returns raises a ``TypeError`` naming the
operator and the record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from naiad.actors.vertex import StatelessVertex
from naiad.dataflow.channels import Pipeline
from naiad.operators.aggregate import checked_functions
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream

OK, ERR = "ok", "err"


class OkErr(StatelessVertex):
    def __init__(self, f: Callable[[Any], tuple[str, Any]]) -> None:
        self.f = f

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        oks: list[Any] = []
        errs: list[Any] = []
        f = self.f
        for record in batch:
            result = f(record)
            if result.__class__ is tuple and len(result) == 2:
                tag, value = result
                if tag == OK:
                    oks.append(value)
                    continue
                if tag == ERR:
                    errs.append(value)
                    continue
            raise TypeError(
                f"ok_err {self.name!r}: f(record) must return ('ok', value) or ('err', error), "
                f"not {result!r:.80} (for record {record!r:.80})"
            )
        outputs = self.shard.outputs
        outputs[0].send(cap, oks)
        outputs[1].send(cap, errs)


def ok_err(
    stream: Stream, f: Callable[[Any], tuple[str, Any]], name: str = "ok_err"
) -> tuple[Stream, Stream]:
    """``(values, errors)``: ``f(record)`` returns ``("ok", value)`` or ``("err", error)``.

    >>> import naiad
    >>> def parse(text):
    ...     return ("ok", int(text)) if text.isdigit() else ("err", f"not a number: {text}")
    >>> def build(s):
    ...     numbers, errors = s.from_epochs([["1", "x", "22"]]).ok_err(parse)
    ...     return numbers.collect(), errors.collect()
    >>> naiad.run(build)
    [([(0, 1), (0, 22)], [(0, 'not a number: x')])]
    """
    checked_functions("ok_err", name, f=f)
    node = stream.scope.add_operator(name, OkErr(f), [(stream, Pipeline())], outputs=2)
    return stream.derive(node, 0), stream.derive(node, 1)
