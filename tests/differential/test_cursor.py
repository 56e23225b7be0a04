"""Cursors over a trace: seeking keys, and keys that cannot be sought."""

from __future__ import annotations

import re
from typing import Any

import pytest

import naiad
from naiad.differential import Collection


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
