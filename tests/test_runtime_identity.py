"""What a runtime says about its place in the cluster: ``rt.process_index``, ``rt.workers``
(the global workers it runs, known before it starts) and ``df.by_worker`` (what each built),
on 1 and 2 workers and 2 simulated processes. Real processes over TCP:
tests/cluster/test_gathered_outputs_tcp.py."""

from __future__ import annotations

import asyncio

import pytest

import naiad

CONFIGS = [{"workers": 1}, {"workers": 2}, {"workers": 2, "processes": 2}, {"processes": 3}]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_a_runtime_says_which_process_it_is_and_which_workers_it_runs(
    config: dict[str, int],
) -> None:
    """``rt.workers`` (known before the start) are the ``scope.index`` of the builds, as
    ``df.workers`` lists them; ``df.by_worker`` pairs each with its result."""

    async def main() -> None:
        rt = naiad.Runtime(**config)
        assert rt.process_index == 0
        assert rt.workers == list(range(rt.peers))
        assert rt.peers == config.get("workers", 1) * config.get("processes", 1)
        async with rt:
            df = rt.dataflow(lambda s: (s.index, s.peers))
            assert rt.workers == [w.index for p in rt.processes for w in p.workers]
        assert df.workers == rt.workers
        assert df.by_worker == {w: (w, rt.peers) for w in rt.workers}

    asyncio.run(main())
