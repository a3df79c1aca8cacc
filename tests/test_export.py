"""ONNX export: ML-Agents' tensor names, constants, and onnxruntime == torch on random obs
(vector, image + vector, hybrid; PPO and DDPG; saved policies)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner, PPOPolicy
from unity_rl.algorithms.ppo.model import DeterministicActor
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


def test_onnx_continuous_actions_are_clamped_like_ml_agents(tmp_path):
    """ML-Agents' exported model sends clamp(μ, −3, 3) / 3 (``ActionModel.get_action_out``), the
    same map as ``PPOPolicy.env_actions`` during training; the earlier versions' ``unit`` clip
    (weights that record it) clips to ±1."""
    for action_clip, expected in (("mlagents", lambda m: np.clip(m, -3, 3) / 3),
                                  ("unit", lambda m: np.clip(m, -1, 1))):
        learner = PPOLearner(8, CONTINUOUS, PPOConfig(), NetworkConfig(hidden_units=32), seed=0)
        with torch.no_grad():
            learner.model.actor_head[-1].bias.copy_(torch.tensor([4.5, 1.5]))
        module = DeterministicActor(learner.model, learner.normalizer, action_clip)
        path = export_onnx(module, 8, CONTINUOUS, tmp_path / f"{action_clip}.onnx")
        obs = np.random.default_rng(1).normal(0, 1, (16, 8)).astype(np.float32)
        actions = ort.InferenceSession(str(path)).run(["continuous_actions"], {"obs_0": obs})[0]
        with torch.no_grad():
            mean = learner.model.actor_head(learner.model.actor_encoder(torch.from_numpy(obs))).numpy()
        np.testing.assert_allclose(actions, expected(mean), rtol=1e-5, atol=1e-6)
    assert np.allclose(actions[:, 0], 1.0)


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


def test_visual_scale_rescales_images_only(tmp_path):
    """A network trained on 0..255 images: Unity's [0, 1] images are multiplied back."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Flatten(), nn.Linear(2 * 4 * 5, 2), nn.Tanh())
    path = export_onnx(module, [(2, 4, 5)], CONTINUOUS, tmp_path / "v.onnx", visual_scale=255.0)
    image = np.random.default_rng(4).integers(0, 256, (6, 2, 4, 5)).astype(np.float32)
    got = ort.InferenceSession(str(path)).run(["continuous_actions"], {"obs_0": image / 255.0})[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, module(torch.from_numpy(image)).numpy(), atol=1e-4)


IMAGE_AND_VECTOR = [(3, 20, 20), (4,)]
HYBRID = SimpleNamespace(continuous_size=2, discrete_branches=(3, 2))


def _obs(rng, n):
    image = rng.random((n, 3, 20, 20), dtype=np.float32)
    vector = rng.normal(1.0, 3.0, (n, 4)).astype(np.float32)
    return image, vector, np.concatenate([image.reshape(n, -1), vector], axis=1)


@pytest.mark.parametrize("spec", [CONTINUOUS, DISCRETE, HYBRID], ids=["cont", "disc", "hybrid"])
def test_image_and_vector_observations_round_trip(tmp_path, spec):
    """obs_0 NCHW image + obs_1 vector; normalisation (vector columns only) folded in; the ONNX
    actions are the policy's deterministic actions on the flat training rows."""
    learner = PPOLearner(IMAGE_AND_VECTOR, spec, PPOConfig(),
                         NetworkConfig(normalize=True, hidden_units=16), seed=0)
    rng = np.random.default_rng(5)
    learner.layout.update(learner.normalizer, _obs(rng, 256)[2])
    assert learner.normalizer.mean.shape == (4,)  # statistics of the vector columns only
    path = export_onnx(learner.export_module(), IMAGE_AND_VECTOR, spec, tmp_path / "iv.onnx")
    session = ort.InferenceSession(str(path))
    assert [(i.name, i.shape) for i in session.get_inputs()][:2] == [
        ("obs_0", ["batch", 3, 20, 20]), ("obs_1", ["batch", 4])]
    image, vector, flat = _obs(rng, 9)
    feeds = {"obs_0": image, "obs_1": vector}
    masks = np.ones((9, 5), bool)
    if spec.discrete_branches:
        masks[:, 1] = False          # branch 0: action 1 never allowed
        masks[:4, 3] = False         # branch 1: only action 1 for the first rows
        feeds["action_masks"] = masks.astype(np.float32)
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    policy = PPOPolicy(IMAGE_AND_VECTOR, spec, NetworkConfig(normalize=True, hidden_units=16))
    policy.load_weights(learner.weights())
    actions, _, _ = policy.act(flat, masks if spec.discrete_branches else None, deterministic=True)
    c = spec.continuous_size
    if c:
        np.testing.assert_allclose(out["continuous_actions"], np.clip(actions[:, :c], -3, 3) / 3,
                                   atol=1e-5)  # ML-Agents' clamp, as PPOPolicy.env_actions
        np.testing.assert_array_equal(out["continuous_actions"],
                                      out["deterministic_continuous_actions"])
    else:
        assert "continuous_actions" not in out
    if spec.discrete_branches:
        discrete = out["discrete_actions"]
        assert discrete.dtype == np.int64 and discrete.shape == (9, 2)
        np.testing.assert_array_equal(discrete, actions[:, c:].astype(np.int64))
        assert (discrete[:, 0] != 1).all() and (discrete[:4, 1] == 1).all()
        assert out["discrete_action_output_shape"].tolist() == [[3.0, 2.0]]
    else:
        assert "discrete_actions" not in out
    assert out["version_number"].tolist() == [3.0] and out["memory_size"].tolist() == [0.0]


