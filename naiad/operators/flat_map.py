"""``flat_map``: each record becomes zero or more records."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from naiad.operators.aggregate import checked_functions, iterable_result
from naiad.operators.map import map_batch

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


def flat_map(stream: Stream, f: Callable[[Any], Iterable[Any]], name: str = "flat_map") -> Stream:
    """Replaces every record by the records of ``f(record)``.

    >>> import naiad
    >>> naiad.run(lambda s: s.from_epochs([["a b", "c"]]).flat_map(str.split).collect())
    [[(0, 'a'), (0, 'b'), (0, 'c')]]
    """
    checked_functions("flat_map", name, f=f)

    def flattened(batch: Any) -> list[Any]:
        out: list[Any] = []
        extend = out.extend
        for x in batch:
            records = f(x)
            try:
                extend(records)  # the outputs in C: a Python step per input record only
            except TypeError:  # a result that is no iterable (None) is named; else the user's
                iterable_result(records, f"flat_map {name!r}", f"f({x!r:.80})")
                raise
        return out

    return map_batch(stream, flattened, name)
