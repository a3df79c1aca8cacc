"""PushBlockCollab (and the base of DungeonEscape): Unity's cooperative scenes, one
SimpleMultiAgentGroup per area.

Both are grids: an agent occupies one cell and moves at most one cell per decision (at the
decision's academy step; the other steps of the DecisionPeriod 5 do nothing, Unity's
``TakeActionsBetweenDecisions`` being irrelevant on a grid). One branch of 7 actions as Unity's
agents: 0 nothing, 1 forward (+z), 2 back (-z), 3 right (+x), 4 left (-x), 5 strafe left (-x),
6 strafe right (+x) (no rotation: the grid has none). Every area is one group: the agents of
area a have ``group_id`` a + 1 (Unity's SimpleMultiAgentGroup ids start at 1, 0 = no group).
What a model offers the Academy for groups (``scenes/base.py``): ``group_id`` [n],
``group_reward`` [n] (AddGroupReward, drained when sent), ``asleep`` [n] (a disabled agent: no
decisions, no actions), and ``act`` returning (reward, ended, None, interrupted): EndGroupEpisode
ends every registered member, GroupEpisodeInterrupted ends them with max_step_reached.

**PushBlockCollab** (``PushBlockCollab?team=0``, 4 areas x 3 agents, MaxStep 0; Unity's
PushBlockEnvController MaxEnvironmentSteps 5000): an ``W`` x ``D`` room; the goal is the far row
(z = D - 1). Six blocks of Unity's GoalValues [2, 2, 1, 1, 3, 3]: a block of value v is v cells
wide (1 deep) and moves one cell only when at least v agents push it the same way in the same
decision, standing in the cells just behind it (so the 3-block needs the whole group lined up
behind it, and wide blocks cannot be pushed sideways). A block that reaches the goal row scores
AddGroupReward(v) and disappears; when all six are in: EndGroupEpisode. AddGroupReward(-0.5/5000)
per academy step (Unity's FixedUpdate), timeout: GroupEpisodeInterrupted. Sensors, Unity's in
Python's order: ``GridSensor-OneHot`` (6, 20, 20) PNG (cells of 1 around the agent, tags
[wall, agent, goal, blockSmall, blockLarge, blockVeryLarge]) and ``RBSensor`` (10: position 3,
rotation quaternion 4, velocity 3). The best return is 12 less the time penalty (Unity's
benchmark 11).

**DungeonEscape**: ``dungeon_escape.py``, on the same ``GroupAreas``.

Deviations from Unity: grids instead of PhysX, a 1-deep block row per value, no rotations,
rooms small enough that Unity's POCA configs learn them in minutes here; ``gravity`` is read
at every episode start (Unity's ProjectSettingsOverrides) and has no effect.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.options import OptionError
from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.sensor_kit import onehot_planes_png
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

DECISION_PERIOD = 5
MOVES = np.array([[0, 0], [0, 1], [0, -1], [1, 0], [-1, 0], [-1, 0], [1, 0]])
"""(dx, dz) of each action of the branch of 7."""
RB = ObsSpec("RBSensor", (10,), dimension_properties=(1,))
"""Unity's RigidBodySensorComponent "RBSensor" (both scenes)."""


