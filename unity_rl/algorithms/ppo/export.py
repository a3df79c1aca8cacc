"""A saved PPO policy (training-checkpoint entry or ``<Behavior>.pt``) rebuilt as the
deterministic ``torch.nn.Module`` that evaluate plays and ``unity_rl.export`` writes to ONNX."""
from __future__ import annotations

from typing import Any

from torch import nn

from unity_rl.algorithms.ppo.acting import PPOPolicy
from unity_rl.algorithms.spec import saved_obs_shapes


def _weights(state: dict) -> dict:
    if state.get("weights") is not None:
        return state["weights"]
    learner = state["learner"]
    return {"model": learner["model"], "normalizer": learner["normalizer"],
            "version": learner.get("version", 0), "obs_shapes": learner.get("obs_shapes"),
            "arch": learner.get("arch"),  # None (older files): PPOPolicy's LEGACY_ARCH
            "value_heads": learner.get("value_heads"),  # None (one-head files): extrinsic
            "goal_indices": learner.get("goal_indices", ()),
            "shared_critic": learner.get("shared_critic", False)}


def load_policy_module(state: dict, action_layout: Any, network_cfg: Any) -> nn.Module:
    """PPO's export module (normaliser folded in, ML-Agents' action clamp) from saved weights."""
    weights = _weights(state)
    policy = PPOPolicy(saved_obs_shapes(state, weights), action_layout, network_cfg)
    policy.load_weights(weights)
    return policy.export_module()
