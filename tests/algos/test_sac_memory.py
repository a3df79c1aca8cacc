"""SAC with ``network_settings.memory``: memories kept per agent by the acting policy, the
critic memories computed sequence by sequence, trajectories padded into whole sequences (the
replay's sequences: ``test_replay_sequences.py``), the stored memories
reproducing the rollout's actions in training, and the ONNX recurrent contract stepped like the
torch policy through an episode. (The update itself equals ML-Agents' weight for weight:
``test_sac_mlagents_reference.py``, case "memory".)"""
from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.offpolicy.acting import trajectories_to_transitions
from unity_rl.algorithms.offpolicy.host import OffPolicyHost
from unity_rl.algorithms.sac.acting import SACActingPolicy
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.learner import SACLearner
from unity_rl.experience import Segment, StepExtras, Trajectory
from unity_rl.export import export_onnx, load_policy
from unity_rl.replay import ReplayBuffer

HYBRID = SimpleNamespace(continuous_size=2, discrete_branches=(3, 2))
L, M, OBS = 4, 12, 5
NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=2,
                    memory=MemoryConfig(sequence_length=L, memory_size=M))
CFG = SACConfig(batch_size=16, buffer_size=64)


def _pair(spec=HYBRID, net=NET, cfg=CFG):
    learner = SACLearner([(OBS,)], spec, cfg, net, seed=0)
    learner.observe(np.random.default_rng(3).normal(1.0, 2.0, (64, OBS)).astype(np.float32))
    policy = SACActingPolicy([(OBS,)], spec, 1, network_cfg=net, sac_cfg=cfg)
    policy.load_weights({"policy": learner.weights(), "agent_steps": 0, "num_actors": 1,
                         "replay": None})
    return learner, policy


def _allowed(rng, n, width=5):
    allowed = rng.random((n, width)) > 0.3
    allowed[:, [0, 3]] = True
    return allowed


def _trajectory(policy, rng, steps, key="a", terminated=False):
    """One agent acting ``steps`` times; its trajectory as the collector would store it."""
    obs, actions, masks, memories = [], [], [], []
    for _ in range(steps):
        o = rng.normal(size=(1, OBS)).astype(np.float32)
        m = _allowed(rng, 1)
        a, _, _ = policy.act(o, m, agent_keys=[key])
        obs.append(o[0]), actions.append(a[0]), masks.append(m[0])
        memories.append(policy.step_extras()["memories"][0])
    return Trajectory(np.stack(obs), np.stack(actions), np.zeros((steps, 4), np.float32),
                      np.full(steps, np.nan, np.float32), rng.normal(size=steps).astype(np.float32),
                      rng.normal(size=OBS).astype(np.float32), terminated, np.stack(masks),
                      StepExtras(memories=np.stack(memories)))


def test_memories_are_kept_per_agent_from_zeros_and_reset_when_episodes_end():
    _, policy = _pair()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(2, OBS)).astype(np.float32)
    policy.act(obs, _allowed(rng, 2), agent_keys=["a", "b"])
    assert not policy.step_extras()["memories"].any()          # a new agent starts from zeros
    after_first = {k: policy.memories[k].copy() for k in "ab"}
    policy.act(obs[::-1], _allowed(rng, 2), agent_keys=["b", "a"])  # order changes: by key
    np.testing.assert_array_equal(policy.step_extras()["memories"],
                                  np.stack([after_first["b"], after_first["a"]]))
    policy.episodes_ended(["a"])
    policy.act(obs, _allowed(rng, 2), agent_keys=["a", "b"])
    stored = policy.step_extras()["memories"]
    assert not stored[0].any() and stored[1].any()           # a's next episode from zeros


def test_critic_memories_are_computed_sequence_by_sequence_and_carried():
    learner, policy = _pair()
    rng = np.random.default_rng(1)
    first = _trajectory(policy, rng, 10)
    second = _trajectory(policy, rng, 3, terminated=True)
    third = _trajectory(policy, rng, 5)
    done = policy.prepare_trajectories([first, second, third])
    critic = done[0].extras.critic_memories
    assert critic.shape == (10, M) and not critic[:L].any()   # the first sequence from zeros
    x = torch.as_tensor(learner.layout.normalize(learner.normalizer, first.obs))
    with torch.no_grad():  # sequence 2 starts where the learner's V leaves sequence 1
        after = learner.critic.run(x[:L], None, torch.zeros(1, M), L)[1]
    np.testing.assert_allclose(critic[L:2 * L], np.repeat(after.numpy(), L, 0), atol=1e-6)
    assert (critic[2 * L:] == critic[2 * L]).all() and critic[2 * L].any()  # the leftover
    assert done[1].extras.critic_memories[0].any()           # carried into the next trajectory
    assert not done[2].extras.critic_memories[:L].any()      # reset after a terminated one


def test_trajectories_pad_to_whole_sequences_as_mlagents_pads():
    _, policy = _pair()
    rng = np.random.default_rng(2)
    t = policy.prepare_trajectories([_trajectory(policy, rng, 6)])[0]
    batch = trajectories_to_transitions([t], 5, "own", L, M)
    assert len(batch.rewards) == 8
    np.testing.assert_array_equal(batch.loss_mask, [1] * 6 + [0] * 2)
    assert not batch.obs[6:].any() and not batch.next_obs[6:].any() and not batch.rewards[6:].any()
    assert not batch.memories[6:].any() and not batch.critic_memories[6:].any()
    np.testing.assert_array_equal(batch.action_masks[6:], np.repeat(batch.action_masks[5:6], 2, 0))
    np.testing.assert_array_equal(batch.memories[:6], t.extras.memories)


