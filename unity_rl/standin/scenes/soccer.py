"""SoccerTwos and StrikersVsGoalie: Unity's competitive scenes (``SoccerEnvController``), small.

One model holds every field of a build (``pool``: the teams' behaviors share it and its agents;
``behavior_of`` puts each agent in its team's behavior at every episode start). A field is a
2 ``L`` x 2 ``W`` box with a goal mouth |z| < ``G`` at each end: the blue goal at x = -L
(defended by team 0, blue), the purple goal at x = +L (team 1, purple). Every academy step
(DecisionPeriod 5, actions repeated between decisions) each agent acts on its three branches of
3 as Unity's ``AgentSoccer.MoveAgent``: forward / back, right / left strafe, rotate left / right;
an agent that touches the ball kicks it away from itself (AddReward(0.2 x ``ball_touch``),
``ball_touch`` read at every episode start, default 0). The ball rolls with friction and bounces
off the walls. Each team is one SimpleMultiAgentGroup (``group_id`` 2 x field + team + 1).

Rewards and ends, as ``SoccerEnvController``: a goal gives the scoring group
AddGroupReward(1 - steps / MaxEnvironmentSteps) and the other AddGroupReward(-1), then
EndGroupEpisode for both; MaxEnvironmentSteps (5000 academy steps) without a goal:
GroupEpisodeInterrupted. StrikersVsGoalie adds the existential term of ``AgentSoccer``:
Striker AddReward(-1/5000), Goalie AddReward(+1/5000) per step; the ball in the blue goal counts
for the Goalie's team (Unity's prefab has both goals).

Behaviors and sensors (Unity's names and sizes; tags relative to the agent's team, which is what
Unity's per-team tag lists amount to):
- SoccerTwos (``SoccerTwos?team=0`` / ``?team=1``, 2 v 2 per field, 8 fields): forward rays
  ``StackingSensor_size3_{Blue|Purple}RayPerceptionSensor`` (5 rays per direction over 60
  degrees, 6 tags [ball, own goal, other goal, wall, own agent, other agent], 3 stacks: 264) and
  backward ``...RayPerceptionSensorReverse`` (1 ray per direction, 45 degrees: 72);
- StrikersVsGoalie (``Striker?team=0``: 2 per field; ``Goalie?team=1``: 1 per field; 8 fields):
  Striker rays with 5 tags [ball, purple goal, wall, blue agent, purple agent] (231 and 63),
  Goalie ``StackingSensor_size3_PurpleGoalieRayPerceptionSensor`` (20 rays per direction over
  180 degrees, 4 tags [ball, purple goal, wall, blue agent]: 738).

``--standin-scripted-team N``: team N's agents ignore their actions and follow a script (walk
to the point behind the ball on the line to the goal they attack, then through the ball): a
fixed opponent against which a trained policy can be measured. ``--standin-scripted-skill P``
weakens it: each academy step a scripted agent follows the script with probability P (default
1) and takes a uniformly random action otherwise. Deviations from Unity: a flat 2-D
field, box-shaped bodies for the ray caster, a small field so that goals come quickly.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.sensor_kit import cast_rays, ray_angles, ray_directions
from unity_rl.standin.scenes.stacking import VectorStack, stacked_name
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

L, W, G = 1.5, 1.0, 0.45
"""Half length, half width, goal-mouth half width of a field."""
MAX_ENV_STEPS = 5000
FORWARD, LATERAL, TURN = 0.03, 0.02, 0.08
"""Per academy step: forward/back and strafe distances, rotation (radians)."""
TOUCH, KICK, FRICTION = 0.2, 0.07, 0.97
RAY_LENGTH = 3.0
AGENT_HALF, BALL_HALF = 0.08, 0.06
TAG_KEYS = ("ball", "own_goal", "other_goal", "wall", "own_agent", "other_agent")


class _Role:
    """One behavior's body and sensors."""

    def __init__(self, name: str, team: int, sensors: tuple, tags: tuple[str, ...]):
        self.name, self.team, self.tags = name, team, tags
        self.sensors = sensors
        """(sensor name, rays per direction, max degrees, backward) per sensor, in Python's order."""
        per_ray = len(tags) + 2
        self.sizes = [len(ray_angles(r, d)) * per_ray for _, r, d, _ in sensors]
        self.spec = BehaviorSpecDef(
            obs=tuple(ObsSpec(stacked_name(3, s[0]), (3 * n,), dimension_properties=(1,))
                      for s, n in zip(sensors, self.sizes)), branches=(3, 3, 3))


