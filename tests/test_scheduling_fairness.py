"""A loop whose messages never stop does not starve the notifications of its worker.

Workers run messages before notifications; before a notification was made to wait for at most
``MESSAGES_BEFORE_A_NOTIFICATION`` message activations, a loop that kept messages queued on a
worker (one that never converges, or a long one) held up every notification there, and with
them every other dataflow on that worker: on one worker, no probe of another dataflow passed
and none completed while the loop went round (measured: 0 of 3 epochs answered in 1 s)."""

from __future__ import annotations

import asyncio

import pytest

import naiad
from tests.test_drop_dataflow import expected_squares, feed_squares, spinning_loop, squares


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_other_dataflows_answer_and_complete_while_a_loop_spins(
    workers: int, processes: int
) -> None:
    async def main() -> tuple[list[tuple[int, int]], int]:
        async with naiad.Runtime(workers, processes=processes, transport="inproc") as rt:
            calls = [0]
            spinning = rt.dataflow(spinning_loop(calls), name="spinning")
            for handle in spinning.results:
                handle.send([1, 2, 3])
                handle.close()
            while calls[0] < 100:
                await asyncio.sleep(0.01)
            other = rt.dataflow(squares, name="squares")
            before = calls[0]
            answers = await feed_squares(other, range(4))  # each epoch waited for, then done
            during = calls[0] - before
            spinning.drop()
            return answers, during

    answers, during = asyncio.run(main())
    assert answers == expected_squares(4, workers * processes)
    assert during > 0  # the loop went on meanwhile
