"""The interner keeps dates and durations apart from numbers.

``np.timedelta64`` is an ``np.integer``: in months it equals the int of its count and hashes
as it. The process-wide interner (a dict from value to code) therefore gave 5 months and the
int 5 one code, decoded as whichever form came first (an int replaced it: a record of 5 months
came out as 5), and an int beyond int64 that shares its hash (``hash(2**63 + 1) == 5``) made
the lookup compare them, which numpy refuses: any arrangement in the process holding such an
int after 5 months had been interned failed with "OverflowError: int too big to convert".
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection, updates
from naiad.differential.updates import Interner
from naiad.transport.codec import object_column
from tests.differential import reference as ref

MONTHS = [np.timedelta64(k, "M") for k in range(-3, 8)]
HUGE = [2**63 + 1, 2**64 + 5, -(2**70) - 1]


@pytest.mark.parametrize("months_first", [True, False])
def test_durations_and_numbers_get_their_own_codes(months_first: bool) -> None:
    interner = Interner()
    first, second = (MONTHS, [5, *HUGE]) if months_first else ([5, *HUGE], MONTHS)
    a = interner.encode(object_column(first))
    b = interner.encode(object_column(second))
    assert interner.decode(a).tolist() == first and interner.decode(b).tolist() == second
    assert [type(v) for v in interner.decode(np.concatenate([a, b])).tolist()] == [
        type(v) for v in [*first, *second]
    ]


def test_equal_dates_still_share_a_code() -> None:
    interner = Interner()
    values = [np.timedelta64(1, "h"), dt.timedelta(hours=1), np.timedelta64(60, "m")]
    values += [np.timedelta64(1, "Y"), np.timedelta64(12, "M"), np.timedelta64(365, "D")]
    values += [np.datetime64("2020-01-01T00:00:00"), dt.datetime(2020, 1, 1)]
    codes = interner.encode(object_column(values)).tolist()
    assert codes[0] == codes[1] == codes[2] and codes[3] == codes[4] != codes[5]
    assert codes[6] == codes[7] and len(set(codes)) == 4
    assert interner.code_of(dt.timedelta(minutes=60)) == codes[0]
    assert interner.code_of(5) is None and interner.code_of(np.timedelta64(5, "M")) is None


def by_repr(changes: list[tuple[Any, int]]) -> Counter[str]:
    """A multiset of records keyed by their reprs (a Counter of the records themselves meets
    Python's own ``OverflowError`` comparing a huge int with 5 months)."""
    out: Counter[str] = Counter()
    for record, diff in changes:
        out[repr(record)] += diff
    return Counter({k: v for k, v in out.items() if v})


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_a_huge_int_beside_months_in_a_dataflow(layout: tuple[int, int]) -> None:
    epochs = [[(m, 1) for m in MONTHS], [(h, 1) for h in HUGE] + [(MONTHS[0], -1)]]
    check_distinct(epochs, layout)


def check_distinct(epochs: list[list[tuple[Any, int]]], layout: tuple[int, int]) -> None:
    """``distinct`` of ``epochs`` on ``layout`` holds every record present, once, at every
    epoch (records compared by their reprs: see :func:`by_repr`)."""

    def build(scope: naiad.Scope) -> Any:
        return Collection.from_epochs(scope, epochs).distinct().changes()

    results = ref.run(build, layout)
    for epoch in range(len(epochs)):
        got = by_repr([(r, d) for r, t, d in ref.flatten(results) if t <= epoch])
        want = Counter(dict.fromkeys(by_repr([c for e in epochs[: epoch + 1] for c in e]), 1))
        assert got == want, epoch


# Tuples hash and compare through their items, so the same holds one level down: a packed
# value column ((5 months, "x") beside (5, "x")), a key that is a tuple, a frozenset.
IN_TUPLES = [(m, "x") for m in MONTHS] + [((m,), 1) for m in MONTHS]
IN_TUPLES += [frozenset([m]) for m in MONTHS]
NUMBERS_IN_TUPLES = [(v, "x") for v in [5, *HUGE]] + [((v,), 1) for v in [5, *HUGE]]
NUMBERS_IN_TUPLES += [frozenset([v]) for v in [5, *HUGE]]


@pytest.mark.parametrize("months_first", [True, False])
def test_durations_in_tuples_get_their_own_codes(months_first: bool) -> None:
    interner = Interner()
    first, second = (
        (IN_TUPLES, NUMBERS_IN_TUPLES) if months_first else (NUMBERS_IN_TUPLES, IN_TUPLES)
    )
    a = interner.encode(object_column(first))
    b = interner.encode(object_column(second))
    assert repr(interner.decode(a).tolist()) == repr(first)
    assert repr(interner.decode(b).tolist()) == repr(second)
    assert len(set(a.tolist()) | set(b.tolist())) == len(first) + len(second)
    assert interner.code_of((5, "x")) is not None and interner.code_of((MONTHS[8], "x")) is not None
    assert interner.code_of((MONTHS[8], "x")) != interner.code_of((5, "x"))


def test_equal_dates_in_tuples_still_share_a_code() -> None:
    interner = Interner()
    values = [(np.timedelta64(1, "h"), "a"), (dt.timedelta(hours=1), "a")]
    values += [((np.timedelta64(60, "m"),), "a"), ((dt.timedelta(minutes=60),), "a")]
    codes = interner.encode(object_column(values)).tolist()
    assert codes[0] == codes[1] != codes[2] == codes[3]
    assert interner.code_of((dt.timedelta(minutes=60), "a")) == codes[0]


def test_a_column_of_tuples_without_dates_is_keyed_as_it_is(monkeypatch: Any) -> None:
    """The check for dates inside tuples is a C pass over their items: no Python step per
    value (the wrapping of keys) unless a date is there."""
    calls = Counter[str]()
    real = updates._table_key

    def counted(value: Any) -> Any:
        calls["key"] += 1
        return real(value)

    monkeypatch.setattr(updates, "_table_key", counted)
    interner = Interner()
    interner.encode(object_column([(k, ("a", k), frozenset([k])) for k in range(1000)]))
    assert calls["key"] == 0
    interner.encode(object_column([(k, ("a", MONTHS[0])) for k in range(1000)]))
    assert calls["key"] >= 1000  # each record (and its items) wrapped


@pytest.mark.parametrize("layout", ref.LAYOUTS)
def test_months_and_numbers_inside_records_in_a_dataflow(layout: tuple[int, int]) -> None:
    """Records of three fields: a key column beside a packed column of the other two (a
    tuple holding the duration or the number), and a key that is itself such a tuple."""
    months = [(1, m, "x") for m in MONTHS] + [((m,), 2, "y") for m in MONTHS]
    numbers = [(1, v, "x") for v in [5, *HUGE]] + [((v,), 2, "y") for v in [5, *HUGE]]
    epochs = [[(r, 1) for r in months], [(r, 1) for r in numbers] + [(months[0], -1)]]
    check_distinct(epochs, layout)
