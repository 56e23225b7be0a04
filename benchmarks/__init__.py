"""naiad's benchmarks: ``python -m benchmarks NAME [--quick]``; ``--list`` lists them.

Each benchmark is one module with a ``main(argv)`` that measures naiad beside its floor or
peers in the same run and prints, as the last line of stdout, one JSON object
(``/work/shared/BENCHMARKS.md``).
"""

from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "coordination": "Naiad §5.2: one notification round per iteration of an empty cyclic "
    "dataflow (workers 1 and 2) vs the asyncio queue ping-pong round trip",
    "exchange": "Naiad §5.1: all-to-all exchange of int64 numpy batches vs bare asyncio "
    "queues with the same partitioning",
    "wordcount": "Zipf word count: naiad (1 and 2 workers) vs collections.Counter vs bytewax",
    "progress-traffic": "Naiad Figure 6c: progress protocol bytes and frames of iterative "
    "computations on 2 processes x 2 workers, with and without local accumulation",
    "wcc": "weakly connected components of a random graph: naiad (1 and 2 processes) vs "
    "Pathway, scipy and networkx",
    "wcc-incremental": "single-edge insertions then deletions on a sparse graph: per-update "
    "latency of naiad's incremental WCC vs Pathway's streaming mode",
    "arrange": "K-Pg §5.1: updates/s into a 1M-key arrangement with a count (vs a dict), and "
    "the time to install a join against an imported arrangement (1k and 10k records)",
    "sharing": "K-Pg Figure 5c: memory and update latency of four graph queries with and "
    "without a shared arrangement of the edges",
}
"""Name -> one-line description; the module ``benchmarks.<name>`` (``-`` spelt ``_``) defines
``main(argv)``. ``exchange``, ``coordination`` and ``wordcount`` also run on clusters of
processes over TCP (``--processes 2``)."""
