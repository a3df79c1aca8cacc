"""Typed messages between the learner host and its actors (any backend).

Two directions, each an Enum tag plus a NamedTuple payload, so every receiver dispatches on
``kind`` and nothing travels as an untyped dict:

- learner -> actor: ``Command`` (``ToActor.WEIGHTS`` with a ``PolicyWeights``, ``ToActor.CONTROL``
  with a ``Control``, or ``ToActor.STOP``);
- actor -> learner: ``Report`` (``FromActor.READY`` with an ``ActorInfo``, ``FromActor.SEGMENT``
  with a ``Rollout``, ``FromActor.ERROR`` with an ``ActorError``).

Versions, one meaning each: ``PolicyWeights.version`` is the run's *publication* number (the
learner host publishes all behaviors' weights together; a sync actor waits for a publication
newer than the one it used); ``BehaviorWeights.version`` / ``Segment.policy_version`` is one
behavior's learner version (its own updates), the unit of policy lag.

Everything here pickles with the standard library plus numpy (weights are CPU numpy arrays), so
the same messages serve local processes and Ray.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple, Union

from unity_rl.errors import UserError
from unity_rl.experience import Segment


class ToActor(Enum):
    """What the learner asks of an actor."""

    WEIGHTS = "weights"
    """Act with these weights from the next segment on (payload: PolicyWeights)."""
    CONTROL = "control"
    """Change what the actor's builds run with, between collections (payload: Control)."""
    STOP = "stop"
    """Finish now: close the builds and exit (no payload)."""


class FromActor(Enum):
    """What an actor tells the learner."""

    READY = "ready"
    """Builds are up; payload: ActorInfo (the behavior spec the learner needs)."""
    SEGMENT = "segment"
    """A collection: one segment per trained behavior; payload: Rollout."""
    ERROR = "error"
    """The actor failed and is exiting; payload: ActorError."""


class BehaviorWeights(NamedTuple):
    """One behavior's policy snapshot."""

    version: int
    """That behavior's learner version (its updates so far)."""
    state: dict[str, Any]
    """What ``Policy.load_weights`` takes: CPU arrays (and normaliser statistics)."""


class PolicyWeights(NamedTuple):
    """What the learner host publishes: every trained behavior's weights at once."""

    version: int
    """Publication number of the run (increases with every publication)."""
    behaviors: dict[str, BehaviorWeights]
    """Full behavior name -> its weights."""


GOAL_SIGNAL = 1
"""``mlagents_envs.base_env.ObservationType.GOAL_SIGNAL``: an observation that is a goal."""


def goal_indices_of(observation_specs) -> tuple[int, ...]:
    """Indices of a BehaviorSpec's GOAL_SIGNAL observations (specs without a type: none)."""
    def type_value(spec) -> int:
        kind = getattr(spec, "observation_type", 0)  # an Enum in mlagents_envs
        return int(getattr(kind, "value", kind))

    return tuple(i for i, spec in enumerate(observation_specs) if type_value(spec) == GOAL_SIGNAL)


class BehaviorInfo(NamedTuple):
    """What an actor's builds report about one behavior it trains."""

    name: str
    """Full behavior name (e.g. '3DBall?team=0')."""
    obs_shapes: tuple[tuple[int, ...], ...]
    """Shape of each observation of the BehaviorSpec, in spec order."""
    action_spec: Any
    """mlagents_envs ActionSpec (continuous_size, discrete_branches)."""
    num_agents: int
    """Agents of this behavior that requested a decision at reset, over the actor's builds."""
    goal_indices: tuple[int, ...] = ()
    """Indices of the observations of type GOAL_SIGNAL (goal conditioning); () for none."""

    @property
    def obs_dim(self) -> int:
        """Length of the flat observation row (every observation flattened, side by side)."""
        total = 0
        for shape in self.obs_shapes:
            size = 1
            for d in shape:
                size *= int(d)
            total += size
        return total


class ActorInfo(NamedTuple):
    """An actor's description of its builds, sent once when they are up."""

    actor_id: int
    """Index of the actor, 0..K-1."""
    behaviors: dict[str, BehaviorInfo]
    """Full behavior name -> what the builds report about it (the behaviors this actor trains)."""
    pid: int
    """Process id of the actor (0 where there is none)."""
    build_pids: tuple[int, ...]
    """Process ids of the actor's builds."""

    def layout(self) -> dict[str, tuple]:
        """Behavior -> (observation shapes, action spec): what must match across actors."""
        return {name: (b.obs_shapes, tuple(b.action_spec), b.goal_indices)
                for name, b in self.behaviors.items()}


