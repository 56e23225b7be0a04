"""Actors: the mailbox/re-entrancy base, vertex shards, the worker scheduler, supervision."""

from naiad.actors.actor import Actor
from naiad.actors.supervision import DataflowStopped
from naiad.actors.vertex import OutputPort, Vertex, VertexShard
from naiad.actors.worker import Worker

__all__ = ["Actor", "DataflowStopped", "OutputPort", "Vertex", "VertexShard", "Worker"]
