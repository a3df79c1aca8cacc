"""Pyramids: Unity's sparse-reward scene (press a switch, a pyramid appears, knock it over, touch
the gold brick), the scene that Unity's curiosity and RND configs are made for.

Interface as Unity's (``Pyramids/Prefabs/AreaPB.prefab``, ``PyramidAgent.cs``): behavior
``Pyramids?team=0``, 16 areas of one agent, DecisionPeriod 5 with actions between decisions,
MaxStep 5000, one branch of 5 (0 nothing, 1 forward, 2 back, 3 turn right, 4 turn left), and
sensors in Python's order:

* ``RayPerceptionSensor``, ``RayPerceptionSensor1``, ``RayPerceptionSensor2`` (56,) each: 3 rays
  per direction (7 rays) over 70, 65 and 75 degrees, tags [block, wall, goal, switchOff,
  switchOn, stone], length 35, no stacking; the second and third rise towards an end 5 and 10
  above their start (Unity's end offsets), so they see what stands higher (the gold brick on
  the pyramid);
* ``VectorSensor_size4`` (4,): the switch state (1 on) and the agent's local velocity (3: x, y,
  z in its own frame; here the last decision's move: z = +1 forward, -1 back).

Rewards as Unity's: -1/MaxStep per academy step (AddReward), +2 (SetReward, replacing the
decision's pending penalties) and EndEpisode when the agent touches the gold brick.

The dynamics are ours, on a grid (as the Hallway stand-in): a move is one cell or a 90-degree
turn per decision, made at the decision's first academy step (the repeated steps of the period
only cost the step penalty); a move into anything solid does not move the agent but touches it.
Each episode: the agent starts at a random cell with a random heading in a ``SIZE`` x ``SIZE``
room (walls around), the switch (``switchOff``) lies at another random cell.

1. Touching the switch turns it on for the episode (``switchOn``, vector obs[0] = 1), and a
   pyramid appears at a random free cell at least ``MIN_PYRAMID_DISTANCE`` cells from the agent:
   ``stone`` blocks 2 high with the gold brick (``goal``) on top.
2. Touching the pyramid ``PUSHES`` times knocks it over (which touches push: ``PUSH_RULE``;
   a pyramid left alone may stand whole again: ``RECOVER_AFTER``; each push takes a layer off: the
   pyramid is lower); the stones scatter to random free cells and the gold brick falls onto a
   random free cell next to where the pyramid stood.
3. Touching the gold brick: +2, the episode ends.

Built so that the extrinsic reward alone is rarely met by chance (a random policy completes the
three stages in few episodes: ``tests/standin/test_pyramids.py`` measures it), while every stage
makes something new appear in the observations (the switch's tag and state, a pyramid at an
unpredictable place, stones scattered at random): what curiosity and RND reward.

``heuristic_action(model, idx)``: the built-in heuristic (Unity's ``Heuristic``, for recording
demonstrations): the shortest way to the switch, then to the pyramid (pushing it over), then
to the gold brick. ``--standin-heuristic`` makes the player act with it whatever actions the
trainer sends (Unity's Behavior Type "Heuristic Only"; the agents still request decisions, so
a recorder sees the observations; the actions applied are the heuristic's).

About 420 lines, in one module on purpose: the scene, its survey options (push rule, recovery,
rooms: docs/reward_signals.md) and the heuristic, which the model itself runs under
``--standin-heuristic`` (``heuristics.py`` imports it from here, so it cannot live there).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.sensor_kit import cast_rays, ray_angles, ray_directions
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

SIZE = 12
"""Cells per side of the room."""
PUSHES = 20
"""Touches that knock the pyramid over (``--standin-pyramid-pushes``). Through stop 28 it was 6,
and extrinsic-only PPO (Unity's config without curiosity) then found the gold by its policy's
drift at 270k agent-steps (seed 1), under 2x curiosity's 150k. With 20, curiosity and RND still
need 150k-210k, extrinsic-only took 1,650k / 210k / 360k (seeds 1-3): usually slower, but a
drifting policy can still find the gold (docs/reward_signals.md)."""
PUSH_RULE = "touch"
"""Which touches of the pyramid push it: ``"touch"``, every touch; or ``"run-up"``, only a touch
right after a decision that stepped a cell (forward or back), so that an agent pressing on
pushes once (``--standin-pyramid-push`` changes it). Tried in stop 30 against the extrinsic
reward alone finding the gold: at 10 pushes it took 360k agent-steps against curiosity's 240k
(seed 1), no better than ``touch`` at 20, so ``touch`` stayed (docs/reward_signals.md)."""
RECOVER_AFTER = 0
"""Decisions without a push after which a standing pyramid is whole again (0: never;
``--standin-pyramid-recover``). Tried in stop 30 with ``run-up`` and 10 pushes: at 4 and at 12
neither curiosity nor the extrinsic reward alone found the gold in 330k-800k agent-steps."""
ROOMS = False
"""Whether walls with one door each split the room into four (``--standin-pyramid-rooms``):
the agent starts in one, the switch lies in another, and the pyramid rises in a room other
than the one the agent pressed the switch from. Off by default: in stop 31 the extrinsic reward
alone found the gold at 840k (seed 1) while RND needed 1,050k or more (docs/reward_signals.md)."""
DIVIDER = SIZE // 2
"""Column and row of the inner walls (with ``ROOMS``)."""
N_PARTITION = 2 * SIZE - 1 - 4
"""Inner wall cells: a column and a row across the room, less their crossing and four doors."""
MIN_PYRAMID_DISTANCE = 4
"""Least Manhattan distance from the agent (when the switch turns on) to the pyramid."""
SCATTERED_STONES = 3
MAX_STEP = 5000
TAGS = ("block", "wall", "goal", "switchOff", "switchOn", "stone")
BLOCK, WALL, GOAL, SWITCH_OFF, SWITCH_ON, STONE = range(6)
SENSORS = (  # (name, max ray degrees, end offset)
    ("RayPerceptionSensor", 70.0, 0.0),
    ("RayPerceptionSensor1", 65.0, 5.0),
    ("RayPerceptionSensor2", 75.0, 10.0),
)
RAYS_PER_DIRECTION = 3
RAY_LENGTH = 35.0
EYE = 0.5
"""Height of the rays' start."""
RAY_SIZE = (2 * RAYS_PER_DIRECTION + 1) * (len(TAGS) + 2)
NOTHING, FORWARD, BACK, TURN_RIGHT, TURN_LEFT = range(5)
_DIRS = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]])
"""(x, z) cell step of headings 0..3 (0 = +z, clockwise seen from above: 1 = +x, the right)."""
# object slots in each area's box table (besides the walls)
SWITCH, PYRAMID, GOLD = 0, 1, 2
STONES = 3  # .. 3 + SCATTERED_STONES
N_OBJECTS = 3 + SCATTERED_STONES
PYRAMID_HEIGHT, BRICK_HEIGHT, LOW = 2.0, 0.6, 0.6


