"""DDPG's networks: the actor μ(s), the critic Q(s, a), Polyak averaging and the export module.

Contract: both networks take flat float32 rows [n, obs_dim] whose vector columns are already
normalised, and split them with their own ``ObservationEncoder`` (images through the
``vis_encode_type`` encoder).  Actions are continuous, in Unity's bounds [-1, 1].
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from unity_rl.algorithms.encoders import FoldedNormalizer, ObservationEncoder, ObsShapesLike, concat_inputs
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import mlp
from unity_rl.algorithms.normalizer import RunningNormalizer

ACTION_LOW = -1.0
"""Lower bound of every continuous action Unity accepts."""
ACTION_HIGH = 1.0
"""Upper bound of every continuous action Unity accepts."""

class Actor(nn.Module):
    """μ(s): encoder, MLP with ReLU, tanh output scaled to [low, high]; takes flat rows with
    normalised vector columns."""

    def __init__(self, obs_shapes: ObsShapesLike, act_dim: int, network: NetworkConfig,
                 low: float = ACTION_LOW, high: float = ACTION_HIGH):
        super().__init__()
        self.encoder = ObservationEncoder(obs_shapes, network)
        self.net = mlp(self.encoder.output_size, network.hidden_units, network.num_layers,
                       act_dim, out_std=0.01, activation=nn.ReLU)
        self.register_buffer("action_scale", torch.tensor((high - low) / 2.0))
        self.register_buffer("action_bias", torch.tensor((high + low) / 2.0))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(self.encoder(obs))) * self.action_scale + self.action_bias


class QNetwork(nn.Module):
    """Q(s, a): encoder, then MLP with ReLU over [encoded s, a]."""

    def __init__(self, obs_shapes: ObsShapesLike, act_dim: int, network: NetworkConfig):
        super().__init__()
        self.encoder = ObservationEncoder(obs_shapes, network)
        self.net = mlp(self.encoder.output_size + act_dim, network.hidden_units,
                       network.num_layers, 1, out_std=1.0, activation=nn.ReLU)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([self.encoder(obs), actions], dim=-1)).squeeze(-1)


class ExportedActor(nn.Module):
    """Deterministic observations -> action for inference (ONNX), normalisation folded in.

    ``forward(obs_0, .., obs_{k-1})`` (one tensor per observation, images NCHW) or
    ``forward(flat)`` (rows [n, obs_dim]) -> float32 [n, act_dim] in [-1, 1].
    """

    def __init__(self, actor: Actor, normalizer: RunningNormalizer | None):
        super().__init__()
        self.actor = copy.deepcopy(actor).cpu().eval()
        self.obs_dim = actor.encoder.layout.obs_dim
        self.normalizer = FoldedNormalizer(actor.encoder.layout, normalizer)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        flat, _ = concat_inputs(inputs, self.obs_dim)
        return self.actor(self.normalizer(flat))


def td_target(b_rewards: torch.Tensor, b_terminated: torch.Tensor, b_next_obs: torch.Tensor,
              actor_target: nn.Module, critic_target: nn.Module, gamma: float) -> torch.Tensor:
    """y = r + γ(1 − terminated)·Q'(s', μ'(s')) — bootstraps on truncation (terminated = 0)."""
    with torch.no_grad():
        next_q = critic_target(b_next_obs, actor_target(b_next_obs))
        return b_rewards + gamma * (1.0 - b_terminated) * next_q


def cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging θ' ← τθ + (1 − τ)θ' over parameters (buffers are copied)."""
    for t, s in zip(target.parameters(), source.parameters()):
        t.lerp_(s, tau)
    for t, s in zip(target.buffers(), source.buffers()):
        t.copy_(s)