def test_hybrid_output_names_and_order(tmp_path):
    module = PPOLearner(4, HYBRID, PPOConfig(), NetworkConfig(hidden_units=8), seed=0).export_module()
    _, inputs, outputs = _io(export_onnx(module, 4, HYBRID, tmp_path / "h.onnx"))
    assert inputs == ["obs_0", "action_masks"]
    assert outputs == ["version_number", "memory_size", "continuous_actions",
                       "continuous_action_output_shape", "deterministic_continuous_actions",
                       "discrete_actions", "discrete_action_output_shape",
                       "deterministic_discrete_actions"]


def test_ddpg_image_and_vector_round_trip(tmp_path):
    from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner

    learner = DDPGLearner(IMAGE_AND_VECTOR, CONTINUOUS, DDPGConfig(), 16, 1, normalize=True,
                          seed=0, vis_encode_type="match3")
    rng = np.random.default_rng(6)
    learner.layout.update(learner.normalizer, _obs(rng, 128)[2])
    path = export_onnx(learner.export_module(), IMAGE_AND_VECTOR, CONTINUOUS, tmp_path / "d.onnx")
    image, vector, flat = _obs(rng, 5)
    got = ort.InferenceSession(str(path)).run(["continuous_actions"],
                                              {"obs_0": image, "obs_1": vector})[0]
    np.testing.assert_allclose(got, learner.make_policy().act(flat, noise=False), atol=1e-5)


