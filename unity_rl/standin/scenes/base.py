"""What a stand-in scene provides: one vectorised model per behavior.

A model simulates all agents of one behavior at once (numpy arrays indexed by agent). The
Academy (``unity_rl.standin.academy``) owns the ML-Agents lifecycle — decision requests, step
counts, rewards since the last decision, terminal infos, MaxStep — and calls the model exactly
where Unity calls the agent's C# methods:

==========================  =================================================================
model method                Unity equivalent
==========================  =================================================================
``reset(idx)``              ``OnEpisodeBegin`` (reads environment parameters)
``act(idx, cont, disc)``    ``OnActionReceived`` at every academy step (actions repeat between
                            decisions); returns the reward and which agents called EndEpisode
``physics_step()``          one fixed physics update (dt = 0.02 s) after all agents acted
``observe(idx)``            ``CollectObservations`` / sensors, one array per ObsSpec
``action_mask(idx)``        ``WriteDiscreteActionMask`` (True = action unavailable)
==========================  =================================================================

``act`` may return a third array, True where that agent's reward *replaces* its pending reward
(Unity's SetReward in one call, AddReward elsewhere: a fall's SetReward(-1)); without it,
``set_reward`` decides for all. A model shared by the behaviors of a ``pool`` (agents that
switch behavior, Unity's Agent.SetModel) also has ``behavior_of(idx)``: called right after
``reset(idx)``, the index within the pool of the behavior each agent belongs to this episode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

PHYSICS_DT = 0.02
"""Unity's default fixed timestep: 50 physics (and academy) steps per simulated second."""


@dataclass(frozen=True)
class BehaviorSpecDef:
    """Observation and action layout of one behavior, as its BrainParameters announce it."""

    obs: tuple[ObsSpec, ...]
    continuous: int = 0
    branches: tuple[int, ...] = ()


class SceneModel(Protocol):
    spec: BehaviorSpecDef
    set_reward: bool
    """True: ``act`` rewards replace the pending reward (Unity SetReward); False: they add."""

    def reset(self, idx: np.ndarray) -> None: ...

    def act(
        self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def physics_step(self) -> None: ...

    def observe(self, idx: np.ndarray) -> list: ...

    def action_mask(self, idx: np.ndarray) -> np.ndarray | None: ...


ModelFactory = Callable[[int, np.random.Generator, EnvironmentParameters, object], SceneModel]
"""(number of agents, rng, environment parameters, PlayerOptions) -> model."""


@dataclass(frozen=True)
class BehaviorDef:
    """One behavior of a scene with its defaults; options and num_areas may change them."""

    name: str
    """Behavior name as a build sends it, with the team suffix: ``3DBall?team=0``."""
    factory: ModelFactory
    agents: int
    decision_period: int
    max_step: int
    pool: str = ""
    """Behaviors with the same non-empty pool share one model, one set of agents and their ids;
    each agent belongs to one of them at a time, chosen by ``model.behavior_of`` at every episode
    start (Unity's SetModel: WallJump's SmallWallJump / BigWallJump). The first behavior of the
    pool holds every agent before the first reset."""
