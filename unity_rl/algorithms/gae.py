"""Generalized Advantage Estimation (Schulman et al. 2016, arXiv:1506.02438), one trajectory.

A trajectory ends either because the episode really ended (``terminated``: the value after the
last step is zero) or because it was cut — by Unity's max step (``interrupted``) or by the
trainer's ``time_horizon`` — in which case the return continues past the cut and we bootstrap
from V(last_obs).  Treating a cut as an end (CleanRL's ``next_done`` on truncation) biases the
values of states near the cut downwards; see Pardo et al. 2018, "Time Limits in RL".
"""
from __future__ import annotations

import numpy as np


def compute_gae(rewards: np.ndarray, values: np.ndarray, last_value: float, terminated: bool,
                gamma: float, gae_lambda: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages Â_t = Σ_l (γλ)^l δ_{t+l} with δ_t = r_t + γ V(s_{t+1}) − V(s_t), and returns.

    rewards, values: [T] for the T decisions of one agent's trajectory.
    last_value: V(s_T), the value of the observation after the last action.
    terminated: True when s_T is terminal (V(s_T) counts as 0), False on a cut (bootstrap).
    Returns (advantages, returns), both [T] float32, with returns = advantages + values
    (the λ-return targets of the value function).
    """
    rewards = np.asarray(rewards, np.float64)
    values = np.asarray(values, np.float64)
    if rewards.shape != values.shape or rewards.ndim != 1:
        raise ValueError(f"rewards {rewards.shape} and values {values.shape} must both be [T]")
    advantages = np.zeros_like(rewards)
    next_value = 0.0 if terminated else float(last_value)
    last_gae_lam = 0.0
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * next_value - values[t]
        last_gae_lam = delta + gamma * gae_lambda * last_gae_lam
        advantages[t] = last_gae_lam
        next_value = values[t]
    returns = advantages + values
    return advantages.astype(np.float32), returns.astype(np.float32)
