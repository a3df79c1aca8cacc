"""Sensor pieces shared by the zoo scenes: RayPerceptionSensor3D layout, a vectorised ray caster
against axis-aligned boxes, and PNG encoding of one-hot planes (Unity's StackingSensor is
``stacking.py``).

* ``ray_angles``: ``RayPerceptionSensor.GetRayAngles``: 90 (forward) first, then 90 - d, 90 + d,
  90 - 2d, ... with d = maxRayDegrees / raysPerDirection; an angle a points to
  (cos a, sin a) in the agent's (right, forward) frame.
* ``ray_outputs``: per ray, in ray order, ``RayPerceptionOutput.ToFloatArray``: a one-hot of the
  hit object's tag among the detectable tags, then 1 if nothing was hit (else 0), then the hit
  fraction (distance / ray length, 1 when nothing was hit): (tags + 2) floats per ray.
"""
from __future__ import annotations

import numpy as np

from unity_rl.standin.scenes.visual_ball import encode_png


def ray_angles(rays_per_direction: int, max_degrees: float) -> np.ndarray:
    """Unity's ray angles in degrees (90 = forward, 0 = right), in sensor output order."""
    angles = [90.0]
    delta = max_degrees / rays_per_direction
    for i in range(rays_per_direction):
        angles += [90.0 - (i + 1) * delta, 90.0 + (i + 1) * delta]
    return np.array(angles)


def ray_directions(heading: np.ndarray, angles_deg: np.ndarray) -> np.ndarray:
    """World (x, z) unit directions [k, R, 2] of rays for agents with ``heading`` (radians,
    0 = +z, clockwise seen from above: forward = (sin h, cos h), right = (cos h, -sin h))."""
    a = np.deg2rad(angles_deg)[None, :]
    h = heading[:, None]
    right = np.stack([np.cos(h), -np.sin(h)], -1)  # [k, 1, 2]
    forward = np.stack([np.sin(h), np.cos(h)], -1)
    return np.cos(a)[..., None] * right + np.sin(a)[..., None] * forward


def cast_rays(start: np.ndarray, end: np.ndarray, boxes: np.ndarray,
              box_tags: np.ndarray, n_tags: int) -> np.ndarray:
    """Casts rays against axis-aligned boxes and writes Unity's ray outputs.

    start, end: [k, R, 3] ray endpoints (x, y, z); boxes: [k, B, 6] (xmin, ymin, zmin, xmax,
    ymax, zmax), a box with xmin > xmax is absent; box_tags: [B] tag index of each box.
    Returns [k, R * (n_tags + 2)] float32.
    """
    k, r, _ = start.shape
    d = (end - start)[:, :, None, :]  # [k, R, 1, 3]
    o = start[:, :, None, :]
    lo, hi = boxes[:, None, :, :3], boxes[:, None, :, 3:]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / np.where(d == 0, 1e-12, d)
        t1, t2 = (lo - o) * inv, (hi - o) * inv
    t_near = np.minimum(t1, t2).max(axis=3)  # [k, R, B]
    t_far = np.maximum(t1, t2).min(axis=3)
    present = (boxes[:, :, 0] <= boxes[:, :, 3])[:, None, :]
    hit = present & (t_near <= t_far) & (t_near >= 0.0) & (t_near <= 1.0)
    t = np.where(hit, t_near, np.inf)
    first = t.argmin(axis=2)  # [k, R]
    frac = np.take_along_axis(t, first[..., None], axis=2)[..., 0]
    any_hit = np.isfinite(frac)
    out = np.zeros((k, r, n_tags + 2), np.float32)
    tag = box_tags[first]
    kk, rr = np.nonzero(any_hit)
    out[kk, rr, tag[kk, rr]] = 1.0
    out[..., n_tags] = ~any_hit
    out[..., n_tags + 1] = np.where(any_hit, frac, 1.0)
    return out.reshape(k, -1)


def onehot_planes_png(planes: np.ndarray) -> bytes:
    """PNG bytes of [C, H, W] planes in {0, 1}: ceil(C / 3) RGB PNGs back to back (the last one
    padded with zero channels), as Unity compresses an observation with more than 3 channels;
    mlagents-envs reads them in order and keeps the first C channels."""
    c, h, w = planes.shape
    n_images = (c + 2) // 3
    padded = np.zeros((n_images * 3, h, w), np.uint8)
    padded[:c] = (planes > 0.5) * 255
    return b"".join(
        encode_png(np.ascontiguousarray(padded[3 * i: 3 * i + 3].transpose(1, 2, 0)))
        for i in range(n_images)
    )