def _striker(color: str, team: int, tags) -> _Role:
    return _Role(color, team, ((f"{color}RayPerceptionSensor", 5, 60.0, False),
                               (f"{color}RayPerceptionSensorReverse", 1, 45.0, True)), tags)


class SoccerModel:
    """Every field of a build; ``roles[j]`` is the role of the j-th agent of a field."""

    set_reward = False
    acts_between_decisions = True
    roles: tuple[_Role, ...] = ()
    existential = 0.0

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        per = len(self.roles)
        if n % per:
            raise ValueError(f"{type(self).__name__} needs a multiple of {per} agents")
        self.rng, self.params, self.n, self.fields = rng, params, n, n // per
        self.slot = np.arange(n) % per
        self.field = np.arange(n) // per
        self.team = np.array([self.roles[j].team for j in self.slot])
        self.group_id = (2 * self.field + self.team + 1).astype(np.int64)
        self.group_reward = np.zeros(n, np.float32)
        self.scripted = getattr(opts, "scripted_team", None)
        self.skill = getattr(opts, "scripted_skill", 1.0)
        self.pos = np.zeros((n, 2))
        self.heading = np.zeros(n)
        self.ball = np.zeros((self.fields, 2))
        self.ball_vel = np.zeros((self.fields, 2))
        self.steps = np.zeros(self.fields, np.int64)
        self.over = np.ones(self.fields, bool)
        self.end = np.zeros(n, bool)
        self.cut = np.zeros(n, bool)
        self.ball_touch = 0.0
        self.stacks = [[VectorStack(n, size, 3) for size in role.sizes] for role in self.roles]
        self.goals = np.zeros(2, np.int64)
        """Goals scored by team 0 and team 1 since the start (for tests and benchmarks)."""

    def spec_for(self, behavior: str) -> BehaviorSpecDef:
        return self._role_of(behavior).spec

    @property
    def spec(self) -> BehaviorSpecDef:
        return self.roles[0].spec

    def _role_of(self, behavior: str) -> _Role:
        raise NotImplementedError

    def behavior_of(self, idx: np.ndarray) -> np.ndarray:
        """The pool's behaviors are the teams, in team order."""
        return self.team[idx]

    # -- episodes -------------------------------------------------------------------------------
    def reset(self, idx: np.ndarray) -> None:
        for f in np.unique(self.field[idx]).tolist():
            members = np.flatnonzero(self.field == f)
            if self.over[f] or np.isin(members, idx).all():
                self.ball_touch = self.params.sample("ball_touch", 0.0, 1)
                self.params.sample("gravity", 9.81, 1)  # read as Unity; no effect in 2-D
                self.over[f] = False
                self.steps[f] = 0
                self.ball[f] = self.rng.uniform([-0.1, -0.3], [0.1, 0.3])
                self.ball_vel[f] = 0.0
                for j, m in enumerate(members):
                    side = -1.0 if self.team[m] == 0 else 1.0
                    self.pos[m] = [side * self.rng.uniform(0.5, 1.2),
                                   self.rng.uniform(-0.6, 0.6)]
                    self.heading[m] = -side * np.pi / 2
                # pending ends and undelivered group rewards of the other team stay: they are
                # sent with that team's terminal infos at its next step
        for j, role in enumerate(self.roles):
            mine = idx[self.slot[idx] == j]
            for stack in self.stacks[j]:
                stack.clear(mine)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        ended = self.end[idx].copy()
        interrupted = self.cut[idx].copy()
        self.end[idx] = self.cut[idx] = False
        reward = np.zeros(len(idx), np.float32)
        live = ~ended
        moving, d = idx[live], np.asarray(discrete)[live]
        if len(moving):
            if self.scripted is not None:
                d = np.where((self.team[moving] == self.scripted)[:, None], self._script(moving), d)
            self.heading[moving] += TURN * ((d[:, 2] == 1) * -1.0 + (d[:, 2] == 2) * 1.0)
            fwd = FORWARD * ((d[:, 0] == 1) * 1.0 - (d[:, 0] == 2) * 0.5)
            side = LATERAL * ((d[:, 1] == 1) * 1.0 - (d[:, 1] == 2) * 1.0)
            h = self.heading[moving]
            step = fwd[:, None] * np.stack([np.sin(h), np.cos(h)], 1) + \
                side[:, None] * np.stack([np.cos(h), -np.sin(h)], 1)
            self.pos[moving] = np.clip(self.pos[moving] + step, [-L, -W], [L, W])
            touched = self._kick(moving)
            reward[live] += 0.2 * self.ball_touch * touched
            sign = np.where(self.team[moving] == 0, -1.0, 1.0)  # Striker (blue) pays, Goalie earns
            reward[live] += self.existential * sign
        return reward, ended, None, interrupted

    def _kick(self, idx: np.ndarray) -> np.ndarray:
        away = self.ball[self.field[idx]] - self.pos[idx]
        dist = np.linalg.norm(away, axis=1)
        touched = dist < TOUCH
        for i in np.flatnonzero(touched).tolist():
            f = self.field[idx[i]]
            self.ball_vel[f] = KICK * away[i] / max(dist[i], 1e-6)
        return touched.astype(np.float32)

    def _script(self, idx: np.ndarray) -> np.ndarray:
        """Actions of the scripted team: face the point behind the ball, walk, push through."""
        attack = np.where(self.team[idx] == 0, 1.0, -1.0)
        ball = self.ball[self.field[idx]]
        goal = np.stack([attack * L, np.zeros(len(idx))], 1)
        to_goal = goal - ball
        to_goal /= np.linalg.norm(to_goal, axis=1, keepdims=True) + 1e-9
        target = ball - 0.15 * to_goal
        # on the wrong side of the ball: go round it (beside it, then behind), not through it
        ahead = np.sum((self.pos[idx] - ball) * to_goal, axis=1) > -0.05
        beside = np.stack([-to_goal[:, 1], to_goal[:, 0]], 1)
        beside *= np.sign(np.sum((self.pos[idx] - ball) * beside, axis=1) + 1e-9)[:, None]
        target[ahead] = (ball - 0.3 * to_goal + 0.35 * beside)[ahead]
        to_target = target - self.pos[idx]
        near = ~ahead & (np.linalg.norm(to_target, axis=1) < 0.08)
        to_target[near] = (ball - self.pos[idx])[near]
        want = np.arctan2(to_target[:, 0], to_target[:, 1])
        diff = (want - self.heading[idx] + np.pi) % (2 * np.pi) - np.pi
        out = np.zeros((len(idx), 3), np.int64)
        out[:, 0] = np.where(np.abs(diff) < 0.6, 1, 0)
        out[:, 2] = np.where(diff > 0.05, 2, np.where(diff < -0.05, 1, 0))
        if self.skill < 1.0:  # a weaker opponent: a random action instead, now and then
            wander = self.rng.random(len(idx)) >= self.skill
            out[wander] = self.rng.integers(0, 3, (int(wander.sum()), 3))
        return out

    def physics_step(self) -> None:
        live = ~self.over
        self.ball[live] += self.ball_vel[live]
        self.ball_vel[live] *= FRICTION
        z = self.ball[:, 1]
        hit = np.abs(z) > W
        self.ball_vel[hit, 1] *= -1.0
        self.ball[:, 1] = np.clip(z, -W, W)
        self.steps[live] += 1
        for f in np.flatnonzero(live).tolist():
            x, z = self.ball[f]
            members = np.flatnonzero(self.field == f)
            if abs(x) > L and abs(z) < G:
                scorer = 0 if x > 0 else 1
                self._goal(f, members, scorer)
            elif abs(x) > L:
                self.ball_vel[f, 0] *= -1.0
                self.ball[f, 0] = np.clip(x, -L, L)
            elif self.steps[f] >= MAX_ENV_STEPS:
                self.end[members] = self.cut[members] = True  # GroupEpisodeInterrupted
                self.over[f] = True

    def _goal(self, f: int, members: np.ndarray, scorer: int) -> None:
        self.goals[scorer] += 1
        win = members[self.team[members] == scorer]
        lose = members[self.team[members] != scorer]
        self.group_reward[win] += 1.0 - self.steps[f] / MAX_ENV_STEPS
        self.group_reward[lose] += -1.0
        self.end[members] = True  # EndGroupEpisode for both groups
        self.over[f] = True

    # -- sensors --------------------------------------------------------------------------------
    def observe(self, idx: np.ndarray) -> list:
        j = int(self.slot[idx[0]]) if len(idx) else 0
        role = self.roles[j]
        boxes, tags = self._boxes(idx, role)
        out = []
        for (name, rays, degrees, backward), stack in zip(role.sensors, self.stacks[j]):
            heading = self.heading[idx] + (np.pi if backward else 0.0)
            dirs = ray_directions(heading, ray_angles(rays, degrees))
            start = np.zeros(dirs.shape[:2] + (3,))
            start[..., 0], start[..., 2] = self.pos[idx, None, 0], self.pos[idx, None, 1]
            start[..., 1] = 0.5
            end = start.copy()
            end[..., 0] += RAY_LENGTH * dirs[..., 0]
            end[..., 2] += RAY_LENGTH * dirs[..., 1]
            values = cast_rays(start, end, boxes, tags, len(role.tags))
            out.append(stack.push(idx, values))
        return out

    def _boxes(self, idx: np.ndarray, role: _Role):
        """Per observer: walls, goals, ball and every agent of its field as boxes, tagged by
        what they are to the observer (absent where the role has no such tag)."""
        k = len(idx)
        field = self.field[idx]
        rows, kinds = [], []

        def box(x0, z0, x1, z1, kind):
            b = np.zeros((k, 6))
            b[:, 0], b[:, 2], b[:, 3], b[:, 5] = x0, z0, x1, z1
            b[:, 4] = 1.0
            rows.append(b)
            kinds.append(kind)

        t = 0.1
        for x0, z0, x1, z1 in ((-L - t, W, L + t, W + t), (-L - t, -W - t, L + t, -W),
                               (-L - t, G, -L, W), (-L - t, -W, -L, -G),
                               (L, G, L + t, W), (L, -W, L + t, -G)):
            box(x0, z0, x1, z1, "wall")
        box(-L - t, -G, -L, G, "goal0")  # the blue goal (team 0 defends it)
        box(L, -G, L + t, G, "goal1")
        ball = self.ball[field]
        box(ball[:, 0] - BALL_HALF, ball[:, 1] - BALL_HALF, ball[:, 0] + BALL_HALF,
            ball[:, 1] + BALL_HALF, "ball")
        per = len(self.roles)
        for j in range(per):
            other = field * per + j
            p = self.pos[other]
            box(p[:, 0] - AGENT_HALF, p[:, 1] - AGENT_HALF, p[:, 0] + AGENT_HALF,
                p[:, 1] + AGENT_HALF, f"agent{self.roles[j].team}")
        boxes = np.stack(rows, 1)
        tags = np.zeros(len(kinds), np.int64)
        for b, kind in enumerate(kinds):
            if kind.startswith("goal"):
                team = int(kind[-1])
                # every observer of a role is on one team: the box is its own or the other goal
                key = "own_goal" if team == role.team else "other_goal"
            elif kind.startswith("agent"):
                key = "own_agent" if int(kind[-1]) == role.team else "other_agent"
            else:
                key = kind
            if key in role.tags:
                tags[b] = role.tags.index(key)
            else:
                boxes[:, b, 0], boxes[:, b, 3] = 1.0, -1.0  # not detectable: absent
        return boxes, tags

    def action_mask(self, idx: np.ndarray):
        return None


