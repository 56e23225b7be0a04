"""Streaming word count over epochs: Naiad's prototypical program (§4.1), asyncio style.

The pattern of §4.1: define input stages, a dataflow graph and an output callback, then
supply the input one epoch at a time. Here:

* **input** (§2.1): every worker owns an input handle made by ``scope.new_input()``; the
  asyncio driver feeds each paragraph of an embedded text as one epoch, dealing its lines
  round-robin to the workers' handles, then advances every handle to the next epoch;
* **graph**: ``lines.flat_map(tokenize)`` splits lines into lowercase words, then a stateful
  :class:`WordCount` vertex (§2.2), its input exchanged by a stable hash of the word
  (``zlib.crc32``, so routing is the same from run to run) keeps running totals. It buffers
  each epoch's counts in ``on_recv`` and asks for a notification; ``on_notify`` (delivered
  once no record of that epoch can still arrive, §2.3) folds them into the totals and emits
  ``(word, total)`` for every word whose total changed in that epoch;
* **output**: the changes are gathered on worker 0 and ``subscribe`` prints, once per
  completed epoch, the epoch's top changed words;
* **pacing**: after each epoch the driver awaits a probe on the output (``probe.wait``),
  so epochs are fed one by one, like Naiad's ``OnNext`` calls.

Run it with ``python examples/wordcount.py [--workers N]`` (``make demo``), or on a cluster with
``naiad run examples/wordcount.py -w W -n P`` (process 0 reports).
"""

from __future__ import annotations

import argparse
import asyncio
import string
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import naiad
from naiad.runtime.launch import script_workers, worker_count

# Four short paragraphs (Dickens, *A Tale of Two Cities*, public domain): one epoch each.
SAMPLE_TEXT = [
    """It was the best of times, it was the worst of times,
it was the age of wisdom, it was the age of foolishness,
it was the epoch of belief, it was the epoch of incredulity.""",
    """It was the season of Light, it was the season of Darkness,
it was the spring of hope, it was the winter of despair,
we had everything before us, we had nothing before us.""",
    """We were all going direct to Heaven,
we were all going direct the other way;
in short, the period was so far like the present period.""",
    """There were a king with a large jaw and a queen with a plain face,
on the throne of England; there were a king with a large jaw
and a queen with a fair face, on the throne of France.""",
]

Report = Callable[[int, list[tuple[str, int]]], None]


def tokenize(line: str) -> list[str]:
    """The words of ``line``: lowercased, punctuation stripped from both ends."""
    words = (w.strip(string.punctuation) for w in line.lower().split())
    return [w for w in words if w]


def word_key(word: str) -> int:
    """A routing key that is the same in every process and run (``hash`` is salted)."""
    return zlib.crc32(word.encode())


class WordCount(naiad.Vertex):
    """Running word totals; emits, at each epoch's notification, the totals that changed."""

    def __init__(self) -> None:
        self.totals: Counter[str] = Counter()
        self.pending: dict[Any, Counter[str]] = {}  # epoch -> counts not yet folded in

    def on_recv(self, port: int, cap: naiad.Capability, batch: Any) -> None:
        counts = self.pending.get(cap.time)
        if counts is None:
            counts = self.pending[cap.time] = Counter()
            self.notify_at(cap)  # first record of this epoch: ask to hear when it is complete
        counts.update(batch)

    def on_notify(self, cap: naiad.Capability) -> None:
        # Notifications arrive in time order, so totals only ever include complete epochs.
        counts = self.pending.pop(cap.time)
        self.totals.update(counts)
        self.send(cap, [(word, self.totals[word]) for word in counts])

    def checkpoint(self) -> Any:
        return {"totals": dict(self.totals), "pending": self.pending}

    def restore(self, state: Any) -> None:
        self.totals = Counter(state["totals"])
        self.pending = state["pending"]


@dataclass
class WordCountParts:
    """What ``build`` returns on one worker."""

    handle: naiad.InputHandle
    probe: naiad.ProbeHandle
    changes: dict[int, dict[str, int]] = field(default_factory=dict)
    """Epoch -> {word: new total} for the words that changed (filled on worker 0)."""


