"""DDPG's acting policy in actors: μ(s) plus exploration noise, over the generic off-policy
acting side (``offpolicy.acting.OffPolicyActingPolicy``: warm-up, actor-side priorities,
shared-replay writes).

Kept light (numpy, torch, the DDPG policy and ``unity_rl.replay``; never the trainer) because it
is imported inside every actor process when the actor unpickles its policy factory.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from unity_rl.algorithms.ddpg.config import DDPGConfig
from unity_rl.algorithms.ddpg.learner import DDPGPolicy, continuous_action_size
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.offpolicy.acting import OffPolicyActingPolicy
from unity_rl.experience import TransitionBatch
from unity_rl.runtime.acting import AgentKeys


class DDPGActorPolicy(OffPolicyActingPolicy):
    """``DDPGPolicy`` in an actor: Gaussian or per-agent Ornstein–Uhlenbeck noise (reset when an
    agent's episode ends), clipped to the action bounds; uniform random actions in warm-up."""

    def __init__(self, obs_shapes: Any, action_spec: Any, seed: int, *, network_cfg: NetworkConfig,
                 ddpg_cfg: DDPGConfig, goal_indices: Sequence[int] = ()):
        super().__init__(ddpg_cfg)
        self.policy: DDPGPolicy | None = None
        try:
            continuous_action_size(action_spec)
        except ValueError as err:
            # The learner refuses this spec with a configuration error naming the behavior (and
            # suggesting PPO) as soon as the actors report ready; failing here first would bury
            # that message under an actor traceback. Without a policy the actor cannot act.
            self._unsupported = str(err)
            return
        self.policy = DDPGPolicy(obs_shapes, action_spec, ddpg_cfg, network_cfg.hidden_units,
                                 network_cfg.num_layers, network_cfg.normalize, seed=seed,
                                 vis_encode_type=network_cfg.vis_encode_type,
                                 goal_conditioning_type=network_cfg.goal_conditioning_type,
                                 goal_indices=goal_indices)

    @property
    def version(self) -> int:
        return -1 if self.policy is None else self.policy.version

    def load_policy_weights(self, weights: dict) -> None:
        if self.policy is None:
            raise ValueError(self._unsupported)
        self.policy.load_weights(weights)

    def policy_actions(self, obs: np.ndarray, deterministic: bool,
                       agent_keys: AgentKeys | None,
                       action_mask: np.ndarray | None = None) -> np.ndarray:
        return self.policy.act(obs, noise=not deterministic, agent_keys=agent_keys)

    def random_actions(self, n: int) -> np.ndarray:
        return self.policy.random_actions(n)

    def td_errors(self, batch: TransitionBatch) -> np.ndarray | None:
        return None if self.policy.critic is None else self.policy.td_errors(batch)

    def episodes_ended(self, agent_keys: AgentKeys) -> None:
        """Resets the exploration noise of agents whose episode ended."""
        self.policy.reset_noise(agent_keys)


def ddpg_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, **options):
    """The actors' picklable factory: a ``DDPGActorPolicy`` (options: network_cfg, ddpg_cfg,
    goal_indices)."""
    return DDPGActorPolicy(obs_shapes, action_spec, seed, **options)
