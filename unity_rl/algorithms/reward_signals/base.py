"""``RewardSignal``: the contract of a reward provider (ML-Agents' ``BaseRewardProvider``).

A provider turns one agent's trajectory into one reward per step; the learner multiplies them
by the signal's ``strength`` and runs GAE with its ``gamma`` on its own value head. A learned
signal (curiosity, RND, GAIL: a later issue) also trains: it defines ``update`` and is then an
``AuxiliaryUpdate`` (``unity_rl.algorithms.auxiliary``) that the PPO host calls after each PPO
update, its metrics reported and its ``state_dict`` checkpointed with the learner's.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from unity_rl.algorithms.reward_signals.config import RewardSignalConfig
from unity_rl.experience import Trajectory


class RewardSignal:
    """One reward signal of one behavior. Subclasses implement ``rewards``; learned ones also
    ``update``, ``state_dict`` and ``load_state_dict``."""

    ignore_done: ClassVar[bool] = False
    """ML-Agents' ``ignore_done``: True bootstraps this signal's value even after a real episode
    end (curiosity, RND); False (extrinsic, GAIL) counts V after a real end as 0."""
    update = None
    """``update(trajectories) -> metrics``: defined by learned signals only (None: nothing to train)."""

    def __init__(self, config: RewardSignalConfig, obs_shapes: Any = None, action_spec: Any = None):
        self.config = config
        """The signal's settings (name, gamma, strength, network_settings)."""

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def gamma(self) -> float:
        return self.config.gamma

    @property
    def strength(self) -> float:
        return self.config.strength

    def rewards(self, trajectory: Trajectory) -> np.ndarray:
        """r_t of each step of ``trajectory``: [T] float32, *before* ``strength``."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """What a checkpoint keeps of this signal (tensors and plain values only)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restores ``state_dict()``'s output."""
