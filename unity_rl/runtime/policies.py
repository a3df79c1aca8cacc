"""Picklable policy factories for actors: ``(obs_dim, action_spec, seed) -> policy copy``.

Kept in their own light module so that an actor process unpickling its ``ActorSpec`` imports the
acting side of an algorithm only (never the trainer, checkpoints or metrics).
"""
from __future__ import annotations

from typing import Any

from unity_rl.algos.nets import NetworkConfig


def ppo_policy(obs_dim: int, action_spec: Any, seed: int, *, network_cfg: NetworkConfig):
    """A ``PPOPolicy`` with one torch thread (weights arrive later with ``load_weights``)."""
    from unity_rl.algos.ppo import PPOPolicy

    return PPOPolicy(obs_dim, action_spec, network_cfg, seed=seed, num_threads=1)


def ddpg_policy(obs_dim: int, action_spec: Any, seed: int, **options):
    """A ``DDPGActorPolicy`` (options: network_cfg, ddpg_cfg, replay_link; see offpolicy_actor)."""
    from unity_rl.runtime.offpolicy_actor import DDPGActorPolicy

    return DDPGActorPolicy(obs_dim, action_spec, seed, **options)
