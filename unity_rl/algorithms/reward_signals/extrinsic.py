"""``reward_signals.extrinsic``: the reward the environment gives (ML-Agents'
``ExtrinsicRewardProvider``). Its group-reward branch is upstream of it: a collector without
group collection (PPO, SAC, DDPG) has already added each step's group reward to its reward, with
ML-Agents' warning (``unity_rl.runtime.collector``); POCA adds groupmates' and group rewards in
its learner."""
from __future__ import annotations

import numpy as np

from unity_rl.algorithms.reward_signals.base import RewardSignal, SignalBatch


class ExtrinsicReward(RewardSignal):
    """r_t = the environment's reward after action t. Nothing to learn; V after a real end is 0."""

    reads_observations = False

    def rewards(self, batch: SignalBatch) -> np.ndarray:
        return np.asarray(batch.env_rewards, np.float32)


PROVIDER = ExtrinsicReward
