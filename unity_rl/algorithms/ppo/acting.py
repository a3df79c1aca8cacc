"""The actors' PPO policy factory: ``(obs_shapes, action_spec, seed) -> PPOPolicy``.

Picklable (a module-level function bound with ``functools.partial``); an actor unpickling its
plan imports only this and the policy, never the trainer, checkpoints or metrics.
"""
from __future__ import annotations

from typing import Any, Sequence

from unity_rl.algorithms.network_config import NetworkConfig


def ppo_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, *,
               network_cfg: NetworkConfig, arch: dict | None = None):
    """A ``PPOPolicy`` (weights arrive later with ``load_weights``, which bring their ``arch``)."""
    from unity_rl.algorithms.ppo.learner import PPOPolicy

    return PPOPolicy(obs_shapes, action_spec, network_cfg, seed=seed, arch=arch)
