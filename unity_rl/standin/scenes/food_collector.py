"""FoodCollector: a hybrid-action scene in the spirit of Unity's FoodCollector (numpy).

Each agent has its own flat square arena (side 10, centred on 0) with one food item. Actions,
as Unity's FoodCollector: 3 continuous in [-1, 1] (move forward, move sideways, rotate) and one
discrete branch of 2 (laser off / on).

* Moves (every academy step, actions repeat between decisions as in Unity): forward/sideways up
  to 0.1 per step in the agent's frame, rotation up to 6 degrees per step; the agent stays
  inside the arena.
* Food: reaching within 1.0 of it gives +1 and the food reappears at a random place at least
  2.0 away (the episode goes on, as Unity's FoodCollector respawns food).
* Laser: each agent has a *signal* bit (in its observation), drawn at random at the start of the
  episode and after each food eaten. Every academy step with the laser equal to the signal gives
  +0.01, otherwise -0.01 (+-0.05 per decision): a policy that ignores the bit earns 0 on average
  from the laser, one that reads it earns 0.05 per decision.
* Observation ``VectorSensor_size8``: food position in the agent's frame (right, forward) / 10,
  distance / 10, sin and cos of the heading, agent position / 5 (x, z), the signal bit.
* DecisionPeriod 5, MaxStep 1000 academy steps (200 decisions), 8 agents per build.

Deviation from Unity: no other agents, no bad food, no freezing by laser; the laser's value
comes from the signal bit. The reward signal is learnable on both action parts.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

HALF = 5.0
SPEED = 0.1
TURN = np.deg2rad(6.0)
EAT_RADIUS = 1.0
MIN_FOOD_DISTANCE = 2.0
LASER_REWARD = 0.01


class FoodCollectorModel:
    spec = BehaviorSpecDef(
        obs=(ObsSpec("VectorSensor_size8", (8,), dimension_properties=(1,)),),
        continuous=3,
        branches=(2,),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng = rng
        self.pos = np.zeros((n, 2))
        self.heading = np.zeros(n)
        self.food = np.zeros((n, 2))
        self.signal = np.zeros(n, np.int64)

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        self.pos[idx] = self.rng.uniform(-HALF + 1, HALF - 1, (k, 2))
        self.heading[idx] = self.rng.uniform(-np.pi, np.pi, k)
        self._respawn(idx)

    def _respawn(self, idx: np.ndarray) -> None:
        """New food (at least ``MIN_FOOD_DISTANCE`` from the agent) and a new signal bit."""
        todo = idx
        while len(todo):
            self.food[todo] = self.rng.uniform(-HALF + 1, HALF - 1, (len(todo), 2))
            near = np.linalg.norm(self.food[todo] - self.pos[todo], axis=1) < MIN_FOOD_DISTANCE
            todo = todo[near]
        self.signal[idx] = self.rng.integers(0, 2, len(idx))

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        c = np.clip(continuous, -1.0, 1.0)
        heading = self.heading[idx] + TURN * c[:, 2]
        self.heading[idx] = heading
        fwd = np.stack([np.sin(heading), np.cos(heading)], axis=1)  # x, z
        right = np.stack([np.cos(heading), -np.sin(heading)], axis=1)
        move = SPEED * (c[:, :1] * fwd + c[:, 1:2] * right)
        self.pos[idx] = np.clip(self.pos[idx] + move, -HALF, HALF)
        eaten = np.linalg.norm(self.food[idx] - self.pos[idx], axis=1) < EAT_RADIUS
        laser_ok = discrete[:, 0] == self.signal[idx]
        reward = np.where(laser_ok, LASER_REWARD, -LASER_REWARD) + eaten.astype(float)
        if eaten.any():
            self._respawn(idx[eaten])
        return reward, np.zeros(len(idx), bool)

    def physics_step(self) -> None:
        pass

    def observe(self, idx: np.ndarray) -> list:
        h = self.heading[idx]
        d = self.food[idx] - self.pos[idx]
        right = d[:, 0] * np.cos(h) - d[:, 1] * np.sin(h)
        forward = d[:, 0] * np.sin(h) + d[:, 1] * np.cos(h)
        obs = np.stack([right / 10, forward / 10, np.hypot(d[:, 0], d[:, 1]) / 10,
                        np.sin(h), np.cos(h), self.pos[idx, 0] / HALF, self.pos[idx, 1] / HALF,
                        self.signal[idx]], axis=1)
        return [obs.astype(np.float32)]

    def action_mask(self, idx: np.ndarray) -> None:
        return None
