"""PPO with ``network_settings.memory``: memories kept per agent by the acting policy, the
rollout memories reproduce the rollout log-probs in training, padded sequences in the host's
buffer count, and the ONNX recurrent contract steps like the torch policy through an episode.
(The update itself equals ML-Agents' weight for weight: ``test_mlagents_reference.py``,
case "memory".)"""
from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.ppo.acting import PPOPolicy
from unity_rl.algorithms.ppo.host import PPOHost
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.experience import Segment, StepExtras, Trajectory
from unity_rl.export import export_onnx, load_policy

HYBRID = SimpleNamespace(continuous_size=2, discrete_branches=(3, 2))
NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=2,
                    memory=MemoryConfig(sequence_length=4, memory_size=12))
OBS = 5


def _pair(net=NET, spec=HYBRID, cfg=PPOConfig(buffer_size=64, minibatch_size=16)):
    learner = PPOLearner(OBS, spec, cfg, net, seed=0)
    if learner.normalizer is not None:
        learner.normalizer.update(np.random.default_rng(3).normal(1.0, 2.0, (64, OBS)))
    policy = PPOPolicy(OBS, spec, net, seed=1)
    policy.load_weights(learner.weights())
    return learner, policy


def _masks(rng, n):
    allowed = rng.random((n, 5)) > 0.3
    allowed[:, [0, 3]] = True
    return allowed


def test_memories_are_kept_per_agent_from_zeros_and_reset_when_episodes_end():
    _, policy = _pair()
    rng = np.random.default_rng(0)
    obs, masks = rng.normal(size=(3, OBS)).astype(np.float32), _masks(rng, 3)
    policy.act(obs, masks, agent_keys=["a", "b", "c"])
    assert (policy.step_extras()["memories"] == 0).all()          # new agents start at zero
    first = {k: policy.memories[k].copy() for k in "abc"}
    # rows in another order, one agent missing, one new: each row reads its own agent's memory
    policy.act(obs[[2, 0]], masks[[2, 0]], agent_keys=["c", "d"])
    np.testing.assert_array_equal(policy.step_extras()["memories"][0], first["c"])
    assert (policy.step_extras()["memories"][1] == 0).all()
    policy.episodes_ended(["a", "c"])                               # terminal or interrupted
    assert set(policy.memories) == {"b", "d"}
    policy.act(obs[:1], masks[:1], agent_keys=["a"])
    assert (policy.step_extras()["memories"] == 0).all()
    # one batched call equals one call per agent
    _, alone = _pair()
    for i, key in enumerate("abc"):
        alone.act(obs[i:i + 1], masks[i:i + 1], deterministic=True, agent_keys=[key])
    _, batched = _pair()
    batched.act(obs, masks, deterministic=True, agent_keys=list("abc"))
    for key in "abc":
        np.testing.assert_allclose(alone.memories[key], batched.memories[key], atol=1e-6)


def _rollout(policy, rng, num_agents=3, steps=11):
    """Trajectories of ``num_agents`` agents acting together for ``steps`` steps (one each)."""
    keys = [f"agent{i}" for i in range(num_agents)]
    rows = {k: {"obs": [], "actions": [], "logprobs": [], "masks": [], "memories": []} for k in keys}
    for _ in range(steps):
        obs, masks = rng.normal(size=(num_agents, OBS)).astype(np.float32), _masks(rng, num_agents)
        actions, logprobs, values = policy.act(obs, masks, agent_keys=keys)
        assert np.isnan(values).all()  # the critic's memories live with the learner
        memories = policy.step_extras()["memories"]
        for i, k in enumerate(keys):
            for name, value in (("obs", obs), ("actions", actions), ("logprobs", logprobs),
                                ("masks", masks), ("memories", memories)):
                rows[k][name].append(value[i])
    return [Trajectory(obs=np.stack(r["obs"]), actions=np.stack(r["actions"]),
                       logprobs=np.stack(r["logprobs"]), values=np.zeros(steps, np.float32),
                       rewards=rng.normal(size=steps).astype(np.float32),
                       last_obs=rng.normal(size=OBS).astype(np.float32), terminated=i == 0,
                       action_masks=np.stack(r["masks"]),
                       extras=StepExtras(memories=np.stack(r["memories"])))
            for i, r in enumerate(rows.values())]


