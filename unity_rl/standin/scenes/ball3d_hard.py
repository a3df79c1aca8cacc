"""3DBallHard: 3DBall without the ball's velocity, observed through two stacked sensors.

Unity's ``Ball3DHardAgent`` (``3DBall/Scripts/Ball3DHardAgent.cs``, prefab ``3DBallHard``) has no
vector observations of its own (VectorObservationSize 0); it declares two members with
``[Observable(numStackedObservations: 9)]``, so Python receives, in sensor-name order:

0. ``StackingSensor_size9_ObservableAttribute:Ball3DHardAgent.PositionDelta``, (27,): the ball's
   position minus the platform's (3 floats), last 9 observations, oldest first;
1. ``StackingSensor_size9_ObservableAttribute:Ball3DHardAgent.Rotation``, (18,): the platform
   rotation quaternion's z and x (2 floats), last 9 observations, oldest first.

The velocity is not observed: a policy infers it from the stacks. Stacks are pushed at every
observation the agent sends (decisions and terminal infos) and cleared at the agent's episode
reset (``stacking.py``). Physics, actions, rewards (0.1 per decision, -1 on a fall), 12 agents,
DecisionPeriod 5 (actions repeated between decisions), MaxStep 5000: as ``ball3d`` (3DBall).

Environment parameters: as Unity's quirk (this agent's OnEpisodeBegin does not call
SetResetParameters), ``mass`` and ``scale`` are read only once per agent, at its first episode
after the trainer's first RESET (Unity's Initialize, which runs after the first side-channel
messages); ``gravity`` (a global physics setting in Unity) is read at every episode start.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.ball3d import Ball3DModel
from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.stacking import VectorStack, stacked_name
from unity_rl.standin.wire import ObsSpec

STACKS = 9
POSITION = stacked_name(STACKS, "ObservableAttribute:Ball3DHardAgent.PositionDelta")
ROTATION = stacked_name(STACKS, "ObservableAttribute:Ball3DHardAgent.Rotation")


class Ball3DHardModel(Ball3DModel):
    spec = BehaviorSpecDef(
        obs=(ObsSpec(POSITION, (3 * STACKS,), dimension_properties=(1,)),
             ObsSpec(ROTATION, (2 * STACKS,), dimension_properties=(1,))),
        continuous=2,
    )

    def __init__(self, n, rng, params, opts=None):
        self._position = VectorStack(n, 3, STACKS)
        self._rotation = VectorStack(n, 2, STACKS)
        self._initialized = None  # the construction-time reset is not Unity's Initialize
        super().__init__(n, rng, params, opts)
        self._initialized = np.zeros(n, bool)
        self._init_radius = self.radius.copy()
        self._init_mass = self.mass.copy()

    def reset(self, idx: np.ndarray) -> None:
        super().reset(idx)
        self._position.clear(idx)
        self._rotation.clear(idx)
        if self._initialized is None or len(idx) == 0:
            return
        idx = np.asarray(idx)
        first = idx[~self._initialized[idx]]
        self._init_radius[first] = self.radius[first]
        self._init_mass[first] = self.mass[first]
        self._initialized[first] = True
        # mass and scale stay those of Initialize (Unity's quirk); gravity is the new draw
        self.radius[idx] = self._init_radius[idx]
        self.mass[idx] = self._init_mass[idx]
        self._rest[idx] = self.PLATFORM_TOP + self.radius[idx]

    def observe(self, idx: np.ndarray) -> list:
        full = super().observe(idx)[0]
        return [self._position.push(idx, full[:, 2:5]), self._rotation.push(idx, full[:, 0:2])]