class GroupAreas:
    """Areas of ``per_area`` agents, one SimpleMultiAgentGroup each (see the module doc)."""

    per_area = 3
    max_env_steps = 5000
    set_reward = False
    acts_between_decisions = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        if n % self.per_area:
            raise OptionError(f"--standin-agents: {type(self).__name__} has groups of "
                              f"{self.per_area}, so it needs a multiple of {self.per_area} agents, "
                              f"got {n}")
        self.rng, self.params = rng, params
        self.n, self.areas = n, n // self.per_area
        self.area = np.arange(n) // self.per_area
        self.group_id = (self.area + 1).astype(np.int64)
        self.group_reward = np.zeros(n, np.float32)
        self.asleep = np.zeros(n, bool)
        self.pos = np.zeros((n, 2), np.int64)
        self.velocity = np.zeros((n, 2), np.float32)
        self.area_steps = np.zeros(self.areas, np.int64)
        self.area_over = np.ones(self.areas, bool)
        """The area's group episode ended: the next ``reset`` of its agents resets it."""

    def members(self, a: int) -> np.ndarray:
        return np.arange(a * self.per_area, (a + 1) * self.per_area)

    def reset(self, idx: np.ndarray) -> None:
        for a in np.unique(self.area[idx]).tolist():
            members = self.members(a)
            if self.area_over[a] or np.isin(members, idx).all():
                self.params.sample("gravity", 14.715, 1)  # read as Unity; no effect on a grid
                self.area_over[a] = False
                self.area_steps[a] = 0
                self.asleep[members] = False
                self.velocity[members] = 0.0
                self.group_reward[members] = 0.0
                self.reset_area(a)

    def reset_area(self, a: int) -> None:
        raise NotImplementedError

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        ended = np.zeros(self.n, bool)
        interrupted = np.zeros(self.n, bool)
        action = np.zeros(self.n, np.int64)
        action[idx] = discrete[:, 0]
        for a in np.unique(self.area[idx]).tolist():
            members = self.members(a)
            awake = members[~self.asleep[members]]
            self.area_steps[a] += DECISION_PERIOD
            self.step_area(a, awake, action[awake], ended)
            if not ended[members].any() and self.area_steps[a] >= self.max_env_steps:
                ended[awake] = interrupted[awake] = True  # GroupEpisodeInterrupted
            if ended[awake].all() and len(awake):
                self.area_over[a] = True
        return np.zeros(len(idx), np.float32), ended[idx], None, interrupted[idx]

    def step_area(self, a: int, awake: np.ndarray, action: np.ndarray, ended: np.ndarray) -> None:
        raise NotImplementedError

    def end_group(self, a: int, ended: np.ndarray) -> None:
        """EndGroupEpisode: every registered (awake) member ends."""
        members = self.members(a)
        ended[members[~self.asleep[members]]] = True

    def add_group_reward(self, a: int, value: float) -> None:
        members = self.members(a)
        self.group_reward[members[~self.asleep[members]]] += value

    def physics_step(self) -> None:
        pass

    def action_mask(self, idx: np.ndarray):
        return None

    def rb_sensor(self, idx: np.ndarray, width: int, depth: int) -> np.ndarray:
        """RBSensor: local position (x, 0, z) scaled to [-1, 1], rotation (identity
        quaternion), velocity of the last move (cells per decision)."""
        out = np.zeros((len(idx), 10), np.float32)
        out[:, 0] = self.pos[idx, 0] / (width - 1) * 2 - 1
        out[:, 2] = self.pos[idx, 1] / (depth - 1) * 2 - 1
        out[:, 6] = 1.0
        out[:, 7] = self.velocity[idx, 0]
        out[:, 9] = self.velocity[idx, 1]
        return out


# ------------------------------------------------------------------------------------------------
# PushBlockCollab
# ------------------------------------------------------------------------------------------------

GRID = 20
BLOCK_VALUES = (2, 2, 1, 1, 3, 3)
"""Unity's PushBlockCollabAreaGrid GoalValues, in prefab order."""


