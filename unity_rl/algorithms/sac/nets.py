"""SAC's networks as ML-Agents 1.1.0 builds them (``mlagents/trainers/sac/optimizer_torch.py``,
``torch_entities/networks.py``, ``distributions.py``).

Contract: every network takes flat float32 rows [n, obs_dim] whose vector columns are already
normalised (one normaliser, the actor's: ML-Agents copies it into Q1, Q2, V and target V before
each update), split by its own ``ObservationEncoder``; its body (``algorithms.body.Body``) is ML-Agents' ``LinearEncoder``
(``num_layers`` × [Linear(h) + Swish], Kaiming-normal) or, with goals under 'hyper', its
``ConditionalEncoder``.

- ``SACActor``: body → ``mu`` (Linear, gain 0.2) and a state-dependent ``log_sigma`` (Linear,
  gain 0.2, clamped to [−20, 2]) for the continuous part, one ``logits`` Linear (gain 0.1) for
  every discrete branch side by side (masked as ML-Agents: logits·m − 1e8·(1 − m)).
- ``ValueNetwork``: body over [encoding | continuous action] (Q takes the action, V does not) →
  one head per reward signal (``heads.<signal>``: Xavier uniform, zero bias) with ``outputs``
  columns: 1 for V and continuous Q, sum(branches) for a discrete Q (one Q per action value).

Memory (``network_settings.memory``, ML-Agents' ``NetworkBody`` with ``use_lstm``): every body
(π, V, V', Q1, Q2) ends in its own one-layer LSTM of hidden size ``memory_size // 2`` (ML-Agents'
``lstm_layer``) and the heads read its output. With memory a forward pass takes rows [n·L, ...]
ordered sequence after sequence (``sequence_length`` L) and the memories [n, memory_size] ([h | c])
the n sequences start from (None: zeros); ``run`` also returns the memories after each sequence.

``TanhGaussian`` and ``BranchProbabilities`` are ML-Agents' ``TanhGaussianDistInstance`` and
``CategoricalDistInstance`` with its ε = 1e-7 inside the logs, so that log-probs, entropies and
losses are the same numbers.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from unity_rl.algorithms.body import Body
from unity_rl.algorithms.encoders import ObsShapesLike
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import mlagents_init

EPSILON = 1e-7
"""ML-Agents' ``distributions.EPSILON``."""
LOG_SIGMA_MIN, LOG_SIGMA_MAX = -20.0, 2.0
"""ML-Agents' clamp of the conditional log σ."""
_HALF_LOG_2PI = math.log(math.sqrt(2 * math.pi))


class SACActor(nn.Module):
    """π(a|s): tanh-squashed Gaussian with state-dependent σ, and masked categoricals."""

    def __init__(self, obs_shapes: ObsShapesLike, continuous_size: int,
                 discrete_branches: Sequence[int], network: NetworkConfig,
                 goal_indices: Sequence[int] = ()):
        super().__init__()
        self.continuous_size = int(continuous_size)
        self.discrete_branches = tuple(int(b) for b in discrete_branches)
        self.body = Body(obs_shapes, network, 0, goal_indices)
        hidden = self.body.output_size
        self.memory_size = self.body.memory_size
        if self.continuous_size:
            self.mu = mlagents_init(nn.Linear(hidden, self.continuous_size), 0.2)
            self.log_sigma = mlagents_init(nn.Linear(hidden, self.continuous_size), 0.2)
        if self.discrete_branches:
            self.logits = mlagents_init(nn.Linear(hidden, sum(self.discrete_branches)), 0.1)

    def forward(self, x: torch.Tensor, masks: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, sequence_length: int = 1,
                ) -> tuple[TanhGaussian | None, BranchProbabilities | None]:
        """(continuous distribution, discrete distribution); either None when absent.
        ``masks``: float or bool [n, sum(branches)], 1/True where allowed (None: all)."""
        return self.run(x, masks, memory, sequence_length)[:2]

    def run(self, x: torch.Tensor, masks: torch.Tensor | None = None,
            memory: torch.Tensor | None = None, sequence_length: int = 1,
            ) -> tuple[TanhGaussian | None, BranchProbabilities | None, torch.Tensor | None]:
        """``forward``'s distributions and the memories after each sequence (None: no LSTM)."""
        h, memory_out = self.body.run(x, None, memory, sequence_length)
        gaussian = None
        if self.continuous_size:
            log_sigma = torch.clamp(self.log_sigma(h), LOG_SIGMA_MIN, LOG_SIGMA_MAX)
            gaussian = TanhGaussian(self.mu(h), torch.exp(log_sigma))
        categorical = None
        if self.discrete_branches:
            logits = self.logits(h)
            if masks is not None:
                masks = masks.to(logits.dtype)
                logits = logits * masks - 1e8 * (1.0 - masks)
            categorical = BranchProbabilities(logits, self.discrete_branches)
        return gaussian, categorical, memory_out


