"""A saved DDPG policy (training-checkpoint entry or ``<Behavior>.pt``) rebuilt as the
deterministic actor (normalisation folded in) that evaluate plays and ONNX export writes."""
from __future__ import annotations

from typing import Any

from torch import nn

from unity_rl.algorithms.ddpg.config import DDPGConfig
from unity_rl.algorithms.ddpg.learner import DDPGPolicy, ExportedActor
from unity_rl.algorithms.spec import saved_obs_shapes


def load_policy_module(state: dict, action_layout: Any, network_cfg: Any) -> nn.Module:
    """μ(s) with the saved normaliser, from a .pt (``weights``) or a checkpoint's learner state."""
    weights = state.get("weights")
    if weights is None:  # a training checkpoint: the learner state, possibly inside its host's
        learner = state["learner"]
        weights = learner if "actor" in learner else learner["ddpg"]
    policy = DDPGPolicy(saved_obs_shapes(state, weights), action_layout, DDPGConfig(),
                        network_cfg.hidden_units, network_cfg.num_layers, network_cfg.normalize,
                        vis_encode_type=network_cfg.vis_encode_type,
                        goal_conditioning_type=network_cfg.goal_conditioning_type,
                        goal_indices=weights.get("goal_indices", ()))
    policy.load_weights({"actor": weights["actor"], "normalizer": weights["normalizer"],
                         "version": weights.get("version", 0),
                         "goal_indices": weights.get("goal_indices", ())})
    return ExportedActor(policy.actor, policy.normalizer)
