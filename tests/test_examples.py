"""The examples under ``examples/``, checked against plain-Python oracles on 1, 2 and 4 workers."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str) -> ModuleType:
    """Imports ``examples/<name>.py`` (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


wordcount = _load("wordcount")
distinct_count = _load("distinct_count")
bfs_levels = _load("bfs_levels")

WORKERS = [1, 2, 4]


# --- wordcount -------------------------------------------------------------------------------


def _wordcount_oracle(paragraphs: list[str]) -> dict[int, dict[str, int]]:
    """Epoch -> {word of that epoch: running total up to and including it}."""
    running: Counter[str] = Counter()
    expected = {}
    for epoch, paragraph in enumerate(paragraphs):
        words = [w for line in paragraph.splitlines() for w in wordcount.tokenize(line)]
        running.update(words)
        expected[epoch] = {w: running[w] for w in set(words)}
    return expected


@pytest.mark.parametrize("workers", WORKERS)
def test_wordcount_matches_counter(workers: int) -> None:
    text = wordcount.SAMPLE_TEXT
    changes = wordcount.wordcount(text, workers)
    assert changes == _wordcount_oracle(text)
    everything = Counter(w for p in text for w in wordcount.tokenize(p))
    assert wordcount.final_totals(changes) == dict(everything)


@pytest.mark.parametrize("workers", WORKERS)
def test_wordcount_reports_empty_epochs(workers: int) -> None:
    text = ["a b a", "", "b c\nc", "a"]  # epoch 1 has no input at all
    changes = wordcount.wordcount(text, workers)
    assert changes == {0: {"a": 2, "b": 1}, 1: {}, 2: {"b": 2, "c": 2}, 3: {"a": 3}}


def test_wordcount_tokenize_and_key() -> None:
    assert wordcount.tokenize("It was, the 'best' of TIMES;") == [
        "it",
        "was",
        "the",
        "best",
        "of",
        "times",
    ]
    assert wordcount.word_key("the") == 0x3C456DE6  # zlib.crc32: stable across runs


NAIAD_RUN = [sys.executable, "-m", "naiad.runtime.cli", "run"]


@pytest.mark.parametrize(
    "launch",
    [[sys.executable], [*NAIAD_RUN, "-w", "1", "-n", "2"]],
    ids=["python", "naiad run -w 1 -n 2"],
)
def test_wordcount_script_runs(launch: list[str]) -> None:
    """Regression (under ``naiad run``): the script's ``--workers`` defaulted to 2, which the
    launched Runtime refused ("Runtime(workers=2) disagrees with the cluster"); each
    process fed the whole text (every count doubled) and printed its own final totals."""
    done = subprocess.run(
        [*launch, str(EXAMPLES / "wordcount.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    workers = "2 workers" if len(launch) == 1 else "1 workers x 2 processes"
    assert f"4 epochs on {workers}" in out
    assert "epoch 0: 3 lines, 36 words" in out
    assert "epoch 3:" in out
    assert "most frequent: the=15, of=12, was=11, it=10" in out
    assert out.index("epoch 0:") < out.index("epoch 1:") < out.index("final:")
    assert out.count("final:") == 1  # process 0 reports


@pytest.mark.parametrize("example", ["distinct_count", "bfs_levels"])
def test_the_other_examples_report_the_same_on_a_cluster(example: str) -> None:
    """They gather their outputs on worker 0: ``naiad run -w 3`` gives them 3 workers, and
    ``-n 2`` / ``-n 3`` print what one process prints, once (process 0 reports). Regression:
    ``-n 2`` was refused; before that each process printed the part its workers held."""
    script = str(EXAMPLES / f"{example}.py")
    alone = subprocess.run(
        [sys.executable, script, "--workers", "4"], capture_output=True, text=True, timeout=60
    )
    assert alone.returncode == 0, alone.stderr
    done = subprocess.run(
        [*NAIAD_RUN, script, "-w", "3"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert " 3 workers" in done.stdout
    for w, n in [(2, 2), (1, 3)]:
        done = subprocess.run(
            [*NAIAD_RUN, script, "-w", str(w), "-n", str(n)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert f" {w} workers x {n} processes" in out
        if example == "distinct_count":  # the same report, bar the header
            assert out.splitlines()[1:] == alone.stdout.splitlines()[1:]
        else:  # notifications differ with the workers' shares; the levels do not
            assert (
                out.split("notifications")[0].splitlines()[1:]
                == (alone.stdout.split("notifications")[0].splitlines()[1:])
            )
            assert out.count("  worker ") == w * n
            assert "matches a plain queue-based BFS: True" in out


# --- distinct_count --------------------------------------------------------------------------


@pytest.mark.parametrize("workers", WORKERS)
def test_distinct_count_matches_oracle(workers: int) -> None:
    epochs = distinct_count.sample_epochs(5, size=12, seed=1)
    distinct, counts = distinct_count.distinct_count(epochs, workers)
    for t, batch in enumerate(epochs):
        assert sorted(distinct[t]) == sorted(set(batch))  # each distinct record exactly once
        assert counts[t] == dict(Counter(batch))


@pytest.mark.parametrize("workers", WORKERS)
def test_distinct_count_output0_precedes_epoch_end(workers: int) -> None:
    batch = ["x", "y", "x", "z", "y", "x"]
    out0, out1 = asyncio.run(distinct_count.open_epoch_demo(batch, workers))
    assert sorted(out0) == ["x", "y", "z"]
    assert out1 == []  # the counts wait for the epoch to complete


def test_distinct_count_needs_an_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: ``--epochs 0`` ended in an IndexError (the open-epoch demo sends epoch 0)."""
    with pytest.raises(SystemExit):
        distinct_count.main(["--epochs", "0"])
    assert "--epochs must be at least 1, not 0" in capsys.readouterr().err


# --- bfs_levels ------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("seed", [1, 10, 16])
def test_bfs_levels_match_plain_bfs(workers: int, seed: int) -> None:
    edges = bfs_levels.random_graph(40, 50, seed)
    levels, notified = bfs_levels.bfs_levels(edges, root=0, workers=workers)
    expected = bfs_levels.plain_bfs(edges, 0)
    assert levels == expected
    depth = max(expected.values())
    for its in notified:  # at most one notification per iteration, in iteration order
        assert its == sorted(set(its))
        assert all(0 <= i <= depth + 1 for i in its)
    # Every level's nodes were settled by a notification at that iteration.
    assert set(expected.values()) <= {i for its in notified for i in its}


def test_bfs_isolated_root() -> None:
    levels, notified = bfs_levels.bfs_levels([(1, 2)], root=0, workers=2)
    assert levels == {0: 0}
    assert notified == [[0], []]


def test_bfs_refuses_more_edges_than_the_nodes_hold(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: ``--nodes 3 --edges 10`` drew edges forever."""
    assert len(bfs_levels.random_graph(3, 3, 1)) == 3  # the complete graph
    with pytest.raises(SystemExit):
        bfs_levels.main(["--nodes", "3", "--edges", "10"])
    assert "3 nodes hold at most 3 distinct edges, not 10" in capsys.readouterr().err


@pytest.mark.parametrize("root", ["30", "-1", "999999"])
def test_bfs_refuses_a_root_outside_the_graph(
    root: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: ``--root 999999`` (30 nodes) printed the root at level 0 beside 30
    unreached nodes, as a node of the graph."""
    with pytest.raises(SystemExit) as exit_:
        bfs_levels.main(["--nodes", "30", "--root", root])
    assert exit_.value.code == 2
    assert f"argument --root: the graph's nodes are 0 to 29, not {root}" in capsys.readouterr().err


# --- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["wordcount", "distinct_count", "bfs_levels"])
@pytest.mark.parametrize("workers", ["0", "-2"])
def test_examples_refuse_fewer_than_one_worker(
    example: str, workers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: ``--workers 0`` ended in a ``Runtime`` traceback (ValueError: workers and
    processes must be at least 1), not a usage error naming the option."""
    module = {"wordcount": wordcount, "distinct_count": distinct_count, "bfs_levels": bfs_levels}
    with pytest.raises(SystemExit) as exit_:
        module[example].main(["--workers", workers])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --workers: workers per process must be at least 1, not {workers}" in err


def test_wordcount_refuses_a_negative_top(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: ``--top -1`` printed every changed word of an epoch but the last one (a
    negative slice), as if it were a count."""
    with pytest.raises(SystemExit) as exit_:
        wordcount.main(["--workers", "1", "--top", "-1"])
    assert exit_.value.code == 2
    assert "--top must be at least 0, not -1" in capsys.readouterr().err