class TanhGaussian:
    """a = tanh(u), u ~ N(μ, σ²): ML-Agents' ``TanhGaussianDistInstance``."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor):
        self.mean = mean
        self.std = std

    def rsample(self, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(a = tanh(u), log π(a) per dimension [n, C]) for a reparameterised sample u."""
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype,
                            device=self.mean.device)
        u = self.mean + noise * self.std
        return torch.tanh(u), self.log_prob_unsquashed(u)

    def log_prob_unsquashed(self, u: torch.Tensor) -> torch.Tensor:
        """log N(u; μ, σ) − log|d tanh(u)/du| per dimension, with ML-Agents' ε's."""
        var = self.std**2
        normal = (-((u - self.mean) ** 2) / (2 * var + EPSILON) - torch.log(self.std + EPSILON)
                  - _HALF_LOG_2PI)
        # torch's TanhTransform.log_abs_det_jacobian: 2·(log 2 − u − softplus(−2u))
        return normal - 2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))


class BranchProbabilities:
    """One categorical per branch over already-masked logits: ML-Agents' ``CategoricalDistInstance``
    (probabilities by softmax, log-probabilities log(p + 1e-7))."""

    def __init__(self, logits: torch.Tensor, branches: Sequence[int]):
        self.branches = tuple(branches)
        self.probs = torch.cat([torch.softmax(b, dim=-1) for b in logits.split(self.branches, -1)],
                               dim=-1)
        """[n, sum(branches)] π(a) of every action value, branch after branch."""
        self.all_log_probs = torch.log(self.probs + EPSILON)
        """[n, sum(branches)] log π(a) of every action value."""

    def split(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """[n, sum(branches)] -> one [n, b] tensor per branch."""
        return x.split(self.branches, dim=-1)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """[n, B] int64: one index per branch."""
        return torch.cat([torch.multinomial(p, 1, generator=generator) for p in self.split(self.probs)],
                         dim=-1)

    def mode(self) -> torch.Tensor:
        """[n, B] int64: the most probable index of every branch."""
        return torch.stack([p.argmax(-1) for p in self.split(self.probs)], dim=-1)


class ValueNetwork(nn.Module):
    """V(s) (``action_size`` 0) or Q(s, ·): one head per reward signal (``heads``, ML-Agents'
    ``ValueHeads``); ``forward(x, actions=None) -> {signal: [n, outputs]}``."""

    def __init__(self, obs_shapes: ObsShapesLike, network: NetworkConfig, streams: Sequence[str],
                 action_size: int = 0, outputs: int = 1, goal_indices: Sequence[int] = ()):
        super().__init__()
        self.body = Body(obs_shapes, network, action_size, goal_indices)
        self.heads = nn.ModuleDict({
            name: mlagents_init(nn.Linear(self.body.output_size, outputs), xavier_uniform=True)
            for name in streams})

    def forward(self, x: torch.Tensor, actions: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, sequence_length: int = 1,
                ) -> dict[str, torch.Tensor]:
        return self.run(x, actions, memory, sequence_length)[0]

    def run(self, x: torch.Tensor, actions: torch.Tensor | None = None,
            memory: torch.Tensor | None = None, sequence_length: int = 1,
            ) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """(``forward``'s values, the memories after each sequence; None without an LSTM)."""
        h, memory_out = self.body.run(x, actions, memory, sequence_length)
        return {name: head(h) for name, head in self.heads.items()}, memory_out


def soft_update(source: nn.Module, target: nn.Module, tau: float) -> None:
    """target ← τ·source + (1 − τ)·target, parameter by parameter (ML-Agents' ``soft_update``)."""
    with torch.no_grad():
        for s, t in zip(source.parameters(), target.parameters()):
            t.mul_(1.0 - tau).add_(s, alpha=tau)
