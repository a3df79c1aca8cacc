"""Mock: a scene whose behaviors come from a spec (``--standin-spec JSON_OR_PATH``).

The public side is ``unity_rl.testing`` (``MockBehavior``, ``mock_build``) and docs/testing.md.
Each behavior of the spec becomes a ``BehaviorDef`` with its agents, decision period and MaxStep
and a ``MockModel`` with its observations and actions:

* **Target.** Per agent, drawn at each episode start from the scene's seeded generator: ``t_j``
  uniform in [-1, 1] for each continuous action, ``d_b`` uniform in 0..size-1 for each branch.
* **Code.** ``u = [(t_j + 1) / 2 ..., one_hot(d_b, size_b) ...]``, length
  ``L = continuous + sum(branches)``, values in [0, 1].
* **Observations.** A vector of size n: ``u[:n]``, then ``n - L`` values drawn uniformly in
  [0, 1) at each observation (seeded noise). Rank 3 (C, H, W), png or not: vertical bands,
  column x shows ``u[x * L // W]`` in every channel and row (with W < L some components have
  no column); png images carry ``round(255 u)``, float grids ``u`` exactly.
* **Actions and rewards** (one act per decision: TakeActionsBetweenDecisions off; AddReward).
  ``match`` = mean over components of ``1 - |clip(a_j, -1, 1) - t_j| / 2`` (continuous) and
  ``[a_b == d_b]`` (branches); reward ``0.1 * (match - 1)``; a *hit* (every branch right, every
  continuous action within 0.2 of its target) adds +1 and, with ``terminate_on_match``, ends the
  episode (terminal info, not interrupted). MaxStep ends it as interrupted.
* **Masks** (``masks``): in each branch of 3 or more actions, action ``(d_b + 1) % size_b`` is
  unavailable; smaller branches have none.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from unity_rl.standin.options import OptionError
from unity_rl.standin.scenes.base import BehaviorDef, BehaviorSpecDef
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import ObsSpec
from unity_rl.testing import MockBehavior, MockSpecError, load_spec_text, sensor_names

HIT_TOLERANCE = 0.2
"""A continuous action within this distance of its target counts as right."""
MISS_SCALE = 0.1
HIT_REWARD = 1.0


def _encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of a [C, H, W] uint8 image as Unity sends it: RGB; one channel as gray (the
    trainer averages it back), more than 3 as concatenated PNGs of 3 channels (zero-padded)."""
    from unity_rl.standin.scenes.visual_ball import encode_png

    c = image.shape[0]
    if c == 1:
        return encode_png(np.ascontiguousarray(np.repeat(image, 3, axis=0).transpose(1, 2, 0)))
    pad = (-c) % 3
    if pad:
        image = np.concatenate([image, np.zeros((pad, *image.shape[1:]), np.uint8)])
    return b"".join(encode_png(np.ascontiguousarray(image[i:i + 3].transpose(1, 2, 0)))
                    for i in range(0, image.shape[0], 3))


