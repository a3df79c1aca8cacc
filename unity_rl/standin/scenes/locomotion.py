"""Crawler, Walker and Worm: Unity's continuous-control walkers as a kinematic abstraction.

Not PhysX. Each agent is a *body* on an endless flat floor: a root (Crawler ``Body``, Walker
``hips``, Worm ``bodySegment0``) with a heading, a planar velocity and — for Crawler and Walker —
a tilt (pitch, roll) that is an unstable inverted pendulum, plus a tree of jointed parts with
Unity's names, joint axes and action layout. The continuous actions are Unity's: first the joint
target rotations (in [-1, 1], the joint limits), then one *strength* per jointed part
((a + 1) / 2 of the maximum joint force). Joints follow their targets at a rate that grows with
their strength. A fixed linear map of the joint angles (the same in every build: the body's
"gait") gives four controls in [-1, 1]: forward drive, turning, and pitch and roll torques.
So, as in Unity, the joints move the body: the policy must find the joint patterns that drive,
steer and keep the body upright.

Per academy step (Unity's fixedDeltaTime here: 0.01333 s): forward speed relaxes towards
``max_speed * max(drive, 0) * mean strength``; the heading turns by up to ``turn`` rad/s;
the tilt obeys ``tilt'' = K tilt - D tilt' + B torque`` (K > 0: it falls over unless balanced).
A tilt beyond ``tilt_limit`` is a ground contact of a part that Unity marks
``agentDoneOnGroundContact``: SetReward(-1) and EndEpisode.

Reward, as Unity's agents, added at *every* academy step (FixedUpdate): the target direction
``f`` (unit vector to the target, Unity's orientation cube), the velocity goal ``f * v*``:
``match = (1 - (min(|v - f v*|, v*) / v*)^2)^2`` times ``look = (f . forward + 1) / 2``
(Worm: ``1 - angle/180`` when the heading is within 30 degrees of ``f``, else 0). At most 1 per
academy step, 5000 per episode (MaxStep 5000, DecisionPeriod 5). The target speed ``v*`` is
drawn per episode (Crawler U(0.1, 15), Walker U(0.1, 10); Worm: 10 always), the target stands
10 to 20 away in a random direction and moves elsewhere when the body comes within 1.5 of it.

Observations have Unity's sensors, names and sizes, filled from the abstraction: velocities,
velocity goal, target position and rotation deltas in the orientation-cube frame, then per body
part ground contact, velocity, angular velocity, position and rotation quaternions computed by
forward kinematics of the part tree (plus Crawler's ``PhysicsBodySensor:Body``: model-space
translation, rotation and linear velocity of its 9 bodies, then their local rotations).
Unity's actions are applied only at decisions (TakeActionsBetweenDecisions off) and then hold as
joint targets; here the academy repeats the decision's action at every step, the same thing for
joint targets.

The forward kinematics of the part trees (parts, rotations, quaternions) is ``kinematics.py``;
here are the three bodies (Crawler, Walker, Worm) on one model, their sensor layouts and the
scripted balance controller.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import BehaviorSpecDef
from unity_rl.standin.scenes.kinematics import (Part, axis_rotation, quaternion, tree_kinematics,
                                                wrap_angle, yaw_quaternion)
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

DT = 0.01333
"""Fixed timestep of Unity's Crawler, Walker and Worm scenes (ProjectSettingsOverrides)."""
JOINT_LIMIT = 1.0
"""Joint target range in radians for an action of +-1."""


