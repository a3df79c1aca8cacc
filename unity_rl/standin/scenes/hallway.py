"""Hallway: Unity's memory scene, a T-maze whose cue is seen only at the episode's first decision.

Unity's Hallway (``HallwayAgent.cs``): the agent sees a symbol (O or X) in the hallway and must
then touch the goal carrying the same symbol: +1 (SetReward) for the right one, -0.1 for the
wrong one, either ends the episode; -1/MaxStep (AddReward) at every academy step. Interface as
Unity's (behavior ``Hallway?team=0``, 17 areas of one agent, DecisionPeriod 6 with actions
between decisions, MaxStep 3000, one branch of 5: 0 nothing, 1 forward, 2 back, 3 turn right,
4 turn left) and sensors in Python's order:

* ``StackingSensor_size3_RayPerceptionSensor`` (105,): 2 rays per direction over 70 degrees
  (5 rays), tags [symbol_O_Goal, symbol_X_Goal, symbol_O, symbol_X, wall], ray length 12, 3 stacks
  (``sensor_kit.cast_rays``, ``stacking.VectorStack``);
* ``StackingSensor_size3_VectorSensor_size1`` (3,): StepCount / MaxStep, 3 stacks.

The dynamics are ours, small, and built so that the task **needs memory**:

* The hallway is a corridor of cells (0, 0) .. (0, CORRIDOR) along +z; its end (0, CORRIDOR) is a
  fork with the **O goal on the left** (-1, CORRIDOR) and the **X goal on the right**
  (+1, CORRIDOR), the same in every episode; walls (1 high) everywhere else. The agent starts at
  (0, 0) facing +z. A move is one cell or a 90-degree turn per decision, made at the decision's
  first academy step (the other steps of the period repeat the action, which then only costs the
  step penalty); a move into a wall does nothing, a move into a goal touches it.
* The cue, a block tagged ``symbol_O`` or ``symbol_X`` (drawn at random per episode) in the cell
  ahead of the start, is in the rays **only in the episode's first observation**; the stacked
  sensor carries that observation for two more decisions, and for those first
  ``HOLD_DECISIONS`` = 3 decisions the agent is held at the start (its actions do nothing).
  From the 4th decision on, nothing the agent observes depends on the cue.

Hence: a policy that sees only its current observation (stacks included) acts, from the 4th
decision on, on observations that are the same for an O and an X episode — and before that its
actions are ignored — so it reaches the same goal in both: at best +1 in one and -0.1 in the
other, 0.45 per episode on average, less the step penalties. A policy that remembers the cue
walks CORRIDOR cells, turns to its goal and touches it: 3 + CORRIDOR + 2 = 6 decisions,
return 1 (SetReward replaces the last decision's penalties), 0.992 over the episode. The fork is
only one cell away so that an episode is short (random actions: about 30 decisions): with the
fork 3 cells away, mlagents-learn with Unity's ``ppo/Hallway.yaml`` stayed at 0.30-0.36 for 90k
agent-steps (memoryless ceiling 0.436).

Deviations from Unity: a grid instead of PhysX (moves of a whole cell or turn per decision),
the goals do not swap sides (Unity draws their places per episode, which a memory policy must
then combine with the cue), the cue is hidden after the first observation and the agent held for
the first three decisions (in Unity the symbol stays visible, so memory only helps there).
``gravity`` (Unity's default 19.62) is read at every episode start and has no effect.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.sensor_kit import cast_rays, ray_angles, ray_directions
from unity_rl.standin.scenes.stacking import VectorStack, stacked_name
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

CORRIDOR = 1
"""Cells from the start to the fork."""
HOLD_DECISIONS = 3
"""Decisions at the start whose actions do nothing: the cue's observation and the two more that
the 3-stack carries it in."""
MAX_STEP = 3000
ANGLES = ray_angles(2, 70.0)
TAGS = ("symbol_O_Goal", "symbol_X_Goal", "symbol_O", "symbol_X", "wall")
STACKS = 3
RAY_LENGTH = 12.0
NOTHING, FORWARD, BACK, TURN_RIGHT, TURN_LEFT = range(5)
O, X = 0, 1
_DIRS = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]])
"""(x, z) cell step of headings 0..3 (0 = +z, clockwise seen from above: 1 = +x, the right)."""


def _boxes() -> tuple[np.ndarray, np.ndarray]:
    """The maze's boxes [B, 6] (xmin, ymin, zmin, xmax, ymax, zmax) and tags [B]; the last two are
    the O and the X cue (present only where ``observe`` shows them)."""
    c = CORRIDOR
    boxes = [
        (-1.5, 0, c - 0.5, -0.5, 1, c + 0.5, 0),  # O goal, left of the fork
        (0.5, 0, c - 0.5, 1.5, 1, c + 0.5, 1),  # X goal, right of the fork
        (-1.5, 0, -1.5, -0.5, 1, c - 0.5, 4),  # left wall
        (0.5, 0, -1.5, 1.5, 1, c - 0.5, 4),  # right wall
        (-0.5, 0, -1.5, 0.5, 1, -0.5, 4),  # behind the start
        (-2.5, 0, c + 0.5, 2.5, 1, c + 1.5, 4),  # across the fork
        (-0.5, 0, 0.5, 0.5, 1, 1.5, 2),  # cue O, the cell ahead of the start
        (-0.5, 0, 0.5, 0.5, 1, 1.5, 3),  # cue X
    ]
    table = np.array(boxes, float)
    return table[:, :6], table[:, 6].astype(np.int64)


class HallwayModel:
    spec = BehaviorSpecDef(
        obs=(ObsSpec(stacked_name(STACKS, "RayPerceptionSensor"),
                     (STACKS * len(ANGLES) * (len(TAGS) + 2),), dimension_properties=(1,)),
             ObsSpec(stacked_name(STACKS, "VectorSensor_size1"), (STACKS,),
                     dimension_properties=(1,))),
        branches=(5,),
    )
    set_reward = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng, self.params = rng, params
        max_step = getattr(opts, "max_step", None)
        self.max_step = MAX_STEP if max_step is None else int(max_step)
        """Agent.MaxStep (``--standin-max-step`` changes it): the step penalty is 1/MaxStep."""
        self.cell = np.zeros((n, 2), np.int64)
        self.heading = np.zeros(n, np.int64)
        self.cue = np.zeros(n, np.int64)
        self.seen = np.zeros(n, np.int64)
        """Observations sent in this episode."""
        self.moved = np.ones(n, bool)
        """True once the last decision's action has moved the agent."""
        self.steps = np.zeros(n, np.int64)
        """Academy steps acted in this episode (Unity's StepCount, up to the step in progress)."""
        self.box, self.box_tags = _boxes()
        self.rays = VectorStack(n, len(ANGLES) * (len(TAGS) + 2), STACKS)
        self.vector = VectorStack(n, 1, STACKS)

    def reset(self, idx: np.ndarray) -> None:
        self.params.sample("gravity", 19.62, len(idx))  # read as Unity does; no effect on a grid
        self.cell[idx] = 0
        self.heading[idx] = 0
        self.cue[idx] = self.rng.integers(0, 2, len(idx))
        self.seen[idx] = 0
        self.moved[idx] = True
        self.steps[idx] = 0
        self.rays.clear(idx)
        self.vector.clear(idx)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        a = discrete[:, 0]
        self.steps[idx] += 1
        go = (self.seen[idx] > HOLD_DECISIONS) & ~self.moved[idx]
        self.moved[idx] |= go
        turn = (a == TURN_RIGHT).astype(np.int64) - (a == TURN_LEFT)
        heading = (self.heading[idx] + go * turn) % 4
        self.heading[idx] = heading
        step = go * ((a == FORWARD).astype(np.int64) - (a == BACK))
        target = self.cell[idx] + step[:, None] * _DIRS[heading]
        x, z = target[:, 0], target[:, 1]
        free = (x == 0) & (z >= 0) & (z <= CORRIDOR)
        goal = (np.abs(x) == 1) & (z == CORRIDOR)
        self.cell[idx] = np.where(free[:, None], target, self.cell[idx])
        correct = goal & ((x < 0) == (self.cue[idx] == O))
        reward = np.where(goal, np.where(correct, 1.0, -0.1), -1.0 / max(self.max_step, 1))
        return reward, goal, goal  # a goal's reward replaces the pending one (SetReward)

    def physics_step(self) -> None:
        pass

    def observe(self, idx: np.ndarray) -> list:
        k = len(idx)
        boxes = np.repeat(self.box[None], k, 0)
        show = self.seen[idx] == 0
        for slot, symbol in ((-2, O), (-1, X)):  # hide the cue boxes not shown: xmin > xmax
            hidden = ~(show & (self.cue[idx] == symbol))
            boxes[hidden, slot, 0] = 1.0
            boxes[hidden, slot, 3] = 0.0
        self.seen[idx] += 1
        self.moved[idx] = False
        dirs = ray_directions(self.heading[idx] * (np.pi / 2), ANGLES)  # [k, R, 2]
        start = np.stack([self.cell[idx, 0], np.full(k, 0.5), self.cell[idx, 1]], 1)
        start = np.repeat(start[:, None].astype(float), len(ANGLES), 1)
        end = start + RAY_LENGTH * np.insert(dirs, 1, 0.0, axis=2)
        rays = cast_rays(start, end, boxes, self.box_tags, len(TAGS))
        fraction = self.steps[idx] / self.max_step if self.max_step > 0 else np.zeros(k)
        return [self.rays.push(idx, rays),
                self.vector.push(idx, fraction[:, None].astype(np.float32))]

    def action_mask(self, idx: np.ndarray) -> None:
        return None


def oracle_action(model: HallwayModel, idx: np.ndarray, cue: np.ndarray) -> np.ndarray:
    """The shortest way to the goal of ``cue`` (a policy that remembers it): forward to the
    fork, turn towards the goal, forward into it."""
    cell, heading = model.cell[idx], model.heading[idx]
    at_fork = cell[:, 1] == CORRIDOR
    want = np.where(cue == O, 3, 1)  # heading towards the O goal (-x) or the X goal (+x)
    turn = np.where((heading - want) % 4 == 1, TURN_LEFT, TURN_RIGHT)
    return np.where(at_fork & (heading != want), turn, FORWARD)