class SoccerTwosModel(SoccerModel):
    """2 v 2 per field, symmetric teams (see the module doc)."""

    roles = (_striker("Blue", 0, TAG_KEYS), _striker("Blue", 0, TAG_KEYS),
             _striker("Purple", 1, TAG_KEYS), _striker("Purple", 1, TAG_KEYS))

    def _role_of(self, behavior: str) -> _Role:
        team = int(behavior.partition("?team=")[2] or 0)
        return next(r for r in self.roles if r.team == team)


_STRIKER_TAGS = ("ball", "other_goal", "wall", "own_agent", "other_agent")
"""Unity's [ball, purpleGoal, wall, blueAgent, purpleAgent] for a blue Striker."""
_GOALIE_TAGS = ("ball", "own_goal", "wall", "other_agent")
"""Unity's [ball, purpleGoal, wall, blueAgent] for the purple Goalie."""


class StrikersVsGoalieModel(SoccerModel):
    """Two blue Strikers against one purple Goalie per field (see the module doc)."""

    roles = (_striker("Blue", 0, _STRIKER_TAGS), _striker("Blue", 0, _STRIKER_TAGS),
             _Role("PurpleGoalie", 1, (("PurpleGoalieRayPerceptionSensor", 20, 180.0, False),),
                   _GOALIE_TAGS))
    existential = 1.0 / MAX_ENV_STEPS

    def _role_of(self, behavior: str) -> _Role:
        return self.roles[2] if behavior.startswith("Goalie") else self.roles[0]
