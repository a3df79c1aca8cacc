"""PushBlock and WallJump: Unity's block-pushing scenes, kinematic and seen through ray sensors.

Not PhysX: an agent is a disc of radius 0.5 that moves by fixed amounts per academy step
(dt 0.02 s; actions repeat between decisions, DecisionPeriod 5); a block is an axis-aligned box
that moves only when the agent walks into it (pushed out along the contact normal, by the
overlap). Observations are Unity's ray-perception sensors (``sensor_kit.cast_rays``: 3 rays per
direction over 90 degrees, 7 rays, (tags + 2) floats each) cast against the scene's boxes, and
stacked as Unity's StackingSensor; the agent's heading is random at every episode start (Unity's
PushBlock rotates its whole area by a multiple of 90 degrees; only the rays show where things
are).

**PushBlock** (``PushBlock?team=0``, 32 agents): a 12 x 12 walled arena (walls 1 high), the goal
zone (a trigger volume 1 high) along the far 2.5 of it, a block of footprint ``block_scale``
(default 2, read at every episode start) and height 2.5. Actions: one branch of 7 (0 nothing,
1 forward, 2 backward, 3 turn right, 4 turn left, 5 strafe left, 6 strafe right: 0.1, 0.1,
4 degrees, 0.075 per step). Rewards as Unity's PushAgentBasic: -1/MaxStep (-0.0002) per
academy step; the block's centre in the goal zone: +5 and end. Sensors, in Python's order:
``StackingSensor_size3_OffsetRayPerceptionSensor`` (rays 1.5 higher, over the walls and the goal
zone: they see only the block) and ``StackingSensor_size3_RayPerceptionSensor``; tags
[block, goal, wall], ray length 12; 105 floats each. MaxStep 5000. ``dynamic_friction``,
``static_friction`` and ``block_drag`` are read and have no effect (a kinematic block).

**WallJump** (``SmallWallJump?team=0`` and ``BigWallJump?team=0``, 24 agents): a 10 x 18 platform
with open edges, a wall across its middle, the goal (a 2-wide trigger 1 high) at a random place
on the far side, a block (2 x 2, 3.5 high) on the agent's side. At every episode start the agent
draws Unity's configuration: 1 in 5 no wall (``no_wall_height``, 0) and 1 in 5 a small wall
(``small_wall_height``, 4) as **SmallWallJump**, 3 in 5 a big wall (``big_wall_height``, 8) as
**BigWallJump** — the agent switches behavior as Unity's SetModel does (same agent id; its
terminal info goes to the old behavior, its new episode to the new one). A jump rises 5 (gravity
``gravity``, default 26.98 = 2.75 g; the jump speed keeps the height 5 at that gravity), so a
small wall is jumped from the floor and a big wall only from the top of the block, pushed
against the wall. Actions: branches [3, 3, 3, 2] (forward/back, turn right/left, strafe
right/left, jump), 0.1 per step, 6 degrees per step. Rewards (Unity's WallJumpAgent):
-0.0005 per academy step; reaching the goal: +1 (SetReward) and end; the agent or the block off
the platform: -1 (SetReward) and end. Sensors: ``StackingSensor_size6_OffsetRayPerceptionSensor``
(rays from 2.5 above the agent's centre rising to 5 above at their end: a wall shows in them only
if it is high), ``StackingSensor_size6_RayPerceptionSensor`` (tags [wall, goal, block], ray length
20, 210 floats each) and ``StackingSensor_size6_VectorSensor_size4`` (agent position / 20 and
grounded, 24 floats). MaxStep 2000.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.sensor_kit import cast_rays, ray_angles, ray_directions
from unity_rl.standin.scenes.stacking import VectorStack, stacked_name
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

RADIUS = 0.5
ANGLES = ray_angles(3, 90.0)
_VEC = (1,)


def _ray_spec(name: str, stacks: int, tags: int) -> ObsSpec:
    size = stacks * len(ANGLES) * (tags + 2)
    return ObsSpec(stacked_name(stacks, name), (size,), dimension_properties=_VEC)


def push_out(agent: np.ndarray, box_lo: np.ndarray, box_hi: np.ndarray):
    """Overlap of discs (centres [k, 2]) with boxes (footprints [k, 2] lo / hi): the normal from
    the box to the disc [k, 2] and the penetration depth [k] (0 where they do not touch)."""
    closest = np.clip(agent, box_lo, box_hi)
    d = agent - closest
    dist = np.linalg.norm(d, axis=1)
    inside = dist < 1e-9
    normal = np.where(inside[:, None], 0.0, d / np.maximum(dist, 1e-9)[:, None])
    depth = np.where(inside, 0.0, np.maximum(RADIUS - dist, 0.0))
    if inside.any():  # centre inside the box: out through the nearest face
        a = agent[inside]
        gaps = np.stack([a[:, 0] - box_lo[inside, 0], box_hi[inside, 0] - a[:, 0],
                         a[:, 1] - box_lo[inside, 1], box_hi[inside, 1] - a[:, 1]], 1)
        face = gaps.argmin(1)
        n = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]], float)[face]
        normal[inside] = n
        depth[inside] = gaps[np.arange(len(face)), face] + RADIUS
    return normal, depth


def _move(heading: np.ndarray, forward: np.ndarray, side: np.ndarray) -> np.ndarray:
    """World (x, z) displacement for moves along the agent's forward and right axes."""
    fwd = np.stack([np.sin(heading), np.cos(heading)], 1)
    right = np.stack([np.cos(heading), -np.sin(heading)], 1)
    return forward[:, None] * fwd + side[:, None] * right


