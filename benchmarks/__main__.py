"""``python -m benchmarks NAME [--quick] [options]`` and ``python -m benchmarks --list``."""

from __future__ import annotations

import importlib
import sys

from benchmarks import BENCHMARKS

USAGE = "usage: python -m benchmarks NAME [--quick] [options]  |  python -m benchmarks --list"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        print("benchmarks: " + ", ".join(BENCHMARKS) + "  (NAME --help for its options)")
        return 0 if args else 2
    if args[0] == "--list":
        for name, description in BENCHMARKS.items():
            print(f"{name:<14} {description}")
        return 0
    name, rest = args[0], args[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"benchmarks.{name.replace('-', '_')}")
    module.main(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