class LocomotionModel:
    """A body of ``PARTS`` driven by joint actions; subclasses declare the scene."""

    PARTS: tuple[Part, ...] = ()
    ROOT_HEIGHT = 1.0
    CONTACT_HEIGHT = 0.1
    MAX_SPEED = 6.0
    TURN = 2.0
    BALANCE = True
    K, D, B = 3.0, 1.0, 8.0
    TILT_LIMIT = 0.7
    SPEED_RANGE = (0.1, 10.0)
    WORM_FACING = False
    spec: BehaviorSpecDef
    set_reward = False
    acts_between_decisions = True

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None):
        self.rng, self.params = rng, params
        parts = self.PARTS
        self.dof = [(p, a) for p, part in enumerate(parts) for a in part.axes]
        self.jointed = [p for p, part in enumerate(parts) if part.axes]
        self.n_rot, self.n_str = len(self.dof), len(self.jointed)
        self.strength_of_dof = np.array([self.jointed.index(p) for p, _ in self.dof])
        controls = 4 if self.BALANCE else 2
        gait = np.random.default_rng(17).normal(size=(self.n_rot, controls))
        self.gait = 1.5 * np.linalg.qr(gait)[0].T  # [controls, n_rot], orthogonal rows
        self.pos, self.vel = np.zeros((n, 2)), np.zeros((n, 2))
        self.heading, self.tilt, self.tilt_rate = np.zeros(n), np.zeros((n, 2)), np.zeros((n, 2))
        self.theta, self.strength = np.zeros((n, self.n_rot)), np.ones((n, self.n_str))
        self.prev = (self.heading.copy(), self.tilt.copy(), self.theta.copy(), self.pos.copy())
        self.target, self.speed = np.zeros((n, 2)), np.ones(n)
        self.fallen = np.zeros(n, bool)

    # -- Unity's OnEpisodeBegin / OnActionReceived + FixedUpdate ---------------------------

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        self.pos[idx] = 0.0
        self.vel[idx] = 0.0
        self.heading[idx] = self.rng.uniform(-np.pi, np.pi, k)
        self.tilt[idx] = self.rng.uniform(-0.05, 0.05, (k, 2)) if self.BALANCE else 0.0
        self.tilt_rate[idx] = 0.0
        self.theta[idx] = 0.0
        self.strength[idx] = 1.0
        self.fallen[idx] = False
        lo, hi = self.SPEED_RANGE
        self.speed[idx] = self.rng.uniform(lo, hi, k)
        self._new_target(idx)
        for prev, now in zip(self.prev, (self.heading, self.tilt, self.theta, self.pos)):
            prev[idx] = now[idx]

    def _new_target(self, idx: np.ndarray) -> None:
        angle = self.rng.uniform(-np.pi, np.pi, len(idx))
        dist = self.rng.uniform(10.0, 20.0, len(idx))
        self.target[idx] = self.pos[idx] + dist[:, None] * np.stack(
            [np.sin(angle), np.cos(angle)], 1)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        for prev, now in zip(self.prev, (self.heading, self.tilt, self.theta, self.pos)):
            prev[idx] = now[idx]
        a = np.clip(continuous, -1.0, 1.0)
        strength = (a[:, self.n_rot:] + 1.0) / 2.0
        self.strength[idx] = strength
        theta = self.theta[idx]
        rate = 0.1 + 0.4 * strength[:, self.strength_of_dof]
        theta += (a[:, :self.n_rot] * JOINT_LIMIT - theta) * rate
        self.theta[idx] = theta
        u = np.clip(theta / JOINT_LIMIT @ self.gait.T, -1.0, 1.0)
        heading = self.heading[idx] + self.TURN * u[:, 1] * DT
        self.heading[idx] = heading
        forward = np.stack([np.sin(heading), np.cos(heading)], 1)
        drive = self.MAX_SPEED * np.maximum(u[:, 0], 0.0) * strength.mean(1)
        vel = self.vel[idx]
        vel += (drive[:, None] * forward - vel) * 0.1
        self.vel[idx] = vel
        self.pos[idx] += vel * DT
        ended = np.zeros(len(idx), bool)
        if self.BALANCE:
            tilt, rate_t = self.tilt[idx], self.tilt_rate[idx]
            rate_t += (self.K * tilt - self.D * rate_t + self.B * u[:, 2:4]) * DT
            tilt += rate_t * DT
            self.tilt[idx], self.tilt_rate[idx] = tilt, rate_t
            ended = (np.abs(tilt) > self.TILT_LIMIT).any(1)
            self.fallen[idx] = ended
        to_target = self.target[idx] - self.pos[idx]
        dist = np.linalg.norm(to_target, axis=1)
        f = to_target / np.maximum(dist, 1e-6)[:, None]
        v_star = self.speed[idx]
        delta = np.minimum(np.linalg.norm(vel - f * v_star[:, None], axis=1), v_star)
        match = (1.0 - (delta / v_star) ** 2) ** 2
        cos = (f * forward).sum(1)
        if self.WORM_FACING:
            angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
            look = np.where(angle < 30.0, 1.0 - angle / 180.0, 0.0)
        else:
            look = (cos + 1.0) / 2.0
        reward = np.where(ended, -1.0, match * look)
        reached = idx[(dist < 1.5) & ~ended]
        if len(reached):
            self._new_target(reached)
        return reward, ended, ended  # a fall is SetReward(-1), the rest AddReward

    def physics_step(self) -> None:
        pass

    def action_mask(self, idx: np.ndarray) -> None:
        return None

    # -- sensors ------------------------------------------------------------------------------

    def _cube(self, idx: np.ndarray):
        """Orientation cube: yaw towards the target; world (x, z) -> cube frame."""
        d = self.target[idx] - self.pos[idx]
        return np.arctan2(d[:, 0], d[:, 1])

    def _to_cube(self, yaw: np.ndarray, v: np.ndarray) -> np.ndarray:
        """World vectors [k, ..., 3] into the cube frame (rotation by -yaw about y)."""
        r = axis_rotation("y", -yaw)
        return np.einsum("kij,k...j->k...i", r, v)

    def kinematics(self, idx: np.ndarray, heading, tilt, theta, pos):
        """World rotations [k, P, 3, 3], positions [k, P, 3] and joint (local) rotations of every
        part, by forward kinematics down the part tree."""
        return tree_kinematics(self, idx, heading, tilt, theta, pos)

    def body_state(self, idx: np.ndarray):
        """Per part, in the cube frame: contact, velocity, angular velocity, position, world and
        local rotations; and the cube yaw."""
        yaw = self._cube(idx)
        r1, p1, local = self.kinematics(idx, self.heading, self.tilt, self.theta, self.pos)
        r0, p0, _ = self.kinematics(idx, *self.prev)
        vel = self._to_cube(yaw, (p1 - p0) / DT)
        s = r1 @ np.swapaxes(r0, -1, -2)
        ang = np.stack([s[..., 2, 1] - s[..., 1, 2], s[..., 0, 2] - s[..., 2, 0],
                        s[..., 1, 0] - s[..., 0, 1]], -1) / (2 * DT)
        ang = self._to_cube(yaw, ang)
        contact = p1[..., 1] < self.CONTACT_HEIGHT
        done_parts = np.array([part.done_on_ground for part in self.PARTS])
        contact |= self.fallen[idx, None] & done_parts[None, :]
        rel = self._to_cube(yaw, p1 - p1[:, :1])
        cube_rot = axis_rotation("y", -yaw)[:, None] @ r1
        return dict(yaw=yaw, contact=contact.astype(np.float32), vel=vel, ang=ang, rel=rel,
                    rot=cube_rot, local=local)

    def goal_features(self, idx: np.ndarray, yaw: np.ndarray):
        """Velocity goal and average velocity in the cube frame, their distance, target position
        in the cube frame, and the yaw from the root's forward to the cube's."""
        k = len(idx)
        zeros = np.zeros(k)
        vel_goal = np.stack([zeros, zeros, self.speed[idx]], 1)
        v = self.vel[idx]
        avg = self._to_cube(yaw, np.stack([v[:, 0], zeros, v[:, 1]], 1))
        d = self.target[idx] - self.pos[idx]
        target = self._to_cube(yaw, np.stack([d[:, 0], zeros, d[:, 1]], 1))
        delta_yaw = wrap_angle(yaw - self.heading[idx])
        return vel_goal, avg, np.linalg.norm(vel_goal - avg, axis=1), target, delta_yaw


