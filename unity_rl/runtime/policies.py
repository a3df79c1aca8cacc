"""Picklable policy factories for actors: ``(obs_shapes, action_spec, seed) -> policy copy``.

Kept in their own light module so that an actor process unpickling its ``ActorSpec`` imports the
acting side of an algorithm only (never the trainer, checkpoints or metrics).
"""
from __future__ import annotations

from typing import Any, Sequence

from unity_rl.algos.nets import NetworkConfig


def ppo_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, *,
               network_cfg: NetworkConfig, arch: dict | None = None):
    """A ``PPOPolicy`` (weights arrive later with ``load_weights``; ``arch``: PPOConfig.arch)."""
    from unity_rl.algos.ppo import PPOPolicy

    return PPOPolicy(obs_shapes, action_spec, network_cfg, seed=seed, arch=arch)


def ddpg_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, **options):
    """A ``DDPGActorPolicy`` (options: network_cfg, ddpg_cfg, replay_link; see offpolicy_actor)."""
    from unity_rl.runtime.offpolicy_actor import DDPGActorPolicy

    return DDPGActorPolicy(obs_shapes, action_spec, seed, **options)

