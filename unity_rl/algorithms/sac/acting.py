"""SAC's acting policy in actors: samples of the tanh-squashed Gaussian and the masked branch
categoricals from shipped weights, over the generic off-policy acting side
(``offpolicy.acting.OffPolicyActingPolicy``: transitions, shared-replay writes).

No random warm-up: during ``buffer_init_steps`` the policy itself acts, as in ML-Agents
(``SACConfig.RANDOM_WARMUP`` is False). The builds get the squashed samples in (−1, 1) unclipped
(ML-Agents' ``clip_action = not tanh_squash``). Action rows follow ``Trajectory.actions``:
continuous [n, C] float32, discrete [n, B] int64, hybrid [n, C + B] float32.

Imported inside every actor process: numpy, torch, the SAC networks, never the learner.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from unity_rl.algorithms.encoders import ObservationLayout
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import seeded_init
from unity_rl.algorithms.offpolicy.acting import OffPolicyActingPolicy
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.nets import SACActor
from unity_rl.runtime.acting import AgentKeys


class SACActingPolicy(OffPolicyActingPolicy):
    """π's copy in an actor (loads ``SACLearner.weights()``)."""

    def __init__(self, obs_shapes: Any, action_spec: Any, seed: int, *, network_cfg: NetworkConfig,
                 sac_cfg: SACConfig, goal_indices: Sequence[int] = ()):
        super().__init__(sac_cfg)
        self.layout = ObservationLayout(obs_shapes)
        self.continuous_size = int(getattr(action_spec, "continuous_size", 0))
        self.discrete_branches = tuple(int(b) for b in (getattr(action_spec, "discrete_branches", ())
                                                        or ()))
        self.mask_size = sum(self.discrete_branches)
        self.goal_indices = tuple(int(i) for i in goal_indices)
        with seeded_init(seed):  # weights arrive later
            self.actor = SACActor(self.layout.obs_shapes, self.continuous_size,
                                  self.discrete_branches, network_cfg,
                                  goal_indices=self.goal_indices).eval()
        self.normalizer = self.layout.make_normalizer(network_cfg.normalize)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.rng = np.random.default_rng(seed)
        self.version = -1

    def load_policy_weights(self, weights: dict) -> None:
        goals = tuple(int(i) for i in weights.get("goal_indices", ()))
        if goals != self.goal_indices:
            raise ValueError(f"these weights are for goal observations {goals}, this policy was "
                             f"built for {self.goal_indices}")
        self.actor.load_state_dict(weights["policy"])
        if self.normalizer is not None:
            self.normalizer.load_state_dict(weights["normalizer"])
        self.version = int(weights["version"])

    @torch.no_grad()
    def policy_actions(self, obs: np.ndarray, deterministic: bool, agent_keys: AgentKeys | None,
                       action_mask: np.ndarray | None = None) -> np.ndarray:
        x = torch.as_tensor(self.layout.normalize(self.normalizer, obs))
        masks = None if action_mask is None else torch.as_tensor(np.asarray(action_mask, bool))
        gaussian, categorical = self.actor(x, masks)
        parts = []
        if gaussian is not None:
            continuous = (torch.tanh(gaussian.mean) if deterministic
                          else gaussian.rsample(self.generator)[0])
            parts.append(continuous.numpy().astype(np.float32))
        if categorical is not None:
            discrete = categorical.mode() if deterministic else categorical.sample(self.generator)
            parts.append(discrete.numpy().astype(np.int64))
        return self._join(parts)

    def random_actions(self, n: int) -> np.ndarray:
        parts = []
        if self.continuous_size:
            parts.append(self.rng.uniform(-1.0, 1.0, (n, self.continuous_size)).astype(np.float32))
        if self.discrete_branches:
            parts.append(np.stack([self.rng.integers(0, b, n) for b in self.discrete_branches],
                                  axis=1).astype(np.int64))
        return self._join(parts)

    @staticmethod
    def _join(parts: list[np.ndarray]) -> np.ndarray:
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([parts[0], parts[1].astype(np.float32)], axis=1)


def sac_policy(obs_shapes: Sequence[tuple[int, ...]], action_spec: Any, seed: int, **options):
    """The actors' picklable factory: a ``SACActingPolicy`` (options: network_cfg, sac_cfg,
    goal_indices)."""
    return SACActingPolicy(obs_shapes, action_spec, seed, **options)
