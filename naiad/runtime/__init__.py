"""The runtime: configuration, workers, dataflow instantiation, entry points."""

from naiad.runtime.runtime import Dataflow, Runtime, run, run_coroutine

__all__ = ["Dataflow", "Runtime", "run", "run_coroutine"]
