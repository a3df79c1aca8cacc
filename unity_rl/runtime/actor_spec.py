"""What an actor is given, as the wiring hands it to a backend (everything pickles: it travels
to the actor's process or Ray actor).

- ``StreamSettings``: how the actor opens its ``AgentStream`` (the build, how many, worker ids,
  seed, behaviors, launch settings, restart quota);
- ``ActorSpec``: the actor's id, its stream, one ``BehaviorPlan`` per config section (a name
  matches a behavior's full or short name; ``default_plan`` for the others), sync or async
  waiting, seed and the run's control state to start with. ``plan_for`` raises
  ``BehaviorSettingsError`` naming a behavior that has no plan and what to add;
- ``PolicyFactory``: how a plan makes the actor's policy copy.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from unity_rl.envs.behavior import ALL_BEHAVIORS
from unity_rl.envs.settings import DEFAULTS as LAUNCH_DEFAULTS
from unity_rl.envs.types import short_name
from unity_rl.runtime.acting import ActingPolicy
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.messages import Control

PolicyFactory = Callable[[Any, Any, int], ActingPolicy]
"""(obs_shapes, action_spec, seed[, goal_indices=]) -> a policy copy; must pickle (a module-level function or a
``functools.partial`` of one) because it travels to the actor's process."""


@dataclass(frozen=True)
class StreamSettings:
    """How an actor opens its ``AgentStream`` (everything pickles)."""

    env_path: str
    """Build executable."""
    num_builds: int = 1
    """Builds this actor owns."""
    worker_id_start: int = 0
    """Worker id of the actor's first build (distinct ranges per actor: distinct ports)."""
    seed: int = 0
    """Seed sent to the builds (build i gets seed + i)."""
    behaviors: tuple[str, ...] = (ALL_BEHAVIORS,)
    """Behaviors to train (short or full names), or ``(ALL_BEHAVIORS,)``."""
    other_behaviors: str = "error"
    """What agents of behaviors not trained get: 'error' (raise) or 'zeros' (zero actions)."""
    launch: Any = None
    """The run's ``unity_rl.envs.launcher.LaunchSettings`` (ports, flags, engine, timeouts)."""
    restart_quota: tuple[int, int, float] = LAUNCH_DEFAULTS.restart_limits
    """Build restarts: (lifetime, per period, period seconds); -1 for unlimited."""

    @property
    def timeout_wait(self) -> float:
        """Seconds a build may take to connect."""
        return float((self.launch or LAUNCH_DEFAULTS).timeout_wait)

    @property
    def step_timeout(self) -> float | None:
        """Seconds a build may take to answer a step."""
        return self.launch.answer_timeout if self.launch is not None else None

    def open(self):
        """Starts the builds and returns the ``AgentStream`` over them."""
        from unity_rl.envs.agent_stream import AgentStream
        from unity_rl.envs.launcher import RestartQuota

        return AgentStream.from_settings(
            self.launch, num_builds=self.num_builds, worker_id_start=self.worker_id_start,
            seed=self.seed, behaviors=list(self.behaviors),
            other_behaviors=self.other_behaviors, restart_quota=RestartQuota(*self.restart_quota))


class BehaviorSettingsError(ValueError):
    """The builds have a behavior the config has no settings for (raised by ``plan_for``)."""


@dataclass(frozen=True)
class ActorSpec:
    """Everything one actor needs, as the wiring hands it to a backend."""

    actor_id: int
    """Index of the actor, 0..K-1."""
    stream: StreamSettings
    """Its builds."""
    plans: tuple[tuple[str, BehaviorPlan], ...]
    """(config section name, plan) per behavior section; a name matches a behavior's full or
    short name."""
    wait_for_new_weights: bool
    """Sync wiring: after each rollout, wait for a newer publication."""
    default_plan: BehaviorPlan | None = None
    """Plan for behaviors without a section (ML-Agents' default_settings); None: an error."""
    seed: int = 0
    """Seed of the policies' action sampling."""
    torch_threads: int = 1
    """Intra-op threads of the actor's torch (1: the builds need the other cores)."""
    niceness: int = 0
    """Added to the actor process's niceness before it launches its builds (they inherit it)."""
    partial_interval_s: float | None = None
    """Sync wiring: send the trajectories finished so far as a partial rollout at most this
    often (seconds) during a collection (``Rollout.final``); None: one rollout per collection."""
    control: Control | None = None
    """The run's control state to start with (a re-created actor gets the latest one)."""
    stream_factory: Optional[Callable[[], Any]] = field(default=None, compare=False)
    """Tests: replaces ``stream.open()`` with a stand-in stream (must pickle for processes)."""

    def open_stream(self):
        return self.stream_factory() if self.stream_factory is not None else self.stream.open()

    def plan_for(self, behavior: str) -> BehaviorPlan:
        """The plan of a behavior (full name); ``BehaviorSettingsError`` when there is none."""
        for name, plan in self.plans:
            if name in (behavior, short_name(behavior)):
                return plan
        if self.default_plan is not None:
            return self.default_plan
        known = [name for name, _ in self.plans]
        raise BehaviorSettingsError(f"the builds have behavior '{behavior}' but the config has no settings "
                         f"for it (sections: {known}): add behaviors.{behavior.split('?', 1)[0]} "
                         f"or default_settings, or train only some behaviors with --behavior")
