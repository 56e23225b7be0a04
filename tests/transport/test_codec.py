"""The wire codec: every progress batch decodes to itself, in its order, and anything else a
peer could send decodes or raises ``FrameError``, nothing else."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from naiad.progress.timestamp import Lex, Product
from naiad.transport.codec import (
    FrameError,
    decode_changes,
    decode_message,
    encode_changes,
    encode_message,
    packb,
)

small = st.integers(-(2**40), 2**40)


def times_of_depth(depth: int) -> st.SearchStrategy[Any]:
    time: st.SearchStrategy[Any] = st.integers(0, 2**40)
    for _ in range(depth - 1):
        time = st.builds(Product, time, st.integers(0, 300))
    return time


batches = st.one_of(
    # one depth throughout (grouped runs), with runs made likely by few locations and epochs
    st.integers(1, 3).flatmap(
        lambda depth: st.lists(
            st.tuples(st.tuples(st.integers(0, 3), times_of_depth(depth)), small), max_size=30
        )
    ),
    # mixed depths (one row per update)
    st.lists(
        st.tuples(
            st.tuples(st.integers(0, 2**20), st.integers(1, 3).flatmap(times_of_depth)), small
        ),
        max_size=20,
    ),
    # times that are neither ints nor Products (tagged)
    st.lists(
        st.tuples(st.tuples(st.integers(0, 9), st.builds(Lex, small, small)), small), max_size=5
    ),
)


@settings(max_examples=300, deadline=None)
@given(batches)
def test_progress_batches_decode_to_themselves(changes: list) -> None:
    decoded = decode_changes(encode_changes(changes))
    assert decoded == changes
    assert [type(t) for (_, t), _ in decoded] == [type(t) for (_, t), _ in changes]


scalars = st.one_of(small, st.booleans(), st.none(), st.text(max_size=3), st.binary(max_size=3))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6), max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        values,
        st.tuples(st.sampled_from([0, 1, 2]), values).map(list),
        st.tuples(st.just(2), st.one_of(small, values), values).map(list),
        st.tuples(st.just(2), st.integers(-1, 3), st.lists(small, max_size=12)).map(list),
    )
)
def test_malformed_progress_batches_raise_frame_errors(message: Any) -> None:
    try:
        changes = decode_changes(msgpack.packb(message))
    except FrameError:
        return
    for (loc, _), delta in changes:
        assert type(loc) is int and type(delta) is int


def test_an_array_head_whose_size_overflows_int64_is_a_frame_error() -> None:
    """2**32 x 2**32 int64 elements: an int64 product of the shape wraps to 0 bytes."""
    head = packb([0, 1, "<i8", [2**32, 2**32]])
    payload = struct.pack("<I", len(head)) + head + bytes(16)
    with pytest.raises(FrameError, match="array body has 16 bytes"):
        decode_message(payload)


records = st.recursive(
    st.one_of(
        st.integers(),  # any size: beyond 64 bits they travel as an extension type
        st.floats(allow_nan=False),
        st.booleans(),
        st.none(),
        st.text(max_size=3),
        st.binary(max_size=3),
        st.complex_numbers(allow_nan=False),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner)),
    max_leaves=20,
)


def shape(value: Any) -> Any:
    """A value with every leaf's type next to it (``True == 1``, but a bool must stay one)."""
    if isinstance(value, list | tuple):
        return (type(value), [shape(v) for v in value])
    return (type(value), value)


@settings(max_examples=300, deadline=None)
@given(st.lists(records, max_size=8))
def test_records_of_any_python_values_cross_the_wire(batch: list[Any]) -> None:
    time, back = decode_message(b"".join(bytes(p) for p in encode_message(3, batch)))
    assert time == 3 and shape(back) == shape(batch)


SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(SURROGATES | st.characters(categories=["L"]), max_size=4), max_size=6))
@example(["\ud800", "a\udfff"])
def test_strings_with_lone_surrogates_cross_the_wire(strings: list[str]) -> None:
    """Regression: a Python str holding a lone surrogate ('\\ud800', legal in Python, not in
    strict UTF-8) raised UnicodeEncodeError in msgpack: as a record, a numpy string scalar,
    a tuple field or a dict key."""
    batch = [*strings, *map(np.str_, strings), tuple(strings), {s: 1 for s in strings}]
    time, back = decode_message(b"".join(bytes(p) for p in encode_message(3, batch)))
    assert time == 3 and back == batch


BEYOND_64_BITS = st.integers(0, 9) | st.integers(2**64, 2**70)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.tuples(st.integers(0, 9), BEYOND_64_BITS), small),
        min_size=1,
        max_size=9,
    ).filter(lambda changes: any(t >= 2**64 for (_, t), _ in changes))
)
def test_progress_batches_with_times_beyond_64_bits_decode_to_themselves(changes: list) -> None:
    """Regression: the flat forms packed an epoch of 2**64 with plain msgpack (OverflowError)."""
    assert decode_changes(encode_changes(changes)) == changes


