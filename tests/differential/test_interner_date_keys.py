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
from naiad.differential import Collection
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

    def build(scope: naiad.Scope) -> Any:
        return Collection.from_epochs(scope, epochs).distinct().changes()

    results = ref.run(build, layout)
    for epoch in range(len(epochs)):
        got = by_repr([(r, d) for r, t, d in ref.flatten(results) if t <= epoch])
        want = Counter(dict.fromkeys(by_repr([c for e in epochs[: epoch + 1] for c in e]), 1))
        assert got == want, epoch
