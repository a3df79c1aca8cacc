"""GAIL here equals mlagents-learn 1.1.0's ``GAILRewardProvider``: rewards, two discriminator
updates (stats and weights), rewards after.

The reference files (``mlagents_reference/gail_<case>.npz`` and ``.demo``) were written by
ML-Agents' own provider (``make_gail_reference.py``, run in an mlagents-learn venv), with the
expert rows it sampled and torch's seed before each update. Replaying them through ``GAILReward``
checks the discriminator (encoder, action + done inputs, estimator, VAIL's code), the reward,
the loss, the gradient penalty (interpolation, the gradient with respect to the first
observation only, through the normaliser), VAIL's KL and β update (the gradient through the updated β, as ML-Agents' in-place
``.data`` assignment makes it), the normaliser folded with
the expert rows, and the Adam step.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.config import GAILConfig
from unity_rl.algorithms.reward_signals.gail import GAILReward

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference"
CASES = ("discrete", "hybrid_actions", "vail")


def _load(name: str) -> dict:
    out: dict = {}
    with np.load(REFERENCE / f"gail_{name}.npz") as npz:
        for key in npz.files:
            group, field = key.split("/", 1)
            out.setdefault(group, {})[field] = npz[key]
    return out


class RecordedRows:
    """Stands in for GAIL's row generator: the expert rows ML-Agents drew, in order."""

    def __init__(self, rows: dict):
        self.pending = [rows[str(i)] for i in range(len(rows))]

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        rows = self.pending.pop(0)
        assert len(rows) == size and rows.max() < high, "GAIL samples other expert rows"
        return rows


def _signal(case: dict, name: str) -> GAILReward:
    obs_shapes = [tuple(int(d) for d in case[f"obs_shape{i}"])
                  for i in range(sum(k.startswith("obs_shape") for k in case))]
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    config = GAILConfig("gail", demo_path=str(REFERENCE / f"gail_{name}.demo"),
                        learning_rate=float(case["learning_rate"]),
                        use_actions=bool(case["use_actions"]), use_vail=bool(case["use_vail"]),
                        network_settings=NetworkConfig(normalize=bool(case["normalize"]),
                                                       hidden_units=int(case["hidden"]),
                                                       num_layers=int(case["layers"])))
    return GAILReward(config, obs_shapes, spec)


def _named(signal: GAILReward) -> dict[str, torch.nn.Parameter]:
    """Our parameters under the reference's names (encoder parameters by position)."""
    modules = signal.modules
    out = {f"encoder/{k}": p for k, p in enumerate(modules["encoder"].parameters())}
    out["estimator.weight"], out["estimator.bias"] = (modules["estimator"].weight,
                                                      modules["estimator"].bias)
    if "z_mu" in modules:
        out["z_mu.weight"], out["z_mu.bias"] = modules["z_mu"].weight, modules["z_mu"].bias
        out["z_sigma"] = modules["z_sigma"].value
    return out


def _batch(data: dict, b: int, n_obs: int) -> SignalBatch:
    obs = np.concatenate([data[f"{b}/obs{i}"].reshape(len(data[f"{b}/done"]), -1)
                          for i in range(n_obs)], axis=1)
    n = len(obs)
    return SignalBatch(obs, data[f"{b}/continuous"], data[f"{b}/discrete"].astype(np.int64),
                       obs, data[f"{b}/done"], np.zeros(n, np.float32), np.ones(n, np.float32))


@pytest.mark.parametrize("name", CASES)
def test_rewards_and_two_updates_match_mlagents_gail(name):
    ref = _load(name)
    case = ref["case"]
    signal = _signal(case, name)
    params = _named(signal)
    assert set(params) == set(ref["weights0"]), "the reference and GAILReward differ in parameters"
    with torch.no_grad():
        for key, value in ref["weights0"].items():
            assert params[key].shape == value.shape, key
            params[key].copy_(torch.from_numpy(value))
    n_obs = sum(k.startswith("obs_shape") for k in case)
    batches = [_batch(ref["data"], b, n_obs) for b in range(2)]
    for b, batch in enumerate(batches):
        np.testing.assert_allclose(signal.rewards(batch), ref["rewards_before"][str(b)],
                                   rtol=1e-5, atol=1e-6)
    signal.rng = RecordedRows(ref["expert_rows"])
    for k in range(2):
        signal.generator.manual_seed(50 + k)
        stats = signal.update(batches[k])
        expected = ref[f"stats{k + 1}"]
        assert set(stats) == set(expected)
        for tag, value in expected.items():
            assert stats[tag] == pytest.approx(float(value), rel=1e-5, abs=1e-6), tag
        for key, value in ref[f"weights{k + 1}"].items():
            np.testing.assert_allclose(params[key].detach().numpy(), value, rtol=0, atol=2e-6,
                                       err_msg=f"{name} update {k + 1}: {key}")
    moved = max(np.abs(ref["weights2"][k] - ref["weights0"][k]).max() for k in ref["weights0"])
    assert moved > 1e-4, "the reference's updates moved nothing: the case tests nothing"
    for b, batch in enumerate(batches):
        np.testing.assert_allclose(signal.rewards(batch), ref["rewards_after"][str(b)],
                                   rtol=1e-5, atol=1e-6)


def test_gail_state_resumes_the_same_discriminator_beta_and_draws():
    import copy

    ref = _load("vail")
    torch.manual_seed(1)  # a fixed init: with some draws β stays 0 after one update
    first, second = _signal(ref["case"], "vail"), _signal(ref["case"], "vail")
    batch = _batch(ref["data"], 0, 1)
    first.update(batch)
    second.load_state_dict(copy.deepcopy(first.state_dict()))
    assert second.beta == first.beta > 0.0
    np.testing.assert_array_equal(second.rewards(batch), first.rewards(batch))
    assert second.update(batch) == first.update(batch)  # same expert rows, noise and Adam step