def build(scope: naiad.Scope, report: Report | None = None) -> WordCountParts:
    """The word-count dataflow on one worker; ``report(epoch, changes)`` runs on worker 0."""
    handle, lines = scope.new_input()
    changed = lines.flat_map(tokenize).unary(WordCount(), exchange=word_key)
    gathered = changed.exchange(lambda _: 0)  # every change on worker 0, for one report
    parts = WordCountParts(handle, gathered.probe())

    def on_epoch(epoch: int, records: list[tuple[str, int]]) -> None:
        if scope.index != 0:
            return  # the other workers hold no records after the gather
        parts.changes[epoch] = dict(records)
        if report is not None:
            report(epoch, records)

    gathered.subscribe(on_epoch)
    return parts


async def run_wordcount(
    paragraphs: Iterable[str], workers: int = 2, report: Report | None = None
) -> dict[int, dict[str, int]]:
    """Feeds one paragraph per epoch; returns epoch -> {changed word: running total} (on
    the process of worker 0; empty on the other processes of a cluster)."""
    async with naiad.Runtime(workers=workers) as rt:
        dataflow = rt.dataflow(lambda scope: build(scope, report), name="wordcount")
        parts: list[WordCountParts] = dataflow.results  # this process's workers
        probe = parts[0].probe  # every worker's probe sees the same (global) frontier
        for epoch, paragraph in enumerate(paragraphs):
            lines = paragraph.splitlines()
            # round-robin over all workers (every process runs this loop for its own)
            for worker, p in zip(dataflow.workers, parts, strict=True):
                p.handle.send(lines[worker :: rt.peers])
            for p in parts:
                p.handle.advance_to(epoch + 1)
            # Pace the input: wait until no record of this epoch can still reach the output.
            # (The probe says nothing of when subscribe's callback runs, so the report is
            # printed from inside that callback, which keeps the output in epoch order.)
            await probe.wait(epoch)
        for p in parts:
            p.handle.close()
    return parts[0].changes


def final_totals(changes: dict[int, dict[str, int]]) -> dict[str, int]:
    """The latest total of every word, from the per-epoch changes."""
    totals: dict[str, int] = {}
    for epoch in sorted(changes):
        totals.update(changes[epoch])
    return totals


def wordcount(paragraphs: Iterable[str], workers: int = 2) -> dict[int, dict[str, int]]:
    """Synchronous wrapper of :func:`run_wordcount` (no printing)."""
    return asyncio.run(run_wordcount(paragraphs, workers))


def printer(paragraphs: list[str], top: int = 6) -> Report:
    """A report callback printing each epoch's input size and top changed words."""
    previous: dict[str, int] = {}

    def report(epoch: int, records: list[tuple[str, int]]) -> None:
        text = paragraphs[epoch]
        first = text.splitlines()[0]
        print(f"epoch {epoch}: {len(text.splitlines())} lines, {len(tokenize(text))} words")
        print(f"  input   : {first[:60]}{'...' if len(first) > 60 else ''}")
        ranked = sorted(records, key=lambda wt: (-wt[1], wt[0]))
        shown = [f"{w}={t} (+{t - previous.get(w, 0)})" for w, t in ranked[:top]]
        print(f"  changed : {len(records)} words; top: " + ", ".join(shown))
        previous.update(records)

    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers",
        type=worker_count,
        help="workers per process (default: naiad run's -w, else 2)",
    )
    parser.add_argument("--top", type=int, default=6, help="changed words shown per epoch")
    args = parser.parse_args(argv)
    if args.top < 0:  # a negative slice showed every changed word but the last ones
        parser.error(f"--top must be at least 0, not {args.top}")
    workers = script_workers(args.workers)
    cluster = naiad.Runtime(workers=workers)  # not started: its place in a `naiad run` cluster
    first = cluster.process_index == 0  # the process that reports

    if first:
        processes = f" x {cluster.process_count} processes" if cluster.process_count > 1 else ""
        print(f"streaming word count: {len(SAMPLE_TEXT)} epochs on {workers} workers{processes}\n")
    changes = asyncio.run(run_wordcount(SAMPLE_TEXT, workers, printer(SAMPLE_TEXT, args.top)))
    if not first:
        return
    totals = final_totals(changes)
    ranked = sorted(totals.items(), key=lambda wt: (-wt[1], wt[0]))
    print(f"\nfinal: {len(totals)} distinct words, {sum(totals.values())} in all")
    print("  most frequent: " + ", ".join(f"{w}={t}" for w, t in ranked[:10]))


if __name__ == "__main__":
    main()