class Rollout(NamedTuple):
    """What an actor sends per collection: one segment per behavior it trains."""

    actor_id: int
    """Which actor collected it."""
    publication: int
    """``PolicyWeights.version`` of the weights the actor acted with."""
    segments: dict[str, Segment]
    """Full behavior name -> that behavior's segment (every trained behavior, maybe empty)."""
    restarts: int = 0
    """Builds of this actor restarted during the collection."""
    final: bool = True
    """False: trajectories finished so far in a collection that goes on (a sync actor sends
    them as they finish, ``ActorSpec.partial_interval_s``, so the learner counts their steps and
    episodes at once); the collection's last rollout is final."""


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


SNAPSHOT_VERSION = -1
"""``Segment.policy_version`` of a lane that acts with a fixed opponent snapshot (self-play):
its data was not collected with the learner's weights."""


class LanePolicy(NamedTuple):
    """Self-play: what one behavior's lane acts with from its next collection on."""

    weights: BehaviorWeights
    """Weights to load now."""
    fixed: bool
    """True: an opponent snapshot; the lane keeps it (publications no longer change it) and tags
    its segments ``SNAPSHOT_VERSION``. False: the learner's weights; the lane follows the
    publications again (the learning team)."""


class Control(NamedTuple):
    """learner -> every actor, beside weights: what the run changes in the actors' builds.

    A message is a change: a field left None changes nothing, and a parameter (or lane) not named
    keeps its value. The backend keeps the sum of every change (``updated``) and starts a
    re-created actor with it. The actor applies a control between collections, in its order
    among the weights: parameters, then lanes, then the reset.
    """

    env_parameters: dict[str, Any] | None = None
    """Environment parameter name -> a float or a sampler spec (``config.EnvironmentParameter``;
    what ``envs.communicator.send_environment_parameter`` sends), sent to every build through the
    environment-parameters side channel (read by the scene at its next episode, as
    ``environment_parameters`` of the config at start-up; a restarted build gets them too)."""
    reset_episodes: bool = False
    """After the parameters, reset every build: every agent's episode is cut and its open
    trajectory dropped (mlagents-learn's reset for a lesson with ``require_reset``). A one-off:
    not part of the control state a re-created actor starts with (its builds start afresh)."""
    lanes: dict[str, LanePolicy] | None = None
    """Self-play (``unity_rl.training.selfplay``): full behavior name -> the policy its lane acts
    with (an opponent snapshot, or the learner's weights for the learning team)."""
    paused: bool | None = None
    """async flow control: True, the actor collects no further rollout (it keeps taking
    commands and beating its heartbeat) until a control with False; its builds wait paused
    between two decisions, as under a slow learner in sync mode. None: unchanged."""

    def updated(self, change: "Control") -> "Control":
        """This control state after ``change`` (parameters and lanes merged name by name)."""
        if change.env_parameters is None and change.lanes is None and change.paused is None:
            return self
        out = self._replace(reset_episodes=False)
        if change.paused is not None:
            out = out._replace(paused=change.paused)
        if change.env_parameters is not None:
            params = dict(self.env_parameters or {})
            params.update(change.env_parameters)
            out = out._replace(env_parameters=params)
        if change.lanes is not None:
            lanes = dict(self.lanes or {})
            lanes.update(change.lanes)
            out = out._replace(lanes=lanes)
        return out


class Command(NamedTuple):
    """learner -> actor."""

    kind: ToActor
    weights: PolicyWeights | None = None
    control: Control | None = None


class Report(NamedTuple):
    """actor -> learner."""

    kind: FromActor
    actor_id: int
    payload: Union[ActorInfo, Rollout, ActorError]


class ActorFailedError(UserError, RuntimeError):
    """An actor raised, died or stopped answering; the message names it and says why."""

    def __init__(self, actor_id: int, reason: str, error: ActorError | None = None):
        super().__init__(f"actor {actor_id} failed: {reason}")
        self.actor_id = actor_id
        self.reason = reason
        self.error = error
        """The exception the actor reported (None: it died or hung without one)."""

    @classmethod
    def from_error(cls, error: ActorError) -> "ActorFailedError":
        return cls(error.actor_id, f"{error.exc_type}: {error.message}\n"
                                   f"--- traceback in actor {error.actor_id} ---\n"
                                   f"{error.traceback.rstrip()}", error)
