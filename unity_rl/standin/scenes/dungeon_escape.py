"""DungeonEscape: Unity's sacrifice scene on ``collab.GroupAreas`` (grids, one group per area;
the group protocol and the actions are described in ``collab.py``).

**DungeonEscape** (``DungeonEscape?team=0``, 12 areas x 3 agents, MaxStep 0;
MaxEnvironmentSteps 15000): an ``W`` x ``D`` room with a door (``lock``) in the middle of the far
wall and a ``portal`` in the middle of the near row. A dragon starts in the far row and walks one
cell toward the portal every ``DRAGON_EVERY`` decisions; when it reaches the portal:
EndGroupEpisode, no reward. An agent that walks into the dragon kills it and dies itself
(disabled: a terminal, then asleep until the group's episode ends; it is no longer a member, so
it gets no group reward): the dragon drops a ``key``. An agent that walks onto the key carries it
(its ``VectorSensor_size1`` reads 1); the carrier walking into the door: AddGroupReward(1) and
EndGroupEpisode. An agent walking into the portal dies as well (the group ends when none is
left). Timeout: GroupEpisodeInterrupted. Sensors in Python's order: ``RBSensor`` (10),
``StackingSensor_size3_RayPerceptionSensor`` (360: 7 rays per direction over 60 degrees from the
agent's heading, the direction of its last move; tags [wall, agent, dragon, key, lock, portal],
length 20, 3 stacks) and ``VectorSensor_size1`` (has the key). The best group return is 1.

Deviations from Unity: a grid instead of PhysX, no rotation (the heading is the direction of the
last move), a room small enough that Unity's POCA config learns it in minutes here; ``gravity`` is
read at every episode start and has no effect.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.collab import MOVES, RB, GroupAreas
from unity_rl.standin.scenes.sensor_kit import cast_rays, ray_angles
from unity_rl.standin.scenes.stacking import VectorStack, stacked_name
from unity_rl.standin.wire import ObsSpec

DRAGON_EVERY = 3
"""Decisions per dragon move."""
RAY_ANGLES = ray_angles(7, 60.0)
TAGS = 6  # wall, agent, dragon, key, lock, portal
RAY_LENGTH = 20.0
_WALL, _AGENT, _DRAGON, _KEY, _LOCK, _PORTAL = range(TAGS)


class DungeonEscapeModel(GroupAreas):
    W, D = 5, 6
    max_env_steps = 15000
    spec = BehaviorSpecDef(
        obs=(RB,
             ObsSpec(stacked_name(3, "RayPerceptionSensor"), (3 * len(RAY_ANGLES) * (TAGS + 2),),
                     dimension_properties=(1,)),
             ObsSpec("VectorSensor_size1", (1,), dimension_properties=(1,))),
        branches=(7,),
    )

    def __init__(self, n, rng, params, opts=None):
        super().__init__(n, rng, params, opts)
        self.heading = np.zeros((n, 2), np.float32)
        self.dragon = np.zeros((self.areas, 2), np.int64)
        self.dragon_alive = np.zeros(self.areas, bool)
        self.key = np.zeros((self.areas, 2), np.int64)
        self.key_down = np.zeros(self.areas, bool)
        self.has_key = np.zeros(n, bool)
        self.decisions = np.zeros(self.areas, np.int64)
        self.door = np.array([self.W // 2, self.D])      # in the far wall
        self.portal = np.array([self.W // 2, 0])
        self.stack = VectorStack(n, len(RAY_ANGLES) * (TAGS + 2), 3)

    def reset_area(self, a: int) -> None:
        members = self.members(a)
        self.dragon[a] = (int(self.rng.integers(0, self.W)), self.D - 1)
        self.dragon_alive[a], self.key_down[a] = True, False
        self.has_key[members] = False
        self.decisions[a] = 0
        cells = self.rng.choice(self.W * 2, self.per_area, replace=False)
        self.pos[members] = np.stack([cells % self.W, 1 + cells // self.W], 1)
        self.heading[members] = (0.0, 1.0)
        self.stack.clear(members)

    def _die(self, agent: int, ended: np.ndarray) -> None:
        ended[agent] = True
        self.asleep[agent] = True  # disabled and unregistered: out of the group's episode
        self.has_key[agent] = False

    def step_area(self, a, awake, action, ended):
        self.decisions[a] += 1
        for agent, act in zip(awake.tolist(), action.tolist()):
            if self.asleep[agent]:
                continue
            move = MOVES[act]
            if move.any():
                self.heading[agent] = move
            t = self.pos[agent] + move
            if self.has_key[agent] and (t == self.door).all():  # UnlockDoor
                self.add_group_reward(a, 1.0)
                self.end_group(a, ended)
                return
            if not (0 <= t[0] < self.W and 0 <= t[1] < self.D):
                continue
            others = [m for m in self.members(a).tolist() if m != agent and not self.asleep[m]]
            if any((self.pos[m] == t).all() for m in others):
                continue
            self.velocity[agent] = move
            self.pos[agent] = t
            if self.dragon_alive[a] and (t == self.dragon[a]).all():  # KilledByBaddie
                self.dragon_alive[a], self.key_down[a] = False, True
                self.key[a] = t
                self._die(agent, ended)
            elif (t == self.portal).all():  # TouchedHazard
                self._die(agent, ended)
            elif self.key_down[a] and (t == self.key[a]).all():
                self.key_down[a], self.has_key[agent] = False, True
        members = self.members(a)
        if self.asleep[members].all():  # nobody left: the group's episode ends
            return
        if self.dragon_alive[a] and self.decisions[a] % DRAGON_EVERY == 0:
            step = np.sign(self.portal - self.dragon[a])
            self.dragon[a] += (step[0], 0) if step[0] else (0, step[1])
            if (self.dragon[a] == self.portal).all():  # BaddieTouchedBlock
                self.end_group(a, ended)

    def observe(self, idx: np.ndarray) -> list:
        idx = np.asarray(idx)
        k = len(idx)
        start = np.zeros((k, len(RAY_ANGLES), 3))
        start[:, :, 0] = self.pos[idx, 0, None] + 0.5
        start[:, :, 1] = 0.5
        start[:, :, 2] = self.pos[idx, 1, None] + 0.5
        fwd = self.heading[idx]
        right = np.stack([fwd[:, 1], -fwd[:, 0]], 1)
        ang = np.deg2rad(RAY_ANGLES)[None, :, None]
        direction = np.cos(ang) * right[:, None] + np.sin(ang) * fwd[:, None]
        end = start.copy()
        end[:, :, 0] += direction[..., 0] * RAY_LENGTH
        end[:, :, 2] += direction[..., 1] * RAY_LENGTH
        boxes, tags = self._boxes(idx)
        rays = cast_rays(start, end, boxes, tags, TAGS)
        return [self.rb_sensor(idx, self.W, self.D), self.stack.push(idx, rays),
                self.has_key[idx].astype(np.float32)[:, None]]

    def _boxes(self, idx: np.ndarray):
        """Per observing agent: walls, its groupmates, dragon, key, door, portal (absent boxes
        have xmin > xmax)."""
        w, d = self.W, self.D
        absent = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
        rows = []
        for agent in idx.tolist():
            a = self.area[agent]
            b = [[-1, 0, -1, 0, 1, d + 1], [w, 0, -1, w + 1, 1, d + 1],
                 [-1, 0, -1, w + 1, 1, 0], [-1, 0, d, w + 1, 1, d + 1]]
            for m in self.members(a).tolist():
                if m == agent or self.asleep[m]:
                    b.append(absent)
                else:
                    x, z = self.pos[m]
                    b.append([x + 0.1, 0, z + 0.1, x + 0.9, 1, z + 0.9])
            x, z = self.dragon[a]
            b.append([x, 0, z, x + 1, 1, z + 1] if self.dragon_alive[a] else absent)
            x, z = self.key[a]
            b.append([x + 0.3, 0, z + 0.3, x + 0.7, 1, z + 0.7] if self.key_down[a] else absent)
            x, z = self.door
            b.append([x, 0, z - 0.01, x + 1, 1, z + 0.2])  # the lock, in front of the far wall
            x, z = self.portal
            b.append([x, 0, z, x + 1, 0.6, z + 1])
            rows.append(b)
        tags = np.array([_WALL] * 4 + [_AGENT] * self.per_area + [_DRAGON, _KEY, _LOCK, _PORTAL])
        return np.asarray(rows, float), tags
