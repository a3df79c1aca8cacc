"""SAC's side of imitation: its actor as behavioral cloning sees it (``SACImitationPolicy``, an
``imitation.behavioral_cloning.ImitationPolicy``: the tanh-squashed reparameterised sample, the
branch probabilities) and the BC update the off-policy host runs once per SAC update step
(``make_behavioral_cloning``: the shared builder of ``imitation.behavioral_cloning`` with SAC's
learning rate and batch size), as ML-Agents' ``off_policy_trainer._update_policy`` does."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from unity_rl.algorithms.imitation.behavioral_cloning import BehavioralCloning
from unity_rl.algorithms.imitation.behavioral_cloning import \
    make_behavioral_cloning as build_behavioral_cloning
from unity_rl.algorithms.imitation.config import BehavioralCloningConfig
from unity_rl.algorithms.sac.learner import SACLearner


class SACImitationPolicy:
    """The learner's π (``SACActor``, its LSTM with memory) and its normaliser."""

    def __init__(self, learner: SACLearner):
        self.learner = learner
        self.sequence_length = int(getattr(learner, "sequence_length", 1))
        """L: rows per sequence (1 without memory); each sequence starts from zero memory."""
        self.continuous_size = learner.continuous_size
        self.discrete_branches = tuple(learner.discrete_branches)
        self.device = learner.device

    def actor_parameters(self) -> list:
        return list(self.learner.policy.parameters())

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        return self.learner._obs_tensor(obs)

    def sample(self, obs: torch.Tensor, generator: torch.Generator):
        memory_size = int(getattr(self.learner, "memory_size", 0))
        memory = (obs.new_zeros(len(obs) // self.sequence_length, memory_size) if memory_size
                  else None)
        gaussian, categorical = self.learner.policy(obs, None, memory, self.sequence_length)
        continuous = gaussian.rsample(generator)[0] if gaussian is not None else None
        return continuous, None if categorical is None else categorical.probs


def make_behavioral_cloning(cfg: BehavioralCloningConfig, learner: SACLearner,
                            current_step: Callable[[], int], *, seed: int | None,
                            pairing: str = "mlagents", behavior: str = "") -> BehavioralCloning:
    """BC for a SAC learner (``imitation.behavioral_cloning.make_behavioral_cloning`` on its
    actor): BC's Adam at ``learning_rate · strength``, ``batch_size`` the SAC one when BC sets
    none."""
    return build_behavioral_cloning(
        cfg, SACImitationPolicy(learner), learner.obs_shapes, learner.cfg.learning_rate,
        learner.cfg.batch_size, current_step, seed=seed, pairing=pairing, behavior=behavior)