def test_training_sequences_from_the_stored_memories_reproduce_the_rollout_log_probs():
    # without normalisation: prepare() moves the statistics before the ratios (ML-Agents' order)
    learner, policy = _pair(net=NetworkConfig(hidden_units=16, num_layers=2, memory=NET.memory))
    trajectories = _rollout(policy, np.random.default_rng(1))
    batch = learner.prepare(trajectories)
    L = batch.sequence_length
    assert len(batch.obs) == 3 * 12 and int(batch.loss_mask.sum()) == 33   # 11 -> 4 + 4 + 3 (+1)
    assert batch.memories.shape == (9, 12) and batch.critic_memories.shape == (9, 12)
    with torch.no_grad():
        dist = learner.model.distribution(batch.obs, batch.masks, batch.memories, L)
        logprobs = dist.log_prob(batch.actions)
    real = batch.loss_mask
    np.testing.assert_allclose(logprobs[real].numpy(), batch.logprobs[real].numpy(), atol=2e-5)
    # the padded rows hold zeros and count 0 in the losses
    assert (batch.advantages[~real] != 0).all()  # normalised over the padded buffer (ML-Agents)
    metrics = learner.optimise(batch)
    assert np.isfinite(list(metrics.values())).all() and learner.agent_steps_trained == 33


def test_critic_memory_is_carried_between_trajectories_until_one_terminates():
    learner, policy = _pair()
    trajectories = _rollout(policy, np.random.default_rng(2))  # the first one terminated
    learner.prepare(trajectories[1:])
    assert learner.critic_memory is not None       # a cut trajectory leaves its memory
    learner.prepare(trajectories[:1])
    assert learner.critic_memory is None           # a terminated one resets it


def test_host_counts_trajectories_padded_to_whole_sequences():
    learner, policy = _pair(cfg=PPOConfig(buffer_size=24, minibatch_size=16))
    host = PPOHost(learner, buffer_steps=24, drop_lag=None)
    trajectories = _rollout(policy, np.random.default_rng(3), num_agents=2, steps=9)
    host.accept(Segment(trajectories, 0, 0, 18, [], []))
    assert host.ready()                            # 2 × 12 padded rows >= 24 (18 real steps)
    assert np.isfinite(list(host.train(sync=True).values())).all()


@pytest.mark.parametrize("spec", [HYBRID, SimpleNamespace(continuous_size=0, discrete_branches=(4,))])
def test_onnx_steps_through_an_episode_like_the_torch_policy(tmp_path, spec):
    learner, policy = _pair(spec=spec)
    path = export_onnx(learner.export_module(), OBS, spec, tmp_path / "Hallway.onnx")
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    names = [i.name for i in model.graph.input], [o.name for o in model.graph.output]
    assert names[0] == ["obs_0", "action_masks", "recurrent_in"]
    assert names[1][:2] == ["version_number", "memory_size"] and names[1][-1] == "recurrent_out"
    session = ort.InferenceSession(str(path))
    rng = np.random.default_rng(4)
    n, width = 3, sum(spec.discrete_branches)
    recurrent = np.zeros((n, 1, 12), np.float32)       # Unity: zeros at an episode start
    keys = ["a", "b", "c"]
    for _ in range(8):
        obs = rng.normal(size=(n, OBS)).astype(np.float32)
        allowed = rng.random((n, width)) > 0.3
        allowed[:, 0] = True
        out = dict(zip(names[1], session.run(None, {"obs_0": obs, "action_masks":
                                                    allowed.astype(np.float32),
                                                    "recurrent_in": recurrent})))
        actions, _, _ = policy.act(obs, allowed, deterministic=True, agent_keys=keys)
        expected = policy.env_actions(actions)
        c = spec.continuous_size
        if c:
            np.testing.assert_allclose(out["continuous_actions"], expected[:, :c], atol=1e-5)
        np.testing.assert_array_equal(out["discrete_actions"], expected[:, c:].astype(np.int64))
        np.testing.assert_allclose(out["recurrent_out"][:, 0],
                                   np.stack([policy.memories[k] for k in keys]), atol=1e-5)
        assert out["memory_size"].tolist() == [12.0]
        recurrent = out["recurrent_out"]                # fed back, as Unity does


def test_saved_memory_policy_loads_and_exports(tmp_path):
    learner, _ = _pair()
    path = tmp_path / "B.pt"
    torch.save({"trainer_type": "ppo", "behavior_name": "B?team=0", "obs_dim": OBS,
                "obs_shapes": [(OBS,)], "action_spec": (2, (3, 2)), "network": asdict(NET),
                "weights": learner.weights(), "agent_steps": 7}, path)
    loaded = load_policy(path)
    assert loaded.module.memory_size == 12
    export_onnx(loaded.module, list(loaded.obs_shapes), loaded.action_spec, tmp_path / "B.onnx")
