"""A join of integer keys with float keys costs the small side's keys, not the trace's.

Integers and floats are compared exactly (as Python does: 2**53 + 1 is not 2.0**53). The
join did it by converting both key columns to Python objects whenever an integer lay beyond
2**53, and otherwise let numpy search one column in the other, which converts the searched
(large) column to float64: one update against a trace of n keys allocated and converted
O(n) elements. Measured here by the memory numpy allocates during one update (its buffers
are traced by tracemalloc): a count of elements touched, not a time.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

import numpy as np
import pytest

import naiad
from naiad.differential import Collection

CASES = {
    # trace keys, the updates' keys
    "ints beyond 2**53 against float keys": (np.float64, [2**53 + 1, 2**53, 7]),
    "float keys against integer keys": (np.int64, [7.0, 7.5, 2.0**70, -0.0]),
}


async def one_update_peaks(n: int, trace_dtype: Any, keys: list[Any]) -> tuple[int, list[Any]]:
    """The most memory allocated during any one single-record update joined against a trace
    of ``n`` keys (``0..n-1`` plus ``2**53``, of ``trace_dtype``), and every join output."""
    async with naiad.Runtime() as rt:

        def build(scope: Any) -> Any:
            r_in, right = Collection.new_input(scope, "right")
            l_in, left = Collection.new_input(scope, "left")
            joined = left.join(right)
            return r_in, l_in, joined.changes(), joined.probe()

        df = rt.dataflow(build)
        r_in, l_in, out, probe = df.results[0]
        trace_keys = np.r_[np.arange(n), 2**53].astype(trace_dtype)
        r_in.send_columns((trace_keys, np.zeros(n + 1, np.int64)))
        r_in.close()
        l_in.advance_to(1)
        await probe.wait(0)
        tracemalloc.start()
        peak = 0
        try:
            for epoch, key in enumerate(keys, 1):
                before = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                l_in.insert((key, 1))
                l_in.advance_to(epoch + 1)
                await probe.wait(epoch)
                peak = max(peak, tracemalloc.get_traced_memory()[1] - before)
        finally:
            tracemalloc.stop()
        l_in.close()
        await df.finished()
        return peak, out


@pytest.mark.parametrize("case", list(CASES))
def test_one_update_against_a_larger_trace_costs_no_more(case: str) -> None:
    trace_dtype, keys = CASES[case]
    small, out_small = asyncio.run(one_update_peaks(20_000, trace_dtype, keys))
    large, out_large = asyncio.run(one_update_peaks(200_000, trace_dtype, keys))
    # the oracle: Python's exact equality of the update's key with the trace's keys
    for n, out in ((20_000, out_small), (200_000, out_large)):
        trace = [*range(n), 2**53]
        expected = sorted(
            (key, 1, 0)
            for key in keys
            for t in trace
            if key == t  # an int equals a float exactly or not at all
        )
        assert sorted((r[0], r[1], r[2]) for r, _, d in out for _ in range(d)) == expected
    # ten times the trace: the numpy buffers allocated for one update stay those of its keys
    # (the old code converted the trace's 200,000 keys: 1.6 MB and more per update)
    assert large < small + 256 * 1024, (small, large)
