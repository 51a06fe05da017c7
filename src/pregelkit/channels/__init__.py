"""Channels: the slots a graph's state is made of, each with its own way of
combining the writes of a step.

Each channel's module loads when its name is first used: a workflow pays
only for the channels it has.
"""

from typing import TYPE_CHECKING

from pregelkit._internal._lazy import lazy_attributes

if TYPE_CHECKING:
    from pregelkit.channels.any_value import AnyValue
    from pregelkit.channels.base import BaseChannel
    from pregelkit.channels.binop import BinaryOperatorAggregate
    from pregelkit.channels.delta import DeltaChannel
    from pregelkit.channels.ephemeral_value import EphemeralValue
    from pregelkit.channels.last_value import LastValue, LastValueAfterFinish
    from pregelkit.channels.named_barrier_value import (
        NamedBarrierValue,
        NamedBarrierValueAfterFinish,
    )
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

__getattr__ = lazy_attributes(
    __name__,
    {
        "AnyValue": ".any_value",
        "BaseChannel": ".base",
        "BinaryOperatorAggregate": ".binop",
        "DeltaChannel": ".delta",
        "EphemeralValue": ".ephemeral_value",
        "LastValue": ".last_value",
        "LastValueAfterFinish": ".last_value",
        "NamedBarrierValue": ".named_barrier_value",
        "NamedBarrierValueAfterFinish": ".named_barrier_value",
        "Topic": ".topic",
        "UntrackedValue": ".untracked_value",
    },
)
