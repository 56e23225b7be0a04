"""The README's example runs and prints what the word count should."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_counts_words(capsys: pytest.CaptureFixture[str]) -> None:
    block = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    exec(compile(block, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    totals: dict[str, int] = {}
    for line in printed:
        _, pairs = line.split(" ", 1)
        totals.update(dict(ast.literal_eval(pairs)))
    assert totals == Counter(["a", "rose", "is", "a", "rose", "is", "a", "rose"])


def test_readme_differential_example_prints_the_components(
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    block = next(b for b in blocks if "graph.wcc" in b)
    exec(compile(block, str(README), "exec"), {"__name__": "readme"})
    printed = ast.literal_eval(capsys.readouterr().out.strip())
    expected_comment = block.split("# [", 1)[1].replace("\n#", "")
    assert printed == ast.literal_eval("[" + expected_comment)