class MockModel:
    set_reward = False
    acts_between_decisions = False

    def __init__(self, n: int, rng: np.random.Generator, params: EnvironmentParameters,
                 opts=None, *, behavior: MockBehavior):
        self.behavior = behavior
        self.rng = rng
        names = sensor_names(behavior.observations)
        dims = {1: (1,), 3: (1, 2, 2)}
        self.spec = BehaviorSpecDef(
            obs=tuple(ObsSpec(name, tuple(o.shape), png=o.png,
                              dimension_properties=dims[len(o.shape)])
                      for name, o in zip(names, behavior.observations)),
            continuous=behavior.continuous,
            branches=tuple(behavior.branches),
        )
        self.c = behavior.continuous
        self.branches = np.asarray(behavior.branches, dtype=np.int64)
        self.offsets = self.c + np.concatenate([[0], np.cumsum(self.branches)[:-1]]).astype(
            np.int64) if len(self.branches) else np.zeros(0, np.int64)
        self.code_len = self.c + int(self.branches.sum())
        self.cont_target = np.zeros((n, self.c), np.float32)
        self.disc_target = np.zeros((n, len(self.branches)), np.int64)
        self.mask_width = int(self.branches.sum())

    # -- state ---------------------------------------------------------------------------------

    def reset(self, idx: np.ndarray) -> None:
        k = len(idx)
        if self.c:
            self.cont_target[idx] = self.rng.uniform(-1.0, 1.0, (k, self.c))
        for b, size in enumerate(self.branches):
            self.disc_target[idx, b] = self.rng.integers(0, size, k)

    def code(self, idx: np.ndarray) -> np.ndarray:
        """[k, L] float32 in [0, 1]: continuous targets mapped to [0, 1], then one-hots."""
        u = np.zeros((len(idx), self.code_len), np.float32)
        u[:, :self.c] = (self.cont_target[idx] + 1.0) / 2.0
        if len(self.branches):
            rows = np.arange(len(idx))[:, None]
            u[rows, self.offsets[None, :] + self.disc_target[idx]] = 1.0
        return u

    def act(self, idx: np.ndarray, continuous: np.ndarray, discrete: np.ndarray):
        k = len(idx)
        parts = []
        hit = np.ones(k, bool)
        if self.c:
            err = np.abs(np.clip(continuous[:, :self.c], -1.0, 1.0) - self.cont_target[idx])
            parts.append(1.0 - err / 2.0)
            hit &= (err <= HIT_TOLERANCE).all(axis=1)
        if len(self.branches):
            right = discrete[:, :len(self.branches)] == self.disc_target[idx]
            parts.append(right.astype(np.float64))
            hit &= right.all(axis=1)
        match = np.concatenate(parts, axis=1).mean(axis=1)
        reward = MISS_SCALE * (match - 1.0) + HIT_REWARD * hit
        ended = hit if self.behavior.terminate_on_match else np.zeros(k, bool)
        return reward.astype(np.float32), ended

    def physics_step(self) -> None:
        pass

    # -- sensors -------------------------------------------------------------------------------

    def observe(self, idx: np.ndarray) -> list:
        u = self.code(idx)
        k, L = u.shape
        out = []
        for spec in self.spec.obs:
            if len(spec.shape) == 1:
                n = spec.shape[0]
                vec = np.empty((k, n), np.float32)
                shown = min(n, L)
                vec[:, :shown] = u[:, :shown]
                if n > L:
                    vec[:, L:] = self.rng.random((k, n - L), dtype=np.float32)
                out.append(vec)
                continue
            c, h, w = spec.shape
            band = (np.arange(w) * L) // w  # column -> component (every column shows one)
            rows = u[:, band]  # [k, W]
            grid = np.broadcast_to(rows[:, None, None, :], (k, c, h, w))
            if spec.png:
                pixels = np.rint(grid * 255.0).astype(np.uint8)
                out.append([_encode_png(p) for p in pixels])
            else:
                out.append(np.ascontiguousarray(grid, dtype=np.float32))
        return out

    def action_mask(self, idx: np.ndarray) -> np.ndarray | None:
        if not self.behavior.masks:
            return None
        mask = np.zeros((len(idx), self.mask_width), dtype=bool)
        rows = np.arange(len(idx))
        for b, size in enumerate(self.branches):
            if size >= 3:
                masked = (self.disc_target[idx, b] + 1) % size
                mask[rows, self.offsets[b] - self.c + masked] = True
        return mask


def behavior_defs(behaviors: list[MockBehavior]) -> tuple[BehaviorDef, ...]:
    """The scene's behaviors for a validated spec."""
    return tuple(
        BehaviorDef(b.full_name, partial(MockModel, behavior=b), b.agents, b.decision_period,
                    b.max_step)
        for b in behaviors
    )


def mock_scene(opts) -> tuple[BehaviorDef, ...]:
    """SCENES["Mock"]: the behaviors of ``--standin-spec``; OptionError when it is missing or
    invalid (the player logs it and exits with code 2)."""
    spec = getattr(opts, "spec", None)
    if spec is None:
        raise OptionError("the Mock scene needs --standin-spec JSON_OR_PATH (see docs/testing.md "
                          "or unity_rl.testing.mock_build)")
    try:
        return behavior_defs(load_spec_text(spec))
    except MockSpecError as err:
        raise OptionError(f"invalid mock spec: {err}") from None