# -- the three scenes -----------------------------------------------------------------------

def _crawler_parts() -> tuple[Part, ...]:
    parts = [Part("body", -1, (0, 0, 0), "", True)]
    for i, (sx, sz) in enumerate(((1, 1), (-1, 1), (-1, -1), (1, -1))):
        upper = len(parts)
        parts.append(Part(f"leg{i}Upper", 0, (0.5 * sx, 0.0, 0.5 * sz), "xz", True))
        parts.append(Part(f"leg{i}Lower", upper, (0.4 * sx, -0.35, 0.4 * sz), "x", False))
    return tuple(parts)


class CrawlerModel(LocomotionModel):
    """Unity's Crawler: 4 legs, 20 actions (12 joint rotations + 8 strengths)."""

    PARTS = _crawler_parts()
    ROOT_HEIGHT, CONTACT_HEIGHT = 0.6, 0.3
    MAX_SPEED, TURN = 10.0, 2.5
    K, D, B = 0.8, 1.5, 4.0
    SPEED_RANGE = (0.1, 15.0)
    spec = BehaviorSpecDef(
        obs=(ObsSpec("PhysicsBodySensor:Body", (126,), dimension_properties=(1,)),
             ObsSpec("VectorSensor_size32", (32,), dimension_properties=(1,))),
        continuous=20,
    )

    def observe(self, idx: np.ndarray) -> list:
        b = self.body_state(idx)
        k = len(idx)
        model_space = np.concatenate([b["rel"], quaternion(b["rot"]), b["vel"]], -1)  # [k,9,10]
        physics = np.concatenate([model_space.reshape(k, -1),
                                  quaternion(b["local"]).reshape(k, -1)], 1)
        vel_goal, avg, dist, target, dyaw = self.goal_features(idx, b["yaw"])
        height = np.full((k, 1), self.ROOT_HEIGHT / 10.0) * np.cos(self.tilt[idx]).prod(1,
                                                                                    keepdims=True)
        vector = np.concatenate([dist[:, None], avg, vel_goal, yaw_quaternion(dyaw), target,
                                 height, b["contact"], self.strength[idx]], 1)
        return [physics.astype(np.float32), vector.astype(np.float32)]


