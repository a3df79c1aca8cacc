"""Exploration noise for deterministic policies (DDPG).

Noise is drawn for a batch of rows, one row per agent decision.  Temporally correlated noise
(Ornstein–Uhlenbeck) needs one process state per agent, so callers pass ``keys`` naming the agent
behind each row (any hashable: a slot index, ``(build, behavior, agent_id)``...).  Unity gives no
guarantee of agent order or count between steps, so keys — not row positions — carry the state;
without keys, row ``i`` is keyed by ``i``.  Call ``reset(keys)`` when those agents' episodes end.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Sequence

import numpy as np


class ActionNoise(ABC):
    """Additive noise for ``n`` rows of ``act_dim`` actions."""

    def __init__(self, act_dim: int, sigma: float, seed: int | None = None):
        self.act_dim = act_dim
        self.sigma = sigma
        self.rng = np.random.default_rng(seed)

    @abstractmethod
    def __call__(self, n: int, keys: Sequence[Hashable] | None = None) -> np.ndarray:
        """Returns [n, act_dim] float32 noise; ``keys[i]`` names the agent of row ``i``."""

    def reset(self, keys: Iterable[Hashable] | None = None) -> None:
        """Forgets the state of these agents (all agents when ``keys`` is None)."""


class GaussianNoise(ActionNoise):
    """Independent N(0, σ²) noise per row and step (what TD3 and CleanRL's DDPG use)."""

    def __call__(self, n: int, keys: Sequence[Hashable] | None = None) -> np.ndarray:
        return self.rng.normal(0.0, self.sigma, (n, self.act_dim)).astype(np.float32)


class OrnsteinUhlenbeckNoise(ActionNoise):
    """Ornstein–Uhlenbeck process per agent, as in the DDPG paper (θ = 0.15, σ = 0.2).

    x ← x + θ(μ − x)·dt + σ·√dt·N(0, 1), with μ = 0 and one step per decision (dt = 1 by default);
    a new or reset agent starts at x = μ.  Its stationary standard deviation is
    σ·√(dt / (2θ·dt − θ²·dt²)): about 0.38 for the paper's values and dt = 1.
    """

    def __init__(self, act_dim: int, sigma: float, theta: float = 0.15, dt: float = 1.0,
                 seed: int | None = None):
        super().__init__(act_dim, sigma, seed)
        self.theta = theta
        self.dt = dt
        self.state: dict[Hashable, np.ndarray] = {}
        """Current x per agent key."""

    def __call__(self, n: int, keys: Sequence[Hashable] | None = None) -> np.ndarray:
        keys = range(n) if keys is None else keys
        if len(keys) != n:
            raise ValueError(f"got {len(keys)} keys for {n} rows")
        zero = np.zeros(self.act_dim, np.float64)
        x = np.stack([self.state.get(k, zero) for k in keys]) if n else np.zeros((0, self.act_dim))
        x = x + self.theta * (0.0 - x) * self.dt \
            + self.sigma * np.sqrt(self.dt) * self.rng.standard_normal(x.shape)
        for k, row in zip(keys, x):
            self.state[k] = row
        return x.astype(np.float32)

    def reset(self, keys: Iterable[Hashable] | None = None) -> None:
        if keys is None:
            self.state.clear()
            return
        for k in keys:
            self.state.pop(k, None)


def make_noise(kind: str, act_dim: int, sigma: float, theta: float = 0.15,
               seed: int | None = None) -> ActionNoise:
    """Builds the noise named by ``DDPGConfig.exploration_noise`` ('gaussian' or 'ou')."""
    if kind == "gaussian":
        return GaussianNoise(act_dim, sigma, seed)
    if kind == "ou":
        return OrnsteinUhlenbeckNoise(act_dim, sigma, theta, seed=seed)
    raise ValueError(f"unknown exploration noise {kind!r}: expected 'gaussian' or 'ou'")
