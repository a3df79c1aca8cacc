"""3DBall: balance a ball on a tilting platform (Unity's Ball3DAgent, simulated with numpy).

What matches Unity's example (unity_builds/README.md): 8 vector observations (platform rotation
quaternion z and x, ball position minus platform position, ball velocity), 2 continuous actions
in [-1, 1] rotating the platform by up to 2 degrees per academy step about z and x — a rotation
is skipped when its quaternion component is already beyond ±0.25 in that direction —, reward
set to 0.1 at every action while the ball is on (Unity's SetReward: 0.1 per decision, not per
step), -1 and EndEpisode when the ball is more than 2 below the platform or more than 3 off
centre. Episode start: platform tilted uniformly within ±10 degrees about x and z, ball at rest
at height 4 above an offset uniform in ±1.5. ``mass``, ``scale`` and ``gravity`` environment
parameters are read at each episode start.

The physics is a model, not PhysX: the platform is a 5x5 plate; on it the ball rolls without
slipping (acceleration 5/7 g sin(tilt) down the slope, light rolling resistance) and follows
the surface; off it, or above it, the ball falls freely and lands without bouncing. Signs follow
Unity's left-handed axes: a positive rotation about z raises the +x side (the ball rolls to -x),
a positive rotation about x lowers the +z side (the ball rolls to +z). The task keeps Unity's
character: random actions drop the ball within a few simulated seconds, a PD controller on the
ball's offset and velocity balances it for the whole 5000-step episode (both are tested).
``mass`` is stored but, as for a ball rolling on a rigid plate, does not change the motion.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.base import PHYSICS_DT, BehaviorSpecDef
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec

DEG = np.pi / 180.0


class Ball3DModel:
    """All 3DBall agents of one behavior; arrays are indexed by agent."""

    spec = BehaviorSpecDef(
        obs=(ObsSpec("VectorSensor_size8", (8,), dimension_properties=(1,)),), continuous=2
    )
    set_reward = True

    HALF_EXTENT = 2.5
    """Half the side of the square platform."""
    PLATFORM_TOP = 0.25
    """Height of the platform's top face above its centre."""
    ROLL_FACTOR = 5.0 / 7.0
    """Acceleration of a solid sphere rolling without slipping, as a fraction of g sin(slope)."""
    ROLLING_RESISTANCE = 0.05
    """Fraction of the horizontal speed lost per simulated second while on the platform."""
    MAX_ROTATION_DEG = 2.0
    ROTATION_LIMIT = 0.25
    DROP_HEIGHT = 4.0
    START_TILT_DEG = 10.0
    START_OFFSET = 1.5

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters, opts=None):
        self.n = n
        self.rng = rng
        self.params = params
        # State, one row per agent. tilt: platform rotation (about z, about x) in radians;
        # hpos/hvel: ball (x, z) offset from the platform centre and its velocity; y/vy: ball
        # height above the platform centre and its velocity.
        self.tilt = np.zeros((n, 2))
        self.hpos = np.zeros((n, 2))
        self.hvel = np.zeros((n, 2))
        self.y = np.zeros(n)
        self.vy = np.zeros(n)
        self.on_plate = np.zeros(n, dtype=bool)
        self.radius = np.full(n, 0.5)
        self.gravity = np.full(n, 9.81)
        self.mass = np.ones(n)
        self._slope_gain = np.zeros((n, 2))
        """Rolling acceleration per unit sin(tilt): (-5/7 g, +5/7 g) (signs: see module doc)."""
        self._rest = np.zeros(n)
        """Height of the resting ball's centre above a level platform's centre."""
        self.reset(np.arange(n))

    # -- Unity callbacks -----------------------------------------------------------------------

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        if k == 0:
            return
        rng = self.rng
        tilt = rng.uniform(-self.START_TILT_DEG, self.START_TILT_DEG, (k, 2)) * DEG
        self.tilt[idx] = tilt
        self.hpos[idx] = rng.uniform(-self.START_OFFSET, self.START_OFFSET, (k, 2))
        self.hvel[idx] = 0.0
        self.y[idx] = self.DROP_HEIGHT
        self.vy[idx] = 0.0
        self.on_plate[idx] = False
        self.mass[idx] = self.params.sample("mass", 1.0, k)
        radius = 0.5 * self.params.sample("scale", 1.0, k)
        gravity = self.params.sample("gravity", 9.81, k)
        self.radius[idx] = radius
        self.gravity[idx] = gravity
        self._rest[idx] = self.PLATFORM_TOP + radius
        gain = self.ROLL_FACTOR * gravity
        self._slope_gain[idx] = np.stack([-gain, gain], axis=1)

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        every = len(idx) == self.n
        sel = slice(None) if every else idx
        rot = np.minimum(np.maximum(continuous, -1.0), 1.0, dtype=np.float64)
        rot *= self.MAX_ROTATION_DEG * DEG
        tilt = self.tilt[sel]
        half = 0.5 * tilt
        # Quaternion components (z, x) of the rotation; a rotation that would push a component
        # already beyond the limit further out is skipped, as in Ball3DAgent.
        q = np.sin(half) * np.cos(half)[:, ::-1]
        rot *= q * np.sign(rot) < self.ROTATION_LIMIT
        if every:
            tilt += rot
        else:
            self.tilt[idx] = tilt + rot
        fell = (self.y[sel] < -2.0) | (np.abs(self.hpos[sel]).max(axis=1) > 3.0)
        return 0.1 - 1.1 * fell, fell

    def physics_step(self) -> None:
        dt = PHYSICS_DT
        on = self.on_plate
        on_dt = on * dt
        hvel, hpos, y, vy = self.hvel, self.hpos, self.y, self.vy
        hvel += np.sin(self.tilt) * self._slope_gain * on_dt[:, None]
        hvel *= (1.0 - self.ROLLING_RESISTANCE * on_dt)[:, None]
        vy -= self.gravity * (dt - on_dt)
        y_prev = y.copy()
        hpos += hvel * dt
        y += vy * dt
        slope = np.tan(self.tilt)
        surface = slope[:, 0] * hpos[:, 0] - slope[:, 1] * hpos[:, 1] + self._rest
        inside = np.abs(hpos).max(axis=1) <= self.HALF_EXTENT
        # In contact: stays on (follows the surface), or lands from above (no bounce).
        contact = inside & (on | ((y <= surface) & (y_prev >= surface - 0.5)))
        c = contact * 1.0
        vy *= 1.0 - c
        vy += (c * on) * ((surface - y_prev) / dt)
        y += c * (surface - y)
        self.on_plate = contact

    def observe(self, idx: np.ndarray) -> list:
        half = 0.5 * self.tilt[idx]
        out = np.empty((len(half), 8), dtype=np.float32)
        out[:, 0:2] = np.sin(half) * np.cos(half)[:, ::-1]
        out[:, 2] = self.hpos[idx, 0]
        out[:, 3] = self.y[idx]
        out[:, 4] = self.hpos[idx, 1]
        out[:, 5] = self.hvel[idx, 0]
        out[:, 6] = self.vy[idx]
        out[:, 7] = self.hvel[idx, 1]
        return [out]

    def action_mask(self, idx: np.ndarray) -> None:
        return None