def _saved_policy(tmp_path, learner, obs_shapes, spec, net, trainer_type="ppo"):
    """A ``<Behavior>.pt`` as the trainer writes it (``Trainer.save_policy``)."""
    from dataclasses import asdict

    path = tmp_path / "B.pt"
    torch.save({"trainer_type": trainer_type, "behavior_name": "B?team=0",
                "obs_dim": int(sum(np.prod(s) for s in obs_shapes)), "obs_shapes": obs_shapes,
                "action_spec": (spec.continuous_size, tuple(spec.discrete_branches)),
                "network": asdict(net), "weights": learner.weights(), "agent_steps": 7}, path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("trainer_type", ["ppo", "ddpg"])
def test_saved_policy_with_an_image_rebuilds_its_encoder_and_exports(tmp_path, trainer_type):
    from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner
    from unity_rl.export import export_checkpoint, load_policy

    net = NetworkConfig(normalize=True, hidden_units=16, vis_encode_type="resnet")
    if trainer_type == "ppo":
        learner = PPOLearner(IMAGE_AND_VECTOR, CONTINUOUS, PPOConfig(), net, seed=0)
    else:
        learner = DDPGLearner(IMAGE_AND_VECTOR, CONTINUOUS, DDPGConfig(), 16, 2, True, seed=0,
                              vis_encode_type="resnet")
    rng = np.random.default_rng(7)
    learner.layout.update(learner.normalizer, _obs(rng, 64)[2])
    path = _saved_policy(tmp_path, learner, IMAGE_AND_VECTOR, CONTINUOUS, net, trainer_type)
    loaded = load_policy(path)
    assert loaded.obs_shapes == ((3, 20, 20), (4,)) and loaded.agent_steps == 7
    image, vector, flat = _obs(rng, 3)
    with torch.no_grad():
        expected = learner.export_module()(torch.from_numpy(flat)).numpy()
        np.testing.assert_allclose(loaded.module(torch.from_numpy(image), torch.from_numpy(vector))
                                   .numpy(), expected, atol=1e-6)
    onnx_path = export_checkpoint(path)
    assert onnx_path.name == "B.onnx"
    got = ort.InferenceSession(str(onnx_path)).run(["continuous_actions"],
                                                   {"obs_0": image, "obs_1": vector})[0]
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_saved_policy_without_recorded_shapes_is_a_flat_mlp(tmp_path):
    """Files written before networks knew shapes: an MLP over the flat row (obs_dim inputs)."""
    from unity_rl.export import load_policy

    net = NetworkConfig(hidden_units=8)
    learner = PPOLearner(1204, DISCRETE, PPOConfig(), net, seed=0)  # trained on flat rows
    weights = learner.weights()
    del weights["obs_shapes"]
    path = tmp_path / "old.pt"
    torch.save({"trainer_type": "ppo", "behavior_name": "B", "obs_dim": 1204,
                "obs_shapes": IMAGE_AND_VECTOR, "action_spec": (0, (3, 2)),
                "network": {"normalize": False, "hidden_units": 8, "num_layers": 2},
                "weights": weights}, path)
    loaded = load_policy(path)
    assert not loaded.module.encoder.encoders  # no CNN: the saved network had none
    _, _, flat = _obs(np.random.default_rng(8), 2)
    with torch.no_grad():
        np.testing.assert_array_equal(loaded.module(torch.from_numpy(flat)).numpy(),
                                      learner.export_module()(torch.from_numpy(flat)).numpy())


GOAL_SHAPES = [(6,), (2,)]  # a vector and a GOAL_SIGNAL vector (obs_1), as GridWorld's one-hot


@pytest.mark.parametrize("trainer_type", ["ppo", "ddpg"])
def test_goal_conditioned_policy_exports_with_the_same_inputs_and_outputs(tmp_path, trainer_type):
    """``goal_conditioning_type: hyper`` with a goal observation: the exported model still takes
    obs_0..obs_n (the goal is one of them) and gives the torch module's actions."""
    from unity_rl.algorithms.conditioning import ConditionalEncoder
    from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner
    from unity_rl.export import export_checkpoint, load_policy

    net = NetworkConfig(normalize=True, hidden_units=16, num_layers=2)
    if trainer_type == "ppo":
        learner = PPOLearner(GOAL_SHAPES, CONTINUOUS, PPOConfig(), net, seed=0, goal_indices=(1,))
        assert isinstance(learner.model.critic, ConditionalEncoder)
    else:
        learner = DDPGLearner(GOAL_SHAPES, CONTINUOUS, DDPGConfig(), 16, 2, True, seed=0,
                              goal_indices=(1,))
        assert isinstance(learner.critic.net.body, ConditionalEncoder)
    rng = np.random.default_rng(8)
    learner.layout.update(learner.normalizer, rng.normal(0.5, 2.0, (64, 8)))
    path = _saved_policy(tmp_path, learner, GOAL_SHAPES, CONTINUOUS, net, trainer_type)
    module = load_policy(path).module
    onnx_path = export_checkpoint(path)
    _, inputs, outputs = _io(onnx_path)
    assert inputs == ["obs_0", "obs_1"]
    assert outputs == ["version_number", "memory_size", "continuous_actions",
                       "continuous_action_output_shape", "deterministic_continuous_actions"]
    vector = rng.normal(size=(9, 6)).astype(np.float32)
    goal = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 9)]
    session = ort.InferenceSession(str(onnx_path))
    got = session.run(["continuous_actions"], {"obs_0": vector, "obs_1": goal})[0]
    with torch.no_grad():
        expected = module(torch.from_numpy(vector), torch.from_numpy(goal)).numpy()
        trained = learner.export_module()(torch.from_numpy(np.concatenate([vector, goal], 1)))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(expected, trained.numpy(), atol=1e-6)
    other = session.run(["continuous_actions"], {"obs_0": vector, "obs_1": goal[:, ::-1].copy()})[0]
    assert not np.allclose(other, got)  # the goal reaches the actions
