"""Channels: the slots a graph's state is made of, each with its own way of
combining the writes of a step."""

from pregelkit.channels.any_value import AnyValue
from pregelkit.channels.base import BaseChannel
from pregelkit.channels.binop import BinaryOperatorAggregate
from pregelkit.channels.delta import DeltaChannel
from pregelkit.channels.ephemeral_value import EphemeralValue
from pregelkit.channels.last_value import LastValue, LastValueAfterFinish
from pregelkit.channels.named_barrier_value import NamedBarrierValue, NamedBarrierValueAfterFinish
from pregelkit.channels.topic import Topic
from pregelkit.channels.untracked_value import UntrackedValue

__all__ = [
    "AnyValue",
    "BaseChannel",
    "BinaryOperatorAggregate",
    "DeltaChannel",
    "EphemeralValue",
    "LastValue",
    "LastValueAfterFinish",
    "NamedBarrierValue",
    "NamedBarrierValueAfterFinish",
    "Topic",
    "UntrackedValue",
]
