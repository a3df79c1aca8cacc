"""GAE against hand-computed values, with termination and with a bootstrapped cut."""
from __future__ import annotations

import numpy as np
import pytest

from unity_rl.algorithms.gae import compute_gae

REWARDS = np.array([1.0, 2.0], np.float32)
VALUES = np.array([0.5, 1.0], np.float32)
GAMMA, LAM = 0.9, 0.8


def test_terminated_does_not_bootstrap():
    # δ1 = 2 + 0 − 1 = 1;  δ0 = 1 + 0.9·1 − 0.5 = 1.4;  A0 = 1.4 + 0.9·0.8·1 = 2.12
    adv, ret = compute_gae(REWARDS, VALUES, last_value=2.0, terminated=True, gamma=GAMMA, gae_lambda=LAM)
    np.testing.assert_allclose(adv, [2.12, 1.0], rtol=1e-6)
    np.testing.assert_allclose(ret, [2.62, 2.0], rtol=1e-6)
    assert adv.dtype == np.float32 and ret.dtype == np.float32


def test_truncated_bootstraps_from_last_value():
    # δ1 = 2 + 0.9·2 − 1 = 2.8;  A0 = 1.4 + 0.72·2.8 = 3.416
    adv, ret = compute_gae(REWARDS, VALUES, last_value=2.0, terminated=False, gamma=GAMMA, gae_lambda=LAM)
    np.testing.assert_allclose(adv, [3.416, 2.8], rtol=1e-6)
    np.testing.assert_allclose(ret, [3.916, 3.8], rtol=1e-6)


def test_lambda_one_gives_discounted_return_and_lambda_zero_td():
    rewards = np.array([1.0, 0.0, 3.0])
    values = np.array([0.2, -0.4, 0.7])
    _, ret = compute_gae(rewards, values, 5.0, False, 0.5, 1.0)
    np.testing.assert_allclose(ret, [1 + 0.25 * 3 + 0.125 * 5, 0.5 * 3 + 0.25 * 5, 3 + 0.5 * 5], rtol=1e-6)
    adv, _ = compute_gae(rewards, values, 5.0, False, 0.5, 0.0)
    np.testing.assert_allclose(adv, [1 + 0.5 * -0.4 - 0.2, 0 + 0.5 * 0.7 + 0.4, 3 + 2.5 - 0.7], rtol=1e-6)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError):
        compute_gae(np.zeros(3), np.zeros(2), 0.0, True, 0.99, 0.95)
