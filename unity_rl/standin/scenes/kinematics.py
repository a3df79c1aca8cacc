"""Forward kinematics of a jointed body, for the locomotion stand-ins (``locomotion.py``:
Crawler, Walker, Worm). Numpy only; rotations are 3×3 matrices in Unity's frame (x right, y up,
z forward) and quaternions are (x, y, z, w), Unity's component order.

- ``Part``: one body part of a tree (parent index, joint offset, joint axes, ground-contact end);
- ``tree_kinematics(model, idx, heading, tilt, theta, pos)``: world rotations, positions and
  joint rotations of every part of ``model.PARTS`` for the agents ``idx`` (the root from heading
  and tilt, each joint from its angles ``theta``; parents may be listed after their children);
- ``axis_rotations`` / ``axis_rotation``: rotation matrices about x, y or z;
- ``quaternion`` (of rotation matrices), ``yaw_quaternion`` (a rotation about y),
  ``wrap_angle`` (into [-π, π)).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Part:
    name: str
    parent: int
    """Index of the parent part, -1 for the root."""
    offset: tuple[float, float, float]
    """Joint position in the parent's frame (x right, y up, z forward)."""
    axes: str = ""
    """Joint rotation axes (one action each), e.g. "xz"."""
    done_on_ground: bool = False
    """Unity's GroundContact.agentDoneOnGroundContact (-1 and end)."""


def quaternion(m: np.ndarray) -> np.ndarray:
    """(x, y, z, w) of rotation matrices [..., 3, 3] (Unity's Quaternion component order)."""
    t = 1.0 + np.stack([m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2],
                        m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
                        -m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2],
                        -m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]], -1)
    q = np.sqrt(np.maximum(t, 0.0)) / 2  # w, |x|, |y|, |z|
    x = np.copysign(q[..., 1], m[..., 2, 1] - m[..., 1, 2])
    y = np.copysign(q[..., 2], m[..., 0, 2] - m[..., 2, 0])
    z = np.copysign(q[..., 3], m[..., 1, 0] - m[..., 0, 1])
    return np.stack([x, y, z, q[..., 0]], -1)


def yaw_quaternion(angle: np.ndarray) -> np.ndarray:
    """Quaternion.FromToRotation between two horizontal directions ``angle`` apart."""
    z = np.zeros_like(angle)
    return np.stack([z, np.sin(angle / 2), z, np.cos(angle / 2)], -1)


def wrap_angle(a: np.ndarray) -> np.ndarray:
    """Angles wrapped into [-π, π)."""
    return (a + np.pi) % (2 * np.pi) - np.pi


def tree_kinematics(model, idx, heading, tilt, theta, pos):
    """Forward kinematics of ``model.PARTS`` (a child may be listed before its parent, as
    Walker's chest before its spine): world rotations [k, P, 3, 3], positions [k, P, 3], and
    joint rotations [k, P, 3, 3]."""
    order, starts, codes = _tree_plan(type(model))
    k = len(idx)
    root_angles = np.stack([heading[idx], tilt[idx, 0], tilt[idx, 1]], 1)
    r = axis_rotations(np.array([1, 0, 2]), root_angles)
    root = r[:, 0] @ r[:, 1] @ r[:, 2]
    joints = axis_rotations(codes, theta[idx]) if len(codes) else None
    p_root = np.stack([pos[idx, 0], np.full(k, model.ROOT_HEIGHT), pos[idx, 1]], 1)
    parts = model.PARTS
    n = len(parts)
    rots = np.empty((k, n, 3, 3))
    poss = np.empty((k, n, 3))
    local = np.broadcast_to(np.eye(3), (k, n, 3, 3)).copy()
    for p in order:
        part = parts[p]
        joint = None
        for j in range(starts[p], starts[p] + len(part.axes)):
            joint = joints[:, j] if joint is None else joint @ joints[:, j]
        if joint is not None:
            local[:, p] = joint
        if part.parent < 0:
            rots[:, p] = root if joint is None else root @ joint
            poss[:, p] = p_root
        else:
            parent = rots[:, part.parent]
            rots[:, p] = parent if joint is None else parent @ joint
            poss[:, p] = poss[:, part.parent] + parent @ np.asarray(part.offset, float)
    return rots, poss, local


_PLANS: dict = {}


def _tree_plan(cls):
    """(parent-first part order, first dof index per part, axis codes per dof) of a class."""
    if cls not in _PLANS:
        parts = cls.PARTS
        order, seen = [], set()

        def visit(p):
            if p not in seen:
                if parts[p].parent >= 0:
                    visit(parts[p].parent)
                seen.add(p)
                order.append(p)

        for p in range(len(parts)):
            visit(p)
        starts = np.cumsum([0] + [len(part.axes) for part in parts])
        codes = np.array(["xyz".index(a) for part in parts for a in part.axes], np.int64)
        _PLANS[cls] = (order, starts, codes)
    return _PLANS[cls]


def axis_rotations(codes: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices [k, D, 3, 3] about axes ``codes`` [D] (0 x, 1 y, 2 z) by ``angles``
    [k, D] radians."""
    k, d = angles.shape
    c, s = np.cos(angles), np.sin(angles)
    m = np.zeros((k, d, 3, 3))
    for code, (i, j) in enumerate(((1, 2), (0, 2), (0, 1))):
        sel = np.flatnonzero(codes == code)
        if not len(sel):
            continue
        cs, ss = c[:, sel], s[:, sel]
        m[:, sel, code, code] = 1.0
        m[:, sel, i, i] = cs
        m[:, sel, j, j] = cs
        sign = 1.0 if code == 1 else -1.0
        m[:, sel, i, j] = sign * ss
        m[:, sel, j, i] = -sign * ss
    return m


def axis_rotation(axis: str, angle: np.ndarray) -> np.ndarray:
    """Rotation matrices [k, 3, 3] about one axis ("x", "y" or "z") by ``angle`` [k] radians."""
    return axis_rotations(np.array(["xyz".index(axis)]), angle[:, None])[:, 0]