def _box(x0, y0, z0, x1, y1, z1) -> np.ndarray:
    return np.stack(np.broadcast_arrays(x0, y0, z0, x1, y1, z1), -1).astype(float)


class PushBlockModel:
    HALF = 6.0
    GOAL_Z = 3.5
    BLOCK_HEIGHT = 2.5
    RAY_LENGTH = 12.0
    STEP_PENALTY = 1.0 / 5000
    spec = BehaviorSpecDef(
        obs=(_ray_spec("OffsetRayPerceptionSensor", 3, 3), _ray_spec("RayPerceptionSensor", 3, 3)),
        branches=(7,),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng, self.params = rng, params
        self.pos, self.heading = np.zeros((n, 2)), np.zeros(n)
        self.block, self.block_half = np.zeros((n, 2)), np.ones(n)
        self.stacks = [VectorStack(n, 35, 3), VectorStack(n, 35, 3)]

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        scale = np.clip(self.params.sample("block_scale", 2.0, k), 0.5, 4.0)
        for name, default in (("dynamic_friction", 0.0), ("static_friction", 0.0),
                              ("block_drag", 0.5)):
            self.params.sample(name, default, k)  # read as Unity does; no kinematic effect
        self.block_half[idx] = scale / 2
        h = self.HALF - 1.0
        self.block[idx] = np.stack([self.rng.uniform(-h + 1, h - 1, k),
                                    self.rng.uniform(-3.0, 1.0, k)], 1)
        todo = idx
        while len(todo):
            self.pos[todo] = np.stack([self.rng.uniform(-h, h, len(todo)),
                                       self.rng.uniform(-h, 0.0, len(todo))], 1)
            gap = np.abs(self.pos[todo] - self.block[todo]).max(1)
            todo = todo[gap < self.block_half[todo] + RADIUS + 0.5]
        self.heading[idx] = self.rng.uniform(-np.pi, np.pi, k)
        for s in self.stacks:
            s.clear(idx)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        a = discrete[:, 0]
        self.heading[idx] += np.deg2rad(4.0) * ((a == 3).astype(float) - (a == 4))
        forward = 0.1 * ((a == 1).astype(float) - (a == 2))
        side = 0.075 * ((a == 6).astype(float) - (a == 5))
        lim = self.HALF - RADIUS
        pos = np.clip(self.pos[idx] + _move(self.heading[idx], forward, side), -lim, lim)
        block, half = self.block[idx], self.block_half[idx][:, None]
        normal, depth = push_out(pos, block - half, block + half)
        blim = self.HALF - half
        block = np.clip(block - normal * depth[:, None], -blim, blim)
        normal, depth = push_out(pos, block - half, block + half)  # block stuck at a wall
        self.pos[idx] = np.clip(pos + normal * depth[:, None], -lim, lim)
        self.block[idx] = block
        scored = block[:, 1] > self.GOAL_Z
        return np.where(scored, 5.0, 0.0) - self.STEP_PENALTY, scored

    def physics_step(self) -> None:
        pass

    def boxes(self, idx: np.ndarray) -> np.ndarray:
        k, h, w = len(idx), self.HALF, 0.5
        b, s = self.block[idx], self.block_half[idx]
        return np.stack([
            _box(b[:, 0] - s, 0.0, b[:, 1] - s, b[:, 0] + s, self.BLOCK_HEIGHT, b[:, 1] + s),
            _box(np.full(k, -h), 0.0, self.GOAL_Z, h, 1.0, h),  # goal zone (a trigger volume)
            _box(np.full(k, -h - w), 0.0, -h - w, -h, 1.0, h + w),  # walls
            _box(np.full(k, h), 0.0, -h - w, h + w, 1.0, h + w),
            _box(np.full(k, -h - w), 0.0, -h - w, h + w, 1.0, -h),
            _box(np.full(k, -h - w), 0.0, h, h + w, 1.0, h + w),
        ], 1)

    def observe(self, idx: np.ndarray) -> list:
        boxes, tags = self.boxes(idx), np.array([0, 1, 2, 2, 2, 2])
        dirs = ray_directions(self.heading[idx], ANGLES)  # [k, 7, 2]
        out = []
        for height, stack in ((2.0, self.stacks[0]), (0.5, self.stacks[1])):
            start = np.stack([self.pos[idx, 0], np.full(len(idx), height), self.pos[idx, 1]], 1)
            start = np.repeat(start[:, None], len(ANGLES), 1)
            end = start + self.RAY_LENGTH * np.insert(dirs, 1, 0.0, axis=2)
            out.append(stack.push(idx, cast_rays(start, end, boxes, tags, 3)))
        return out

    def action_mask(self, idx: np.ndarray) -> None:
        return None


class WallJumpModel:
    HALF_X, HALF_Z = 5.0, 9.0
    WALL_HALF = 0.5
    BLOCK_HALF, BLOCK_HEIGHT = 1.0, 3.5
    JUMP_HEIGHT = 5.0
    RAY_LENGTH = 20.0
    DT = 0.02
    spec = BehaviorSpecDef(
        obs=(_ray_spec("OffsetRayPerceptionSensor", 6, 3), _ray_spec("RayPerceptionSensor", 6, 3),
             ObsSpec("StackingSensor_size6_VectorSensor_size4", (24,),
                     dimension_properties=_VEC)),
        branches=(3, 3, 3, 2),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng, self.params = rng, params
        self.pos, self.y, self.vy = np.zeros((n, 2)), np.zeros(n), np.zeros(n)
        self.heading = np.zeros(n)
        self.block, self.goal = np.zeros((n, 2)), np.zeros((n, 2))
        self.wall = np.zeros(n)
        self.big = np.zeros(n, bool)
        self.gravity = np.full(n, 26.98)
        self.stacks = [VectorStack(n, 35, 6), VectorStack(n, 35, 6), VectorStack(n, 4, 6)]

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        config = self.rng.integers(0, 5, k)  # Unity: Random.Range(0, 5)
        heights = [self.params.sample(name, default, k) for name, default in
                   (("no_wall_height", 0.0), ("small_wall_height", 4.0),
                    ("big_wall_height", 8.0))]
        self.wall[idx] = np.choose(np.minimum(config, 2), heights)
        self.big[idx] = config >= 2
        self.gravity[idx] = np.maximum(self.params.sample("gravity", 26.98, k), 1.0)
        self.pos[idx] = np.stack([self.rng.uniform(-4, 4, k), self.rng.uniform(-8, -5, k)], 1)
        self.block[idx] = np.stack([self.rng.uniform(-3.5, 3.5, k),
                                    self.rng.uniform(-4.0, -2.0, k)], 1)
        self.goal[idx] = np.stack([self.rng.uniform(-4, 4, k), np.full(k, 7.0)], 1)
        self.y[idx] = 0.0
        self.vy[idx] = 0.0
        self.heading[idx] = self.rng.uniform(-np.pi, np.pi, k)
        for s in self.stacks:
            s.clear(idx)

    def behavior_of(self, idx: np.ndarray) -> np.ndarray:
        """0: SmallWallJump (no wall or a small one), 1: BigWallJump."""
        return self.big[idx].astype(np.int64)

    def _ground(self, pos, y, block, wall):
        """Height of what is under each agent: platform 0, block top, wall top."""
        on_block = (np.abs(pos - block) <= self.BLOCK_HALF).all(1) \
            & (y >= self.BLOCK_HEIGHT - 0.3)
        on_wall = (np.abs(pos[:, 1]) <= self.WALL_HALF) & (y >= wall - 0.3) & (wall > 0)
        return np.maximum(np.where(on_block, self.BLOCK_HEIGHT, 0.0),
                          np.where(on_wall, wall, 0.0))

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        fwd_a, rot_a, side_a, jump_a = discrete.T
        heading = self.heading[idx] + np.deg2rad(6.0) * ((rot_a == 1).astype(float) - (rot_a == 2))
        self.heading[idx] = heading
        forward = 0.1 * ((fwd_a == 1).astype(float) - (fwd_a == 2))
        side = 0.1 * ((side_a == 1).astype(float) - (side_a == 2))
        old = self.pos[idx]
        pos = old + _move(heading, forward, side)
        y, vy, wall, block = self.y[idx], self.vy[idx], self.wall[idx], self.block[idx]
        # the wall stops an agent whose feet are below its top
        hits_wall = (np.abs(pos[:, 1]) < self.WALL_HALF + RADIUS) & (y < wall - 1e-6)
        side_sign = np.where(old[:, 1] < 0, -1.0, 1.0)
        pos[:, 1] = np.where(hits_wall, side_sign * (self.WALL_HALF + RADIUS), pos[:, 1])
        # the block: pushed by an agent on the floor, climbed from above
        low = y < self.BLOCK_HEIGHT - 0.3
        h = np.full((len(idx), 2), self.BLOCK_HALF)
        normal, depth = push_out(pos, block - h, block + h)
        depth = np.where(low, depth, 0.0)
        new_block = block - normal * depth[:, None]
        near_wall = np.abs(new_block[:, 1]) < self.WALL_HALF + self.BLOCK_HALF
        blocked = near_wall & (wall > 0)
        new_block[:, 1] = np.where(blocked, np.sign(block[:, 1]) * (
            self.WALL_HALF + self.BLOCK_HALF), new_block[:, 1])
        normal, depth = push_out(pos, new_block - h, new_block + h)
        pos += normal * np.where(low, depth, 0.0)[:, None]
        self.block[idx] = new_block
        # vertical motion: jump from whatever the agent stands on
        ground = self._ground(pos, y, new_block, wall)
        grounded = y <= ground + 1e-6
        g = self.gravity[idx]
        vy = np.where(grounded & (jump_a == 1), np.sqrt(2 * g * self.JUMP_HEIGHT),
                      np.where(grounded, 0.0, vy - g * self.DT))
        y = np.maximum(y + vy * self.DT, ground)
        vy = np.where(y <= ground, np.maximum(vy, 0.0), vy)
        self.pos[idx], self.y[idx], self.vy[idx] = pos, y, vy
        off = lambda p: (np.abs(p[:, 0]) > self.HALF_X) | (np.abs(p[:, 1]) > self.HALF_Z)  # noqa
        fell = off(pos) | off(new_block)
        goal = (np.abs(pos - self.goal[idx]) <= np.array([1.0, 1.0]) + RADIUS).all(1) & (y < 1.0)
        goal &= ~fell
        ended = fell | goal
        reward = np.where(fell, -1.0, np.where(goal, 1.0, -0.0005))
        return reward, ended, ended

    def physics_step(self) -> None:
        pass

    def boxes(self, idx: np.ndarray) -> np.ndarray:
        k = len(idx)
        b, g, w = self.block[idx], self.goal[idx], self.wall[idx]
        bh, wh = self.BLOCK_HALF, self.WALL_HALF
        wall_x0 = np.where(w > 0, -self.HALF_X, 1.0)  # no wall: an absent box (x0 > x1)
        return np.stack([
            _box(wall_x0, 0.0, np.full(k, -wh), np.where(w > 0, self.HALF_X, 0.0), w, wh),
            _box(g[:, 0] - 1, 0.0, g[:, 1] - 1, g[:, 0] + 1, 1.0, g[:, 1] + 1),
            _box(b[:, 0] - bh, 0.0, b[:, 1] - bh, b[:, 0] + bh, self.BLOCK_HEIGHT, b[:, 1] + bh),
        ], 1)

    def observe(self, idx: np.ndarray) -> list:
        k = len(idx)
        boxes, tags = self.boxes(idx), np.array([0, 1, 2])
        dirs = np.insert(ray_directions(self.heading[idx], ANGLES), 1, 0.0, axis=2)
        centre = np.stack([self.pos[idx, 0], self.y[idx] + 0.5, self.pos[idx, 1]], 1)
        centre = np.repeat(centre[:, None], len(ANGLES), 1)
        up = np.array([0.0, 1.0, 0.0])
        offset_rays = cast_rays(centre + 2.5 * up, centre + self.RAY_LENGTH * dirs + 5.0 * up,
                                boxes, tags, 3)
        rays = cast_rays(centre, centre + self.RAY_LENGTH * dirs, boxes, tags, 3)
        grounded = self.y[idx] <= self._ground(self.pos[idx], self.y[idx], self.block[idx],
                                               self.wall[idx]) + 1e-6
        vector = np.stack([self.pos[idx, 0] / 20, self.y[idx] / 20, self.pos[idx, 1] / 20,
                           grounded.astype(float)], 1)
        return [self.stacks[0].push(idx, offset_rays), self.stacks[1].push(idx, rays),
                self.stacks[2].push(idx, vector)]

    def action_mask(self, idx: np.ndarray) -> None:
        return None