_WALKER = (
    Part("hips", -1, (0, 0, 0), "", True),
    Part("chest", 2, (0, 0.25, 0), "xyz", True),
    Part("spine", 0, (0, 0.25, 0), "xyz", True),
    Part("head", 1, (0, 0.35, 0), "xy", True),
    Part("thighL", 0, (-0.15, -0.1, 0), "xz", True),
    Part("shinL", 4, (0, -0.45, 0), "x"),
    Part("footL", 5, (0, -0.4, 0.1), "xyz"),
    Part("thighR", 0, (0.15, -0.1, 0), "xz", True),
    Part("shinR", 7, (0, -0.45, 0), "x"),
    Part("footR", 8, (0, -0.4, 0.1), "xyz"),
    Part("armL", 1, (-0.25, 0.1, 0), "xz", True),
    Part("forearmL", 10, (0, -0.3, 0), "x", True),
    Part("handL", 11, (0, -0.25, 0), "", True),
    Part("armR", 1, (0.25, 0.1, 0), "xz", True),
    Part("forearmR", 13, (0, -0.3, 0), "x", True),
    Part("handR", 14, (0, -0.25, 0), "", True),
)


class WalkerModel(LocomotionModel):
    """Unity's Walker: 16 body parts, 39 actions (26 joint rotations + 13 strengths)."""

    PARTS = _WALKER
    ROOT_HEIGHT, CONTACT_HEIGHT = 0.95, 0.1
    MAX_SPEED, TURN = 6.0, 2.0
    K, D, B = 3.0, 1.0, 8.0
    SPEED_RANGE = (0.1, 10.0)
    spec = BehaviorSpecDef(
        obs=(ObsSpec("VectorSensor_size243", (243,), dimension_properties=(1,)),),
        continuous=39,
    )

    def observe(self, idx: np.ndarray) -> list:
        b = self.body_state(idx)
        k = len(idx)
        vel_goal, avg, dist, target, dyaw = self.goal_features(idx, b["yaw"])
        head_yaw = dyaw - self.theta[idx, self._head_yaw]
        per_part = np.concatenate([b["contact"][..., None], b["vel"], b["ang"], b["rel"]], -1)
        jointed = quaternion(b["local"][:, self.jointed])  # [k, 13, 4]
        joint_part = np.concatenate([jointed, self.strength[idx][..., None]], -1)
        obs = np.concatenate([dist[:, None], avg, vel_goal, yaw_quaternion(dyaw),
                              yaw_quaternion(wrap_angle(head_yaw)), target,
                              per_part.reshape(k, -1), joint_part.reshape(k, -1)], 1)
        return [obs.astype(np.float32)]

    @property
    def _head_yaw(self) -> int:
        return [i for i, (p, a) in enumerate(self.dof) if self.PARTS[p].name == "head"
                and a == "y"][0]


