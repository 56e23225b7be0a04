"""``arrange_from_upsert``: an arrangement of the latest value per key, from a stream of
upserts (differential dataflow's ``arrange_from_upsert``, for change-data-capture inputs).

An upsert is a record ``(key, value)`` of a timely stream, at the stream's time; ``value``
``None`` deletes the key. The arranged collection holds ``(key, value)`` for each key's
latest value, and changes by ``-(key, old) +(key, new)`` at each time a key's value changes
(a repeated value, or the deletion of an absent key, changes nothing).

Several upserts of one key at one time: the greatest value wins (Python's ordering), and
any value wins over ``None`` (a deletion at the same time as a value is ignored), as in
differential dataflow; so the result does not depend on the order in which the workers'
upserts arrive. Values of one key and time that Python cannot order (or orders only partially,
as frozensets by inclusion: none of them the greatest) fail the dataflow with an error
naming the operator. Equal values of different types (``1``, ``1.0``, ``True``) are
one value, as everywhere in an arrangement.

How: upserts are routed to the worker of their key (the hash ``arrange_by_key`` routes by,
so the arrangement joins with any other arrangement by key), kept per time until the time
completes, then read in time order against the arrangement itself: the keys' current values
are looked up in its spine (one sorted search per batch for all the keys of a round), and
the round's changes are sealed into it as one batch, sent on as any arrangement's. The trace
is the operator's only state; it reads only totals, so no history needs to be kept for it.
A sequence of upserts needs totally ordered times: integer epochs, or ``Lex`` loops
(inside a ``Product`` loop it is refused when built).

Malformed upserts (not a pair, unhashable, with a NaN) are refused by the channel's check,
once per record, at the sender and on every layout (one worker too, where nothing is routed):
a ``send`` to an input that holds one raises naming the record, with nothing of it delivered
to any consumer of the input, and the dataflow goes on; from an operator's output, the
operator that sent it fails.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.dataflow.channels import Exchange
from naiad.differential import lattice
from naiad.differential.arrange import Arranged, ArrangeVertex
from naiad.differential.trace import Batch, Spine
from naiad.differential.updates import (
    columns_of,
    consolidated,
    stable_hash,
    time_matrix,
    unique_sorted,
)
from naiad.progress.capability import Capability

if TYPE_CHECKING:
    from naiad.operators.stream import Stream


class UpsertVertex(ArrangeVertex):
    """Keeps each time's upserts until it completes; then turns them, in time order, into
    the changes of the arranged collection (see the module docstring)."""

    def __init__(self, spine: Spine, name: str) -> None:
        super().__init__(spine)
        self.label = name

    def on_recv(self, port: int, cap: Capability, batch: Any) -> None:
        records = list(batch)  # checked by the channel (its exchange's check)
        if records:
            self.stash(cap.time, records)
            self.held.add(cap)

    def seal(self, times: list[Any], upper: np.ndarray, lower: np.ndarray, last: bool) -> Batch:
        # per key, its upserts' values per time (times least first, as given)
        upserts: dict[Hashable, dict[Any, list[Any]]] = {}
        for t in times:
            for records in self.pending.pop(t):
                for key, value in records:
                    upserts.setdefault(key, {}).setdefault(t, []).append(value)
        current = self._current(list(upserts))
        out: list[tuple[Any, Any]] = []
        at: list[Any] = []
        diffs: list[int] = []
        for key, by_time in upserts.items():
            old = current.get(key)
            for t, values in by_time.items():
                new = self._winner(key, t, values)
                if new is old or (new is not None and old is not None and new == old):
                    continue
                if old is not None:
                    out.append((key, old))
                    at.append(t)
                    diffs.append(-1)
                if new is not None:
                    out.append((key, new))
                    at.append(t)
                    diffs.append(1)
                old = new
        spine = self.spine
        if not out:  # no value changed: the upper frontier moves all the same
            return spine.advance_upper(upper, last)
        key_column, value_column = columns_of(out)
        return spine.insert_updates(
            key_column,
            (value_column,),
            time_matrix(at, spine.depth),
            np.array(diffs, dtype=np.int64),
            upper,
            lower,
            last,
        )

    def _winner(self, key: Any, t: Any, values: list[Any]) -> Any:
        """The value of ``key`` after its upserts ``values`` at time ``t``: the greatest one,
        ``None`` only if all are ``None``."""
        present = [v for v in values if v is not None]
        if len(present) <= 1:
            return present[0] if present else None
        try:
            best = max(present)
            # max of a partial order (frozensets: subset) is whichever came first of two
            # incomparable values, so the result would depend on the order of arrival
            beaten = next((v for v in present if not (v < best or v == best)), None)
            if beaten is not None:
                raise TypeError(f"neither of {best!r:.40} and {beaten!r:.40} is the greater")
        except TypeError as e:
            raise TypeError(
                f"{self.label}: key {key!r} has several upserts at time {t!r} whose values "
                f"cannot be ordered ({e}): the greatest value wins a tie, so the values of "
                "one key must be comparable"
            ) from None
        return best

    def _current(self, keys: list[Any]) -> dict[Any, Any]:
        """The current value of each of ``keys`` that has one (read from the spine)."""
        spine = self.spine
        stored = spine.stored_keys(columns_of([(k, None) for k in keys])[0])
        found, cols, _, diffs = spine.gather(unique_sorted(stored))
        if not len(found):
            return {}
        times = np.zeros((len(found), 1), dtype=np.int64)
        (found, values), _, counts = consolidated([found, *cols], times, diffs)
        live = counts != 0
        assert (counts[live] == 1).all(), "an upsert arrangement holds one value per key"
        values = spine.decode(1, values[live])
        by_code = dict(zip(found[live].tolist(), values.tolist(), strict=True))
        return {
            k: by_code[code]
            for k, code in zip(keys, stored.tolist(), strict=True)
            if code in by_code
        }


def check_upsert(record: Any, name: str) -> None:
    """Refuses a record that is not a ``(key, value or None)`` pair of hashable values
    without NaN, naming the operator ``name``.

    >>> check_upsert(("k", None), "upsert")
    >>> check_upsert(["k", 1], "upsert")
    Traceback (most recent call last):
    ...
    TypeError: upsert: an upsert is a (key, value or None) tuple, not ['k', 1]
    """
    from naiad.differential.collection import check_record

    if type(record) is not tuple or len(record) != 2:
        raise TypeError(f"{name}: an upsert is a (key, value or None) tuple, not {record!r:.80}")
    try:
        check_record(record)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name}: {e}") from None


def arrange_from_upsert(stream: Stream, name: str = "arrange_from_upsert") -> Arranged:
    """An arrangement by key of each key's latest value, from ``stream``'s upserts: records
    ``(key, value)`` at the stream's times, ``value`` ``None`` deleting the key (see
    :mod:`naiad.differential.upsert`; several upserts of a key at one time: the greatest
    value wins). It is an :class:`Arranged` like ``arrange_by_key``'s: joins, reduces,
    ``trace`` and :func:`import_trace` read it.

    >>> import naiad
    >>> from naiad.differential import arrange_from_upsert
    >>> def build(scope):
    ...     cdc = scope.from_epochs([[("ada", 1), ("bob", 2)], [("ada", 3)], [("bob", None)]])
    ...     return arrange_from_upsert(cdc).as_collection().changes()
    >>> naiad.run(build)  # doctest: +NORMALIZE_WHITESPACE
    [[(('ada', 1), 0, 1), (('bob', 2), 0, 1), (('ada', 1), 1, -1), (('ada', 3), 1, 1),
      (('bob', 2), 2, -1)]]
    """
    from naiad.differential.total import check_totally_ordered
    from naiad.operators.stream import Stream

    if not isinstance(stream, Stream):
        raise TypeError(
            f"{name}: expected a timely Stream of (key, value or None) records, not "
            f"{type(stream).__name__}"
        )
    scope = stream.scope
    check_totally_ordered(scope, name, "an arrangement of explicit (key, value) changes")
    spine = Spine(scope.depth, lattice.scope_lex(scope), name, scope.index)

    def check(batch: Any) -> None:
        for record in batch:
            check_upsert(record, name)

    def route(record: Any) -> int:
        return stable_hash(record[0])  # as arrange_by_key routes the key column

    # the channel checks each record once, at the sender on every layout: a malformed
    # upsert sent to an input raises at send, with nothing of that send delivered
    exchange = Exchange(key=route, check=check)
    node = scope.add_operator(name, UpsertVertex(spine, name), [(stream, exchange)])
    return Arranged(stream.derive(node), spine)
