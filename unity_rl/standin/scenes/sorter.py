"""Sorter: visit numbered tiles in ascending order, seen through a buffer sensor (numpy).

Unity's interface (``Sorter/Prefabs/Area.prefab``, ``SorterAgent.cs``; ``EXAMPLES.md``):

* behavior ``Sorter``, 8 agents (one per area), DecisionPeriod 5 (actions repeat between
  decisions), MaxStep 5000 academy steps;
* observations, in Unity's sensor-name order:

  - ``BufferSensor`` (20, 23), dimension properties (VARIABLE_SIZE, NONE): one row per tile on
    the floor, in ascending tile order (``CurrentlyVisibleTilesList`` is sorted); a row is a
    one-hot of the tile's number (slot number − 1 of 20), its position relative to the agent
    (x, z) / 20 in world axes, and 1 if it was visited (else 0). Rows past the tiles on the floor
    are zero (Unity's BufferSensor leaves them unfilled);
  - ``RBSensor`` (10,): the agent body's translation (x, 0, z) from its start / 20, its rotation
    as a quaternion (x, y, z, w) about the vertical axis, its velocity (right, 0, forward) in its
    own frame;
  - ``StackingSensor_size2_VectorSensor_size4`` (8,): position (x, z) / 20 and forward (x, z),
    the last 2 decisions stacked (oldest first, zeros at an episode start);
* actions: 3 discrete branches of 3 (forward: none / forward / back; sideways: none / right /
  left, which replaces the forward move when not none, as Unity's ``MoveAgent``; rotate: none /
  left / right);
* rewards: −1/MaxStep every academy step; +1 for touching the next tile in ascending order
  (it becomes visited; touching it again does nothing); −1 and EndEpisode for touching any other
  tile not touched yet; EndEpisode once every tile is visited;
* environment parameter ``num_tiles`` (default 20, the prefab's ``DefaultMaxNumTiles``), read at
  every episode start: that episode has ``Random.Range(1, num_tiles + 1)`` tiles (1 to
  ``num_tiles``), numbers drawn without replacement from 1..20, each on its own one of 20 slots
  on a circle around the agent's start.

Geometry at Unity's scale (``Area.prefab``): each tile is a box 3.5 wide (along the circle) and
1.5 deep whose centre is 20.5 from the area's centre, at slot angle k·18° (Unity rotates the
tile's parent by k·360°/20 about the vertical; the observed position is that box's centre,
``GetChild(1)``), so at the start a tile's relative position / 20 has length about 1, as in
Unity, and the boxes cover a bit more than half of their slot's arc. Tiles are not obstacles here
(Unity's colliders stop the agent; a touch is what counts). Stand-in choices (not Unity's
physics): the agent is a disc of radius 0.5 that touches a tile when its disc meets the box (its
centre within the box grown by 0.5), moves 0.3 per academy step (15 units/s; 1.5 per decision,
so the ring is about 13 decisions away) without inertia, its centre within 21.5 of the area's centre (so
along that rim it meets every tile box it passes), and turns 4° per academy step (Unity's 200°/s × 0.02 s); it starts each episode at
the centre with a random heading (Unity resets the position, not the rotation).

Why not smaller: an arena shrunk 5× with Unity's /20 scaling kept (the first version: tiles at
radius 4, touched within 1.0 of a point, 1.25 apart) showed tile directions at about 0.2 instead
of Unity's 1, and made neighbouring tiles' touch zones overlap (Unity's boxes leave gaps);
within 150k agent-steps a policy that saw the tiles did no better than a blind one
(docs/curricula.md).

``--standin-blind``: the buffer sensor sends zero rows only (every row is padding), same shape:
a baseline that never sees the tiles (what dropping the buffer observation costs).
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.stacking import VectorStack, stacked_name
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

HIGHEST_TILE = 20
"""Unity's ``k_HighestTileValue``: tile numbers 1..20, 20 slots, 20 buffer rows."""
ENTITY_SIZE = HIGHEST_TILE + 3
DEFAULT_MAX_NUM_TILES = 20
MAX_STEP = 5000
TILE_RADIUS = 20.5
"""Distance of a tile's box centre from the area's centre (Unity's ``Cube`` at local z 20.5)."""
TILE_HALF_WIDTH, TILE_HALF_DEPTH = 1.75, 0.76
"""Half the box's size along the circle (3.5) and along the radius (1.52), Unity's scale."""
AGENT_RADIUS = 0.5
ARENA_RADIUS = 21.5
"""The agent's centre stays within this distance of the area's centre."""
SPEED, TURN = 0.3, np.deg2rad(4.0)
VARIABLE_SIZE, NONE = 4, 1
"""mlagents-envs' DimensionProperty values of a buffer sensor's two axes."""


