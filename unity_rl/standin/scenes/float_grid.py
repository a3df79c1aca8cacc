"""FloatGrid: a small scene whose observation is an *uncompressed* float 3-D grid.

Some Unity sensors (grid sensors, custom ISensor implementations) send rank-3 observations as
plain floats (compression NONE) with values far outside [0, 1]. This scene checks that such
grids reach the trainer unchanged (float32, not treated as an image).

* Observations (sorted by name): ``GridSensor``, float [2, 6, 6] = ``float_grid(x, y)``:
  channel 0 a fixed terrain of heights spanning -20..12 (values not multiples of 1/255),
  channel 1 is -20 everywhere except 12 at the agent's cell; ``VectorSensor_size2``: the
  agent's cell (x, y) as floats, so a test can recompute the grid.
* Actions: one branch of 5 (no-op, up, down, left, right), like GridWorld, no masks.
* Rewards: -0.01 per step; reaching the lowest terrain cell gives +1 and ends the episode.
* 4 agents, DecisionPeriod 1, MaxStep 100; the agent starts on a random cell.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

SIZE = 6
LOW, HIGH = -20.0, 12.0
_ii, _jj = np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")
TERRAIN = (LOW + (HIGH - LOW) * (0.5 + 0.5 * np.sin(1.3 * _ii + 2.1 * _jj + 0.37))).astype(
    np.float32)
"""[6, 6] heights: row = y, column = x."""
GOAL = np.unravel_index(int(np.argmin(TERRAIN)), TERRAIN.shape)  # (y, x)
_MOVES = np.array([[0, 0], [0, -1], [0, 1], [-1, 0], [1, 0]])  # (dx, dy); up = y - 1


def float_grid(x: int, y: int) -> np.ndarray:
    """The GridSensor observation of an agent on cell (x, y): float32 [2, 6, 6]."""
    grid = np.empty((2, SIZE, SIZE), np.float32)
    grid[0] = TERRAIN
    grid[1] = LOW
    grid[1, y, x] = HIGH
    return grid


class FloatGridModel:
    spec = BehaviorSpecDef(
        obs=(ObsSpec("GridSensor", (2, SIZE, SIZE), dimension_properties=(1, 2, 2)),
             ObsSpec("VectorSensor_size2", (2,), dimension_properties=(1,))),
        branches=(5,),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng = rng
        self.cell = np.zeros((n, 2), np.int64)  # (x, y)

    def reset(self, idx: np.ndarray) -> None:
        self.cell[idx] = self.rng.integers(0, SIZE, (len(idx), 2))

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        cell = np.clip(self.cell[idx] + _MOVES[discrete[:, 0]], 0, SIZE - 1)
        self.cell[idx] = cell
        goal = (cell[:, 0] == GOAL[1]) & (cell[:, 1] == GOAL[0])
        return -0.01 + 1.0 * goal, goal

    def physics_step(self) -> None:
        pass

    def observe(self, idx: np.ndarray) -> list:
        grids = np.stack([float_grid(x, y) for x, y in self.cell[idx].tolist()])
        return [grids, self.cell[idx].astype(np.float32)]

    def action_mask(self, idx: np.ndarray) -> None:
        return None
