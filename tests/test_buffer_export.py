"""ONNX export of policies with a buffer sensor: input ``obs_i`` [batch, max_entities,
entity_size] as ML-Agents exports it, and onnxruntime == the torch policy on rows with padding
(zero rows), for PPO (discrete, normalised vector beside it) and SAC (hybrid)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.learner import SACLearner
from unity_rl.export import export_onnx

SHAPES = [(6, 5), (4,)]  # a buffer sensor of up to 6 entities of 5, then a vector


def _obs(rng, n):
    entities = rng.normal(size=(n, 6, 5)).astype(np.float32)
    entities[np.arange(6)[None, :] >= rng.integers(0, 7, n)[:, None]] = 0.0  # padding rows
    vector = rng.normal(1.0, 3.0, (n, 4)).astype(np.float32)
    return entities, vector, np.concatenate([entities.reshape(n, -1), vector], axis=1)


def test_ppo_buffer_sensor_round_trip(tmp_path):
    spec = SimpleNamespace(continuous_size=0, discrete_branches=(3, 3))
    learner = PPOLearner(SHAPES, spec, PPOConfig(), NetworkConfig(normalize=True, hidden_units=16),
                         seed=0)
    rng = np.random.default_rng(1)
    learner.layout.update(learner.normalizer, _obs(rng, 256)[2])
    assert learner.normalizer.mean.shape == (4,)  # the buffer sensor is never normalised
    module = learner.export_module()
    path = export_onnx(module, SHAPES, spec, tmp_path / "Sorter.onnx")
    session = ort.InferenceSession(str(path))
    assert [(i.name, i.shape) for i in session.get_inputs()] == [
        ("obs_0", ["batch", 6, 5]), ("obs_1", ["batch", 4]), ("action_masks", ["batch", 6])]
    entities, vector, flat = _obs(rng, 16)
    masks = np.ones((16, 6), np.float32)
    got = session.run(["discrete_actions"], {"obs_0": entities, "obs_1": vector,
                                             "action_masks": masks})[0]
    with torch.no_grad():
        expected = module(torch.from_numpy(flat), torch.from_numpy(masks)).numpy()
        logits = learner.model.actor_output(
            torch.from_numpy(learner.layout.normalize(learner.normalizer, flat)))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, np.stack([b.argmax(-1).numpy()
                                                 for b in logits.split([3, 3], -1)], -1))


def test_sac_buffer_sensor_round_trip(tmp_path):
    spec = SimpleNamespace(continuous_size=2, discrete_branches=(3,))
    learner = SACLearner(SHAPES, spec, SACConfig(), NetworkConfig(hidden_units=16), seed=0)
    module = learner.export_module()
    path = export_onnx(module, SHAPES, spec, tmp_path / "s.onnx")
    session = ort.InferenceSession(str(path))
    assert session.get_inputs()[0].shape == ["batch", 6, 5]
    entities, vector, flat = _obs(np.random.default_rng(2), 9)
    masks = np.ones((9, 3), np.float32)
    cont, disc = session.run(["continuous_actions", "discrete_actions"],
                             {"obs_0": entities, "obs_1": vector, "action_masks": masks})
    with torch.no_grad():
        expected = module(torch.from_numpy(flat), torch.from_numpy(masks))
    np.testing.assert_allclose(cont, expected[0].numpy(), atol=1e-5)
    np.testing.assert_array_equal(disc, expected[1].numpy())


def test_entity_order_does_not_matter_an_added_entity_does():
    """Self-attention with a mean-pool is permutation-invariant over the entities; a row that
    was padding and now holds an entity changes the action."""
    spec = SimpleNamespace(continuous_size=2, discrete_branches=())
    learner = PPOLearner([(4, 3), (2,)], spec, PPOConfig(), NetworkConfig(hidden_units=16), seed=0)
    rng = np.random.default_rng(3)
    few = np.zeros((1, 4, 3), np.float32)
    few[0, :2] = rng.normal(size=(2, 3))
    vec = rng.normal(size=(1, 2)).astype(np.float32)
    other = few.copy()
    other[0, 3] = rng.normal(size=3)  # a third entity: the action changes
    with torch.no_grad():
        a, b = (learner.model.actor_output(torch.from_numpy(np.concatenate(
            [e.reshape(1, -1), vec], axis=1))) for e in (few, other))
        c = learner.model.actor_output(torch.from_numpy(np.concatenate(
            [few[:, [1, 0, 2, 3]].reshape(1, -1), vec], axis=1)))  # order of entities: none
    assert np.abs((a - b).numpy()).max() > 1e-4
    np.testing.assert_allclose(a.numpy(), c.numpy(), atol=1e-5)


def test_saved_policy_with_a_buffer_sensor_rebuilds_and_exports(tmp_path):
    """A ``<Behavior>.pt`` of a buffer-sensor behavior (as the trainer writes it) reloads with its
    attention encoder and exports; onnxruntime equals the learner's policy."""
    from dataclasses import asdict

    from unity_rl.export import export_checkpoint, load_policy

    spec = SimpleNamespace(continuous_size=0, discrete_branches=(3, 3))
    net = NetworkConfig(hidden_units=16)
    learner = PPOLearner(SHAPES, spec, PPOConfig(), net, seed=0)
    path = tmp_path / "Sorter.pt"
    torch.save({"trainer_type": "ppo", "behavior_name": "Sorter?team=0", "obs_dim": 34,
                "obs_shapes": SHAPES, "action_spec": (0, (3, 3)), "network": asdict(net),
                "weights": learner.weights(), "agent_steps": 1}, path)
    loaded = load_policy(path)
    assert loaded.obs_shapes == ((6, 5), (4,))
    entities, vector, flat = _obs(np.random.default_rng(4), 5)
    masks = np.ones((5, 6), np.float32)
    onnx_path = export_checkpoint(path)
    got = ort.InferenceSession(str(onnx_path)).run(
        ["discrete_actions"], {"obs_0": entities, "obs_1": vector, "action_masks": masks})[0]
    with torch.no_grad():
        expected = learner.export_module()(torch.from_numpy(flat), torch.from_numpy(masks))
    np.testing.assert_array_equal(got, expected.numpy())


def test_ddpg_takes_a_buffer_sensor():
    from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner

    spec = SimpleNamespace(continuous_size=2, discrete_branches=())
    learner = DDPGLearner(SHAPES, spec, DDPGConfig(), 16, 1, normalize=False, seed=0)
    actions = learner.make_policy().act(_obs(np.random.default_rng(5), 3)[2], noise=False)
    assert actions.shape == (3, 2) and np.isfinite(actions).all()