EXTENDED_BITS = 8 * np.dtype(np.longdouble).itemsize  # np.longdouble's size here


def any_dtype() -> st.SearchStrategy[np.dtype[Any]]:
    leaf = st.one_of(
        hnp.boolean_dtypes(),
        hnp.integer_dtypes(endianness="?"),
        hnp.unsigned_integer_dtypes(endianness="?"),
        hnp.floating_dtypes(endianness="?", sizes=(16, 32, 64, EXTENDED_BITS)),
        hnp.complex_number_dtypes(endianness="?", sizes=(64, 128, 2 * EXTENDED_BITS)),
        hnp.datetime64_dtypes(endianness="?"),
        hnp.timedelta64_dtypes(endianness="?"),
        hnp.unicode_string_dtypes(endianness="?", min_len=1),
        hnp.byte_string_dtypes(endianness="?", min_len=1),
    )
    return st.one_of(leaf, hnp.array_dtypes(leaf, min_size=1, max_size=3))


@settings(max_examples=300, deadline=None)
@given(
    hnp.arrays(any_dtype(), hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5)),
    st.booleans(),
)
def test_arrays_of_every_dtype_and_shape_cross_the_wire_as_arrays(
    array: np.ndarray, strided: bool
) -> None:
    """Regression: dates and times failed to encode ("cannot include dtype 'M' in a buffer"),
    strings, bytes and structured arrays arrived as lists, a 0-d array with shape (1,)."""
    if strided and array.ndim:
        array = array[::-1]
    time, back = decode_message(b"".join(bytes(p) for p in encode_message(5, array)))
    assert isinstance(back, np.ndarray)
    assert (time, back.dtype, back.shape) == (5, array.dtype, array.shape)
    assert back.tobytes() == np.ascontiguousarray(array).tobytes()
    if array.dtype.fields:  # a structured element (np.void) is not a record that can cross
        return
    # its elements, numpy scalars, cross as records of equal value; those Python's own numbers
    # would round (np.longdouble, np.clongdouble) arrive as themselves
    elements = list(array.ravel())
    _, records = decode_message(b"".join(bytes(p) for p in encode_message(5, elements)))
    extended = (np.longdouble, np.clongdouble)
    assert [type(r) for r in records if isinstance(r, extended)] == [
        type(e) for e in elements if isinstance(e, extended)
    ]
    nan = array.dtype.kind in "fcmM"
    assert np.array_equal(np.array(records, array.dtype), array.ravel(), equal_nan=nan)


def test_extended_precision_scalars_cross_the_wire_exactly() -> None:
    """Regression: a np.longdouble (or np.clongdouble) record arrived rounded to a float
    (complex) of 64-bit parts, while arrays of them travelled exactly."""
    third = np.longdouble(1) / 3
    batch = [third, np.clongdouble(third + 1j * third), (1, third)]
    _, back = decode_message(b"".join(bytes(p) for p in encode_message(0, batch)))
    assert [type(v) for v in back] == [np.longdouble, np.clongdouble, tuple]
    assert back[0] == third and back[1] == batch[1] and back[2][1] == third
    assert back[0].tobytes() == third.tobytes()


def test_a_malformed_extended_scalar_is_a_frame_error() -> None:
    for dtype, raw in [("<f8", bytes(8)), ("<f16", bytes(3)), ("not a dtype", b"")]:
        payload = packb([0, 0, [msgpack.ExtType(7, packb([dtype, raw]))]])
        with pytest.raises(FrameError, match="malformed"):
            decode_message(struct.pack("<I", len(payload)) + payload)


def test_object_arrays_cross_the_wire_as_object_arrays() -> None:
    array = np.empty((2, 2), dtype=object)
    array[:] = [[("a", 1), None], [2.5, "x"]]
    _, back = decode_message(b"".join(bytes(p) for p in encode_message(0, array)))
    assert back.dtype == object and back.shape == (2, 2) and back.tolist() == array.tolist()


def test_numpy_scalars_cross_the_wire() -> None:
    """Regression: numpy strings, bytes, complex numbers and dates (what ``map`` over such an
    array yields) were refused, with a message that claimed numpy scalars were accepted."""
    batch = [
        np.str_("s"),
        np.bytes_(b"b"),
        np.complex64(1 - 2j),
        np.datetime64("2020-01-02", "D"),
        np.timedelta64(7, "ms"),
        np.datetime64("NaT"),
    ]
    _, back = decode_message(b"".join(bytes(p) for p in encode_message(0, batch)))
    types = [str, bytes, complex, np.datetime64, np.timedelta64, np.datetime64]
    assert [type(v) for v in back] == types
    assert back[:5] == ["s", b"b", 1 - 2j, np.datetime64("2020-01-02"), np.timedelta64(7, "ms")]
    assert np.isnat(back[5]) and back[3].dtype == np.dtype("M8[D]")


def test_a_record_the_codec_cannot_send_is_named() -> None:
    with pytest.raises(TypeError, match=r"cannot send a builtins\.frozenset between processes"):
        encode_message(0, [1, frozenset([2])])