def touching(tiles: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """[n, rows] bool: the agent's disc (centre ``pos`` [n, 2]) meets the box of each tile
    (centres ``tiles`` [n, rows, 2], boxes facing the area's centre)."""
    radial = tiles / np.maximum(np.linalg.norm(tiles, axis=2, keepdims=True), 1e-9)
    d = pos[:, None, :] - tiles
    along_radius = np.sum(d * radial, axis=2)
    along_circle = d[..., 0] * radial[..., 1] - d[..., 1] * radial[..., 0]
    return ((np.abs(along_circle) <= TILE_HALF_WIDTH + AGENT_RADIUS)
            & (np.abs(along_radius) <= TILE_HALF_DEPTH + AGENT_RADIUS))


class SorterModel:
    spec = BehaviorSpecDef(
        obs=(ObsSpec("BufferSensor", (HIGHEST_TILE, ENTITY_SIZE),
                     dimension_properties=(VARIABLE_SIZE, NONE)),
             ObsSpec("RBSensor", (10,), dimension_properties=(NONE,)),
             ObsSpec(stacked_name(2, "VectorSensor_size4"), (8,), dimension_properties=(NONE,))),
        branches=(3, 3, 3),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng, self.params = rng, params
        self.blind = bool(getattr(opts, "blind", False))
        self.pos = np.zeros((n, 2))
        self.vel = np.zeros((n, 2))  # world (x, z) per academy step
        self.heading = np.zeros(n)  # radians, 0 = +z, clockwise seen from above
        self.numbers = np.zeros((n, HIGHEST_TILE), np.int64)  # tile numbers, ascending; 0 = none
        self.tiles = np.zeros((n, HIGHEST_TILE, 2))  # world (x, z) of each row's tile
        self.count = np.zeros(n, np.int64)  # tiles on the floor this episode
        self.next = np.zeros(n, np.int64)  # row of the next tile to visit
        self.stack = VectorStack(n, 4, 2)
        self.num_tiles_seen: list[float] = []
        """``num_tiles`` as read at each reset batch (what the build got)."""

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        max_tiles = self.params.sample("num_tiles", float(DEFAULT_MAX_NUM_TILES), k)
        self.num_tiles_seen.append(float(max_tiles[0]))
        max_tiles = np.clip(max_tiles.astype(np.int64), 1, HIGHEST_TILE)
        count = self.rng.integers(1, max_tiles + 1)  # Random.Range(1, max + 1)
        self.count[idx] = count
        self.next[idx] = 0
        self.numbers[idx] = 0
        self.tiles[idx] = 0.0
        for j, (i, c) in enumerate(zip(idx.tolist(), count.tolist())):
            numbers = np.sort(self.rng.choice(HIGHEST_TILE, c, replace=False) + 1)
            slots = self.rng.choice(HIGHEST_TILE, c, replace=False)
            angle = slots * (2 * np.pi / HIGHEST_TILE)
            self.numbers[i, :c] = numbers
            self.tiles[i, :c] = TILE_RADIUS * np.stack([np.sin(angle), np.cos(angle)], 1)
        self.pos[idx] = 0.0
        self.vel[idx] = 0.0
        self.heading[idx] = self.rng.uniform(-np.pi, np.pi, k)
        self.stack.clear(idx)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        fwd_a, side_a, rot_a = discrete.T
        heading = self.heading[idx] + TURN * ((rot_a == 2).astype(float) - (rot_a == 1))
        self.heading[idx] = heading
        forward = np.stack([np.sin(heading), np.cos(heading)], 1)
        right = np.stack([np.cos(heading), -np.sin(heading)], 1)
        move = ((fwd_a == 1).astype(float) - (fwd_a == 2))[:, None] * forward
        side = ((side_a == 1).astype(float) - (side_a == 2))[:, None] * right
        move = np.where((side_a != 0)[:, None], side, move)  # Unity: sideways replaces forward
        pos = self.pos[idx] + SPEED * move
        r = np.linalg.norm(pos, axis=1, keepdims=True)
        pos = np.where(r > ARENA_RADIUS, pos * ARENA_RADIUS / np.maximum(r, 1e-9), pos)
        self.vel[idx] = pos - self.pos[idx]
        self.pos[idx] = pos

        reward = np.full(len(idx), -1.0 / MAX_STEP)
        done = np.zeros(len(idx), bool)
        rows = np.arange(HIGHEST_TILE)[None, :]
        on_floor = rows < self.count[idx][:, None]
        untouched = on_floor & (rows >= self.next[idx][:, None])
        hits = touching(self.tiles[idx], pos) & untouched
        right_tile = hits[np.arange(len(idx)), self.next[idx].clip(0, HIGHEST_TILE - 1)]
        wrong = hits.any(1) & ~(right_tile & (hits.sum(1) == 1))
        good = right_tile & ~wrong
        reward += np.where(good, 1.0, 0.0) + np.where(wrong, -1.0, 0.0)
        self.next[idx] += good
        done |= wrong | (self.next[idx] >= self.count[idx])
        return reward, done

    def physics_step(self) -> None:
        pass

    def observe(self, idx: np.ndarray) -> list:
        k = len(idx)
        h = self.heading[idx]
        pos = self.pos[idx]
        buffer = np.zeros((k, HIGHEST_TILE, ENTITY_SIZE), np.float32)
        rows = np.arange(HIGHEST_TILE)[None, :]
        on_floor = rows < self.count[idx][:, None]
        ii, rr = np.nonzero(on_floor & (not self.blind))
        buffer[ii, rr, self.numbers[idx][ii, rr] - 1] = 1.0
        rel = (self.tiles[idx] - pos[:, None, :]) / 20.0
        buffer[ii, rr, HIGHEST_TILE] = rel[ii, rr, 0]
        buffer[ii, rr, HIGHEST_TILE + 1] = rel[ii, rr, 1]
        buffer[ii, rr, HIGHEST_TILE + 2] = (rr < self.next[idx][ii]).astype(np.float32)
        vel = self.vel[idx] / 0.02  # units per second
        rb = np.stack([pos[:, 0] / 20, np.zeros(k), pos[:, 1] / 20,
                       np.zeros(k), np.sin(h / 2), np.zeros(k), np.cos(h / 2),
                       vel[:, 0] * np.cos(h) - vel[:, 1] * np.sin(h), np.zeros(k),
                       vel[:, 0] * np.sin(h) + vel[:, 1] * np.cos(h)], 1).astype(np.float32)
        vector = np.stack([pos[:, 0] / 20, pos[:, 1] / 20, np.sin(h), np.cos(h)], 1)
        return [buffer, rb, self.stack.push(idx, vector.astype(np.float32))]

    def action_mask(self, idx: np.ndarray) -> None:
        return None
