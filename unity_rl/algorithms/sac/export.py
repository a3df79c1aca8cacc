"""SAC's deterministic policy as a module (evaluate, ONNX) and the loader that rebuilds it from a
saved policy (training-checkpoint entry or ``<Behavior>.pt``).

``SACExportModule(obs...)`` -> tanh(μ(s)) for the continuous part (ML-Agents' exported
``continuous_actions`` is tanh of a sample; here the sample is its mean, as every policy this
project exports is deterministic) and the most probable index of each discrete branch.
``deterministic_continuous_actions`` is μ(s) *un-squashed*, as ML-Agents 1.1.0 exports it
(TRAINERS.md §10: it can leave [−1, 1]); with ``unity_rl.fix_quirks: [sac_deterministic_squash]``
it is tanh(μ(s)) as well.

With memory (``network_settings.memory``) the module takes ``recurrent_in`` [n, 1, memory_size]
as its last input and returns ``recurrent_out`` [n, 1, memory_size] after its actions: the actor
LSTM's state [h | c] before and after this step (ML-Agents' recurrent ONNX contract; Unity feeds
``recurrent_out`` back as the agent's next ``recurrent_in``).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from unity_rl.algorithms.encoders import FoldedNormalizer, ObservationLayout, concat_inputs
from unity_rl.algorithms.sac.nets import SACActor
from unity_rl.algorithms.spec import saved_obs_shapes


class SACExportModule(nn.Module):
    """Normaliser folded in; ``forward(obs_0.., [action_masks])`` as ``unity_rl.export`` expects."""

    def __init__(self, actor: SACActor, layout: ObservationLayout, normalizer: Any,
                 squash_deterministic: bool = False):
        super().__init__()
        self.actor = actor
        self.obs_dim = layout.obs_dim
        self.normalize = FoldedNormalizer(layout, normalizer)
        self.squash_deterministic = bool(squash_deterministic)
        self.memory_size = actor.memory_size
        """Size of ``recurrent_in`` / ``recurrent_out`` (0: no memory, no such tensors)."""

    def _distributions(self, inputs: tuple[torch.Tensor, ...]):
        flat, rest = concat_inputs(inputs, self.obs_dim)
        memory = None
        if self.memory_size:
            if not rest:
                raise ValueError("a memory policy needs recurrent_in [n, 1, memory_size]")
            memory, rest = rest[-1].reshape(-1, self.memory_size), rest[:-1]
        masks = rest[0] if rest and self.actor.discrete_branches else None
        return self.actor.run(self.normalize(flat), masks, memory, 1)

    def forward(self, *inputs: torch.Tensor):
        gaussian, categorical, memory_out = self._distributions(inputs)
        continuous = None if gaussian is None else torch.tanh(gaussian.mean)
        discrete = None if categorical is None else categorical.mode()
        actions = tuple(a for a in (continuous, discrete) if a is not None)
        if memory_out is not None:
            return (*actions, memory_out.unsqueeze(1))
        return actions[0] if len(actions) == 1 else actions

    def deterministic_continuous_actions(self, *inputs: torch.Tensor) -> torch.Tensor:
        """ML-Agents' ``deterministic_continuous_actions``: μ(s) (tanh(μ) with the fix)."""
        gaussian = self._distributions(inputs)[0]
        return torch.tanh(gaussian.mean) if self.squash_deterministic else gaussian.mean


def load_policy_module(state: dict, action_layout: Any, network_cfg: Any) -> nn.Module:
    """The export module of saved SAC weights (``SACLearner.weights()`` or its checkpoint state)."""
    weights = state.get("weights")
    if weights is None:  # a training checkpoint: the learner state inside its host's
        learner = state["learner"]
        weights = learner if "policy" in learner else learner["sac"]
    obs_shapes = saved_obs_shapes(state, weights)
    layout = ObservationLayout(obs_shapes)
    actor = SACActor(layout.obs_shapes, int(action_layout.continuous_size),
                     tuple(action_layout.discrete_branches), network_cfg,
                     goal_indices=weights.get("goal_indices", ()))
    actor.load_state_dict(weights["policy"])
    normalizer = layout.make_normalizer(network_cfg.normalize)
    if normalizer is not None:
        normalizer.load_state_dict(weights["normalizer"])
    return SACExportModule(actor.eval(), layout, normalizer,
                           bool(weights.get("squash_deterministic", False)))
