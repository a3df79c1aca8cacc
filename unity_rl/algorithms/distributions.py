"""PPO's action distributions: diagonal Gaussian, masked categoricals, and the hybrid of both.

Action rows (see ``Trajectory.actions``): continuous float32 [n, C]; discrete int64 [n, B]
(one index per branch); hybrid float32 [n, C + B], the C continuous values followed by the B
branch indices stored as floats.  Every distribution has ``sample(generator)``, ``mode()``,
``log_prob(actions)`` -> [n] (summed over action dimensions and branches) and ``entropy()`` -> [n].
Masks are bool [n, sum(branches)], True where the action is allowed.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

_LOG_2PI = math.log(2.0 * math.pi)
MASKED_LOGIT = -1e8
"""Logit given to disallowed discrete actions."""


class DiagGaussian:
    """Independent Gaussians N(μ, σ²) per action dimension: log-prob per dimension [n, C];
    entropy the mean over dimensions [n] (``entropy_reduction="sum"``: the sum, the joint entropy)."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor, entropy_reduction: str = "mean"):
        self.mean = mean
        self.log_std = log_std.expand_as(mean)
        self.entropy_reduction = entropy_reduction

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype,
                            device=self.mean.device)
        return self.mean + self.log_std.exp() * noise

    def mode(self) -> torch.Tensor:
        return self.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) * torch.exp(-self.log_std)
        return -0.5 * z**2 - self.log_std - 0.5 * _LOG_2PI

    def entropy(self) -> torch.Tensor:
        per_dim = 0.5 + 0.5 * _LOG_2PI + self.log_std
        return per_dim.sum(-1) if self.entropy_reduction == "sum" else per_dim.mean(-1)


class MaskedMultiCategorical:
    """One categorical per discrete branch; disallowed actions get probability 0.  Log-prob per
    branch [n, B]; entropy summed over branches [n] (ML-Agents: one entropy column per branch)."""

    def __init__(self, logits: torch.Tensor, branches: Sequence[int], masks: torch.Tensor | None):
        if masks is not None:
            logits = logits.masked_fill(~masks, MASKED_LOGIT)
        self.log_probs = [branch - branch.logsumexp(-1, keepdim=True)
                          for branch in logits.split(list(branches), dim=-1)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.stack([torch.multinomial(lp.exp(), 1, generator=generator).squeeze(-1)
                            for lp in self.log_probs], dim=-1)

    def mode(self) -> torch.Tensor:
        return torch.stack([lp.argmax(-1) for lp in self.log_probs], dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        actions = actions.long()
        return torch.cat([lp.gather(-1, actions[:, b:b + 1]) for b, lp in enumerate(self.log_probs)],
                         dim=-1)

    def entropy(self) -> torch.Tensor:
        return sum(-(lp.exp() * lp).sum(-1) for lp in self.log_probs)


class HybridDistribution:
    """Continuous Gaussian part and masked categorical branches, sampled independently.

    Log-probs [n, C + B]: the Gaussian's per dimension, then each branch's.  Entropy as
    ML-Agents' ``ActionModel``: the Gaussian's entropy (mean over its dimensions, see
    ``DiagGaussian``) plus each branch's entropy.
    """

    def __init__(self, gaussian: DiagGaussian, categorical: MaskedMultiCategorical):
        self.gaussian = gaussian
        self.categorical = categorical
        self.continuous_size = gaussian.mean.shape[-1]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return self._join(self.gaussian.sample(generator), self.categorical.sample(generator))

    def mode(self) -> torch.Tensor:
        return self._join(self.gaussian.mode(), self.categorical.mode())

    def _join(self, continuous: torch.Tensor, discrete: torch.Tensor) -> torch.Tensor:
        return torch.cat([continuous, discrete.to(continuous.dtype)], dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        c = self.continuous_size
        return torch.cat([self.gaussian.log_prob(actions[:, :c]),
                          self.categorical.log_prob(actions[:, c:])], dim=-1)

    def entropy(self) -> torch.Tensor:
        return self.gaussian.entropy() + self.categorical.entropy()


def split_hybrid(actions, continuous_size: int):
    """A hybrid action row [n, C + B] -> (continuous float32 [n, C], discrete int64 [n, B])."""
    actions = np.asarray(actions)
    return (actions[:, :continuous_size].astype(np.float32),
            np.rint(actions[:, continuous_size:]).astype(np.int64))
