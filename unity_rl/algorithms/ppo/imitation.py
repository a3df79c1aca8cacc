"""PPO's side of imitation: its actor as behavioral cloning sees it (``PPOImitationPolicy``, an
``imitation.behavioral_cloning.ImitationPolicy``) and the BC update its host runs once after
each PPO update (``make_behavioral_cloning``: the shared builder of
``imitation.behavioral_cloning`` with PPO's learning rate and minibatch size), as ML-Agents'
``on_policy_trainer`` does. POCA's learner has the same actor (``model``, PPO's ``ActorCritic``)
and fields, and its algorithm (``PPOAlgorithm``'s ``make_host``) uses this as it is (ML-Agents'
POCA is an on-policy trainer with the same ``BCModule``)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from unity_rl.algorithms.imitation.behavioral_cloning import BehavioralCloning
from unity_rl.algorithms.imitation.behavioral_cloning import \
    make_behavioral_cloning as build_behavioral_cloning
from unity_rl.algorithms.imitation.config import BehavioralCloningConfig
from unity_rl.algorithms.ppo.learner import PPOLearner


class PPOImitationPolicy:
    """The learner's actor (encoder, trunk, LSTM, heads, log-std) and normaliser (a
    ``PPOLearner`` or a ``POCALearner``: ``model``, ``normalizer``, ``sequence_length``)."""

    def __init__(self, learner: PPOLearner):
        self.learner = learner
        model = learner.model
        self.sequence_length = learner.sequence_length
        self.continuous_size = model.continuous_size
        self.discrete_branches = tuple(model.discrete_branches)
        self.device = learner.device

    def actor_parameters(self) -> list:
        """ML-Agents' ``policy.actor``: the actor encoder, trunk, LSTM, output layer, log-std
        (with ``shared_critic`` its value heads too, which BC's loss never reaches)."""
        model = self.learner.model
        params = [*model.actor_encoder.parameters(), *model.actor_head.parameters()]
        if hasattr(model, "actor_lstm"):
            params += list(model.actor_lstm.parameters())
        if model.continuous_size:
            params.append(model.actor_logstd)
        return params

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(self.learner._normalize(obs), dtype=torch.float32,
                               device=self.device)

    def sample(self, obs: torch.Tensor, generator: torch.Generator):
        model = self.learner.model
        memory = None
        if model.memory_size:
            memory = obs.new_zeros(len(obs) // self.sequence_length, model.memory_size)
        out = model.actor_output(obs, memory, self.sequence_length)
        c = self.continuous_size
        continuous = probs = None
        if c:
            noise = torch.randn(out[:, :c].shape, generator=generator, dtype=out.dtype,
                                device=out.device)
            continuous = out[:, :c] + noise * torch.exp(model.actor_logstd)
        if self.discrete_branches:
            probs = torch.cat([torch.softmax(b, dim=1) for b in
                               out[:, c:].split(list(self.discrete_branches), dim=1)], dim=1)
        return continuous, probs


def make_behavioral_cloning(cfg: BehavioralCloningConfig, learner: PPOLearner,
                            current_step: Callable[[], int], *, seed: int | None,
                            pairing: str = "mlagents", behavior: str = "") -> BehavioralCloning:
    """BC for a PPO learner (``imitation.behavioral_cloning.make_behavioral_cloning`` on its
    actor): BC's Adam at ``learning_rate · strength``, ``batch_size`` the PPO one when BC sets
    none."""
    return build_behavioral_cloning(
        cfg, PPOImitationPolicy(learner), learner.obs_shapes, learner.cfg.learning_rate,
        learner.cfg.minibatch_size, current_step, seed=seed, pairing=pairing, behavior=behavior)