def _walls() -> np.ndarray:
    """[4, 6] the room's walls around cells 0..SIZE-1 (each cell a unit square centred on it)."""
    lo, hi = -1.5, SIZE - 0.5
    return np.array([
        (lo, 0, lo, hi + 1, 2, -0.5),          # z < 0
        (lo, 0, SIZE - 0.5, hi + 1, 2, hi + 1),  # z > SIZE - 1
        (lo, 0, lo, -0.5, 2, hi + 1),          # x < 0
        (SIZE - 0.5, 0, lo, hi + 1, 2, hi + 1),  # x > SIZE - 1
    ], float)


def _cell_box(cell: np.ndarray, low: float, high: float) -> np.ndarray:
    """[k, 6] unit boxes on cells [k, 2] between heights low and high."""
    x, z = cell[:, 0].astype(float), cell[:, 1].astype(float)
    k = len(cell)
    return np.stack([x - 0.5, np.full(k, low), z - 0.5, x + 0.5, np.full(k, high), z + 0.5], 1)


class PyramidsModel:
    spec = BehaviorSpecDef(
        obs=tuple(ObsSpec(name, (RAY_SIZE,), dimension_properties=(1,)) for name, _, _ in SENSORS)
        + (ObsSpec("VectorSensor_size4", (4,), dimension_properties=(1,)),),
        branches=(5,),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng, self.params = rng, params
        max_step = getattr(opts, "max_step", None)
        self.max_step = MAX_STEP if max_step is None else int(max_step)
        """Agent.MaxStep (``--standin-max-step`` changes it): the step penalty is 1/MaxStep."""
        pushes = getattr(opts, "pyramid_pushes", None)
        self.pushes_to_knock = PUSHES if pushes is None else int(pushes)
        """Touches that knock the pyramid over (``--standin-pyramid-pushes`` changes it)."""
        recover = getattr(opts, "pyramid_recover", None)
        self.recover_after = RECOVER_AFTER if recover is None else int(recover)
        """Decisions without a push after which a standing pyramid is whole again (0: never;
        ``--standin-pyramid-recover`` changes it)."""
        self.since_push = np.zeros(n, np.int64)
        """Decisions since the pyramid's last push."""
        rooms = getattr(opts, "pyramid_rooms", None)
        self.rooms = ROOMS if rooms is None else bool(rooms)
        """Four rooms with doors (``ROOMS``; ``--standin-pyramid-rooms`` changes it)."""
        self.partition = np.zeros((n, N_PARTITION if self.rooms else 0, 2), np.int64)
        """Cells of each area's inner walls (doors drawn at every reset)."""
        rule = getattr(opts, "pyramid_push", None) or PUSH_RULE
        self.run_up = rule == "run-up"
        """A touch pushes only after a step (``PUSH_RULE``; ``--standin-pyramid-push``)."""
        self.heuristic = bool(getattr(opts, "heuristic", False))
        """``--standin-heuristic``: act with ``heuristic_action``, ignoring the trainer's actions."""
        self.cell = np.zeros((n, 2), np.int64)
        self.heading = np.zeros(n, np.int64)
        self.velocity = np.zeros((n, 3), np.float32)
        self.switch_on = np.zeros(n, bool)
        self.pushes = np.zeros(n, np.int64)
        """Pushes the pyramid took (``pushes_to_knock``: knocked over)."""
        self.objects = np.full((n, N_OBJECTS, 2), -1, np.int64)
        """Cell of each object slot (switch, pyramid, gold, stones); -1: absent."""
        self.moved = np.ones(n, bool)
        """True once the current decision's action was applied."""
        self.walls = _walls()

    # -- episode --------------------------------------------------------------------------------
    def _free_cells(self, i: int) -> np.ndarray:
        """[m, 2] cells of area i with neither the agent nor an object."""
        taken = np.zeros((SIZE, SIZE), bool)
        taken[tuple(self.cell[i])] = True
        taken[tuple(self.partition[i].T)] = True
        for c in self.objects[i]:
            if c[0] >= 0:
                taken[tuple(c)] = True
        return np.argwhere(~taken)

    def reset(self, idx: np.ndarray) -> None:
        for i in idx.tolist():
            self.objects[i] = -1
            if self.rooms:
                self.partition[i] = _partition(self.rng)
                self.cell[i] = self.partition[i, 0]  # a wall cell: every free cell counts
                free = self._free_cells(i)
                self.cell[i] = free[self.rng.integers(len(free))]
            else:
                self.cell[i] = self.rng.integers(0, SIZE, 2)
            self.heading[i] = self.rng.integers(0, 4)
            free = self._elsewhere(self._free_cells(i), self.cell[i])
            self.objects[i, SWITCH] = free[self.rng.integers(len(free))]
        self.velocity[idx] = 0.0
        self.switch_on[idx] = False
        self.pushes[idx] = 0
        self.since_push[idx] = 0
        self.moved[idx] = False

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        actions = heuristic_action(self, idx) if self.heuristic else discrete[:, 0]
        reward = np.full(len(idx), -1.0 / max(self.max_step, 1))
        done = np.zeros(len(idx), bool)
        for row, (i, a) in enumerate(zip(idx.tolist(), actions.tolist())):
            if self.moved[i]:
                continue
            self.moved[i] = True
            self.since_push[i] += 1
            if self.recover_after and self.since_push[i] > self.recover_after:
                self.pushes[i] = 0  # left alone, the pyramid stands whole again
            ran = self.velocity[i, 2] != 0  # the previous decision stepped a cell
            self.velocity[i] = 0.0
            if a in (TURN_RIGHT, TURN_LEFT):
                self.heading[i] = (self.heading[i] + (1 if a == TURN_RIGHT else -1)) % 4
                continue
            if a not in (FORWARD, BACK):
                continue
            sign = 1 if a == FORWARD else -1
            target = self.cell[i] + sign * _DIRS[self.heading[i]]
            if not ((0 <= target) & (target < SIZE)).all() or (
                    self.rooms and (self.partition[i] == target).all(axis=1).any()):
                continue  # a wall
            hit = np.flatnonzero((self.objects[i] == target).all(axis=1))
            if not len(hit):
                self.cell[i] = target
                self.velocity[i, 2] = sign
            elif hit[0] == SWITCH and not self.switch_on[i]:
                self._switch_on(i)
            elif hit[0] == PYRAMID and (ran or not self.run_up):
                self._push(i)
            elif hit[0] == GOLD:
                reward[row], done[row] = 2.0, True
        return reward, done, done  # the gold's reward replaces the pending one (SetReward)

    def _switch_on(self, i: int) -> None:
        self.switch_on[i] = True
        free = self._elsewhere(self._free_cells(i), self.cell[i])
        far = free[np.abs(free - self.cell[i]).sum(axis=1) >= MIN_PYRAMID_DISTANCE]
        choices = far if len(far) else free
        self.objects[i, PYRAMID] = choices[self.rng.integers(len(choices))]

    def _push(self, i: int) -> None:
        self.pushes[i] += 1
        self.since_push[i] = 0
        if self.pushes[i] < self.pushes_to_knock:
            return
        where = self.objects[i, PYRAMID].copy()
        self.objects[i, PYRAMID] = -1
        free = self._free_cells(i)
        near = free[np.abs(free - where).sum(axis=1) == 1]
        choices = near if len(near) else free
        self.objects[i, GOLD] = choices[self.rng.integers(len(choices))]
        free = self._free_cells(i)
        picks = self.rng.choice(len(free), min(SCATTERED_STONES, len(free)), replace=False)
        self.objects[i, STONES:STONES + len(picks)] = free[picks]

    def _elsewhere(self, cells: np.ndarray, cell: np.ndarray) -> np.ndarray:
        """With rooms: ``cells`` in a room other than ``cell``'s (none in a doorway); else all."""
        if not self.rooms:
            return cells
        rooms = _room(cells)
        other = cells[(rooms >= 0) & (rooms != _room(cell[None])[0])]
        return other if len(other) else cells

    def physics_step(self) -> None:
        pass

    # -- sensors --------------------------------------------------------------------------------
    def _boxes(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[k, B, 6] boxes of the areas ``idx`` and their tags [B] (absent: xmin > xmax)."""
        k = len(idx)
        objects = self.objects[idx]  # [k, N, 2]
        boxes = np.zeros((k, N_OBJECTS, 6))
        heights = [(0.0, LOW)] * N_OBJECTS
        # lower after each push
        pyramid_top = PYRAMID_HEIGHT * (1.0 - self.pushes[idx] / self.pushes_to_knock)
        for slot in range(N_OBJECTS):
            low, high = heights[slot]
            boxes[:, slot] = _cell_box(np.maximum(objects[:, slot], 0), low, high)
        boxes[:, PYRAMID, 4] = np.maximum(pyramid_top, 0.3)
        # the gold brick: on top of the standing pyramid, else where it fell
        standing = objects[:, PYRAMID, 0] >= 0
        brick = np.where(standing[:, None], objects[:, PYRAMID], objects[:, GOLD])
        gold = _cell_box(np.maximum(brick, 0), 0.0, BRICK_HEIGHT)
        gold[standing, 1] = boxes[standing, PYRAMID, 4]
        gold[standing, 4] = boxes[standing, PYRAMID, 4] + BRICK_HEIGHT
        boxes[:, GOLD] = gold
        present = objects[:, :, 0] >= 0
        present[:, GOLD] |= standing
        boxes[~present, 0], boxes[~present, 3] = 1.0, 0.0
        walls = np.repeat(self.walls[None], k, 0)
        inner = _cell_box(self.partition[idx].reshape(-1, 2), 0.0, 2.0).reshape(k, -1, 6)
        tags = np.array([SWITCH_OFF, STONE, GOAL] + [STONE] * SCATTERED_STONES
                        + [WALL] * (4 + inner.shape[1]))
        return np.concatenate([boxes, walls, inner], 1), tags

    def observe(self, idx: np.ndarray) -> list:
        k = len(idx)
        self.moved[idx] = False
        boxes, tags = self._boxes(idx)
        tags = np.repeat(tags[None], k, 0)
        tags[self.switch_on[idx], SWITCH] = SWITCH_ON
        out = []
        start_xz = self.cell[idx].astype(float)
        for _, degrees, offset in SENSORS:
            angles = ray_angles(RAYS_PER_DIRECTION, degrees)
            dirs = ray_directions(self.heading[idx] * (np.pi / 2), angles)  # [k, R, 2]
            start = np.stack([start_xz[:, 0], np.full(k, EYE), start_xz[:, 1]], 1)
            start = np.repeat(start[:, None], len(angles), 1)
            end = start + np.insert(RAY_LENGTH * dirs, 1, offset, axis=2)
            out.append(_cast(start, end, boxes, tags))
        vector = np.concatenate([self.switch_on[idx, None].astype(np.float32),
                                 self.velocity[idx]], 1)
        return out + [vector]

    def action_mask(self, idx: np.ndarray) -> None:
        return None


def _cast(start: np.ndarray, end: np.ndarray, boxes: np.ndarray, tags: np.ndarray) -> np.ndarray:
    """``cast_rays`` with per-area tags [k, B] (the switch's tag changes when it turns on)."""
    if (tags == tags[:1]).all():
        return cast_rays(start, end, boxes, tags[0], len(TAGS))
    out = np.zeros((len(start), RAY_SIZE), np.float32)
    for group in np.unique(tags, axis=0):
        rows = (tags == group).all(axis=1)
        out[rows] = cast_rays(start[rows], end[rows], boxes[rows], group, len(TAGS))
    return out


def _next_step(model: PyramidsModel, i: int, goal: np.ndarray) -> np.ndarray | None:
    """The first cell of a shortest path from area i's agent to a cell next to ``goal`` (then
    ``goal`` itself: touching it), avoiding objects; None when unreachable."""
    blocked = np.zeros((SIZE, SIZE), bool)
    blocked[tuple(model.partition[i].T)] = True
    for c in model.objects[i]:
        if c[0] >= 0:
            blocked[tuple(c)] = True
    start = tuple(model.cell[i])
    target = tuple(goal)
    parent = {start: None}
    queue = deque([start])
    while queue:
        cur = queue.popleft()
        for d in _DIRS:
            nxt = (cur[0] + d[0], cur[1] + d[1])
            if nxt in parent or not (0 <= nxt[0] < SIZE and 0 <= nxt[1] < SIZE):
                continue
            if nxt == target:
                step = cur
                if step == start:
                    return np.array(target)
                while parent[step] != start:
                    step = parent[step]
                return np.array(step)
            if blocked[nxt]:
                continue
            parent[nxt] = cur
            queue.append(nxt)
    return None


def _partition(rng: np.random.Generator) -> np.ndarray:
    """[N_PARTITION, 2] inner wall cells: column and row ``DIVIDER``, one random door in each
    of their four stretches between the crossing and the outer walls."""
    cells = []
    for stretch in (range(0, DIVIDER), range(DIVIDER + 1, SIZE)):
        for along_x in (False, True):
            door = rng.integers(stretch.start, stretch.stop)
            cells += [(j, DIVIDER) if along_x else (DIVIDER, j) for j in stretch if j != door]
    cells.append((DIVIDER, DIVIDER))
    return np.array(cells, np.int64)


def _room(cells: np.ndarray) -> np.ndarray:
    """[m] room index 0-3 of each cell [m, 2] (-1 on the inner walls' lines: doorways)."""
    on_line = (cells == DIVIDER).any(axis=1)
    return np.where(on_line, -1, (cells[:, 0] > DIVIDER) * 2 + (cells[:, 1] > DIVIDER))


def _free(model: PyramidsModel, i: int, cell: np.ndarray) -> bool:
    """Whether ``cell`` is inside area i's room and holds no object."""
    inside = bool(((0 <= cell) & (cell < SIZE)).all())
    return inside and not (np.concatenate([model.objects[i], model.partition[i]]) == cell
                           ).all(axis=1).any()


def heuristic_action(model: PyramidsModel, idx: np.ndarray) -> np.ndarray:
    """Unity's ``Heuristic`` for these agents [k]: towards the switch (off), else the pyramid
    (standing: push it), else the gold brick; each step turns to face the next cell of a
    shortest path, then moves forward. Under the run-up rule, facing the pyramid without having
    stepped, it backs off a cell first (or turns, to come round, when it cannot)."""
    actions = np.full(len(idx), NOTHING, np.int64)
    for row, i in enumerate(np.asarray(idx).tolist()):
        if not model.switch_on[i]:
            goal = model.objects[i, SWITCH]
        elif model.objects[i, PYRAMID, 0] >= 0:
            goal = model.objects[i, PYRAMID]
        else:
            goal = model.objects[i, GOLD]
        step = _next_step(model, i, goal)
        if step is None:
            actions[row] = TURN_RIGHT
            continue
        want = int(np.flatnonzero((_DIRS == step - model.cell[i]).all(axis=1))[0])
        turn = (want - model.heading[i]) % 4
        actions[row] = FORWARD if turn == 0 else TURN_RIGHT if turn == 1 else TURN_LEFT
        if (turn == 0 and model.run_up and model.velocity[i, 2] == 0
                and (step == model.objects[i, PYRAMID]).all()):
            actions[row] = BACK if _free(model, i, model.cell[i] - _DIRS[want]) else TURN_RIGHT
    return actions
