"""The wire format: a fixed frame header, msgpack for structure, raw buffers for numpy arrays.

A frame is a 32-byte header followed by ``length`` bytes of payload::

    magic "NA" | version u8 | kind u8 | dataflow u32 | channel u32 | source u32 | target u32
    | length u32 | seq u64                                        (little endian)

``kind`` says what the payload holds: a data message (``DATA``: ``(time, batch)`` for channel
``channel`` of dataflow ``dataflow`` from worker ``source`` to worker ``target``), a progress
batch (``PROGRESS``), or a control message (``CONTROL``). ``seq`` numbers the frames of one
kind from one process to another, so a receiver can detect loss and duplicates.

Payloads never use pickle: records and times are msgpack values, with extension types for
tuples, ``Product`` and ``Lex`` (so they come back as what was sent), and a numpy array is a
small msgpack head (dtype, shape) followed by its raw bytes, decoded with ``np.frombuffer``
(no per-element work; the decoded array is a read-only view of the received buffer).
Anything else is rejected with an error naming its type.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any, NamedTuple

import msgpack
import numpy as np

from naiad.progress.timestamp import Lex, Product

MAGIC = b"NA"
VERSION = 1
HEADER = struct.Struct("<2sBBIIIIIQ")
HEADER_SIZE = HEADER.size  # 32

# The largest payload a receiver accepts by default. Larger frames are rejected before their
# body is read; 256 MiB holds a batch of 32M 8-byte records.
MAX_PAYLOAD = 256 * 1024 * 1024

_EXT_TUPLE = 1
_EXT_PRODUCT = 2
_EXT_LEX = 3

_BATCH_LIST = 0
_BATCH_ARRAY = 1
_BATCH_COLUMNS = 2

# Columnar batch types (such as differential's ``Updates``), registered by the layers that
# define them: type -> (tag, to_columns), tag -> from_columns.
_COLUMNAR: dict[type, tuple[str, Any]] = {}
_FROM_COLUMNS: dict[str, Any] = {}


def register_columnar(cls: type, tag: str, to_columns: Any, from_columns: Any) -> None:
    """Lets batches of ``cls`` cross processes as a list of 1-D or 2-D numpy columns
    (numeric ones as raw buffers, ``object`` ones as msgpack values)."""
    _COLUMNAR[cls] = (tag, to_columns)
    _FROM_COLUMNS[tag] = from_columns


class Kind(IntEnum):
    DATA = 1
    PROGRESS = 2
    CONTROL = 3


class FrameError(ValueError):
    """A frame that does not follow the wire format."""


class Header(NamedTuple):
    kind: int
    dataflow: int
    channel: int
    source: int
    target: int
    length: int
    seq: int

    def pack(self) -> bytes:
        return HEADER.pack(
            MAGIC,
            VERSION,
            self.kind,
            self.dataflow,
            self.channel,
            self.source,
            self.target,
            self.length,
            self.seq,
        )


def unpack_header(data: bytes | memoryview, max_payload: int = MAX_PAYLOAD) -> Header:
    """Parses and validates a header.

    >>> h = Header(Kind.DATA, 0, 3, 1, 2, 10, 7)
    >>> unpack_header(h.pack()) == h
    True
    >>> unpack_header(b"XX" + h.pack()[2:])
    Traceback (most recent call last):
    ...
    naiad.transport.codec.FrameError: bad frame magic b'XX'
    """
    if len(data) != HEADER_SIZE:
        raise FrameError(f"a frame header has {HEADER_SIZE} bytes, got {len(data)}")
    magic, version, kind, dataflow, channel, source, target, length, seq = HEADER.unpack(data)
    if magic != MAGIC:
        raise FrameError(f"bad frame magic {magic!r}")
    if version != VERSION:
        raise FrameError(f"unsupported frame version {version}")
    if kind not in _KINDS:
        raise FrameError(f"unknown frame kind {kind}")
    if length > max_payload:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_payload}")
    return Header(kind, dataflow, channel, source, target, length, seq)


_KINDS = {int(k) for k in Kind}


def _default(obj: Any) -> Any:
    cls = obj.__class__
    if cls is Product:
        return msgpack.ExtType(_EXT_PRODUCT, packb([obj.outer, obj.inner]))
    if cls is Lex:
        return msgpack.ExtType(_EXT_LEX, packb([obj.outer, obj.inner]))
    if cls is tuple:
        return msgpack.ExtType(_EXT_TUPLE, packb(list(obj)))
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    raise TypeError(
        f"cannot send a {cls.__module__}.{cls.__qualname__} between processes: records must "
        f"be None, bool, int, float, str, bytes, lists, tuples, dicts or numpy arrays"
    )


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_TUPLE:
        return tuple(unpackb(data))
    if code == _EXT_PRODUCT:
        outer, inner = unpackb(data)
        return Product(outer, inner)
    if code == _EXT_LEX:
        outer, inner = unpackb(data)
        return Lex(outer, inner)
    raise FrameError(f"unknown msgpack extension type {code}")


def packb(obj: Any) -> bytes:
    """msgpack with tuples, ``Product`` and ``Lex`` preserved.

    >>> unpackb(packb([("a", 1), Product(2, 3), {"k": None}]))
    [('a', 1), Product(outer=2, inner=3), {'k': None}]
    """
    return msgpack.packb(obj, default=_default, strict_types=True, use_bin_type=True)


def unpackb(data: bytes | memoryview) -> Any:
    try:
        return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)
    except FrameError:
        raise
    except Exception as exc:  # msgpack raises several types for malformed input
        raise FrameError(f"malformed payload: {exc}") from exc


def encode_message(time: Any, batch: Any) -> list[bytes | memoryview]:
    """The payload parts of a data message (numpy arrays are not copied here).

    >>> parts = encode_message(Product(0, 1), np.arange(3, dtype=np.int64))
    >>> time, batch = decode_message(b"".join(parts))
    >>> time, batch.tolist(), batch.dtype.name
    (Product(outer=0, inner=1), [0, 1, 2], 'int64')
    >>> decode_message(b"".join(encode_message(4, ["x", ("y", 2)])))
    (4, ['x', ('y', 2)])
    """
    if isinstance(batch, np.ndarray) and batch.dtype.kind in "biufcmM":
        array = np.ascontiguousarray(batch)
        head = packb([time, _BATCH_ARRAY, array.dtype.str, list(array.shape)])
        return [struct.pack("<I", len(head)), head, _raw(array)]
    columnar = _COLUMNAR.get(type(batch))
    if columnar is not None:
        tag, to_columns = columnar
        descs: list[Any] = []
        bodies: list[bytes | memoryview] = []
        for column in to_columns(batch):
            if column.dtype.kind in "biufcmM":
                array = np.ascontiguousarray(column)
                descs.append(["a", array.dtype.str, list(array.shape)])
                bodies.append(_raw(array))
            else:
                descs.append(["o", column.tolist()])
        head = packb([time, _BATCH_COLUMNS, tag, descs])
        return [struct.pack("<I", len(head)), head, *bodies]
    if isinstance(batch, np.ndarray):
        batch = batch.tolist()
    head = packb([time, _BATCH_LIST, list(batch)])
    return [struct.pack("<I", len(head)), head]


def _raw(array: np.ndarray) -> bytes | memoryview:
    """The bytes of a C-contiguous array, without copying (a zero-size view cannot be cast)."""
    return array.data.cast("B") if array.size else b""


def decode_message(payload: bytes | memoryview) -> tuple[Any, Any]:
    """Inverse of :func:`encode_message`; raises :class:`FrameError` on malformed input."""
    view = memoryview(payload)
    if len(view) < 4:
        raise FrameError("data payload shorter than its length prefix")
    (head_len,) = struct.unpack_from("<I", view)
    if head_len > len(view) - 4:
        raise FrameError(f"data head of {head_len} bytes overruns the payload")
    head = unpackb(view[4 : 4 + head_len])
    if not isinstance(head, list) or len(head) < 3:
        raise FrameError("malformed data head")
    time, kind = head[0], head[1]
    if kind == _BATCH_LIST:
        if len(view) != 4 + head_len or not isinstance(head[2], list):
            raise FrameError("malformed list batch")
        return time, head[2]
    if kind == _BATCH_ARRAY and len(head) == 4:
        array, used = _array(head[2], head[3], view[4 + head_len :])
        if used != len(view) - 4 - head_len:
            raise FrameError("array body has trailing bytes")
        return time, array
    if kind == _BATCH_COLUMNS and len(head) == 4 and head[2] in _FROM_COLUMNS:
        body = view[4 + head_len :]
        columns, offset = [], 0
        for desc in head[3] if isinstance(head[3], list) else []:
            if isinstance(desc, list) and len(desc) == 3 and desc[0] == "a":
                column, used = _array(desc[1], desc[2], body[offset:])
                offset += used
            elif isinstance(desc, list) and len(desc) == 2 and desc[0] == "o":
                column = np.empty(len(desc[1]), dtype=object)
                column[:] = desc[1]
            else:
                raise FrameError("malformed column description")
            columns.append(column)
        if offset != len(body):
            raise FrameError("columnar body has trailing bytes")
        try:
            return time, _FROM_COLUMNS[head[2]](columns)
        except (TypeError, ValueError, IndexError) as exc:
            raise FrameError(f"malformed {head[2]} batch: {exc}") from exc
    raise FrameError(f"unknown batch kind {kind!r}")


def _array(dtype_str: Any, shape_list: Any, body: memoryview) -> tuple[np.ndarray, int]:
    """The array a head describes, read from the front of ``body``; and the bytes it used."""
    try:
        dtype = np.dtype(dtype_str)
        shape = tuple(int(n) for n in shape_list)
    except (TypeError, ValueError) as exc:
        raise FrameError(f"malformed array head: {exc}") from exc
    if dtype.kind not in "biufcmM" or any(n < 0 for n in shape):
        raise FrameError(f"unsupported array {dtype} {shape}")
    size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if len(body) < size:
        raise FrameError(f"array body has {len(body)} bytes, expected {size}")
    return np.frombuffer(body[:size], dtype=dtype).reshape(shape), size


def _flat_time(time: Any) -> list[int] | None:
    """``[epoch, counter, ...]`` for an int or a chain of ``Product``; None otherwise."""
    counters = []
    while time.__class__ is Product:
        counters.append(time.inner)
        time = time.outer
    if time.__class__ is not int:
        return None
    counters.append(time)
    counters.reverse()
    return counters


def encode_changes(changes: list[tuple[tuple[int, Any], int]]) -> bytes:
    """A progress batch: ``[((location, time), delta), ...]``.

    Integer and ``Product`` times (the common case) travel as flat integer rows
    ``[location, delta, epoch, counter, ...]``, several times cheaper to pack than the
    extension types; any other time falls back to the tagged form.

    >>> batch = [((3, Product(0, 5)), 1), ((3, Product(0, 4)), -1), ((1, 7), 1)]
    >>> decode_changes(encode_changes(batch)) == batch
    True
    """
    rows = []
    for (loc, time), delta in changes:
        flat = _flat_time(time)
        if flat is None:
            return packb([_CHANGES_TAGGED, [[loc, time, delta] for (loc, time), delta in changes]])
        rows.append([loc, delta, *flat])
    return msgpack.packb([_CHANGES_FLAT, rows])


_CHANGES_TAGGED = 0
_CHANGES_FLAT = 1


def decode_changes(payload: bytes | memoryview) -> list[tuple[tuple[int, Any], int]]:
    message = unpackb(payload)
    if not (isinstance(message, list) and len(message) == 2 and isinstance(message[1], list)):
        raise FrameError("malformed progress batch")
    form, rows = message
    out = []
    for row in rows:
        if form == _CHANGES_FLAT and isinstance(row, list) and len(row) >= 3:
            loc, delta, *coords = row
            if not all(isinstance(c, int) and not isinstance(c, bool) for c in coords):
                raise FrameError("malformed progress time")
            time: Any = coords[0]
            for counter in coords[1:]:
                time = Product(time, counter)
        elif form == _CHANGES_TAGGED and isinstance(row, list) and len(row) == 3:
            loc, time, delta = row
        else:
            raise FrameError("malformed progress update")
        if not (isinstance(loc, int) and isinstance(delta, int)) or isinstance(delta, bool):
            raise FrameError("malformed progress update")
        out.append(((loc, time), delta))
    return out
