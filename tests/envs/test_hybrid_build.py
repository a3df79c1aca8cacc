"""Hybrid actions as one [n, C + B] float array reach a real build (FoodCollector stand-in)."""
from __future__ import annotations

import numpy as np

from tests.conftest import BUILDS_DIR
from unity_rl import AgentStream


def test_hybrid_float_rows_drive_both_parts(free_base_port):
    with AgentStream(str(BUILDS_DIR / "FoodCollector"), base_port=free_base_port(1),
                     timeout_wait=30) as stream:
        result = stream.reset()
        rewards = []
        for _ in range(6):
            obs = result.decisions.obs[0]
            rows = np.zeros((len(obs), 4), np.float32)
            rows[:, 3] = obs[:, 7]  # laser = the signal bit, as a float branch index
            result = stream.step(rows)
            rewards.append(result.decisions.reward)
        # Standing still with the right laser: +0.01 per academy step, 0.05 per decision.
        assert np.allclose(np.concatenate(rewards), 0.05, atol=1e-6)
