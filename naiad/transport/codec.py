"""The wire format: a fixed frame header, msgpack for structure, raw buffers for numpy arrays.

A frame is a 32-byte header followed by ``length`` bytes of payload::

    magic "NA" | version u8 | kind u8 | dataflow u32 | channel u32 | source u32 | target u32
    | length u32 | seq u64                                        (little endian)

``kind`` says what the payload holds: a data message (``DATA``: ``(time, batch)`` for channel
``channel`` of dataflow ``dataflow`` from worker ``source`` to worker ``target``), a progress
batch (``PROGRESS``), or a control message (``CONTROL``); a payload larger than the frame
limit travels as ``PART`` frames holding its leading pieces, then a frame of its own kind
holding the rest (a progress batch cannot be split into batches: it is applied whole).
``seq`` numbers the frames of one kind from one process to another, so a receiver can detect
loss and duplicates.

Payloads never use pickle: records and times are msgpack values, with extension types for
tuples, ``Product`` and ``Lex`` (so they come back as what was sent; so do numpy scalars of
extended precision, as their bytes), and a numpy array is a small msgpack head (dtype, shape)
followed by its raw bytes, decoded with ``np.frombuffer`` (no per-element work; the decoded
array is a read-only view of the received buffer).
Anything else is rejected with an error naming its type.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
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
_EXT_BIG_INT = 4  # an int outside msgpack's 64-bit range: two's complement, big-endian
_EXT_COMPLEX = 5  # [real, imag]
_EXT_DATETIME = 6  # a numpy datetime64 or timedelta64: [dtype string, int64 count]
_EXT_NUMPY_SCALAR = 7  # a numpy number Python has no exact form for: [dtype string, raw bytes]

# numpy scalars that Python's float and complex would round (extended precision): they travel
# as their bytes and arrive as themselves
_EXTENDED = (np.longdouble, np.clongdouble)

_BATCH_LIST = 0
_BATCH_ARRAY = 1
_BATCH_COLUMNS = 2
_BATCH_OBJECTS = 3

# Columnar batch types (such as differential's ``Updates``), registered by the layers that
# define them: type -> (tag, to_columns), tag -> from_columns.
_COLUMNAR: dict[type, tuple[str, Any]] = {}
_FROM_COLUMNS: dict[str, Any] = {}


def register_columnar(cls: type, tag: str, to_columns: Any, from_columns: Any) -> None:
    """Lets batches of ``cls`` cross processes as a list of 1-D or 2-D numpy columns
    (numeric ones as raw buffers, ``object`` ones as msgpack values). ``to_columns`` may
    return ``(tag, columns)`` instead, naming one of the tags registered for ``cls`` (a
    variant of the class, decoded by that tag's ``from_columns``)."""
    _COLUMNAR[cls] = (tag, to_columns)
    _FROM_COLUMNS[tag] = from_columns


class Kind(IntEnum):
    DATA = 1
    PROGRESS = 2
    CONTROL = 3
    PART = 4  # a leading piece of the payload of the next frame that is not a PART


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
    if cls is int:  # msgpack packs ints from -2**63 to 2**64 - 1 itself
        return msgpack.ExtType(
            _EXT_BIG_INT, obj.to_bytes(obj.bit_length() // 8 + 1, "big", signed=True)
        )
    if isinstance(obj, np.datetime64 | np.timedelta64):
        count = int(np.array(obj).view(np.int64))
        return msgpack.ExtType(_EXT_DATETIME, packb([obj.dtype.str, count]))
    if isinstance(obj, _EXTENDED):
        return msgpack.ExtType(_EXT_NUMPY_SCALAR, packb([obj.dtype.str, obj.tobytes()]))
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, str):  # numpy.str_ and other subclasses
        return str(obj)
    if isinstance(obj, bytes):
        return bytes(obj)
    if isinstance(obj, complex | np.complexfloating):
        return msgpack.ExtType(_EXT_COMPLEX, packb([float(obj.real), float(obj.imag)]))
    raise TypeError(
        f"cannot send a {cls.__module__}.{cls.__qualname__} between processes: records must "
        f"be None, bool, int, float, complex, str, bytes, lists, tuples, dicts or numpy "
        f"numbers, strings and dates (a whole batch may be a numpy array of any dtype)"
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
    if code == _EXT_BIG_INT:
        return int.from_bytes(data, "big", signed=True)
    if code == _EXT_COMPLEX:
        real, imag = unpackb(data)
        return complex(real, imag)
    if code == _EXT_DATETIME:
        unit, count = unpackb(data)
        dtype = np.dtype(unit)
        if dtype.kind not in "mM":
            raise FrameError(f"malformed date type {unit!r}")
        return np.array(count, np.int64).view(dtype)[()]
    if code == _EXT_NUMPY_SCALAR:
        unit, raw = unpackb(data)
        dtype = np.dtype(unit)  # a malformed one raises: unpackb makes that a FrameError
        if dtype.type not in _EXTENDED or len(raw) != dtype.itemsize:
            raise FrameError(f"malformed numpy scalar of type {unit!r}")
        return np.frombuffer(raw, dtype)[0]
    raise FrameError(f"unknown msgpack extension type {code}")


def packb(obj: Any) -> bytes:
    """msgpack with tuples, ``Product``, ``Lex`` and ints of any size preserved.

    >>> unpackb(packb([("a", 1), Product(2, 3), {"k": None}]))
    [('a', 1), Product(outer=2, inner=3), {'k': None}]
    >>> unpackb(packb([-(2**70), 2**64, 2**64 - 1])) == [-(2**70), 2**64, 2**64 - 1]
    True
    >>> unpackb(packb(["\\ud800x", {"\\udfff": 1}])) == ["\\ud800x", {"\\udfff": 1}]
    True
    """
    # surrogatepass: any Python str crosses, a lone surrogate ('\ud800') too, which strict
    # UTF-8 refuses (both ends use it)
    return msgpack.packb(
        obj,
        default=_default,
        strict_types=True,
        use_bin_type=True,
        unicode_errors="surrogatepass",
    )


def check_sendable(record: Any) -> None:
    """Raises ``TypeError`` if ``record`` cannot travel between processes.

    >>> check_sendable((1, "a", 2.5))
    >>> check_sendable((1, frozenset([2])))
    Traceback (most recent call last):
    ...
    TypeError: record (1, frozenset({2})) cannot go to another process: cannot send a ...
    """
    try:
        packb(record)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"record {record!r} cannot go to another process: {exc}") from None


def unpackb(data: bytes | memoryview) -> Any:
    try:
        return msgpack.unpackb(
            data,
            ext_hook=_ext_hook,
            raw=False,
            strict_map_key=False,
            unicode_errors="surrogatepass",
        )
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
    if isinstance(batch, np.ndarray):
        if batch.dtype.hasobject:  # values one by one; comes back as an object array
            head = packb([time, _BATCH_OBJECTS, list(batch.shape), batch.ravel().tolist()])
            return [struct.pack("<I", len(head)), head]
        head = packb([time, _BATCH_ARRAY, _dtype_head(batch.dtype), list(batch.shape)])
        return [struct.pack("<I", len(head)), head, _raw(batch)]
    columnar = _COLUMNAR.get(type(batch))
    if columnar is not None:
        tag, to_columns = columnar
        descs: list[Any] = []
        bodies: list[bytes | memoryview] = []
        columns = to_columns(batch)
        if isinstance(columns, tuple):
            tag, columns = columns
        for column in columns:
            if column.dtype.hasobject:
                descs.append(["o", column.tolist()])
            else:
                descs.append(["a", _dtype_head(column.dtype), list(column.shape)])
                bodies.append(_raw(column))
        head = packb([time, _BATCH_COLUMNS, tag, descs])
        return [struct.pack("<I", len(head)), head, *bodies]
    head = packb([time, _BATCH_LIST, list(batch)])
    return [struct.pack("<I", len(head)), head]


def _dtype_head(dtype: np.dtype[Any]) -> Any:
    """A dtype as msgpack can carry it: its string (byte order included), or for a
    structured dtype the list of its fields.

    >>> _dtype_head(np.dtype({"names": ["a", "b"], "formats": ["<i4", "<i4"], "offsets": [4, 0]}))
    Traceback (most recent call last):
    ...
    TypeError: cannot send a numpy array of dtype {'names': ['a', 'b'], ...
    """
    if not dtype.fields:
        return dtype.str
    try:
        return np.lib.format.dtype_to_descr(dtype)
    except ValueError:  # numpy's own words name neither the send nor a remedy
        raise TypeError(
            f"cannot send a numpy array of dtype {dtype} between processes: its fields are out "
            f"of order or overlap; send numpy.lib.recfunctions.repack_fields(array) instead"
        ) from None


def _raw(array: np.ndarray) -> bytes | memoryview:
    """The bytes of an array: a view of a C-contiguous one (copied into one otherwise); as
    bytes, so that dates, strings and records travel as they are."""
    array = np.ascontiguousarray(array)
    return array.reshape(-1).view(np.uint8).data if array.nbytes else b""


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
    if kind == _BATCH_OBJECTS and len(head) == 4 and len(view) == 4 + head_len:
        shape = _shape(head[2])
        if not isinstance(head[3], list) or len(head[3]) != math.prod(shape):
            raise FrameError("malformed object array")
        return time, object_column(head[3]).reshape(shape)
    if kind == _BATCH_COLUMNS and len(head) == 4 and head[2] in _FROM_COLUMNS:
        body = view[4 + head_len :]
        columns, offset = [], 0
        for desc in head[3] if isinstance(head[3], list) else []:
            if isinstance(desc, list) and len(desc) == 3 and desc[0] == "a":
                column, used = _array(desc[1], desc[2], body[offset:])
                offset += used
            elif isinstance(desc, list) and len(desc) == 2 and desc[0] == "o":
                if not isinstance(desc[1], list):
                    raise FrameError("malformed object column")
                column = object_column(desc[1])
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


def object_column(values: Sequence[Any]) -> np.ndarray:
    """A one-dimensional ``object`` column of ``values`` (tuples stay whole: ``np.array``
    would make a tuple of one length a row of a 2-D array).

    >>> object_column([(1, "a"), (2, "b")]).shape
    (2,)
    """
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def _shape(shape_list: Any) -> tuple[int, ...]:
    if not (isinstance(shape_list, list) and all(_is_int(n) and n >= 0 for n in shape_list)):
        raise FrameError(f"malformed array shape {shape_list!r}")
    return tuple(shape_list)


def _array(dtype_head: Any, shape_list: Any, body: memoryview) -> tuple[np.ndarray, int]:
    """The array a head describes, read from the front of ``body``; and the bytes it used."""
    try:
        if isinstance(dtype_head, str):
            dtype = np.dtype(dtype_head)
        else:
            dtype = np.lib.format.descr_to_dtype(dtype_head)
    except Exception as exc:  # numpy raises several types for a malformed description
        raise FrameError(f"malformed array dtype {dtype_head!r}: {exc}") from exc
    shape = _shape(shape_list)
    if dtype.hasobject:
        raise FrameError(f"unsupported array dtype {dtype}")
    size = dtype.itemsize * math.prod(shape)  # Python ints: no overflow on a hostile shape
    if len(body) < size:
        raise FrameError(f"array body has {len(body)} bytes, expected {size}")
    if not size:  # frombuffer refuses an item size of 0
        return np.zeros(shape, dtype), 0
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
    """A progress batch: ``[((location, time), delta), ...]``, in its order.

    Integer and ``Product`` times (the common case) are flattened to their coordinates
    ``[epoch, counter, ...]``, several times cheaper to pack than the extension types, and
    every run of consecutive updates that share a location and all coordinates but the last
    travels as one group of flat integers: the location, the shared coordinates, the number
    of updates, then ``delta, last coordinate`` for each (two bytes per update for small
    numbers, against five for a row of its own). Times of different depths fall back to one
    row per update; any other time to the tagged form.

    >>> batch = [((3, Product(0, 5)), 1), ((3, Product(0, 4)), -1), ((1, 7), 1)]
    >>> decode_changes(encode_changes(batch)) == batch
    True
    >>> same_depth = [((3, Product(0, 5)), 1), ((3, Product(0, 4)), -1), ((1, Product(1, 7)), 2)]
    >>> msgpack.unpackb(encode_changes(same_depth))
    [2, 2, [3, 0, 2, 1, 5, -1, 4, 1, 1, 1, 2, 7]]
    >>> decode_changes(encode_changes(same_depth)) == same_depth
    True
    >>> decode_changes(encode_changes([((0, 2**64), 1)]))
    [((0, 18446744073709551616), 1)]
    """
    flats = []
    for (_, time), _ in changes:
        flat = _flat_time(time)
        if flat is None:
            return _tagged(changes)
        flats.append(flat)
    try:
        return _flat_changes(changes, flats)
    except OverflowError:  # a coordinate beyond 64 bits: the tagged form carries any int
        return _tagged(changes)


def _tagged(changes: list[tuple[tuple[int, Any], int]]) -> bytes:
    return packb([_CHANGES_TAGGED, [[loc, time, delta] for (loc, time), delta in changes]])


def _flat_changes(changes: list[tuple[tuple[int, Any], int]], flats: list[list[int]]) -> bytes:
    depths = {len(flat) for flat in flats}
    if len(depths) != 1:
        rows = [[loc, delta, *flat] for ((loc, _), delta), flat in zip(changes, flats, strict=True)]
        return msgpack.packb([_CHANGES_FLAT, rows])
    (depth,) = depths
    out: list[int] = []
    run: tuple[int, ...] | None = None
    count_at = 0
    for ((loc, _), delta), flat in zip(changes, flats, strict=True):
        key = (loc, *flat[:-1])
        if key != run:
            run = key
            out.extend(key)
            count_at = len(out)
            out.append(0)
        out[count_at] += 1
        out.append(delta)
        out.append(flat[-1])
    return msgpack.packb([_CHANGES_GROUPED, depth, out])


_CHANGES_TAGGED = 0
_CHANGES_FLAT = 1
_CHANGES_GROUPED = 2


def _is_int(value: Any) -> bool:
    return value.__class__ is int


def _time_of(coords: list[int]) -> Any:
    time: Any = coords[0]
    for counter in coords[1:]:
        time = Product(time, counter)
    return time


def decode_changes(payload: bytes | memoryview) -> list[tuple[tuple[int, Any], int]]:
    message = unpackb(payload)
    if not (isinstance(message, list) and message):
        raise FrameError("malformed progress batch")
    if message[0] == _CHANGES_GROUPED and len(message) == 3:
        return _decode_grouped(message[1], message[2])
    if not (len(message) == 2 and isinstance(message[1], list)):
        raise FrameError("malformed progress batch")
    form, rows = message
    out = []
    for row in rows:
        if form == _CHANGES_FLAT and isinstance(row, list) and len(row) >= 3:
            loc, delta, *coords = row
            if not all(_is_int(c) for c in coords):
                raise FrameError("malformed progress time")
            time: Any = _time_of(coords)
        elif form == _CHANGES_TAGGED and isinstance(row, list) and len(row) == 3:
            loc, time, delta = row
        else:
            raise FrameError("malformed progress update")
        if not (_is_int(loc) and _is_int(delta)):
            raise FrameError("malformed progress update")
        out.append(((loc, time), delta))
    return out


def _decode_grouped(depth: Any, flat: Any) -> list[tuple[tuple[int, Any], int]]:
    if not (_is_int(depth) and depth >= 1 and isinstance(flat, list)):
        raise FrameError("malformed progress batch")
    if not set(map(type, flat)) <= {int}:  # bool is an int subclass: not accepted either
        raise FrameError("malformed progress update")
    out = []
    i, end = 0, len(flat)
    while i < end:
        if i + depth + 1 > end:
            raise FrameError("truncated progress group")
        loc = flat[i]
        outer = _time_of(flat[i + 1 : i + depth]) if depth > 1 else None
        count = flat[i + depth]
        i += depth + 1
        if count < 1 or i + 2 * count > end:
            raise FrameError("malformed progress group")
        for j in range(i, i + 2 * count, 2):
            time = flat[j + 1] if outer is None else Product(outer, flat[j + 1])
            out.append(((loc, time), flat[j]))
        i += 2 * count
    return out
