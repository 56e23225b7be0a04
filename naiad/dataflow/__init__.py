"""Graph construction: scopes, streams, loop contexts, channels and exchange."""

from naiad.dataflow.channels import Broadcast, Exchange, Pact, Pipeline
from naiad.dataflow.scope import BuildError, DataflowBuild, ScopeCore, StreamCore

__all__ = [
    "Broadcast",
    "BuildError",
    "DataflowBuild",
    "Exchange",
    "Pact",
    "Pipeline",
    "ScopeCore",
    "StreamCore",
]