class PushBlockCollabModel(GroupAreas):
    W, D = 7, 7
    spec = BehaviorSpecDef(
        obs=(ObsSpec("GridSensor-OneHot", (6, GRID, GRID), png=True,
                     dimension_properties=(1, 2, 2)), RB),
        branches=(7,),
    )

    def __init__(self, n, rng, params, opts=None):
        super().__init__(n, rng, params, opts)
        k = len(BLOCK_VALUES)
        self.values = np.array(BLOCK_VALUES)
        self.block = np.zeros((self.areas, k, 2), np.int64)
        """Left cell (x, z) of each block; a block covers x .. x + value - 1."""
        self.alive = np.zeros((self.areas, k), bool)

    def reset_area(self, a: int) -> None:
        occupied = np.zeros((self.W, self.D), bool)
        for b, v in enumerate(self.values.tolist()):
            while True:
                x, z = int(self.rng.integers(0, self.W - v + 1)), int(self.rng.integers(2, 5))
                if not occupied[x:x + v, z].any():
                    break
            occupied[x:x + v, z] = True
            self.block[a, b] = (x, z)
        self.alive[a] = True
        cells = self.rng.choice(self.W * 2, self.per_area, replace=False)
        self.pos[self.members(a)] = np.stack([cells % self.W, cells // self.W], 1)

    def _block_map(self, a: int) -> np.ndarray:
        """[W, D] index of the block in each cell, -1 where none."""
        m = -np.ones((self.W, self.D), np.int64)
        for b in np.flatnonzero(self.alive[a]).tolist():
            x, z = self.block[a, b]
            m[x:x + self.values[b], z] = b
        return m

    def step_area(self, a, awake, action, ended):
        self.add_group_reward(a, -0.5 / self.max_env_steps * DECISION_PERIOD)
        moves = MOVES[action]
        target = self.pos[awake] + moves
        blocks = self._block_map(a)
        inside = ((target >= 0) & (target < [self.W, self.D])).all(1)
        pushing: dict[tuple[int, int, int], int] = {}
        for i in np.flatnonzero(inside & moves.any(1)).tolist():
            b = blocks[target[i, 0], target[i, 1]]
            if b >= 0:
                key = (int(b), int(moves[i, 0]), int(moves[i, 1]))
                pushing[key] = pushing.get(key, 0) + 1
        for (b, dx, dz), count in pushing.items():
            if count < self.values[b]:
                continue
            x, z = self.block[a, b] + (dx, dz)
            v = self.values[b]
            if x < 0 or x + v > self.W or z < 0 or z >= self.D:
                continue
            cells = blocks[x:x + v, z]
            agents_there = [(px, pz) for px, pz in self.pos[awake].tolist()
                            if z == pz and x <= px < x + v]
            if ((cells >= 0) & (cells != b)).any() or agents_there:
                continue
            blocks[blocks == b] = -1
            self.block[a, b] = (x, z)
            if z == self.D - 1:  # in the goal: scored, gone
                self.alive[a, b] = False
                self.add_group_reward(a, float(v))
            else:
                blocks[x:x + v, z] = b
        taken = {tuple(p) for p in self.pos[awake].tolist()}
        for i, agent in enumerate(awake.tolist()):
            t = tuple(target[i].tolist())
            free = inside[i] and blocks[t] < 0 and t not in taken
            old = tuple(self.pos[agent].tolist())
            if free:
                taken.discard(old)
                taken.add(t)
                self.pos[agent] = t
            self.velocity[agent] = np.subtract(self.pos[agent], old)
        if not self.alive[a].any():
            self.end_group(a, ended)

    def grids(self, idx: np.ndarray) -> np.ndarray:
        """[k, 6, 20, 20] one-hot planes around each agent (row = z, column = x)."""
        out = np.zeros((len(idx), 6, GRID, GRID), np.uint8)
        half = GRID // 2
        for row, agent in enumerate(np.asarray(idx).tolist()):
            a = self.area[agent]
            ox, oz = self.pos[agent] - half  # world cell of grid (0, 0)
            g = out[row]
            xs, zs = np.arange(GRID) + ox, np.arange(GRID) + oz
            wall_x = (xs < 0) | (xs >= self.W)
            wall_z = (zs < 0) | (zs >= self.D)
            g[0] = wall_z[:, None] | wall_x[None, :]
            goal_row = self.D - 1 - oz
            if 0 <= goal_row < GRID:
                g[2, goal_row] = ~wall_x
            members = self.members(a)
            for m in members[~self.asleep[members]].tolist():
                cx, cz = self.pos[m] - (ox, oz)
                g[1, cz, cx] = 1
            for b in np.flatnonzero(self.alive[a]).tolist():
                v = self.values[b]
                x, z = self.block[a, b] - (ox, oz)
                g[2 + v, z, x:x + v] = 1
        return out

    def observe(self, idx: np.ndarray) -> list:
        return [[onehot_planes_png(g) for g in self.grids(idx)],
                self.rb_sensor(idx, self.W, self.D)]