def pd_controller(obs: np.ndarray, decision_period: int = 5) -> np.ndarray:
    """A hand controller for 3DBall from its 8 observations: [n, 8] -> actions [n, 2].

    Tilts the platform towards a target proportional to the ball's offset and velocity (a PD
    law on the ball), commanding the rotation rate that reaches the target within one decision.
    Used by the tests and the benchmark as the "good policy" reference.
    """
    obs = np.asarray(obs, dtype=np.float64)
    tilt_z = 2.0 * np.arcsin(np.clip(obs[:, 0], -1, 1))
    tilt_x = 2.0 * np.arcsin(np.clip(obs[:, 1], -1, 1))
    x, z, vx, vz = obs[:, 2], obs[:, 4], obs[:, 5], obs[:, 7]
    kp, kd, limit = 0.12, 0.2, 20 * DEG
    target_z = np.clip(kp * x + kd * vx, -limit, limit)  # +tilt_z pushes the ball to -x
    target_x = np.clip(-(kp * z + kd * vz), -limit, limit)  # +tilt_x pushes the ball to +z
    per_decision = decision_period * Ball3DModel.MAX_ROTATION_DEG * DEG
    act = np.stack([(target_z - tilt_z), (target_x - tilt_x)], axis=1) / per_decision
    return np.clip(act, -1.0, 1.0).astype(np.float32)
