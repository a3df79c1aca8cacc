"""GridFoodCollector and VisualFoodCollector: Unity's FoodCollector scenes, with shared areas.

Interfaces as Unity's release 20/21 scenes (EXAMPLES.md):

* **GridFoodCollector** (``FoodCollector.unity``; Unity's ``config/ppo/FoodCollector.yaml``
  names this behavior): 4 areas x 5 agents = 20 agents, behavior ``GridFoodCollector?team=0``.
  One observation, ``GridSensor-OneHot`` (5, 40, 40): a 40x40 grid of 1-unit cells centred on
  the agent and turning with it (row 0 = farthest ahead, column 0 = leftmost), one-hot over
  the tags food, agent, wall, badFood, frozenAgent (channels 0..4). Sent as Unity's grid
  sensor sends it: PNG, two 3-channel PNGs concatenated (channels 0-2, then 3-4 and a zero
  channel), no channel mapping, so mlagents-envs keeps the first 5 channels; values 0 or 1.
* **VisualFoodCollector** (``VisualFoodCollector.unity``): 2 areas x 4 agents = 8 agents,
  behavior ``VisualFoodCollector?team=0``. Observations ``CameraSensor`` (3, 84, 84) RGB PNG
  and ``VectorSensor_size1`` (1,): 1.0 while the agent is frozen. The camera here is a cheap
  egocentric top-down drawing (21x21 units around the agent, 4 pixels per unit, turning with
  it: food green, bad food red, other agents blue, frozen ones white, walls grey, the agent
  itself yellow at the centre), not Unity's first-person view.

Both: actions 3 continuous (forward, sideways, rotate) + one branch of 2 (laser off / on), no
masks; DecisionPeriod 5 with actions repeated between decisions; MaxStep 5000; episodes end only
at MaxStep. Environment parameters ``laser_length`` (1.0) and ``agent_scale`` (1.0), read at
each episode start.

Dynamics (ours, in the spirit of Unity's; not PhysX): each area is a flat 24x24 square with
10 food and 10 bad food items. An agent moves up to 0.15 per academy step forward and sideways
in its own frame and turns up to 6 degrees per step; firing the laser halves its movement.
Touching an item (within 1.0 x ``agent_scale``) gives +1 for food, -1 for bad food, and the
item reappears at a random place of the area (Unity's respawnFood). The laser freezes the
nearest other agent of the area that is ahead within 10 x ``laser_length`` and within 2 to
the side (Unity: a sphere cast of radius 2) for 200 academy steps (4 s): a frozen agent
neither moves, eats nor fires, and shows with the frozenAgent tag. An area's items are
scattered anew when all its agents start an episode together (a RESET, or MaxStep ends
everyone's episode at once). Deviations: no physics (no pushing, no inertia); Unity's
laser_length only scales the drawn laser, here it scales the reach.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.visual_ball import encode_png
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

HALF = 12.0
N_FOOD, N_BAD = 10, 10
SPEED = 0.15
TURN = np.deg2rad(6.0)
EAT_RADIUS = 1.0
LASER_REACH = 10.0
LASER_WIDTH = 2.0
FREEZE_STEPS = 200
GRID = 40
FOOD, AGENT, WALL, BAD, FROZEN = range(5)
"""Grid sensor channels (Unity's tag order: food, agent, wall, badFood, frozenAgent)."""


def _cell_offsets(cells: int, size: float) -> tuple[np.ndarray, np.ndarray]:
    """(right, forward) local offsets of the centres of a cells x cells grid of ``size`` units
    per cell, centred on the agent; row 0 is the farthest ahead."""
    centres = (np.arange(cells) + 0.5 - cells / 2) * size
    right = np.broadcast_to(centres[None, :], (cells, cells))
    forward = np.broadcast_to(-centres[:, None], (cells, cells))
    return right.ravel(), forward.ravel()


class FoodAreasModel:
    """Agents in shared areas with food and bad food; subclasses choose the observations."""

    PER_AREA = 5
    spec: BehaviorSpecDef
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.n, self.rng, self.params = n, rng, params
        self.area = np.arange(n) // self.PER_AREA
        self.n_areas = int(self.area.max()) + 1
        self.pos = np.zeros((n, 2))
        self.heading = np.zeros(n)
        self.frozen = np.zeros(n, np.int64)
        """Academy steps left frozen."""
        self.scale = np.ones(n)
        self.laser_length = np.ones(n)
        self.items = np.zeros((self.n_areas, N_FOOD + N_BAD, 2))
        """[area, item, (x, z)]: items 0..N_FOOD-1 are food, the rest bad food."""
        self.good = np.arange(N_FOOD + N_BAD) < N_FOOD
        for a in range(self.n_areas):
            self.items[a] = self._spots(N_FOOD + N_BAD)

    def _spots(self, k: int) -> np.ndarray:
        return self.rng.uniform(-HALF + 1, HALF - 1, (k, 2))

    # -- Unity callbacks ---------------------------------------------------------------------

    def reset(self, idx: np.ndarray) -> None:
        idx = np.asarray(idx)
        k = len(idx)
        if k == 0:
            return
        self.pos[idx] = self._spots(k)
        self.heading[idx] = self.rng.uniform(-np.pi, np.pi, k)
        self.frozen[idx] = 0
        self.scale[idx] = self.params.sample("agent_scale", 1.0, k)
        self.laser_length[idx] = self.params.sample("laser_length", 1.0, k)
        resetting = np.zeros(self.n, bool)
        resetting[idx] = True
        for a in np.unique(self.area[idx]).tolist():
            if resetting[self.area == a].all():
                self.items[a] = self._spots(N_FOOD + N_BAD)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        idx = np.asarray(idx)
        c = np.clip(continuous, -1.0, 1.0)
        moving = self.frozen[idx] == 0
        shoot = moving & (discrete[:, 0] == 1)
        heading = self.heading[idx] + TURN * c[:, 2] * moving
        self.heading[idx] = heading
        fwd = np.stack([np.sin(heading), np.cos(heading)], axis=1)  # x, z
        right = np.stack([np.cos(heading), -np.sin(heading)], axis=1)
        speed = SPEED * moving * np.where(shoot, 0.5, 1.0)
        move = speed[:, None] * (c[:, :1] * fwd + c[:, 1:2] * right)
        self.pos[idx] = np.clip(self.pos[idx] + move, -HALF, HALF)
        reward = np.zeros(len(idx))
        for j, i in enumerate(idx.tolist()):
            if not moving[j]:
                continue
            a = self.area[i]
            near = np.linalg.norm(self.items[a] - self.pos[i], axis=1) < EAT_RADIUS * self.scale[i]
            if near.any():
                reward[j] = float(np.sum(np.where(self.good[near], 1.0, -1.0)))
                self.items[a, near] = self._spots(int(near.sum()))
        for j in np.flatnonzero(shoot).tolist():
            self._fire(int(idx[j]))
        self.frozen[idx] = np.maximum(self.frozen[idx] - 1, 0)
        return reward, np.zeros(len(idx), bool)

    def _fire(self, i: int) -> None:
        others = np.flatnonzero((self.area == self.area[i]) & (np.arange(self.n) != i))
        if not len(others):
            return
        d = self.pos[others] - self.pos[i]
        h = self.heading[i]
        ahead = d[:, 0] * np.sin(h) + d[:, 1] * np.cos(h)
        side = d[:, 0] * np.cos(h) - d[:, 1] * np.sin(h)
        hit = (ahead > 0) & (ahead <= LASER_REACH * self.laser_length[i]) \
            & (np.abs(side) <= LASER_WIDTH)
        if hit.any():
            target = others[hit][np.argmin(ahead[hit])]
            self.frozen[target] = FREEZE_STEPS + 1  # this step's countdown included

    def physics_step(self) -> None:
        pass

    def action_mask(self, idx: np.ndarray) -> None:
        return None

    # -- egocentric rasterisation --------------------------------------------------------------

    def _local_cells(self, i: int, points: np.ndarray, cells: int, size: float):
        """Flat cell indices (row * cells + col) of ``points`` in agent i's egocentric grid,
        and which points fall inside it."""
        d = points - self.pos[i]
        h = self.heading[i]
        right = d[:, 0] * np.cos(h) - d[:, 1] * np.sin(h)
        forward = d[:, 0] * np.sin(h) + d[:, 1] * np.cos(h)
        col = np.floor(right / size + cells / 2).astype(np.int64)
        row = np.floor(cells / 2 - forward / size).astype(np.int64)
        inside = (col >= 0) & (col < cells) & (row >= 0) & (row < cells)
        return row * cells + col, inside

    def _walls(self, i: int, offsets) -> np.ndarray:
        """Cells of agent i's grid whose centre is outside the area: [cells * cells] bool."""
        right, forward = offsets
        h = self.heading[i]
        x = self.pos[i, 0] + right * np.cos(h) + forward * np.sin(h)
        z = self.pos[i, 1] - right * np.sin(h) + forward * np.cos(h)
        return (np.abs(x) > HALF) | (np.abs(z) > HALF)

    def tag_grid(self, i: int, cells: int, size: float, offsets) -> np.ndarray:
        """[5, cells * cells] one-hot tags (food, agent, wall, badFood, frozenAgent) of agent i."""
        grid = np.zeros((5, cells * cells), np.uint8)
        grid[WALL] = self._walls(i, offsets)
        a = self.area[i]
        flat, inside = self._local_cells(i, self.items[a], cells, size)
        grid[FOOD, flat[inside & self.good]] = 1
        grid[BAD, flat[inside & ~self.good]] = 1
        others = np.flatnonzero((self.area == a) & (np.arange(self.n) != i))
        flat, inside = self._local_cells(i, self.pos[others], cells, size)
        frozen = self.frozen[others] > 0
        grid[AGENT, flat[inside & ~frozen]] = 1
        grid[FROZEN, flat[inside & frozen]] = 1
        return grid


class GridFoodCollectorModel(FoodAreasModel):
    """Unity's GridFoodCollector: ``GridSensor-OneHot`` (5, 40, 40), PNG."""

    PER_AREA = 5
    spec = BehaviorSpecDef(
        obs=(ObsSpec("GridSensor-OneHot", (5, GRID, GRID), png=True,
                     dimension_properties=(1, 2, 2)),),
        continuous=3,
        branches=(2,),
    )
    _OFFSETS = _cell_offsets(GRID, 1.0)

    def grids(self, idx: np.ndarray) -> np.ndarray:
        """[k, 5, 40, 40] uint8 one-hot grids (what Python decodes, times 255)."""
        return np.stack([self.tag_grid(i, GRID, 1.0, self._OFFSETS)
                         for i in np.asarray(idx).tolist()]).reshape(-1, 5, GRID, GRID)

    def observe(self, idx: np.ndarray) -> list:
        pngs = []
        for grid in self.grids(idx):
            rgb = np.zeros((6, GRID, GRID), np.uint8)
            rgb[:5] = grid * 255
            pngs.append(encode_png(np.ascontiguousarray(rgb[:3].transpose(1, 2, 0)))
                        + encode_png(np.ascontiguousarray(rgb[3:].transpose(1, 2, 0))))
        return [pngs]


VIEW_CELLS, VIEW_PX = 21, 4
"""VisualFoodCollector's camera: 21 x 21 units around the agent, 4 pixels per unit = 84."""
_VIEW_COLOURS = np.array([
    [40, 200, 60],    # food
    [60, 110, 255],   # agent
    [110, 110, 110],  # wall
    [220, 40, 40],    # bad food
    [240, 240, 240],  # frozen agent
], np.uint8)
_VIEW_FLOOR = np.array([35, 45, 35], np.uint8)
_VIEW_SELF = np.array([250, 210, 40], np.uint8)


class VisualFoodCollectorModel(FoodAreasModel):
    """Unity's VisualFoodCollector: ``CameraSensor`` (3, 84, 84) PNG + the frozen flag."""

    PER_AREA = 4
    spec = BehaviorSpecDef(
        obs=(ObsSpec("CameraSensor", (3, 84, 84), png=True, dimension_properties=(1, 2, 2)),
             ObsSpec("VectorSensor_size1", (1,), dimension_properties=(1,))),
        continuous=3,
        branches=(2,),
    )
    _OFFSETS = _cell_offsets(VIEW_CELLS, 1.0)

    def render(self, idx: np.ndarray) -> np.ndarray:
        """[k, 84, 84, 3] uint8 egocentric views."""
        out = []
        centre = VIEW_CELLS // 2
        for i in np.asarray(idx).tolist():
            tags = self.tag_grid(i, VIEW_CELLS, 1.0, self._OFFSETS)
            img = np.broadcast_to(_VIEW_FLOOR, (VIEW_CELLS * VIEW_CELLS, 3)).copy()
            for tag in (WALL, FOOD, BAD, AGENT, FROZEN):
                img[tags[tag] == 1] = _VIEW_COLOURS[tag]
            img = img.reshape(VIEW_CELLS, VIEW_CELLS, 3)
            img[centre, centre] = _VIEW_SELF
            out.append(np.repeat(np.repeat(img, VIEW_PX, axis=0), VIEW_PX, axis=1))
        return np.stack(out)

    def observe(self, idx: np.ndarray) -> list:
        images = [encode_png(image) for image in self.render(idx)]
        frozen = (self.frozen[np.asarray(idx)] > 0).astype(np.float32)[:, None]
        return [images, frozen]
