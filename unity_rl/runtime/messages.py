"""Typed messages between the learner host and its actors (any backend).

Two directions, each an Enum tag plus a NamedTuple payload, so every receiver dispatches on
``kind`` and nothing travels as an untyped dict:

- learner -> actor: ``Command`` (``ToActor.WEIGHTS`` with a ``PolicyWeights``, or ``ToActor.STOP``);
- actor -> learner: ``Report`` (``FromActor.READY`` with an ``ActorInfo``, ``FromActor.SEGMENT``
  with a ``Segment``, ``FromActor.ERROR`` with an ``ActorError``).

Everything here pickles with the standard library plus numpy (weights are CPU numpy arrays), so
the same messages serve local processes and Ray.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple, Union

from unity_rl.algos.types import Segment


class ToActor(Enum):
    """What the learner asks of an actor."""

    WEIGHTS = "weights"
    """Act with these weights from the next segment on (payload: PolicyWeights)."""
    STOP = "stop"
    """Finish now: close the builds and exit (no payload)."""


class FromActor(Enum):
    """What an actor tells the learner."""

    READY = "ready"
    """Builds are up; payload: ActorInfo (the behavior spec the learner needs)."""
    SEGMENT = "segment"
    """A collected segment; payload: Segment."""
    ERROR = "error"
    """The actor failed and is exiting; payload: ActorError."""


class PolicyWeights(NamedTuple):
    """A policy snapshot as the learner publishes it."""

    version: int
    """Learner version (number of updates) these weights come from."""
    state: dict[str, Any]
    """What ``Policy.load_weights`` takes: CPU numpy arrays (and normaliser statistics)."""


class ActorInfo(NamedTuple):
    """An actor's description of its builds, sent once when they are up."""

    actor_id: int
    """Index of the actor, 0..K-1."""
    behavior_name: str
    """Full behavior name the actor trains (e.g. '3DBall?team=0')."""
    obs_dim: int
    """Length of the flat observation vector."""
    obs_shapes: tuple[tuple[int, ...], ...]
    """Shape of each observation of the BehaviorSpec (for export)."""
    action_spec: Any
    """mlagents_envs ActionSpec (continuous_size, discrete_branches)."""
    num_agents: int
    """Agents that requested a decision at reset, over all the actor's builds."""
    pid: int
    """Process id of the actor (0 where there is none)."""
    build_pids: tuple[int, ...]
    """Process ids of the actor's builds."""


class ActorError(NamedTuple):
    """An exception raised inside an actor, carried back as text."""

    actor_id: int
    """Which actor failed."""
    exc_type: str
    """Qualified name of the exception class."""
    message: str
    """str(exception)."""
    traceback: str
    """Formatted traceback from the actor's process."""


class Command(NamedTuple):
    """learner -> actor."""

    kind: ToActor
    weights: PolicyWeights | None = None


class Report(NamedTuple):
    """actor -> learner."""

    kind: FromActor
    actor_id: int
    payload: Union[ActorInfo, Segment, ActorError]


class ActorFailedError(RuntimeError):
    """An actor raised, died or stopped answering; the message names it and says why."""

    def __init__(self, actor_id: int, reason: str):
        super().__init__(f"actor {actor_id} failed: {reason}")
        self.actor_id = actor_id
        self.reason = reason

    @classmethod
    def from_error(cls, error: ActorError) -> "ActorFailedError":
        return cls(error.actor_id, f"{error.exc_type}: {error.message}\n"
                                   f"--- traceback in actor {error.actor_id} ---\n"
                                   f"{error.traceback.rstrip()}")
