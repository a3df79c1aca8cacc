"""``LearnedRewardSignal``: what every reward signal with a torch network shares (curiosity, RND,
GAIL): its modules on the learner's device, its own Adam at its ``learning_rate``, its optional
observation normaliser, its checkpoint state (``base.py`` has the seam's contract).

- ``network_settings`` builds each body as ML-Agents' ``NetworkBody`` does (``body``): the
  observation encoders (images through ``vis_encode_type``, vectors as they are) then
  ``num_layers`` × [Linear(hidden_units) + Swish], Kaiming-normal; ``memory`` is dropped (as
  ML-Agents, with a warning at load). GOAL_SIGNAL observations are plain inputs here (ML-Agents
  would hyper-condition the signal's body on them; no example scene combines the two).
- ``normalize: true`` gives the signal a ``RunningNormalizer`` of its own over the vector
  columns (ML-Agents' ``NetworkBody`` normaliser); whether and when it is updated is the
  signal's (ML-Agents: curiosity never updates it, RND on every evaluation and update).
- A subclass builds its modules in ``build`` (inside the learner's seeded init), lists the
  trained parameters in ``parameters()`` and implements ``rewards`` and ``update``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from unity_rl.algorithms.body import Body
from unity_rl.algorithms.encoders import ObservationLayout
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.base import RewardSignal, SignalBatch
from unity_rl.algorithms.reward_signals.config import LearnedSignalConfig


def body(obs_shapes: Any, network: NetworkConfig, action_size: int = 0) -> Body:
    """ML-Agents' ``NetworkBody(observation_specs, network_settings, action_size)``: encoders,
    [encoding | action] -> num_layers × (Linear + Swish). Memory dropped, no goal conditioning."""
    network = NetworkConfig(normalize=network.normalize, hidden_units=network.hidden_units,
                            num_layers=network.num_layers, vis_encode_type=network.vis_encode_type,
                            goal_conditioning_type="none", memory=None)
    return Body(obs_shapes, network, action_size)


class LearnedRewardSignal(RewardSignal):
    """A reward signal with modules, an Adam and (``normalize``) a normaliser of its own."""

    config: LearnedSignalConfig

    def __init__(self, config: LearnedSignalConfig, obs_shapes: Any, action_spec: Any,
                 device: str = "cpu"):
        super().__init__(config, obs_shapes, action_spec, device)
        self.device = torch.device(device)
        self.layout = ObservationLayout(obs_shapes)
        self.continuous_size = int(getattr(action_spec, "continuous_size", 0))
        self.discrete_branches = tuple(int(b) for b in
                                       (getattr(action_spec, "discrete_branches", ()) or ()))
        self.normalizer = self.layout.make_normalizer(config.network_settings.normalize)
        """The signal's own observation normaliser (None without ``normalize``)."""
        self.modules = nn.ModuleDict(self.build(self.layout.obs_shapes, config.network_settings))
        """Every module of the signal (trained or fixed), by name: what checkpoints keep."""
        self.modules.to(self.device)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=config.learning_rate)

    # -- what a subclass provides ---------------------------------------------------------------
    def build(self, obs_shapes: Any, network: NetworkConfig) -> dict[str, nn.Module]:
        raise NotImplementedError

    def parameters(self) -> Sequence[nn.Parameter]:
        """What the signal's Adam trains (default: every module's parameters)."""
        return list(self.modules.parameters())

    # -- helpers ---------------------------------------------------------------------------------
    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """Raw rows -> float tensor through the signal's own normaliser (if any)."""
        return torch.as_tensor(self.layout.normalize(self.normalizer, obs), device=self.device)

    def tensor(self, x: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x), dtype=dtype, device=self.device)

    def flat_actions(self, batch: SignalBatch) -> torch.Tensor:
        """ML-Agents' ``ActionFlattener``: [continuous | one-hot of each branch]."""
        parts = []
        if self.continuous_size:
            parts.append(self.tensor(batch.continuous_actions))
        if self.discrete_branches:
            parts.append(self.one_hot(batch))
        return torch.cat(parts, dim=1)

    def one_hot(self, batch: SignalBatch) -> torch.Tensor:
        """[n, Σ branches] the one-hot of every branch's index, side by side."""
        discrete = self.tensor(batch.discrete_actions, torch.int64)
        return torch.cat([nn.functional.one_hot(discrete[:, i], b).float()
                          for i, b in enumerate(self.discrete_branches)], dim=1)

    def step(self, loss: torch.Tensor) -> None:
        """One step of the signal's Adam on ``loss``."""
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    # -- state -----------------------------------------------------------------------------------
    def extra_state(self) -> dict:
        """Plain values a subclass keeps besides modules, optimiser and normaliser."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        """Restores ``extra_state()``'s output."""

    def state_dict(self) -> dict:
        return {"modules": {k: v.detach().cpu().clone() for k, v in self.modules.state_dict().items()},
                "optimizer": self.optimizer.state_dict(),
                "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
                **self.extra_state()}

    def load_state_dict(self, state: dict) -> None:
        if not state:
            raise ValueError(f"the checkpoint holds no state for the reward signal "
                             f"'{self.name}' (saved before it was configured?)")
        self.modules.load_state_dict(state["modules"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.normalizer is not None and state.get("normalizer") is not None:
            self.normalizer.load_state_dict(state["normalizer"])
        self.load_extra_state(state)
