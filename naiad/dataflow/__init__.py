"""Graph construction: scopes, streams, loop contexts, channels and exchange."""

from naiad.dataflow.channels import Exchange, Pact, Pipeline
from naiad.dataflow.scope import BuildError, DataflowBuild, ScopeCore, StreamCore

__all__ = ["BuildError", "DataflowBuild", "Exchange", "Pact", "Pipeline", "ScopeCore", "StreamCore"]
