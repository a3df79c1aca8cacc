"""GridWorld: Unity's GridWorld example, simplified (simulated with numpy, one agent per area).

Each agent lives in its own 5x5 area (``--standin-agents`` / ``num_areas`` multiply areas; the
build has 9 by default). Every episode puts the agent, a green goal and a red goal on three
distinct random cells, and picks the *target* colour (green or red) at random.

* Observation (the only one): ``CameraSensor``, a top-down RGB image, PNG-compressed as a real
  camera sensor sends it, shape [3, 40, 40] (Unity uses 84x84; 40x40 keeps PNG encoding and the
  ``simple`` visual encoder cheap and is above its 20x20 minimum). The 5x5 grid is drawn at 8
  pixels per cell (aligned with the 8x8/stride-4 first convolution of ML-Agents' encoders), each
  object a 6x6 square: goals bright green and bright red, the agent blue. The whole floor is
  tinted with the *target* colour (dark green or dark red), so the cue is in every patch of the
  image and "this goal has the floor's hue" is a local feature.
* Actions: one branch of 5: 0 no-op, 1 up, 2 down, 3 left, 4 right (Unity's order). Action
  masks (True = unavailable) forbid moving into the surrounding walls, as Unity's GridWorld
  does with its mask option.
* Rewards (Unity's scheme): -0.01 per decision; reaching the target goal: +1 and end of the
  episode; reaching the other goal: -1 and end (both replace that decision's -0.01, Unity's
  SetReward). MaxStep 500 academy steps = 100 decisions, DecisionPeriod 5, and, as in Unity,
  the agent acts only at its decisions (TakeActionsBetweenDecisions off).

Deviation from Unity: Unity tells the agent which goal to reach through a separate goal-signal
vector sensor; here the target is shown only in the image (the floor tint), so a policy that
ignores the image reaches the right goal only by chance (expected goal reward 0).
``oracle_action`` is a scripted policy that reads the true state (mean return about +0.95;
a random masked policy gets about -0.25).
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.visual_ball import encode_png
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

GRID = 5
CELL_PX = 8
IMAGE_SIZE = GRID * CELL_PX  # 40

NOOP, UP, DOWN, LEFT, RIGHT = range(5)
_MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])  # (row, column); up = row - 1
GREEN, RED = 0, 1
_COLOURS = np.array([[40, 220, 60], [230, 40, 40]], np.uint8)  # goals: green, red
_FLOORS = np.array([[25, 95, 35], [105, 25, 25]], np.uint8)  # floor tinted by the target
_AGENT = np.array([60, 110, 255], np.uint8)


class GridWorldModel:
    STEP_COST = 0.01
    spec = BehaviorSpecDef(
        obs=(ObsSpec("CameraSensor", (3, IMAGE_SIZE, IMAGE_SIZE), png=True,
                     dimension_properties=(1, 2, 2)),),
        branches=(5,),
    )
    set_reward = False
    acts_between_decisions = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng = rng
        self.agent = np.zeros((n, 2), np.int64)
        self.goals = np.zeros((n, 2, 2), np.int64)  # [agent, green/red, (row, col)]
        self.target = np.zeros(n, np.int64)

    def reset(self, idx: np.ndarray) -> None:
        for i in idx.tolist():
            cells = self.rng.choice(GRID * GRID, size=3, replace=False)
            rows, cols = np.divmod(cells, GRID)
            self.agent[i] = rows[0], cols[0]
            self.goals[i] = np.stack([rows[1:], cols[1:]], axis=1)
        self.target[idx] = self.rng.integers(0, 2, len(idx))

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        choice = discrete[:, 0]
        pos = np.clip(self.agent[idx] + _MOVES[choice], 0, GRID - 1)
        self.agent[idx] = pos
        on = (pos[:, None, :] == self.goals[idx]).all(axis=2)  # [k, 2]: on green, on red
        hit_target = on[np.arange(len(idx)), self.target[idx]]
        hit_other = on[np.arange(len(idx)), 1 - self.target[idx]]
        reward = np.where(hit_target, 1.0, np.where(hit_other, -1.0, -self.STEP_COST))
        return reward, hit_target | hit_other

    def physics_step(self) -> None:
        pass

    def render(self, idx: np.ndarray) -> np.ndarray:
        """Images [k, 40, 40, 3] uint8 of the given agents."""
        k = len(idx)
        img = np.empty((k, IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
        img[:] = _FLOORS[self.target[idx]][:, None, None, :]
        for j, i in enumerate(idx.tolist()):
            for colour, (r, c) in zip(_COLOURS, self.goals[i]):
                _fill(img[j], r, c, colour)
            _fill(img[j], *self.agent[i], _AGENT)
        return img

    def observe(self, idx: np.ndarray) -> list:
        return [[encode_png(image) for image in self.render(idx)]]

    def action_mask(self, idx: np.ndarray) -> np.ndarray:
        rows, cols = self.agent[idx, 0], self.agent[idx, 1]
        mask = np.zeros((len(idx), 5), dtype=bool)
        mask[:, UP], mask[:, DOWN] = rows == 0, rows == GRID - 1
        mask[:, LEFT], mask[:, RIGHT] = cols == 0, cols == GRID - 1
        return mask


def _fill(image: np.ndarray, row: int, col: int, colour: np.ndarray) -> None:
    """Paints cell (row, col) but a 1-pixel rim, so neighbouring cells stay distinct."""
    top, left = row * CELL_PX, col * CELL_PX
    image[top + 1: top + CELL_PX - 1, left + 1: left + CELL_PX - 1] = colour


def oracle_action(model: GridWorldModel, i: int) -> int:
    """The scripted oracle: from agent i's true state, a move along a shortest path to the target
    goal that never steps onto the other goal (mean return about +0.95; checks solvability)."""
    target = tuple(model.goals[i, model.target[i]].tolist())
    other = tuple(model.goals[i, 1 - model.target[i]].tolist())
    dist = {target: 0}  # breadth-first distances to the target, around the other goal
    frontier = [target]
    while frontier:
        nxt = []
        for r, c in frontier:
            for dr, dc in _MOVES[1:]:
                cell = (r + dr, c + dc)
                if 0 <= cell[0] < GRID and 0 <= cell[1] < GRID and cell != other \
                        and cell not in dist:
                    dist[cell] = dist[(r, c)] + 1
                    nxt.append(cell)
        frontier = nxt
    here = model.agent[i]
    moves = [(dist.get(tuple(np.clip(here + _MOVES[a], 0, GRID - 1).tolist()), 99), a)
             for a in (UP, DOWN, LEFT, RIGHT)]
    return min(moves)[1]
