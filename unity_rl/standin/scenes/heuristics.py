"""Built-in heuristics of the stand-in scenes: Unity's ``Agent.Heuristic`` (what an agent does
under Behavior Type "Heuristic Only"), written as experts that play well, so that a stand-in can
record demonstrations as Unity's Demonstration Recorder does (``unity_rl.standin.record``).

A heuristic reads the model's own state (an expert who sees the scene, as a person at the
keyboard does) and returns ``(continuous [k, C] float32, discrete [k, B] int32)`` for the agents
``idx``. ``HEURISTICS`` maps a model class to its heuristic; a scene without one cannot record.

- **PushBlock**: walk to the block's far side from the goal (around it, not through it), face
  +z, line up with the block by strafing and push it into the goal zone.
- **Hallway**: the oracle (``hallway.oracle_action``): to the fork, towards the goal of the cue.
- **Pyramids**: ``pyramids.heuristic_action``: the shortest way to the switch, the pyramid
  (pushing it over), then the gold brick.
- **Crawler**: the inverse of the body's gait: the four controls wanted (forward drive matched
  to the target speed, turning towards the target, pitch and roll torques that balance the
  tilt) mapped back to joint targets through the gait's orthogonal rows, full strength.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from unity_rl.standin.scenes.blocks import RADIUS, PushBlockModel
from unity_rl.standin.scenes.hallway import HallwayModel, oracle_action
from unity_rl.standin.scenes.kinematics import wrap_angle
from unity_rl.standin.scenes.locomotion import JOINT_LIMIT, CrawlerModel, LocomotionModel
from unity_rl.standin.scenes.pyramids import PyramidsModel, heuristic_action

Heuristic = Callable[[object, np.ndarray], tuple[np.ndarray, np.ndarray]]

_NOTHING, _FORWARD, _BACK, _RIGHT, _LEFT, _STRAFE_LEFT, _STRAFE_RIGHT = range(7)


def pushblock(model: PushBlockModel, idx: np.ndarray):
    pos, heading = model.pos[idx], model.heading[idx]
    block, half = model.block[idx], model.block_half[idx]
    behind_z = block[:, 1] - half - RADIUS - 0.15  # where the agent stands to push
    dx = block[:, 0] - pos[:, 0]
    behind = pos[:, 1] < block[:, 1] - half - 0.2
    aligned = np.abs(dx) < 0.35 * half
    # waypoint: behind the block if already below it, else beside it first (go around)
    side = np.where(dx > 0, -1.0, 1.0)  # the block's side the agent is on
    around = np.stack([block[:, 0] + side * (half + RADIUS + 0.6), behind_z - 0.3], 1)
    goal = np.stack([block[:, 0], behind_z], 1)
    waypoint = np.where(behind[:, None], goal, around)
    to = waypoint - pos
    want = np.arctan2(to[:, 0], to[:, 1])
    error = wrap_angle(want - heading)
    walk = np.where(np.abs(error) > np.deg2rad(12), np.where(error > 0, _RIGHT, _LEFT), _FORWARD)
    # pushing: face +z, keep lined up with the block by strafing, forward
    facing = wrap_angle(-heading)  # a decision turns 20 degrees: a tolerance over half of it
    push = np.where(np.abs(facing) > np.deg2rad(11), np.where(facing > 0, _RIGHT, _LEFT),
                    np.where(dx > 0.2 * half, _STRAFE_RIGHT,
                             np.where(dx < -0.2 * half, _STRAFE_LEFT, _FORWARD)))
    near = np.linalg.norm(to, axis=1) < 0.5
    action = np.where(behind & (aligned | near), push, walk)
    return np.zeros((len(idx), 0), np.float32), action[:, None].astype(np.int32)


def hallway(model: HallwayModel, idx: np.ndarray):
    return np.zeros((len(idx), 0), np.float32), oracle_action(model, idx, model.cue[idx])[:, None]


def locomotion(model: LocomotionModel, idx: np.ndarray):
    k = len(idx)
    to = model.target[idx] - model.pos[idx]
    error = wrap_angle(np.arctan2(to[:, 0], to[:, 1]) - model.heading[idx])
    speed_now = np.linalg.norm(model.vel[idx], axis=1)
    drive = np.clip(model.speed[idx] / model.MAX_SPEED + 0.5 * (model.speed[idx] - speed_now)
                    / model.MAX_SPEED, 0.0, 1.0) * (np.abs(error) < 1.2)
    turn = np.clip(2.0 * error, -1.0, 1.0)
    controls = [drive, turn]
    if model.BALANCE:  # PD on the unstable tilt: torque = -(gain·tilt + damping·rate) / B
        torque = -((model.K + 6.0) * model.tilt[idx] + 3.0 * model.tilt_rate[idx]) / model.B
        controls += [torque[:, 0], torque[:, 1]]
    u = np.clip(np.stack(controls, 1), -1.0, 1.0)
    gait = model.gait  # [controls, n_rot], orthogonal rows of norm 1.5
    theta = u @ gait / (gait ** 2).sum(1).mean() * JOINT_LIMIT
    joints = np.clip(theta / JOINT_LIMIT, -1.0, 1.0)
    strength = np.ones((k, model.n_str), np.float32)
    return np.concatenate([joints, strength], 1).astype(np.float32), np.zeros((k, 0), np.int32)


def pyramids(model: PyramidsModel, idx: np.ndarray):
    return (np.zeros((len(idx), 0), np.float32),
            heuristic_action(model, idx)[:, None].astype(np.int32))


HEURISTICS: dict[type, Heuristic] = {
    PushBlockModel: pushblock,
    PyramidsModel: pyramids,
    HallwayModel: hallway,
    CrawlerModel: locomotion,
}
"""Model class -> its heuristic."""


def heuristic_for(model: object) -> Heuristic | None:
    """The heuristic of ``model``'s scene, or None."""
    return HEURISTICS.get(type(model))
