"""GridWorld: Unity's GridWorld example (simulated with numpy, one agent per area).

Two variants share this module; the build runs the first unless ``--standin-gridworld-tinted``:

**GridWorld as Unity's scene** (``GridWorldModel``, the default), from Unity's
``GridWorld/Prefabs/Area.prefab`` and ``GridAgent.cs`` (see EXAMPLES.md):

* 9 agents (areas), behavior ``GridWorld?team=0``; a decision at every academy step (GridAgent
  calls RequestDecision every FixedUpdate; no DecisionRequester); MaxStep 100.
* Observations, in sensor-name order: ``CameraSensor`` (3, 64, 84): a top-down RGB view of the
  area (width 84, height 64), PNG; ``VectorSensor`` (2,): the goal one-hot (green plus, red ex)
  with ObservationType GOAL_SIGNAL (field 7 of the ObservationProto). Which goal is the
  target is **only** in the goal signal: the image shows both goals and the agent the same way
  whatever the target (Unity shows the target only under the agent, out of the camera's view).
* Actions: one branch of 5 (0 no-op, 1 up, 2 down, 3 left, 4 right), wall moves masked.
* Rewards: -0.01 per step; stepping on a goal of the target kind +1, of the other kind -1,
  either ends the episode (SetReward: replaces that step's -0.01).
* Environment parameters, read at every episode start: ``gridSize`` (5; 2..8), ``numPlusGoals``
  (1), ``numExGoals`` (1) (each 0..8, fewer when the grid has no room).
* Image: square cells of ``64 // gridSize`` pixels (12 at 5x5) centred in the 84x64 frame on a
  grey wall background; dark floor; a green plus, a red X, the agent a blue square.

**The tinted variant** (``TintedGridWorldModel``, ``--standin-gridworld-tinted``): the stand-in
this build was before it matched Unity, kept for the benchmarks and tests that measured it.

Each agent lives in its own square area of ``gridSize`` x ``gridSize`` cells (``--standin-agents``
/ ``num_areas`` multiply areas; the build has 9 by default). ``gridSize`` is Unity's own
environment parameter, read at every episode start (2..8); the stand-in's default is **3**
(Unity's scene: 5), because with Unity's GridWorld.yaml neither mlagents-learn nor unity-rl
learns the 5x5 image scene within 100k agent-steps, while 3x3 is learnt by both in about
40k (see unity_builds/README.md). Every episode puts the agent, a green goal and a red goal on
three distinct random cells, and picks the *target* colour (green or red) at random.

* Observation (the only one): ``CameraSensor``, a top-down RGB image, PNG-compressed as a real
  camera sensor sends it, shape [3, 40, 40] whatever the grid size (Unity uses 84x84; 40x40
  keeps PNG encoding and the ``simple`` visual encoder cheap and is above its 20x20 minimum).
  Each cell is ``40 // gridSize`` pixels (13 at 3x3, 8 at 5x5), each object fills its cell but
  a 1-pixel rim: goals bright green and bright red, the agent blue. The whole floor is tinted
  with the *target* colour (dark green or dark red), so the cue is in every patch of the image
  and "this goal has the floor's hue" is a local feature. ``--standin-blind`` sends all-black
  images instead (same shape, PNG): a baseline blind to the image.
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
``oracle_action`` is a scripted policy that reads the true state (mean return about +0.99 at
3x3, +0.95 at 5x5; a random masked policy gets about -0.03 at 3x3, -0.25 at 5x5).
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.visual_ball import encode_png
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

DEFAULT_GRID = 3  # the tinted variant
"""Cells per side when the ``gridSize`` environment parameter is not set (Unity's default is 5)."""
MIN_GRID, MAX_GRID = 2, 8
IMAGE_SIZE = 40

NOOP, UP, DOWN, LEFT, RIGHT = range(5)
_MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])  # (row, column); up = row - 1
GREEN, RED = 0, 1
_COLOURS = np.array([[40, 220, 60], [230, 40, 40]], np.uint8)  # goals: green, red
_FLOORS = np.array([[25, 95, 35], [105, 25, 25]], np.uint8)  # floor tinted by the target
_AGENT = np.array([60, 110, 255], np.uint8)