_WORM = (
    Part("bodySegment0", -1, (0, 0, 0), ""),
    Part("bodySegment1", 0, (0, 0, -0.6), "xy"),
    Part("bodySegment2", 1, (0, 0, -0.6), "xy"),
    Part("bodySegment3", 2, (0, 0, -0.6), "xy"),
)


class WormModel(LocomotionModel):
    """Unity's Worm: 4 segments, 9 actions (6 joint rotations + 3 strengths); lies on the floor
    (no balance, no falls: episodes end at MaxStep)."""

    PARTS = _WORM
    ROOT_HEIGHT, CONTACT_HEIGHT = 0.25, 0.5
    MAX_SPEED, TURN = 3.0, 1.5
    BALANCE = False
    SPEED_RANGE = (10.0, 10.0)
    WORM_FACING = True
    spec = BehaviorSpecDef(
        obs=(ObsSpec("VectorSensor_size64", (64,), dimension_properties=(1,)),),
        continuous=9,
    )

    def observe(self, idx: np.ndarray) -> list:
        b = self.body_state(idx)
        k = len(idx)
        vel_goal, avg, dist, target, dyaw = self.goal_features(idx, b["yaw"])
        height = np.full((k, 1), self.ROOT_HEIGHT / 10.0)
        strength = np.concatenate([np.ones((k, 1)), self.strength[idx]], 1)  # segment 0: none
        seg_height = (b["rel"][..., 1:2] + self.ROOT_HEIGHT)
        per_part = np.concatenate([b["contact"][..., None], b["vel"], b["ang"],
                                   quaternion(b["local"]), strength[..., None], seg_height], -1)
        obs = np.concatenate([height, vel_goal, np.abs(dyaw)[:, None] / np.pi,
                              yaw_quaternion(dyaw), target, per_part.reshape(k, -1)], 1)
        return [obs.astype(np.float32)]


def balance_controller(model: LocomotionModel, idx: np.ndarray) -> np.ndarray:
    """A scripted policy from the true state (checks the task is solvable): joint targets that
    drive at the target speed towards the target and, with balance, hold the body upright."""
    k = len(idx)
    to_target = model.target[idx] - model.pos[idx]
    err = wrap_angle(np.arctan2(to_target[:, 0], to_target[:, 1]) - model.heading[idx])
    want = [np.clip(model.speed[idx] / model.MAX_SPEED, 0, 1) * (np.abs(err) < 0.5),
            np.clip(3.0 * err, -1, 1)]
    if model.BALANCE:
        gain = 2.0 * model.K / model.B
        want += list(np.clip(-(gain * model.tilt[idx] + 0.6 * model.tilt_rate[idx]).T, -1, 1))
    u = np.stack(want, 1)
    theta = u @ np.linalg.pinv(model.gait).T  # joint angles that give u (gait rows orthogonal)
    actions = np.ones((k, model.n_rot + model.n_str))
    actions[:, :model.n_rot] = np.clip(theta, -1, 1)
    return actions
