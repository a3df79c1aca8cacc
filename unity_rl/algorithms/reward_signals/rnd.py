"""``reward_signals.rnd``: Random Network Distillation (Burda et al. 2018, arXiv:1810.12894) as
ML-Agents 1.1.0's ``RNDRewardProvider`` computes and trains it
(``torch_entities/components/reward_providers/rnd_reward_provider.py``)::

    f(s)  = a fixed, randomly initialised NetworkBody(s)          (the target)
    f̂(s)  = a trained NetworkBody(s) with the same settings        (the predictor)
    r     = Σ (f̂(s) − f(s))²          current observations only; no ½, no clip, no masks
    loss  = mean r, one Adam step on the predictor (lr ``learning_rate``, default 1e-4)

``ignore_done``: True. ``normalize: true``: both networks' normaliser folds in the batch's
observations after each evaluation and each update (ML-Agents' ``RNDNetwork.forward`` calls
``update_normalization`` every time; the two networks' normalisers stay equal, so one is kept).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.learned import LearnedRewardSignal, body


class RNDReward(LearnedRewardSignal):
    """RND: reward = the predictor's squared error against the fixed random target."""

    ignore_done = True

    def build(self, obs_shapes: Any, network: NetworkConfig) -> dict[str, nn.Module]:
        # ML-Agents builds the target first, then the predictor
        target = body(obs_shapes, network).requires_grad_(False)
        return {"target": target, "predictor": body(obs_shapes, network)}

    def parameters(self) -> Sequence[nn.Parameter]:
        return list(self.modules["predictor"].parameters())

    def _error(self, obs: np.ndarray) -> torch.Tensor:
        """[n] Σ (f̂(s) − f(s))², then the normaliser folds ``obs`` in (module doc)."""
        x = self.obs_tensor(obs)
        with torch.no_grad():
            target = self.modules["target"](x)
        error = torch.sum((self.modules["predictor"](x) - target) ** 2, dim=1)
        self.layout.update(self.normalizer, obs)
        return error

    def rewards(self, batch: SignalBatch) -> np.ndarray:
        with torch.no_grad():
            return self._error(batch.obs).cpu().numpy().astype(np.float32)

    def update(self, batch: SignalBatch) -> dict[str, float]:
        loss = self._error(batch.obs).mean()
        self.step(loss)
        return {"Losses/RND Loss": loss.item()}


PROVIDER = RNDReward
