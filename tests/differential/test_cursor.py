"""Cursors over a trace: seeking keys, and keys that cannot be sought."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection
from naiad.differential.trace import Spine


async def test_seeking_a_key_that_cannot_compare_with_the_keys_is_named() -> None:
    """Regression: ``seek_key(None)`` raised numpy's bare TypeError, and a string into integer
    keys was compared as a string (``"10"`` landed between 1 and 5)."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            numbers = collection.arrange_by_key()
            words = collection.map(lambda r: (str(r[0]), r[1])).arrange_by_key()
            return session, numbers.trace, words.trace, numbers.stream.probe()

        df = rt.dataflow(build)
        session, numbers, words, probe = df.results[0]
        for key in (1, 5, 9, 20):
            session.insert((key, key * 10))
        session.advance_to(1)
        await probe.wait(0)
        cursor = numbers.cursor()
        for key in (None, "10", b"1", (1, 2), 1j):
            with pytest.raises(
                TypeError, match=rf"seek the key {re.escape(repr(key))} .*the keys are int64"
            ):
                cursor.seek_key(key)
        with pytest.raises(TypeError, match=r"seek the key \[1\] \(a list\).*interned"):
            words.cursor().seek_key([1])
        # the cursors keep working: numbers are sought in order, interned keys by equality
        assert (cursor.seek_key(10), cursor.key(), cursor.values()) == (
            False,
            20,
            [(200, [(0, 1)])],
        )
        assert cursor.seek_key(5.0) and cursor.key() == 5
        assert not cursor.seek_key(21) and not cursor.valid()
        other = words.cursor()
        assert other.seek_key("9") and other.values() == [(90, [(0, 1)])]
        assert not other.seek_key(None) and not other.seek_key(9)
        session.close()
        numbers.close()
        words.close()
        await df.finished()


async def test_a_cursor_reads_its_rows_as_they_were_when_it_was_made() -> None:
    """Regression: a cursor made while the keys and values were numbers read them with the
    spine's encoding of the moment, so once a later epoch brought strings (the spine
    switched both columns to interned codes) it decoded its numbers as codes (IndexError, or
    value 20 read as whatever the 20th interned value is) and compared codes with its
    numeric keys (seek_key(1) missed key 1). A cursor over an empty trace raised numpy's
    TypeError when seeking None."""
    async with naiad.Runtime(1) as rt:

        def build(scope: Any) -> Any:
            session, collection = Collection.new_input(scope)
            arranged = collection.arrange_by_key()
            return session, arranged.trace, arranged.stream.probe()

        df = rt.dataflow(build)
        session, trace, probe = df.results[0]
        empty = trace.cursor()
        for key in (None, (1, 2), "a", 1):  # nothing stored: no key is found, none refused
            assert empty.seek_key(key) is False and not empty.valid()
        session.insert((1, 10))
        session.insert((5, 20))
        session.advance_to(1)
        await probe.wait(0)
        cursor = trace.cursor()
        session.insert(("k", "text"))
        session.advance_to(2)
        await probe.wait(1)
        assert trace.spine.encoded == [True, True]  # both columns switched to codes
        assert cursor.seek_key(5) and cursor.values() == [(20, [(0, 1)])]
        assert cursor.seek_key(1) and cursor.values() == [(10, [(0, 1)])]
        assert sorted((cursor.key(), cursor.values()) for _ in cursor) == [
            (1, [(10, [(0, 1)])]),
            (5, [(20, [(0, 1)])]),
        ]
        fresh = trace.cursor()
        assert fresh.seek_key("k") and fresh.values() == [("text", [(1, 1)])]
        session.close()
        trace.close()
        await df.finished()


def test_a_cursor_up_to_a_batch_merged_with_later_ones_is_refused() -> None:
    """Regression: ``cursor(seq=2)`` over a trace whose batches 0..4 had merged into one read
    nothing (the merged batch lies beyond 2), not the 3 records of batches 0 to 2, and said
    nothing. It is refused naming the merge; at a reader's physical compaction point, where
    batches are kept apart, every batch up to it is read."""
    spine = Spine(depth=0, name="t")
    handle = spine.reader()
    for e in range(8):
        spine.insert_updates(
            np.array([e]), (), np.array([[e]]), np.ones(1, np.int64), upper=np.array([[e + 1]])
        )
        if e == 5:
            handle.set_physical_compaction(5)
    assert [(b.seq_lo, b.seq_hi) for b in spine.batches][:2] == [(0, 4), (5, 5)]
    with pytest.raises(ValueError, match=r"batches up to 2 were merged .* batch 0\.\.4"):
        handle.cursor(seq=2)
    cursor = handle.cursor(seq=5)
    assert [cursor.key() for _ in cursor] == list(range(6))
