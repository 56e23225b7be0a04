"""Channels: how a logical edge becomes physical edges between worker shards.

A *pact* says how records reach the shards of the consuming operator: :class:`Pipeline`
keeps them on the sending worker; :class:`Exchange` routes each record to worker
``key(record) % peers`` (Naiad §3.1's partitioning function), or, with ``keys``, computes the
routing of a whole batch in one call (a numpy array of worker numbers, for numpy batches);
:class:`Broadcast` sends every batch to every worker.

A *pusher* is the sending end of one physical edge. Every message pushed is counted once, at
the logical target location, in the sending worker's progress batch; the partitioning step
pushes one message per non-empty part, so the counts it reports are exactly the messages
that will be received (invariant 4); a broadcast pushes one message per worker, and counts
as many.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from naiad.actors.vertex import VertexShard, fan_out
from naiad.progress.change_batch import ChangeBatch


class Pact:
    """How records travel from an output to the shards of an input."""


@dataclass(frozen=True)
class Pipeline(Pact):
    """Records stay on the worker that produced them."""


@dataclass(frozen=True)
class Broadcast(Pact):
    """Every batch goes to every worker (one message per worker; on one worker, a pipeline)."""


@dataclass(frozen=True)
class Exchange(Pact):
    """Records go to worker ``key(record) % peers``, or ``keys(batch)[i] % peers``.

    A numpy batch is split into numpy arrays of its dtype and record shape (with ``key``
    too, which is called on each element: a row, a structured record or a numpy scalar).

    >>> Exchange(key=lambda x: x).partition([1, 2, 3, 4], 2)
    [(0, [2, 4]), (1, [1, 3])]
    >>> import numpy as np
    >>> Exchange(key=lambda row: int(row[0])).partition(np.array([[1, 5], [2, 6], [4, 7]]), 2)
    [(0, array([[2, 6],
           [4, 7]])), (1, array([[1, 5]]))]
    >>> [(w, a.tolist()) for w, a in Exchange(keys=lambda b: b).partition(np.arange(5), 2)]
    [(0, [0, 2, 4]), (1, [1, 3])]

    ``check(batch)``, if given, refuses a batch the consumer cannot take by raising; it is
    called once per batch before any record is routed, on every layout (on one worker too,
    where nothing is routed), so a refused send raises at the sender with nothing of it
    delivered, and the key functions may assume checked records.

    >>> def pairs(batch):
    ...     for r in batch:
    ...         if len(r) != 2:
    ...             raise TypeError(f"not a pair: {r!r}")
    >>> Exchange(key=lambda r: r[0], check=pairs).partition([(1, 2), (1, 2, 3)], 2)
    Traceback (most recent call last):
    ...
    TypeError: not a pair: (1, 2, 3)
    """

    key: Callable[[Any], int] | None = None
    keys: Callable[[Any], Any] | None = None
    check: Callable[[Any], None] | None = None

    def __post_init__(self) -> None:
        if (self.key is None) == (self.keys is None):
            raise ValueError("Exchange needs exactly one of key (per record) or keys (per batch)")
        given = self.key if self.keys is None else self.keys
        if not callable(given):
            # on one worker an exchange is wired as a pipeline and never calls it
            which = "key" if self.keys is None else "keys"
            raise TypeError(f"Exchange: {which} must be a function, not {given!r}")
        if self.check is not None and not callable(self.check):
            raise TypeError(f"Exchange: check must be a function, not {self.check!r}")

    def partition(self, batch: Any, peers: int) -> list[tuple[int, Any]]:
        """Splits ``batch`` (once ``check`` accepts it) into its non-empty parts, one per
        destination worker."""
        if self.check is not None:
            self.check(batch)
        if self.keys is None:
            key = self.key
            assert key is not None
            if isinstance(batch, np.ndarray):
                # one key per record, but the parts stay arrays of the batch's dtype and
                # record shape: a list of its elements (numpy scalars, np.void rows, 1-d
                # rows) would not cross processes as the array's bytes
                routes: list[int] = []
                try:
                    for record in batch:
                        routes.append(key(record) % peers)
                except TypeError:
                    _raise_key_error(key, record)
                found = np.array(routes)
                if found.dtype.kind not in "iu" and len(routes):
                    # a float key indexed no list above, but numpy would truncate it
                    for record, route in zip(batch, routes, strict=True):
                        if not isinstance(route, int | np.integer):
                            _raise_key_error(key, record)
                return split_by_routes(batch, found.astype(np.int64, copy=False), peers)
            parts: list[list[Any]] = [[] for _ in range(peers)]
            try:
                for record in batch:
                    parts[key(record) % peers].append(record)
            except TypeError:
                _raise_key_error(key, record)
            return [(w, part) for w, part in enumerate(parts) if part]
        found = integer_array(self.keys(batch), "exchange: keys(batch)")
        if found.dtype == np.uint64:
            # keys (hashes) from 2**63 up would wrap negative in the cast to int64, and a
            # negative key leaves another remainder: take it first, as key(record) does
            found = found % np.uint64(peers)
        keys = routes_array(found, batch, "exchange: keys(batch)")
        workers: np.ndarray
        if peers & (peers - 1) == 0 and peers <= 256:
            # x % peers costs ~11 ns per record in numpy; for a power of two it is the low
            # bits of x's low byte (integer casts wrap), ~0.5 ns and a uint8 result.
            workers = keys.astype(np.uint8) & np.uint8(peers - 1)
        else:
            workers = keys % peers
        return split_by_routes(batch, workers, peers)


def _raise_key_error(key: Callable[[Any], int], record: Any) -> NoReturn:
    """Re-raises the ``TypeError`` being handled, or, when ``key(record)`` is not an integer,
    one that says so."""
    error = sys.exc_info()[1]
    try:
        k = key(record)
    except Exception:
        if error is None:
            raise
        # the key raised itself (not a non-integer result): its own error, shown once, not
        # a second copy "during handling of" the first
        raise error from None
    if isinstance(k, int | np.integer):
        raise
    raise TypeError(
        f"exchange: key(record) must return an integer, not {k!r} (for {record!r}); "
        f"hash other values with naiad.differential.updates.stable_hash"
    ) from None


def routes_array(routes: Any, batch: Any, what: str) -> np.ndarray:
    """``routes`` (what a function returned for ``batch``) checked as one integer per record,
    as an int64 array (left uint64 if a route is beyond int64, where a cast would wrap it
    negative: no part or worker index is that large); ``what`` names the function in
    the error.

    >>> routes_array([1, 0], ["a", "b"], "keys(batch)").tolist()
    [1, 0]
    >>> routes_array([0.5], ["a"], "keys(batch)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: keys(batch) must return a 1-d array of integers (int64 at most), one per ...
    """
    array = integer_array(routes, what)
    if array.ndim != 1 or (array.dtype.kind not in "iub" and array.size):
        # a cast to int64 truncated floats (NaN to INT64_MIN), failed on strings or huge
        # ints with numpy's own message, and a scalar had "no len()"
        raise TypeError(
            f"{what} must return a 1-d array of integers (int64 at most), one per record, not "
            f"{array.ndim}-d {array.dtype} {np.array2string(array.ravel()[:3], separator=', ')}; "
            f"hash other values with naiad.differential.updates.stable_hash"
        )
    if len(array) != len(batch):
        raise ValueError(f"{what} returned {len(array)} routes for a batch of {len(batch)}")
    if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
        return array  # a cast would wrap these negative: the caller's range check names them
    return array.astype(np.int64, copy=False)


def integer_array(values: Any, what: str) -> np.ndarray:
    """``np.asarray(values)``, except for a list of Python integers that numpy would store
    inexactly: one from 2**63 up among others makes a float64 array (2**63 + 1 becomes 2**63),
    one from 2**64 up an object array. Such a list is uint64 when every value fits, else
    refused naming the values; ``what`` names the function that returned it.

    >>> integer_array([2**63 + 1, 5], "keys(batch)")
    array([9223372036854775809,                   5], dtype=uint64)
    >>> integer_array([-1, 2**63], "keys(batch)")
    Traceback (most recent call last):
    ...
    TypeError: keys(batch) must return a 1-d array of integers (int64 at most), one per \
record: it returned -1 and 9223372036854775808, which no 64-bit array holds together \
(int64 ends at 2**63 - 1, uint64 starts at 0)
    """
    array = np.asarray(values)
    if array.dtype.kind not in "fO" or array.ndim != 1 or not isinstance(values, list | tuple):
        return array
    if not all(isinstance(v, int | np.integer) for v in values):
        return array  # not integers: the caller says so
    exact = [int(v) for v in values]  # a numpy int64 -1 would wrap in the cast, not refuse
    try:
        return np.array(exact, dtype=np.uint64)
    except OverflowError:
        head = f"{what} must return a 1-d array of integers (int64 at most), one per record"
        huge = next((v for v in exact if not -(2**63) <= v < 2**64), None)
        if huge is not None:
            raise TypeError(f"{head}: it returned {huge}, beyond 64 bits") from None
        low = next(v for v in exact if v < 0)
        high = next(v for v in exact if v >= 2**63)
        raise TypeError(
            f"{head}: it returned {low} and {high}, which no 64-bit array holds together "
            f"(int64 ends at 2**63 - 1, uint64 starts at 0)"
        ) from None


def split_by_routes(batch: Any, routes: np.ndarray, parts: int) -> list[tuple[int, Any]]:
    """The non-empty parts of ``batch`` (a list or a numpy array), record ``i`` going to part
    ``routes[i]`` (each in ``range(parts)``), in their order within each part.

    >>> split_by_routes(["a", "b", "c"], np.array([2, 0, 2]), 3)
    [(0, ['b']), (2, ['a', 'c'])]
    """
    if isinstance(batch, list):
        if parts > MASK_PEERS:
            return _partition_list_by_sort(batch, routes, parts)
        out = []
        for w in range(parts):
            indices = np.flatnonzero(routes == w).tolist()
            if indices:
                out.append((w, [batch[i] for i in indices]))
        return out
    if parts <= MASK_PEERS:
        return _partition_by_masks(batch, routes, parts)
    return _partition_by_sort(batch, routes, parts)


# Up to this many peers a columnar batch is split with one boolean mask per destination
# (``batch[np.flatnonzero(mask)]``: ~2.5 ns per record and destination, measured here with
# numpy 2.4 on 64 Ki int64 records), above it with one radix sort (~9 ns per record whatever
# the number of peers: argsort of uint8 routes, gather, bincount). Not ``batch[mask]``, which
# costs ~7 ns per record when the mask is random, nor ``compress`` (a nonzero and a ``take``
# with bounds checks: a little slower).
MASK_PEERS = 4


def _partition_by_masks(batch: Any, workers: np.ndarray, peers: int) -> list[tuple[int, Any]]:
    """The non-empty parts, one gather per destination; a batch that goes to a single
    destination is passed on whole, not copied."""
    if peers == 2:
        ones = workers.astype(bool)  # routes are 0 or 1: one mask and its negation
        masks = [~ones, ones]
    else:
        masks = [workers == w for w in range(peers)]
    size = len(workers)
    result = []
    for w, mask in enumerate(masks):
        count = int(np.count_nonzero(mask))
        if count == size:
            return [(w, batch)] if size else []
        if count:
            result.append((w, batch[np.flatnonzero(mask)]))
    return result


def _partition_by_sort(batch: Any, workers: np.ndarray, peers: int) -> list[tuple[int, Any]]:
    """The non-empty parts, after one stable sort of the batch by destination."""
    if peers < 256:
        workers = workers.astype(np.uint8)  # numpy sorts uint8 by radix: ~2x faster
    order = np.argsort(workers, kind="stable")
    counts = np.bincount(workers, minlength=peers)
    ordered = batch[order]
    result, start = [], 0
    for w, count in enumerate(counts.tolist()):
        if count:
            result.append((w, ordered[start : start + count]))
        start += count
    return result


def _partition_list_by_sort(batch: list[Any], routes: np.ndarray, parts: int) -> list[Any]:
    """The non-empty parts of a list, after one stable sort of its routes: a pass per part
    (as above) costs O(parts x records), ~5 ms per batch for 1000 parts even for one record."""
    order = np.argsort(routes.astype(np.uint8) if parts < 256 else routes, kind="stable")
    counts = np.bincount(routes, minlength=parts)
    ordered = [batch[i] for i in order.tolist()]
    nonzero = np.flatnonzero(counts)
    result, start = [], 0
    for w, count in zip(nonzero.tolist(), counts[nonzero].tolist(), strict=True):
        result.append((w, ordered[start : start + count]))
        start += count
    return result


class LocalPusher:
    """Pushes to a shard in this process; ``cut_through`` when it is on the sender's worker."""

    __slots__ = ("buffer", "cut_through", "location", "port", "shard")

    shares = True  # the shard receives the batch object itself
    stages = False  # nothing to refuse

    def __init__(
        self, shard: VertexShard, port: int, location: int, buffer: ChangeBatch, cut_through: bool
    ) -> None:
        self.shard = shard
        self.port = port
        self.location = location
        self.buffer = buffer  # the *sender's* progress batch
        self.cut_through = cut_through

    def push(self, time: Any, batch: Any) -> None:
        self.buffer.update((self.location, time), 1)
        self.shard.receive(self.port, time, batch, self.cut_through)

    def stage(self, time: Any, batch: Any) -> Callable[[], None]:
        return functools.partial(self.push, time, batch)


class ExchangePusher:
    """Partitions each batch and pushes every part to the pusher of its worker."""

    __slots__ = ("encoders", "pact", "peers", "pushers", "target")

    shares = False  # a list is split into new lists (a single worker is wired without one)

    def __init__(self, pact: Exchange, pushers: list[Any], target: str) -> None:
        self.pact = pact
        self.pushers = pushers
        self.target = target  # the name of the operator the records are routed to
        self.peers = len(pushers)
        # per worker, the encoder of a pusher to another process (``encoded``), else None;
        # None altogether when every worker is in this process
        encoders = [getattr(p, "encoded", None) for p in pushers]
        self.encoders = encoders if any(encoders) else None

    # the key function, the pact's check or the codec may refuse a record: an output with
    # other consumers stages this one's parts before delivering anything to any of them
    stages = True

    def push(self, time: Any, batch: Any) -> None:
        pushers, encoders = self.pushers, self.encoders
        parts = self._partition(batch)
        if encoders is None or not parts or (len(parts) == 1 and encoders[parts[0][0]] is None):
            for worker, part in parts:
                pushers[worker].push(time, part)
            return
        self.stage(time, batch, parts)()  # encoded here, so that a refusal names the target

    def _partition(self, batch: Any) -> list[tuple[int, Any]]:
        try:
            return self.pact.partition(batch, self.peers)
        except Exception as exc:
            # raised in the sender's callback, which the error names: say which exchange too
            exc.add_note(routing_note(self.target))
            raise

    def stage(
        self, time: Any, batch: Any, parts: list[tuple[int, Any]] | None = None
    ) -> Callable[[], None]:
        """Partitions ``batch`` and encodes every part that leaves the process; returns the
        delivery. A record the key, the check or the codec refuses raises here, with nothing
        delivered anywhere."""
        pushers, encoders = self.pushers, self.encoders
        staged = []
        if parts is None:
            parts = self._partition(batch)
        try:
            for worker, part in parts:
                encode = None if encoders is None else encoders[worker]
                staged.append((worker, part if encode is None else encode(time, part), encode))
        except Exception as exc:
            # the codec refused a record (or a message is too large to split): say which
            # exchange, as a refusal by the key does
            exc.add_note(routing_note(self.target))
            raise

        def deliver() -> None:
            for worker, part, encode in staged:
                if encode is None:
                    pushers[worker].push(time, part)
                else:
                    pushers[worker].send_encoded(time, part)

        return deliver


class CheckedPusher:
    """An exchange with a ``check`` on one worker, where it is wired as a pipeline: the batch
    is checked as the exchange of several workers would check it, then pushed on whole."""

    __slots__ = ("check", "pusher", "target")

    shares = True  # the shard receives the batch object itself
    stages = True  # the check may refuse it

    def __init__(self, check: Callable[[Any], None], pusher: LocalPusher, target: str) -> None:
        self.check = check
        self.pusher = pusher
        self.target = target  # the name of the operator the records are sent to

    def push(self, time: Any, batch: Any) -> None:
        self.stage(time, batch)()

    def stage(self, time: Any, batch: Any) -> Callable[[], None]:
        try:
            self.check(batch)
        except Exception as exc:
            exc.add_note(routing_note(self.target))
            raise
        return functools.partial(self.pusher.push, time, batch)


def routing_note(target: str) -> str:
    """The note added to an error raised while records are routed to operator ``target``."""
    return f"naiad: while routing records to operator {target!r}"


class BroadcastPusher:
    """Pushes every batch to the pusher of every worker.

    A batch bound for other processes is encoded once, whatever the number of their workers,
    and before anything is delivered: a record the codec refuses raises with nothing of the
    batch delivered anywhere. A list goes itself to one local worker and as a copy to the
    others (as :func:`~naiad.actors.vertex.fan_out` does), so that each may modify its own.
    """

    __slots__ = ("local", "remote", "stages", "target")

    shares = True  # a local worker receives the batch object itself (the sender copies it
    # for this pusher when the output has other consumers after it)

    def __init__(self, pushers: list[Any], target: str) -> None:
        self.local = [p for p in pushers if getattr(p, "encoded", None) is None]
        self.remote = [p for p in pushers if getattr(p, "encoded", None) is not None]
        self.target = target  # the name of the operator the batches are sent to
        self.stages = bool(self.remote)  # the codec may refuse a record

    def push(self, time: Any, batch: Any) -> None:
        self.stage(time, batch)()

    def stage(self, time: Any, batch: Any) -> Callable[[], None]:
        """Encodes ``batch`` for the other processes; returns the delivery to every worker.
        A record the codec refuses raises here, with nothing delivered anywhere."""
        remote = self.remote
        frames: Any = None
        if remote:
            try:
                frames = remote[0].encoded(time, batch)
            except Exception as exc:
                exc.add_note(f"naiad: while broadcasting records to operator {self.target!r}")
                raise

        def deliver() -> None:
            for pusher in remote:
                pusher.send_encoded(time, frames)
            fan_out(self.local, time, batch)

        return deliver
