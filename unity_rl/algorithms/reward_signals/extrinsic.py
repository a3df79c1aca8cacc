"""``reward_signals.extrinsic``: the reward the environment gives (ML-Agents'
``ExtrinsicRewardProvider``; its group-reward branch belongs to POCA, not here)."""
from __future__ import annotations

import numpy as np

from unity_rl.algorithms.reward_signals.base import RewardSignal, SignalBatch


class ExtrinsicReward(RewardSignal):
    """r_t = the environment's reward after action t. Nothing to learn; V after a real end is 0."""

    def rewards(self, batch: SignalBatch) -> np.ndarray:
        return np.asarray(batch.env_rewards, np.float32)


PROVIDER = ExtrinsicReward
