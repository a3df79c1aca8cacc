"""Basic: Unity's simplest example, a walk on a line of 20 cells (simulated with numpy).

The agent starts at cell 10 (``--standin-basic-start`` changes it). One discrete branch of 3
actions: 0 do nothing, 1 move left, 2 move right; moves stop at the ends (cells 0 and 19). Every
step costs 0.01 (AddReward); reaching cell 7 gives 0.1 and ends the episode, cell 17 gives 1 and
ends it. Observation: one-hot of the cell (20 floats). A decision every academy step.

Unlike Unity's Basic, the stand-in sends action masks (True = unavailable): "left" is masked on
cell 0 and "right" on cell 19 — reachable only from a start cell outside 8..16, e.g.
``--standin-basic-start 0`` masks "left" at every episode's first decision.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec


class BasicModel:
    CELLS = 20
    START = 10
    SMALL_GOAL, SMALL_REWARD = 7, 0.1
    LARGE_GOAL, LARGE_REWARD = 17, 1.0
    STEP_COST = 0.01

    spec = BehaviorSpecDef(
        obs=(ObsSpec("OneHotSensor", (20,), dimension_properties=(1,)),), branches=(3,)
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters, opts=None):
        start = getattr(opts, "basic_start", None)
        self.start = self.START if start is None else int(start)
        if not 0 <= self.start < self.CELLS:
            raise ValueError(f"Basic start cell must be in 0..{self.CELLS - 1}, got {self.start}")
        self.position = np.full(n, self.start, dtype=np.int64)
        self._eye = np.eye(self.CELLS, dtype=np.float32)

    def reset(self, idx: np.ndarray) -> None:
        self.position[idx] = self.start

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        choice = discrete[:, 0]
        move = np.where(choice == 1, -1, np.where(choice == 2, 1, 0))
        pos = np.clip(self.position[idx] + move, 0, self.CELLS - 1)
        self.position[idx] = pos
        small, large = pos == self.SMALL_GOAL, pos == self.LARGE_GOAL
        reward = -self.STEP_COST + self.SMALL_REWARD * small + self.LARGE_REWARD * large
        return reward, small | large

    def physics_step(self) -> None:
        pass

    def observe(self, idx: np.ndarray) -> list:
        return [self._eye[self.position[idx]]]

    def action_mask(self, idx: np.ndarray) -> np.ndarray:
        pos = self.position[idx]
        mask = np.zeros((len(pos), 3), dtype=bool)
        mask[:, 1] = pos == 0
        mask[:, 2] = pos == self.CELLS - 1
        return mask
