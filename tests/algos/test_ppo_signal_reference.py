"""A PPO update with a learned reward signal beside the extrinsic one equals mlagents-learn
1.1.0's, weight for weight: the policy, both value heads and the signal's own networks.

``mlagents_reference/ppo_<signal>.npz`` was written by ``make_ppo_signal_reference.py`` with
ML-Agents' ``PPOTrainer`` (``reward_signals: {extrinsic, curiosity}`` and ``{extrinsic, rnd}``):
the signal's rewards per step as ``_process_trajectory`` evaluated them (strength-scaled,
curiosity clipped), then ``_update_policy``'s epochs with the signal updated after each
minibatch's PPO step. This checks the seam end to end: evaluation per trajectory, one value head
and GAE per stream with the signal's gamma and ``ignore_done``, the mean advantage, and the
per-minibatch signal updates with their own Adam."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.algos.test_mlagents_reference import REFERENCE, _our_key, _trajectories
from tests.algos.test_reward_signal_reference import our_name
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.config import (CuriosityConfig, RewardSignalConfig,
                                                       RNDConfig)


def _signal_state(weights: dict, prefix: str) -> dict:
    out = {}
    for key, value in weights.items():
        name = our_name(key)
        if name is not None:
            out[name] = torch.from_numpy(value)
    return out


def _load_with_signal(name: str) -> dict:
    """{group: {field: array}} of the reference file (groups: before, after, data, case,
    signal_before, signal_after, pre)."""
    ref: dict = {"pre": {}}
    with np.load(REFERENCE / f"{name}.npz") as npz:
        for key in npz.files:
            group, field = key.split("/", 1)
            ref.setdefault(group, {})[field] = npz[key]
    return ref


@pytest.mark.parametrize("signal_name", ["curiosity", "rnd"])
def test_ppo_update_with_a_learned_signal_lands_on_mlagents_weights(signal_name):
    ref = _load_with_signal(f"ppo_{signal_name}")
    case = ref["case"]
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    n = int(case["num_trajectories"]) * int(case["length"])  # one minibatch per epoch
    cfg = PPOConfig(learning_rate=float(case["learning_rate"]), buffer_size=n, minibatch_size=n,
                    num_epochs=int(case["epochs"]), gae_lambda=float(case["lambd"]),
                    clip_coef=float(case["epsilon"]), ent_coef=float(case["beta"]),
                    max_steps=int(case["max_steps"]))
    net = NetworkConfig(normalize=False, hidden_units=int(case["hidden"]),
                        num_layers=int(case["layers"]))
    settings = {"curiosity": CuriosityConfig, "rnd": RNDConfig}[signal_name]
    signal_cfg = settings(signal_name, gamma=float(case["signal_gamma"]),
                          strength=float(case["strength"]), learning_rate=float(case["signal_lr"]),
                          network_settings=NetworkConfig(hidden_units=int(case["signal_hidden"]),
                                                         num_layers=int(case["signal_layers"])))
    obs_shapes = [tuple(int(d) for d in case["obs_shape0"])]
    learner = PPOLearner(obs_shapes, spec, cfg, net, seed=0, reward_signals=(
        RewardSignalConfig("extrinsic", gamma=float(case["gamma"])), signal_cfg))
    assert learner.model.value_head_names == ["extrinsic", signal_name]
    mapped = {_our_key(learner, k): v for k, v in ref["before"].items()}
    assert set(mapped) == set(learner.model.state_dict())
    learner.model.load_state_dict({k: torch.from_numpy(v) for k, v in mapped.items()})
    signal = learner.reward_signals[1]
    signal.modules.load_state_dict(_signal_state(ref["signal_before"], ""))
    if ref["pre"]:  # curiosity: its first update, on a batch of its own
        pre = ref["pre"]
        signal.update(SignalBatch(pre["obs0"], pre["continuous"], pre["discrete"],
                                  pre["next_obs0"], np.zeros(len(pre["obs0"]), np.float32),
                                  np.zeros(len(pre["obs0"]), np.float32), pre["masks"]))

    trajectories = _trajectories(case, ref["data"])
    evaluated = np.concatenate([signal.rewards(SignalBatch.from_trajectory(t, spec.continuous_size))
                                for t in trajectories]) * signal.strength
    assert np.abs(ref["data"]["signal_rewards"]).max() > 1e-3, "the case tests nothing"
    np.testing.assert_allclose(evaluated, ref["data"]["signal_rewards"], rtol=1e-5, atol=1e-6)

    metrics = learner.update(trajectories, collected_steps=n)
    assert {f"Policy/{signal_name.capitalize()} Value Estimate",
            f"Policy/{signal_name.capitalize()} Reward"} <= set(metrics)
    after = learner.model.state_dict()
    for key, expected in ref["after"].items():
        np.testing.assert_allclose(after[_our_key(learner, key)].numpy(), expected, rtol=0,
                                   atol=2e-6, err_msg=f"{signal_name}: policy {key}")
    signal_after = signal.modules.state_dict()
    for name, expected in _signal_state(ref["signal_after"], "").items():
        moved = (expected - _signal_state(ref["signal_before"], "")[name]).abs().max()
        if name.startswith("target."):
            assert moved == 0
        np.testing.assert_allclose(signal_after[name].numpy(), expected.numpy(), rtol=0,
                                   atol=2e-6, err_msg=f"{signal_name}: signal {name}")


@pytest.mark.parametrize("signal_name", ["curiosity", "rnd"])
def test_seed_draws_mlagents_initial_actor_signal_and_critic(signal_name):
    """``PPOLearner(seed=0)`` with a learned signal starts from the networks mlagents-learn
    draws after ``torch.manual_seed(0)`` (the reference's ``before`` weights): actor, then the
    signal's networks (its optimizer's ``create_reward_signals``), then the critic."""
    ref = _load_with_signal(f"ppo_{signal_name}")
    case = ref["case"]
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    settings = {"curiosity": CuriosityConfig, "rnd": RNDConfig}[signal_name]
    signal_cfg = settings(signal_name, gamma=float(case["signal_gamma"]),
                          strength=float(case["strength"]), learning_rate=float(case["signal_lr"]),
                          network_settings=NetworkConfig(hidden_units=int(case["signal_hidden"]),
                                                         num_layers=int(case["signal_layers"])))
    learner = PPOLearner([tuple(int(d) for d in case["obs_shape0"])], spec, PPOConfig(),
                         NetworkConfig(normalize=False, hidden_units=int(case["hidden"]),
                                       num_layers=int(case["layers"])),
                         seed=0, reward_signals=(
                             RewardSignalConfig("extrinsic", gamma=float(case["gamma"])),
                             signal_cfg))
    ours = learner.model.state_dict()
    for key, expected in ref["before"].items():
        np.testing.assert_array_equal(ours[_our_key(learner, key)].numpy(), expected,
                                      err_msg=f"{signal_name}: policy {key}")
    signal = learner.reward_signals[1].modules.state_dict()
    for name, expected in _signal_state(ref["signal_before"], "").items():
        np.testing.assert_array_equal(signal[name].numpy(), expected.numpy(),
                                      err_msg=f"{signal_name}: signal {name}")