def cell_px(grid: int) -> int:
    """Pixels per cell side of a ``grid`` x ``grid`` area in the fixed 40x40 image."""
    return IMAGE_SIZE // grid


class TintedGridWorldModel:
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
        self.params = params
        self.blind = bool(getattr(opts, "blind", False))
        self.grid = np.full(n, DEFAULT_GRID, np.int64)  # cells per side, per agent (episode)
        self.agent = np.zeros((n, 2), np.int64)
        self.goals = np.zeros((n, 2, 2), np.int64)  # [agent, green/red, (row, col)]
        self.target = np.zeros(n, np.int64)

    def reset(self, idx: np.ndarray) -> None:
        # Unity's GridArea reads gridSize at every area reset.
        sizes = np.rint(self.params.sample("gridSize", DEFAULT_GRID, len(idx)))
        self.grid[idx] = np.clip(sizes, MIN_GRID, MAX_GRID).astype(np.int64)
        for i in idx.tolist():
            g = int(self.grid[i])
            cells = self.rng.choice(g * g, size=3, replace=False)
            rows, cols = np.divmod(cells, g)
            self.agent[i] = rows[0], cols[0]
            self.goals[i] = np.stack([rows[1:], cols[1:]], axis=1)
        self.target[idx] = self.rng.integers(0, 2, len(idx))

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        choice = discrete[:, 0]
        pos = np.clip(self.agent[idx] + _MOVES[choice], 0, self.grid[idx, None] - 1)
        self.agent[idx] = pos
        on = (pos[:, None, :] == self.goals[idx]).all(axis=2)  # [k, 2]: on green, on red
        hit_target = on[np.arange(len(idx)), self.target[idx]]
        hit_other = on[np.arange(len(idx)), 1 - self.target[idx]]
        reward = np.where(hit_target, 1.0, np.where(hit_other, -1.0, -self.STEP_COST))
        return reward, hit_target | hit_other

    def physics_step(self) -> None:
        pass

    def render(self, idx: np.ndarray) -> np.ndarray:
        """Images [k, 40, 40, 3] uint8 of the given agents (all black with ``--standin-blind``)."""
        k = len(idx)
        img = np.empty((k, IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
        if self.blind:
            img[:] = 0
            return img
        img[:] = _FLOORS[self.target[idx]][:, None, None, :]
        for j, i in enumerate(idx.tolist()):
            px = cell_px(int(self.grid[i]))
            for colour, (r, c) in zip(_COLOURS, self.goals[i]):
                _fill(img[j], r, c, colour, px)
            _fill(img[j], *self.agent[i], _AGENT, px)
        return img

    def observe(self, idx: np.ndarray) -> list:
        return [[encode_png(image) for image in self.render(idx)]]

    def action_mask(self, idx: np.ndarray) -> np.ndarray:
        rows, cols, last = self.agent[idx, 0], self.agent[idx, 1], self.grid[idx] - 1
        mask = np.zeros((len(idx), 5), dtype=bool)
        mask[:, UP], mask[:, DOWN] = rows == 0, rows == last
        mask[:, LEFT], mask[:, RIGHT] = cols == 0, cols == last
        return mask


def _fill(image: np.ndarray, row: int, col: int, colour: np.ndarray, px: int) -> None:
    """Paints cell (row, col) but a 1-pixel rim, so neighbouring cells stay distinct."""
    top, left = row * px, col * px
    image[top + 1: top + px - 1, left + 1: left + px - 1] = colour


def oracle_action(model: "TintedGridWorldModel", i: int) -> int:
    """The scripted oracle: from agent i's true state, a move along a shortest path to the target
    goal that never steps onto the other goal (mean return about +0.95; checks solvability)."""
    grid = int(model.grid[i])
    target = tuple(model.goals[i, model.target[i]].tolist())
    other = tuple(model.goals[i, 1 - model.target[i]].tolist())
    dist = {target: 0}  # breadth-first distances to the target, around the other goal
    frontier = [target]
    while frontier:
        nxt = []
        for r, c in frontier:
            for dr, dc in _MOVES[1:]:
                cell = (r + dr, c + dc)
                if 0 <= cell[0] < grid and 0 <= cell[1] < grid and cell != other \
                        and cell not in dist:
                    dist[cell] = dist[(r, c)] + 1
                    nxt.append(cell)
        frontier = nxt
    here = model.agent[i]
    moves = [(dist.get(tuple(np.clip(here + _MOVES[a], 0, grid - 1).tolist()), 99), a)
             for a in (UP, DOWN, LEFT, RIGHT)]
    return min(moves)[1]


# -- GridWorld as Unity's scene ------------------------------------------------------------------

UNITY_GRID = 5
"""Unity's default ``gridSize``."""
UNITY_HEIGHT, UNITY_WIDTH = 64, 84
"""Unity's camera: width 84, height 64 -> observation (3, 64, 84)."""
EMPTY, PLUS, EX = 0, 1, 2
"""Board codes; the goal signal's one-hot index of a goal kind is code - 1 (GreenPlus, RedEx)."""
_WALL = np.array([90, 90, 90], np.uint8)
_FLOOR = np.array([30, 30, 30], np.uint8)


def _shapes(px: int) -> dict[int, np.ndarray]:
    """[px, px] bool masks of a plus, an X and the agent's square, inside a 1-pixel rim."""
    i, j = np.mgrid[0:px, 0:px]
    inner = (i > 0) & (j > 0) & (i < px - 1) & (j < px - 1)
    mid, half = (px - 1) / 2.0, max(1.0, px / 8.0)
    plus = inner & ((np.abs(i - mid) <= half) | (np.abs(j - mid) <= half))
    ex = inner & ((np.abs(i - j) <= half) | (np.abs(i + j - (px - 1)) <= half))
    return {PLUS: plus, EX: ex, 0: inner}


class GridWorldModel:
    """Unity's GridWorld: camera (3, 64, 84) + GOAL_SIGNAL one-hot (2,), see the module doc."""

    STEP_COST = 0.01
    spec = BehaviorSpecDef(
        obs=(ObsSpec("CameraSensor", (3, UNITY_HEIGHT, UNITY_WIDTH), png=True,
                     dimension_properties=(1, 2, 2)),
             ObsSpec("VectorSensor", (2,), dimension_properties=(1,), observation_type=1)),
        branches=(5,),
    )
    set_reward = False
    acts_between_decisions = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng = rng
        self.params = params
        self.blind = bool(getattr(opts, "blind", False))
        self.grid = np.full(n, UNITY_GRID, np.int64)
        self.board = np.zeros((n, MAX_GRID, MAX_GRID), np.int8)
        """[agent, row, col]: EMPTY, PLUS or EX (the agent is not on the board)."""
        self.agent = np.zeros((n, 2), np.int64)
        self.target = np.zeros(n, np.int64)
        """PLUS or EX: the goal kind that gives +1 this episode."""
        self._shapes: dict[int, dict] = {}

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        sizes = np.clip(np.rint(self.params.sample("gridSize", UNITY_GRID, k)), MIN_GRID, MAX_GRID)
        plus = np.clip(np.rint(self.params.sample("numPlusGoals", 1, k)), 0, MAX_GRID)
        ex = np.clip(np.rint(self.params.sample("numExGoals", 1, k)), 0, MAX_GRID)
        self.grid[idx] = sizes.astype(np.int64)
        for j, i in enumerate(np.asarray(idx).tolist()):
            g = int(sizes[j])
            n_plus = min(int(plus[j]), g * g - 1)
            n_ex = min(int(ex[j]), g * g - 1 - n_plus)
            cells = self.rng.choice(g * g, size=1 + n_plus + n_ex, replace=False)
            rows, cols = np.divmod(cells, g)
            self.board[i] = EMPTY
            self.agent[i] = rows[0], cols[0]
            self.board[i, rows[1:1 + n_plus], cols[1:1 + n_plus]] = PLUS
            self.board[i, rows[1 + n_plus:], cols[1 + n_plus:]] = EX
        self.target[idx] = self.rng.integers(PLUS, EX + 1, k)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        pos = np.clip(self.agent[idx] + _MOVES[discrete[:, 0]], 0, self.grid[idx, None] - 1)
        self.agent[idx] = pos
        under = self.board[idx, pos[:, 0], pos[:, 1]]
        hit_target = under == self.target[idx]
        hit_other = (under != EMPTY) & ~hit_target
        reward = np.where(hit_target, 1.0, np.where(hit_other, -1.0, -self.STEP_COST))
        return reward, hit_target | hit_other

    def physics_step(self) -> None:
        pass

    def render(self, idx: np.ndarray) -> np.ndarray:
        """Camera images [k, 64, 84, 3] uint8 (all black with ``--standin-blind``)."""
        k = len(idx)
        img = np.empty((k, UNITY_HEIGHT, UNITY_WIDTH, 3), np.uint8)
        img[:] = 0 if self.blind else _WALL
        if self.blind:
            return img
        for j, i in enumerate(np.asarray(idx).tolist()):
            g = int(self.grid[i])
            px = UNITY_HEIGHT // g
            shapes = self._shapes.get(px) or self._shapes.setdefault(px, _shapes(px))
            top, left = (UNITY_HEIGHT - g * px) // 2, (UNITY_WIDTH - g * px) // 2
            img[j, top:top + g * px, left:left + g * px] = _FLOOR
            for r, c in np.argwhere(self.board[i, :g, :g] != EMPTY).tolist():
                kind = int(self.board[i, r, c])
                cell = img[j, top + r * px: top + (r + 1) * px, left + c * px: left + (c + 1) * px]
                cell[shapes[kind]] = _COLOURS[kind - 1]
            r, c = self.agent[i].tolist()
            cell = img[j, top + r * px: top + (r + 1) * px, left + c * px: left + (c + 1) * px]
            cell[shapes[0]] = _AGENT
        return img

    def goal_signal(self, idx: np.ndarray) -> np.ndarray:
        """[k, 2] float32 one-hot of the target kind (GreenPlus, RedEx)."""
        return np.eye(2, dtype=np.float32)[self.target[idx] - 1]

    def observe(self, idx: np.ndarray) -> list:
        return [[encode_png(image) for image in self.render(idx)], self.goal_signal(idx)]

    def action_mask(self, idx: np.ndarray) -> np.ndarray:
        rows, cols, last = self.agent[idx, 0], self.agent[idx, 1], self.grid[idx] - 1
        mask = np.zeros((len(idx), 5), dtype=bool)
        mask[:, UP], mask[:, DOWN] = rows == 0, rows == last
        mask[:, LEFT], mask[:, RIGHT] = cols == 0, cols == last
        return mask


def goal_oracle_action(model: GridWorldModel, i: int) -> int:
    """Scripted policy from agent i's true state: a shortest path to the nearest goal of the
    target kind that never steps on a goal of the other kind (NOOP if none is reachable)."""
    g = int(model.grid[i])
    board = model.board[i, :g, :g]
    targets = [tuple(c) for c in np.argwhere(board == model.target[i]).tolist()]
    dist = {t: 0 for t in targets}
    frontier = list(targets)
    while frontier:
        nxt = []
        for r, c in frontier:
            for dr, dc in _MOVES[1:]:
                cell = (r + dr, c + dc)
                if 0 <= cell[0] < g and 0 <= cell[1] < g and cell not in dist \
                        and board[cell] == EMPTY:
                    dist[cell] = dist[(r, c)] + 1
                    nxt.append(cell)
        frontier = nxt
    here = model.agent[i]
    moves = [(dist.get(tuple(np.clip(here + _MOVES[a], 0, g - 1).tolist()), 99), a)
             for a in (UP, DOWN, LEFT, RIGHT)]
    best = min(moves)
    return best[1] if best[0] < 99 else NOOP


def gridworld_scene(opts) -> tuple:
    """SCENES["GridWorld"]: Unity's shape, or the tinted variant with --standin-gridworld-tinted."""
    from unity_rl.standin.scenes.base import BehaviorDef

    if getattr(opts, "gridworld_tinted", False):
        return (BehaviorDef("GridWorld?team=0", TintedGridWorldModel, 9, 5, 500),)
    return (BehaviorDef("GridWorld?team=0", GridWorldModel, 9, 1, 100),)
