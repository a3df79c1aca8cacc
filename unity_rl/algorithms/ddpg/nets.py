"""DDPG's networks: the actor μ(s), the critic Q(s, a), Polyak averaging and the export module.

Contract: both networks take flat float32 rows [n, obs_dim] whose vector columns are already
normalised, and split them with their own ``ObservationEncoder`` (images through the
``vis_encode_type`` encoder).  Actions are continuous, in Unity's bounds [-1, 1].

Goal conditioning (``goal_indices``: the GOAL_SIGNAL observations, with
``goal_conditioning_type: hyper``): each trunk is ML-Agents' ``ConditionalEncoder`` over the
encoding (the critic's: encoding and action, as ML-Agents' Q networks) with its last layer a
HyperNetwork fed by the goal encoding, then the usual output layer (``conditioning.ConditionalMLP``).
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from collections.abc import Sequence

from unity_rl.algorithms.conditioning import ConditionalEncoder, ConditionalMLP
from unity_rl.algorithms.encoders import FoldedNormalizer, ObservationEncoder, ObsShapesLike, concat_inputs
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import layer_init, mlp
from unity_rl.algorithms.normalizer import RunningNormalizer

ACTION_LOW = -1.0
"""Lower bound of every continuous action Unity accepts."""
ACTION_HIGH = 1.0
"""Upper bound of every continuous action Unity accepts."""

def trunk(in_size: int, goal_size: int, out_size: int, out_std: float,
          network: NetworkConfig) -> nn.Module:
    """MLP with ReLU (``nets.mlp``), or, with a goal (``goal_size`` > 0), ML-Agents'
    ``ConditionalEncoder`` body and the same orthogonal output layer."""
    if not goal_size:
        return mlp(in_size, network.hidden_units, network.num_layers, out_size, out_std=out_std,
                   activation=nn.ReLU)
    body = ConditionalEncoder(in_size, goal_size, network.hidden_units, network.num_layers)
    return ConditionalMLP(body, layer_init(nn.Linear(network.hidden_units, out_size), std=out_std))


class Actor(nn.Module):
    """μ(s): encoder, MLP with ReLU, tanh output scaled to [low, high]; takes flat rows with
    normalised vector columns."""

    def __init__(self, obs_shapes: ObsShapesLike, act_dim: int, network: NetworkConfig,
                 low: float = ACTION_LOW, high: float = ACTION_HIGH,
                 goal_indices: Sequence[int] = ()):
        super().__init__()
        self.encoder = ObservationEncoder(obs_shapes, network, network.conditioning_goals(goal_indices))
        self.net = trunk(self.encoder.output_size, self.encoder.goal_size, act_dim, 0.01, network)
        self.register_buffer("action_scale", torch.tensor((high - low) / 2.0))
        self.register_buffer("action_bias", torch.tensor((high + low) / 2.0))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        encoding, goal = self.encoder.encode(obs)
        out = self.net(encoding) if goal is None else self.net(encoding, goal)
        return torch.tanh(out) * self.action_scale + self.action_bias


class QNetwork(nn.Module):
    """Q(s, a): encoder, then MLP with ReLU over [encoded s, a]."""

    def __init__(self, obs_shapes: ObsShapesLike, act_dim: int, network: NetworkConfig,
                 goal_indices: Sequence[int] = ()):
        super().__init__()
        self.encoder = ObservationEncoder(obs_shapes, network, network.conditioning_goals(goal_indices))
        self.net = trunk(self.encoder.output_size + act_dim, self.encoder.goal_size, 1, 1.0, network)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        encoding, goal = self.encoder.encode(obs)
        x = torch.cat([encoding, actions], dim=-1)
        return (self.net(x) if goal is None else self.net(x, goal)).squeeze(-1)


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
