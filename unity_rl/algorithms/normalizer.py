"""Running mean/variance observation normaliser (Chan et al. parallel update), with ML-Agents
1.1.0's starting point (one pseudo-observation: ``prior_count``) so its statistics are ML-Agents'.

Pure numpy state so that actors and the learner can share it as plain arrays; the learner owns
the authoritative copy, updates it from the data it trains on, and ships it with the weights.
Learners and policies keep one over the *vector* (rank-1) columns of the flat observation row
only (``encoders.ObservationLayout.update`` / ``normalize``); images are never normalised.
"""
from __future__ import annotations

import numpy as np


class RunningNormalizer:
    """Tracks mean and variance of observations and normalises them with clipping."""

    def __init__(self, shape: tuple[int, ...], clip: float = 5.0, epsilon: float = 1e-8,
                 prior_count: float = 1.0):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = float(prior_count)
        """Observations folded in so far, starting from ``prior_count`` pseudo-observations of
        mean 0 and variance 1: ML-Agents 1.1.0's ``Normalizer`` starts at one (its
        ``normalization_steps`` = 1, ``running_variance`` = 1), so after n rows its mean is
        Σx / (n + 1); so does this one by default."""
        self.clip = clip
        self.epsilon = epsilon

    def update(self, batch: np.ndarray) -> None:
        """Folds a batch [n, *shape] into the running statistics."""
        if len(batch) == 0:
            return
        batch_mean = batch.mean(axis=0)
        batch_var = batch.var(axis=0)
        n = batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var = m2 / total
        self.count = total

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """Returns (obs - mean) / std clipped to ±clip, as float32."""
        std = np.sqrt(self.var + self.epsilon)
        return np.clip((obs - self.mean) / std, -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": float(self.count)}

    def load_state_dict(self, state: dict) -> None:
        self.mean = np.asarray(state["mean"], np.float64).copy()
        self.var = np.asarray(state["var"], np.float64).copy()
        self.count = float(state["count"])
