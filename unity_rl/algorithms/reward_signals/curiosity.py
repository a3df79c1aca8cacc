"""``reward_signals.curiosity``: the Intrinsic Curiosity Module (Pathak et al. 2017,
arXiv:1705.05363) as ML-Agents 1.1.0's ``CuriosityRewardProvider`` computes and trains it
(``torch_entities/components/reward_providers/curiosity_reward_provider.py``)::

    φ(s)      = NetworkBody(s)                              h = network_settings.hidden_units
    â         = inverse(cat(φ(s), φ(s′)))                  Linear(2h → 256) + Swish → heads:
                continuous Linear(256 → C); discrete Linear(256 → Σb), softmax per branch
    φ̂(s′)     = forward(cat(φ(s), flat a))                 Linear(h + |a| → 256) + Swish → Linear(256 → h)
    r         = ½ Σ (φ(s′) − φ̂(s′))²                       (the forward model's error)
    L_inverse = mean_masked Σ (a − â)²  (continuous)  +  mean_masked −Σ onehot(a)·log(p̂ + 1e-10)
    L_forward = mean_masked r                           (φ(s′) not detached: ML-Agents' quirk)
    loss      = 10 · (0.2 · L_forward + 0.8 · L_inverse), one Adam step (lr ``learning_rate``)

Rewards are evaluated without gradient, clipped at 1 / strength (so strength · r ≤ 1) and are 0
until the signal's first update (ML-Agents' ``_has_updated_once``). ``ignore_done``: True.
The prediction heads are Xavier-uniform (``linear_layer``'s default), the encoders
Kaiming-normal (``LinearEncoder``). ``normalize: true`` gives φ a normaliser that is never
updated (ML-Agents: nothing calls its ``update_normalization``), i.e. a clip to ±5.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from unity_rl.algorithms.encoders import Swish
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import mlagents_init
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.learned import LearnedRewardSignal, body

BETA = 0.2
"""Weight of the forward loss against the inverse loss (ML-Agents' ``beta``)."""
LOSS_MULTIPLIER = 10.0
"""ML-Agents' ``loss_multiplier``."""
MODEL_HIDDEN = 256
"""Width of the inverse and forward models' hidden layer (fixed in ML-Agents)."""
EPSILON = 1e-10


class CuriosityReward(LearnedRewardSignal):
    """ICM: reward = the forward model's error in φ-space (module doc)."""

    ignore_done = True

    def build(self, obs_shapes: Any, network: NetworkConfig) -> dict[str, nn.Module]:
        h = network.hidden_units
        flat_size = self.continuous_size + sum(self.discrete_branches)
        # Drawn in ML-Agents' order (state encoder, inverse model, action predictions, forward
        # model) so that a seed gives its initial networks; registered in this module's
        # earlier order, which checkpoints' optimiser states keep.
        drawn: dict[str, nn.Module] = {
            "state_encoder": body(obs_shapes, network),
            "inverse_model": nn.Sequential(mlagents_init(nn.Linear(2 * h, MODEL_HIDDEN)), Swish()),
        }
        if self.continuous_size:
            drawn["continuous_prediction"] = mlagents_init(
                nn.Linear(MODEL_HIDDEN, self.continuous_size), xavier_uniform=True)
        if self.discrete_branches:
            drawn["discrete_prediction"] = mlagents_init(
                nn.Linear(MODEL_HIDDEN, sum(self.discrete_branches)), xavier_uniform=True)
        drawn["forward_model"] = nn.Sequential(
            mlagents_init(nn.Linear(h + flat_size, MODEL_HIDDEN)), Swish(),
            mlagents_init(nn.Linear(MODEL_HIDDEN, h), xavier_uniform=True))
        order = ("state_encoder", "inverse_model", "forward_model", "continuous_prediction",
                 "discrete_prediction")
        modules = {name: drawn[name] for name in order if name in drawn}
        self.has_updated_once = False
        return modules

    # -- the model -------------------------------------------------------------------------------
    def _phi(self, obs: np.ndarray) -> torch.Tensor:
        return self.modules["state_encoder"](self.obs_tensor(obs))

    def _forward_error(self, batch: SignalBatch, phi: torch.Tensor, phi_next: torch.Tensor
                       ) -> torch.Tensor:
        """[n] ½ Σ (φ(s′) − φ̂(s′))², ML-Agents' ``compute_reward``."""
        predicted = self.modules["forward_model"](torch.cat([phi, self.flat_actions(batch)], dim=1))
        return torch.sum(0.5 * (phi_next - predicted) ** 2, dim=1)

    def _inverse_loss(self, batch: SignalBatch, phi: torch.Tensor, phi_next: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
        hidden = self.modules["inverse_model"](torch.cat([phi, phi_next], dim=1))
        loss = torch.zeros((), device=self.device)
        if self.continuous_size:
            predicted = self.modules["continuous_prediction"](hidden)
            error = torch.sum((self.tensor(batch.continuous_actions) - predicted) ** 2, dim=1)
            loss = loss + error[mask].mean()
        if self.discrete_branches:
            logits = self.modules["discrete_prediction"](hidden)
            probs = torch.cat([torch.softmax(b, dim=1) for b in
                               torch.split(logits, list(self.discrete_branches), dim=1)], dim=1)
            cross_entropy = torch.sum(-torch.log(probs + EPSILON) * self.one_hot(batch), dim=1)
            loss = loss + cross_entropy[mask].mean()
        return loss

    # -- the seam --------------------------------------------------------------------------------
    def rewards(self, batch: SignalBatch) -> np.ndarray:
        with torch.no_grad():
            error = self._forward_error(batch, self._phi(batch.obs), self._phi(batch.next_obs))
        rewards = np.minimum(error.cpu().numpy(), 1.0 / self.strength)
        return (rewards * float(self.has_updated_once)).astype(np.float32)

    def update(self, batch: SignalBatch) -> dict[str, float]:
        self.has_updated_once = True
        mask = self.tensor(batch.mask) > 0
        # ML-Agents encodes s and s′ afresh for each loss (same weights, so the same values)
        forward_loss = self._forward_error(batch, self._phi(batch.obs),
                                           self._phi(batch.next_obs))[mask].mean()
        inverse_loss = self._inverse_loss(batch, self._phi(batch.obs), self._phi(batch.next_obs),
                                          mask)
        self.step(LOSS_MULTIPLIER * (BETA * forward_loss + (1.0 - BETA) * inverse_loss))
        return {"Losses/Curiosity Forward Loss": forward_loss.item(),
                "Losses/Curiosity Inverse Loss": inverse_loss.item()}

    def extra_state(self) -> dict:
        return {"has_updated_once": self.has_updated_once}

    def load_extra_state(self, state: dict) -> None:
        self.has_updated_once = bool(state.get("has_updated_once", True))


PROVIDER = CuriosityReward