def test_stored_memories_reproduce_the_rollout_actions_in_training_sequences():
    """The learner's π over a sampled sequence, from the sequence's stored first memory, gives
    the distribution the actor acted from at every real step (rollout-time memories)."""
    learner, policy = _pair()
    rng = np.random.default_rng(5)
    t = policy.prepare_trajectories([_trajectory(policy, rng, 11)])[0]
    batch = trajectories_to_transitions([t], 5, "own", L, M)
    x = torch.as_tensor(learner.layout.normalize(learner.normalizer, batch.obs))
    with torch.no_grad():
        _, in_training, _ = learner.policy.run(x, torch.as_tensor(batch.action_masks.astype(bool)),
                                               torch.as_tensor(batch.memories[::L]), L)
        _, step_by_step, _ = learner.policy.run(x[:11], torch.as_tensor(t.action_masks),
                                                torch.as_tensor(t.extras.memories), 1)
    np.testing.assert_allclose(in_training.probs[:11], step_by_step.probs, atol=1e-5)


def test_host_trains_on_padded_sequences_and_ships_the_critic():
    learner, policy = _pair()
    rng = np.random.default_rng(6)
    replay = ReplayBuffer(CFG.buffer_size, OBS, 4, 0, mask_dim=5, memory_dim=M, sequence_length=L)
    host = OffPolicyHost(learner, replay, name="sac", num_actors=1)
    trajectories = [_trajectory(policy, rng, n) for n in (7, 9, 6)]
    segment = policy.finish_segment(Segment(trajectories, 0, 0, 22, [], []))
    host.accept(segment)
    assert len(replay) == 8 + 12 + 8                                  # padded rows
    assert host.ready()
    metrics = host.train(sync=True)
    assert metrics["Runtime/Updates This Round"] > 0
    assert np.isfinite([metrics["Losses/Q1 Loss"], metrics["Losses/Policy Loss"]]).all()
    assert host.weights()["policy"]["critic"] is not None


@pytest.mark.parametrize("spec", [HYBRID, SimpleNamespace(continuous_size=0, discrete_branches=(4,)),
                                  SimpleNamespace(continuous_size=2, discrete_branches=())])
def test_onnx_steps_through_an_episode_like_the_torch_policy(tmp_path, spec):
    learner, policy = _pair(spec=spec)
    path = export_onnx(learner.export_module(), [(OBS,)], spec, tmp_path / "Hallway.onnx")
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    names = [i.name for i in model.graph.input], [o.name for o in model.graph.output]
    width = sum(spec.discrete_branches)
    assert names[0] == ["obs_0"] + (["action_masks"] if width else []) + ["recurrent_in"]
    assert names[1][:2] == ["version_number", "memory_size"] and names[1][-1] == "recurrent_out"
    session = ort.InferenceSession(str(path))
    rng = np.random.default_rng(4)
    n, keys = 3, ["a", "b", "c"]
    recurrent = np.zeros((n, 1, M), np.float32)        # Unity: zeros at an episode start
    for _ in range(8):
        obs = rng.normal(size=(n, OBS)).astype(np.float32)
        feed = {"obs_0": obs, "recurrent_in": recurrent}
        allowed = None
        if width:
            allowed = rng.random((n, width)) > 0.3
            allowed[:, 0] = True
            feed["action_masks"] = allowed.astype(np.float32)
        out = dict(zip(names[1], session.run(None, feed)))
        actions, _, _ = policy.act(obs, allowed, deterministic=True, agent_keys=keys)
        c = spec.continuous_size
        if c:
            np.testing.assert_allclose(out["continuous_actions"], actions[:, :c], atol=1e-5)
        if width:
            np.testing.assert_array_equal(out["discrete_actions"], actions[:, c:].astype(np.int64))
        np.testing.assert_allclose(out["recurrent_out"][:, 0],
                                   np.stack([policy.memories[k] for k in keys]), atol=1e-5)
        assert out["memory_size"].tolist() == [float(M)]
        recurrent = out["recurrent_out"]                # fed back, as Unity does
    assert np.abs(recurrent).max() > 1e-3


def test_saved_memory_policy_loads_and_exports(tmp_path):
    learner, _ = _pair()
    path = tmp_path / "B.pt"
    torch.save({"trainer_type": "sac", "behavior_name": "B?team=0", "obs_dim": OBS,
                "obs_shapes": [(OBS,)], "action_spec": (2, (3, 2)), "network": asdict(NET),
                "weights": learner.weights(), "agent_steps": 7}, path)
    loaded = load_policy(path)
    assert loaded.module.memory_size == M
    export_onnx(loaded.module, list(loaded.obs_shapes), loaded.action_spec, tmp_path / "B.onnx")


def test_one_step_lstm_path_equals_nn_lstm():
    """Acting's one-step path (the LSTM cell function) gives ``nn.LSTM``'s numbers."""
    from unity_rl.algorithms.nets import lstm_layer, run_lstm
    torch.manual_seed(0)
    lstm = lstm_layer(16, 6)
    x, memory = torch.randn(5, 16), torch.randn(5, 12)
    out, memory_out = run_lstm(lstm, x, memory, 1)
    with torch.no_grad():
        ref, (h, c) = lstm(x[:, None], (memory[None, :, :6].contiguous(),
                                       memory[None, :, 6:].contiguous()))
    torch.testing.assert_close(out, ref[:, 0])
    torch.testing.assert_close(memory_out, torch.cat([h[0], c[0]], -1))

