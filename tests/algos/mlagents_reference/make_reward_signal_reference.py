"""Writes ``signal_<case>.npz``: rewards and updates of mlagents-learn 1.1.0's own
``CuriosityRewardProvider`` and ``RNDRewardProvider`` on random batches.

Run with the Python of an mlagents-learn venv (never this project's), from the repository root::

    bash ../shared/mlagents_learn/install.sh DIR      # any folder outside the repository
    DIR/venv/bin/python tests/algos/mlagents_reference/make_reward_signal_reference.py

For each case it builds the provider from ML-Agents' settings classes, saves its initial weights
(ML-Agents' parameter names), evaluates a batch (curiosity: 0 before its first update), runs two
updates on two batches (their losses), evaluates again, and saves the weights after.
``test_reward_signal_reference.py`` replays the same with this project's providers and compares
rewards, losses and weights. Rows with mask 0 (``masks``) stand for padding of memory sequences.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from mlagents.trainers.buffer import AgentBuffer, BufferKey
from mlagents.trainers.settings import CuriositySettings, NetworkSettings, RNDSettings
from mlagents.trainers.torch_entities.components.reward_providers import (
    CuriosityRewardProvider,
    RNDRewardProvider,
)
from mlagents.trainers.trajectory import ObsUtil
from mlagents_envs.base_env import (ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec,
                                    ObservationType)

HERE = Path(__file__).resolve().parent
ROWS = 48

CASES = {
    # name: signal, observation shapes, continuous size, branches, hidden, layers, strength, lr,
    # normalize, padded rows (mask 0)
    "curiosity_discrete": dict(signal="curiosity", obs=[(6,), (3,)], continuous=0,
                               branches=(3, 2), hidden=16, layers=2, strength=0.5,
                               learning_rate=3e-3, normalize=False, padded=0),
    "curiosity_continuous": dict(signal="curiosity", obs=[(8,)], continuous=2, branches=(),
                                 hidden=12, layers=1, strength=0.02, learning_rate=3e-4,
                                 normalize=False, padded=0),
    "curiosity_hybrid": dict(signal="curiosity", obs=[(5,)], continuous=2, branches=(4,),
                             hidden=16, layers=2, strength=0.1, learning_rate=1e-3,
                             normalize=True, padded=8),
    "rnd": dict(signal="rnd", obs=[(6,), (3,)], continuous=0, branches=(5,), hidden=16,
                layers=3, strength=0.01, learning_rate=1e-3, normalize=False, padded=0),
    "rnd_normalized": dict(signal="rnd", obs=[(7,)], continuous=2, branches=(), hidden=8,
                           layers=2, strength=0.01, learning_rate=1e-3, normalize=True, padded=0),
}


def provider(case: dict):
    obs_specs = [ObservationSpec(tuple(shape), (DimensionProperty.NONE,), ObservationType.DEFAULT,
                                 f"obs{i}") for i, shape in enumerate(case["obs"])]
    spec = BehaviorSpec(obs_specs, ActionSpec(case["continuous"], tuple(case["branches"])))
    network = NetworkSettings(normalize=case["normalize"], hidden_units=case["hidden"],
                              num_layers=case["layers"])
    if case["signal"] == "curiosity":
        settings = CuriositySettings(gamma=0.99, strength=case["strength"],
                                     network_settings=network, learning_rate=case["learning_rate"])
        return CuriosityRewardProvider(spec, settings)
    settings = RNDSettings(gamma=0.99, strength=case["strength"], network_settings=network,
                           learning_rate=case["learning_rate"])
    return RNDRewardProvider(spec, settings)


def weights(p) -> dict[str, np.ndarray]:
    out = {}
    for name, module in p.get_modules().items():
        for key, value in module.state_dict().items():
            out[f"{name}/{key}"] = value.detach().numpy().copy()
    return out


def batch(case: dict, rng: np.random.Generator, scale: float = 1.0) -> tuple[AgentBuffer, dict]:
    data = {}
    buf = AgentBuffer()
    for i, shape in enumerate(case["obs"]):
        data[f"obs{i}"] = (scale * rng.normal(size=(ROWS, *shape)) + 0.5).astype(np.float32)
        data[f"next_obs{i}"] = (scale * rng.normal(size=(ROWS, *shape)) + 0.5).astype(np.float32)
        buf[ObsUtil.get_name_at(i)].extend(list(data[f"obs{i}"]))
        buf[ObsUtil.get_name_at_next(i)].extend(list(data[f"next_obs{i}"]))
    data["continuous"] = rng.normal(size=(ROWS, case["continuous"])).astype(np.float32)
    data["discrete"] = np.stack([rng.integers(0, b, ROWS) for b in case["branches"]], 1
                                ).astype(np.int64) if case["branches"] else np.zeros((ROWS, 0),
                                                                                     np.int64)
    data["masks"] = np.ones(ROWS, np.float32)
    if case["padded"]:
        data["masks"][-case["padded"]:] = 0.0
    if case["continuous"]:
        buf[BufferKey.CONTINUOUS_ACTION].extend(list(data["continuous"]))
    if case["branches"]:
        buf[BufferKey.DISCRETE_ACTION].extend(list(data["discrete"]))
    buf[BufferKey.MASKS].extend(list(data["masks"]))
    return buf, data


def make(name: str, seed: int = 0) -> Path:
    case = CASES[name]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    p = provider(case)
    before = weights(p)
    out = {}
    batches = [batch(case, rng, scale) for scale in (1.0, 2.0, 1.5)]
    for k, (_, data) in enumerate(batches):
        out.update({f"data{k}/{key}": value for key, value in data.items()})
    out["rewards_before"] = p.evaluate(batches[0][0]).astype(np.float32)
    for k in (1, 2):
        for key, value in p.update(batches[k][0]).items():
            out[f"update{k}/{key}"] = np.asarray(value, np.float32)
    out["rewards_after"] = p.evaluate(batches[0][0]).astype(np.float32)
    path = HERE / f"signal_{name}.npz"
    np.savez_compressed(
        path, **{f"before/{k}": v for k, v in before.items()},
        **{f"after/{k}": v for k, v in weights(p).items()}, **out,
        **{f"case/{k}": np.asarray(v) for k, v in case.items() if k != "obs"},
        **{f"case/obs_shape{i}": np.asarray(s) for i, s in enumerate(case["obs"])})
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
