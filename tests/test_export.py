"""ONNX export: ML-Agents' tensor names, constants, and onnxruntime == torch on random obs."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

from unity_rl.algos.nets import NetworkConfig
from unity_rl.algos.ppo import PPOConfig, PPOLearner
from unity_rl.export import export_onnx

CONTINUOUS = SimpleNamespace(continuous_size=2, discrete_branches=())
DISCRETE = SimpleNamespace(continuous_size=0, discrete_branches=(3, 2))


def _learner(spec, obs_dim=8):
    learner = PPOLearner(obs_dim, spec, PPOConfig(), NetworkConfig(normalize=True,
                                                                   hidden_units=32), seed=0)
    rng = np.random.default_rng(0)
    learner.normalizer.update(rng.normal(1.0, 3.0, (256, obs_dim)))  # non-trivial statistics
    return learner


def _io(path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    return model, [i.name for i in model.graph.input], [o.name for o in model.graph.output]


def test_continuous_round_trip(tmp_path):
    module = _learner(CONTINUOUS).export_module()
    path = export_onnx(module, 8, CONTINUOUS, tmp_path / "3DBall.onnx")
    model, inputs, outputs = _io(path)
    assert inputs == ["obs_0"]
    assert outputs == ["version_number", "memory_size", "continuous_actions",
                       "continuous_action_output_shape", "deterministic_continuous_actions"]
    assert model.opset_import[0].version >= 9
    session = ort.InferenceSession(str(path))
    obs = np.random.default_rng(1).normal(0, 4, (37, 8)).astype(np.float32)
    version, memory, actions, shape, deterministic = session.run(None, {"obs_0": obs})
    with torch.no_grad():
        expected = module(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(actions, deterministic)
    assert version.tolist() == [3.0] and memory.tolist() == [0.0] and shape.tolist() == [2.0]
    assert actions.shape == (37, 2) and np.abs(actions).max() <= 1.0
    # the batch axis is dynamic
    assert session.run(["continuous_actions"], {"obs_0": obs[:1]})[0].shape == (1, 2)


def test_discrete_round_trip_with_masks(tmp_path):
    module = _learner(DISCRETE).export_module()
    path = export_onnx(module, 8, DISCRETE, tmp_path / "d.onnx")
    _, inputs, outputs = _io(path)
    assert inputs == ["obs_0", "action_masks"]
    assert outputs == ["version_number", "memory_size", "discrete_actions",
                       "discrete_action_output_shape", "deterministic_discrete_actions"]
    rng = np.random.default_rng(2)
    obs = rng.normal(0, 4, (50, 8)).astype(np.float32)
    masks = np.ones((50, 5), np.float32)
    masks[:, 0] = 0.0            # branch 0: action 0 never allowed
    masks[:25, 3] = 0.0          # branch 1: only action 1 for the first half
    session = ort.InferenceSession(str(path))
    out = dict(zip(outputs, session.run(None, {"obs_0": obs, "action_masks": masks})))
    with torch.no_grad():
        expected = module(torch.from_numpy(obs), torch.from_numpy(masks)).numpy()
    np.testing.assert_array_equal(out["discrete_actions"], expected)
    np.testing.assert_array_equal(out["deterministic_discrete_actions"], expected)
    assert out["discrete_actions"].dtype == np.int64
    assert (out["discrete_actions"][:, 0] != 0).all() and (out["discrete_actions"][:25, 1] == 1).all()
    assert out["discrete_action_output_shape"].tolist() == [[3.0, 2.0]]


def test_several_vector_observations_become_obs_0_to_n(tmp_path):
    module = _learner(CONTINUOUS, obs_dim=8).export_module()
    path = export_onnx(module, [5, 3], CONTINUOUS, tmp_path / "multi.onnx")
    _, inputs, _ = _io(path)
    assert inputs == ["obs_0", "obs_1"]
    obs = np.random.default_rng(3).normal(size=(4, 8)).astype(np.float32)
    got = ort.InferenceSession(str(path)).run(
        ["continuous_actions"], {"obs_0": obs[:, :5], "obs_1": obs[:, 5:]})[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, module(torch.from_numpy(obs)).numpy(), atol=1e-6)


def test_plain_module_and_no_actions_error(tmp_path):
    module = nn.Sequential(nn.Linear(4, 2), nn.Tanh())
    path = export_onnx(module, 4, CONTINUOUS, tmp_path / "plain.onnx")
    assert not list(tmp_path.glob(".*.tmp"))
    obs = np.ones((2, 4), np.float32)
    got = ort.InferenceSession(str(path)).run(["deterministic_continuous_actions"],
                                              {"obs_0": obs})[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, module(torch.from_numpy(obs)).numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="neither"):
        export_onnx(module, 4, SimpleNamespace(continuous_size=0, discrete_branches=()),
                    tmp_path / "bad.onnx")


def test_visual_observation_is_nchw_in_unit_range(tmp_path):
    """Unity feeds images NCHW in [0, 1]; the trainers saw uint8 values, flattened CHW."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(2 * 4 * 5 + 3, 2), nn.Tanh())
    path = export_onnx(module, [(2, 4, 5), (3,)], CONTINUOUS, tmp_path / "visual.onnx")
    session = ort.InferenceSession(str(path))
    assert [(i.name, i.shape) for i in session.get_inputs()] == [
        ("obs_0", ["batch", 2, 4, 5]), ("obs_1", ["batch", 3])]
    rng = np.random.default_rng(4)
    image = rng.integers(0, 256, (6, 2, 4, 5)).astype(np.float32)
    vector = rng.normal(size=(6, 3)).astype(np.float32)
    got = session.run(["continuous_actions"], {"obs_0": image / 255.0, "obs_1": vector})[0]
    seen_in_training = np.concatenate([image.reshape(6, -1), vector], axis=1)
    with torch.no_grad():
        expected = module(torch.from_numpy(seen_in_training)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4)
