"""ONNX export of a SAC policy: ML-Agents' tensor names, order and shapes, and onnxruntime ==
the torch policy: ``continuous_actions`` = tanh(μ), ``deterministic_continuous_actions`` = μ
un-squashed as ML-Agents 1.1.0 exports it (tanh(μ) with ``deterministic_squash``), discrete
actions the most probable allowed index of each branch; normalisation folded in."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.export import load_policy_module
from unity_rl.algorithms.sac.learner import SACLearner
from unity_rl.export import export_onnx

OBS_SHAPES = [(5,), (3,)]
SPECS = {
    "continuous": SimpleNamespace(continuous_size=2, discrete_branches=()),
    "discrete": SimpleNamespace(continuous_size=0, discrete_branches=(3, 2)),
    "hybrid": SimpleNamespace(continuous_size=2, discrete_branches=(3,)),
}
NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=2)


def _learner(spec, squash: bool = False) -> SACLearner:
    learner = SACLearner(OBS_SHAPES, spec, SACConfig(deterministic_squash=squash), NET, seed=0)
    rng = np.random.default_rng(0)
    learner.observe(rng.normal(1.0, 3.0, (256, 8)))  # non-trivial normaliser statistics
    with torch.no_grad():
        if spec.continuous_size:  # μ well outside [−1, 1]: squashed and un-squashed differ
            learner.policy.mu.bias.copy_(torch.tensor([2.5, -1.5]))
    return learner


def _masks(rng, n: int, branches) -> np.ndarray:
    """Random masks (a third of the actions masked) that leave every branch an action."""
    masks = rng.random((n, sum(branches))) > 1 / 3
    start = 0
    for size in branches:
        masks[~masks[:, start:start + size].any(axis=1), start + size - 1] = True
        start += size
    return masks


def _torch_policy(learner: SACLearner, obs: np.ndarray, masks):
    """(μ, masked logits) of the learner's own policy on normalised flat rows."""
    x = torch.from_numpy(learner.layout.normalize(learner.normalizer, obs))
    with torch.no_grad():
        gaussian, categorical = learner.policy(x, None if masks is None else torch.from_numpy(masks))
    mu = None if gaussian is None else gaussian.mean.numpy()
    probs = None if categorical is None else categorical.probs.numpy()
    return mu, probs


def _argmax_per_branch(probs: np.ndarray, branches) -> np.ndarray:
    bounds = np.cumsum((0,) + tuple(branches))
    return np.stack([probs[:, a:b].argmax(axis=1) for a, b in zip(bounds[:-1], bounds[1:])],
                    axis=1).astype(np.int64)


def _run(path, obs: np.ndarray, masks):
    session = ort.InferenceSession(str(path))
    feeds = {"obs_0": obs[:, :5], "obs_1": obs[:, 5:]}
    if masks is not None:
        feeds["action_masks"] = masks.astype(np.float32)
    names = [o.name for o in session.get_outputs()]
    return [i.name for i in session.get_inputs()], dict(zip(names, session.run(None, feeds))), names


@pytest.mark.parametrize("squash", [False, True], ids=["mlagents", "squashed"])
@pytest.mark.parametrize("kind", list(SPECS))
def test_sac_onnx_matches_policy(tmp_path, kind, squash):
    spec = SPECS[kind]
    learner = _learner(spec, squash)
    path = export_onnx(learner.export_module(), OBS_SHAPES, spec, tmp_path / f"{kind}.onnx")
    onnx.checker.check_model(onnx.load(str(path)))
    rng = np.random.default_rng(1)
    n, c, branches = 37, spec.continuous_size, spec.discrete_branches
    obs = rng.normal(1.0, 4.0, (n, 8)).astype(np.float32)
    masks = _masks(rng, n, branches) if branches else None
    inputs, out, names = _run(path, obs, masks)

    assert inputs == ["obs_0", "obs_1"] + (["action_masks"] if branches else [])
    expected_names = ["version_number", "memory_size"]
    if c:
        expected_names += ["continuous_actions", "continuous_action_output_shape",
                           "deterministic_continuous_actions"]
    if branches:
        expected_names += ["discrete_actions", "discrete_action_output_shape",
                           "deterministic_discrete_actions"]
    assert names == expected_names
    assert out["version_number"].tolist() == [3.0] and out["memory_size"].tolist() == [0.0]

    mu, probs = _torch_policy(learner, obs, masks)
    if c:
        assert out["continuous_action_output_shape"].tolist() == [float(c)]
        assert out["continuous_actions"].shape == (n, c)
        assert out["deterministic_continuous_actions"].shape == (n, c)
        assert np.abs(mu).max() > 1.5  # the un-squashed mean leaves [−1, 1]
        np.testing.assert_allclose(out["continuous_actions"], np.tanh(mu), rtol=1e-5, atol=1e-5)
        deterministic = np.tanh(mu) if squash else mu
        np.testing.assert_allclose(out["deterministic_continuous_actions"], deterministic,
                                   rtol=1e-5, atol=1e-5)
    if branches:
        assert out["discrete_action_output_shape"].tolist() == [[float(b) for b in branches]]
        discrete = out["discrete_actions"]
        assert discrete.dtype == np.int64 and discrete.shape == (n, len(branches))
        np.testing.assert_array_equal(discrete, _argmax_per_branch(probs, branches))
        np.testing.assert_array_equal(out["deterministic_discrete_actions"], discrete)
        bounds = np.cumsum((0,) + tuple(branches))
        for i, start in enumerate(bounds[:-1]):  # never a masked action
            assert masks[np.arange(n), start + discrete[:, i]].all()
    # the batch axis is dynamic
    _, one, _ = _run(path, obs[:1], None if masks is None else masks[:1])
    for name in ("continuous_actions", "discrete_actions"):
        if name in out:
            np.testing.assert_allclose(one[name], out[name][:1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("squash", [False, True], ids=["mlagents", "squashed"])
def test_saved_sac_weights_export_the_same(tmp_path, squash):
    """``load_policy_module`` on ``SACLearner.weights()`` rebuilds the module the learner
    exports (squash flag and normaliser included)."""
    spec = SPECS["hybrid"]
    learner = _learner(spec, squash)
    module = load_policy_module({"weights": learner.weights()}, spec, NET)
    rng = np.random.default_rng(2)
    obs = rng.normal(1.0, 4.0, (9, 8)).astype(np.float32)
    masks = _masks(rng, 9, spec.discrete_branches)
    _, direct, _ = _run(export_onnx(learner.export_module(), OBS_SHAPES, spec,
                                    tmp_path / "direct.onnx"), obs, masks)
    _, saved, _ = _run(export_onnx(module, OBS_SHAPES, spec, tmp_path / "saved.onnx"), obs, masks)
    assert direct.keys() == saved.keys()
    for name in direct:
        np.testing.assert_allclose(saved[name], direct[name], rtol=1e-6, atol=1e-6, err_msg=name)
