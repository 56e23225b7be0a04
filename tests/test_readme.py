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
