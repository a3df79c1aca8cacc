"""Curiosity and RND weight for weight against mlagents-learn 1.1.0's own reward providers.

The fixtures ``mlagents_reference/signal_<case>.npz`` were written by
``make_reward_signal_reference.py`` with ML-Agents' ``CuriosityRewardProvider`` and
``RNDRewardProvider``: initial weights, a batch's rewards before and after two updates on two
other batches, the updates' losses and the weights after. Here our providers start from the same
weights, see the same batches and must give the same numbers (discrete, continuous and hybrid
actions; several observations; padded rows; ``normalize``: curiosity's never-updated normaliser,
RND's normaliser updated on every evaluation and update)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.config import CuriosityConfig, RNDConfig
from unity_rl.algorithms.reward_signals.registry import make_reward_signals

HERE = Path(__file__).resolve().parent / "mlagents_reference"
CASES = ["curiosity_discrete", "curiosity_continuous", "curiosity_hybrid", "rnd", "rnd_normalized"]


def our_name(name: str) -> str | None:
    """ML-Agents' parameter name (``Module:<name>/<key>``) -> ours (None: a normaliser buffer)."""
    module, key = name.split("/", 1)
    if "normalizer" in key:
        return None
    body = {"Module:Curiosity": ("_state_encoder._body_endoder.seq_layers.", "state_encoder.layers."),
            "Module:RND-pred": ("_encoder._body_endoder.seq_layers.", "predictor.layers."),
            "Module:RND-target": ("_encoder._body_endoder.seq_layers.", "target.layers.")}[module]
    if key.startswith(body[0]):
        return body[1] + key[len(body[0]):]
    for theirs, ours in (("inverse_model_action_encoding.0.seq_layers.0.", "inverse_model.0."),
                         ("forward_model_next_state_prediction.0.seq_layers.0.", "forward_model.0."),
                         ("forward_model_next_state_prediction.1.", "forward_model.2."),
                         ("continuous_action_prediction.", "continuous_prediction."),
                         ("discrete_action_prediction.", "discrete_prediction.")):
        if key.startswith(theirs):
            return ours + key[len(theirs):]
    raise KeyError(name)


def mapped(ref, prefix: str) -> dict[str, torch.Tensor]:
    out = {}
    for key in ref.files:
        if key.startswith(prefix):
            name = our_name(key[len(prefix):])
            if name is not None:
                out[name] = torch.from_numpy(ref[key])
    return out


def signal_batch(ref, k: int, num_obs: int) -> SignalBatch:
    data = {key.split("/", 1)[1]: ref[key] for key in ref.files if key.startswith(f"data{k}/")}
    obs = np.concatenate([data[f"obs{i}"] for i in range(num_obs)], 1)
    next_obs = np.concatenate([data[f"next_obs{i}"] for i in range(num_obs)], 1)
    n = len(obs)
    return SignalBatch(obs, data["continuous"], data["discrete"], next_obs,
                       np.zeros(n, np.float32), np.zeros(n, np.float32), data["masks"])


@pytest.mark.parametrize("case", CASES)
def test_provider_matches_mlagents(case):
    ref = np.load(HERE / f"signal_{case}.npz")
    c = {key[len("case/"):]: ref[key] for key in ref.files if key.startswith("case/")}
    shapes = [tuple(int(d) for d in c[f"obs_shape{i}"]) for i in range(
        sum(k.startswith("obs_shape") for k in c))]
    network = NetworkConfig(normalize=bool(c["normalize"]), hidden_units=int(c["hidden"]),
                            num_layers=int(c["layers"]))
    settings = CuriosityConfig if str(c["signal"]) == "curiosity" else RNDConfig
    config = settings(str(c["signal"]), strength=float(c["strength"]), network_settings=network,
                      learning_rate=float(c["learning_rate"]))
    spec = SimpleNamespace(continuous_size=int(c["continuous"]),
                           discrete_branches=tuple(int(b) for b in c["branches"]))
    (signal,) = make_reward_signals([config], shapes, spec)
    ours = signal.modules.state_dict()
    theirs = mapped(ref, "before/")
    assert set(theirs) == set(ours), "every parameter has its ML-Agents counterpart"
    signal.modules.load_state_dict(theirs)

    batches = [signal_batch(ref, k, len(shapes)) for k in range(3)]
    np.testing.assert_allclose(signal.rewards(batches[0]), ref["rewards_before"],
                               rtol=1e-5, atol=1e-6)
    for k in (1, 2):
        metrics = signal.update(batches[k])
        expected = {key.split("/", 1)[1]: float(ref[key]) for key in ref.files
                    if key.startswith(f"update{k}/")}
        assert set(metrics) == set(expected)
        for tag, value in expected.items():
            assert metrics[tag] == pytest.approx(value, rel=1e-5, abs=1e-6), tag
    np.testing.assert_allclose(signal.rewards(batches[0]), ref["rewards_after"],
                               rtol=1e-4, atol=1e-6)
    after = mapped(ref, "after/")
    state = signal.modules.state_dict()
    for name, value in after.items():
        np.testing.assert_allclose(state[name].numpy(), value.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    if str(c["signal"]) == "rnd":  # the target never trains
        for name, value in mapped(ref, "before/").items():
            if name.startswith("target."):
                assert torch.equal(state[name], value)
