"""PPO: losses on known numbers, learning a bandit, masking, weights/state round trips."""
from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import (PPOConfig, PPOLearner, PPOPolicy, clipped_surrogate_loss,
                                decayed, value_loss)
from unity_rl.experience import Trajectory

CONTINUOUS = SimpleNamespace(continuous_size=1, discrete_branches=())
DISCRETE = SimpleNamespace(continuous_size=0, discrete_branches=(3, 2))
METRICS = {"Losses/Policy Loss", "Losses/Value Loss", "Policy/Entropy", "Policy/Learning Rate",
           "Policy/Epsilon", "Policy/Beta", "Policy/Approx KL", "Policy/Clip Fraction"}


def test_clipped_surrogate_on_a_known_batch():
    # ratios 1.5, 0.5, 1.1, 0.5 with advantages +1, −1, +2, +1 and ε = 0.2:
    #   s0: max(−1.5, −1.2) = −1.2 (clipped: no gradient)   s1: max(0.5, 0.8) = 0.8 (clipped)
    #   s2: max(−2.2, −2.2) = −2.2 (inside the range)      s3: max(−0.5, −0.8) = −0.5 (unclipped)
    ratios = torch.tensor([1.5, 0.5, 1.1, 0.5], dtype=torch.float64)
    newlogprob = ratios.log().requires_grad_()
    oldlogprob = torch.zeros(4, dtype=torch.float64)
    advantages = torch.tensor([1.0, -1.0, 2.0, 1.0], dtype=torch.float64)
    loss = clipped_surrogate_loss(newlogprob, oldlogprob, advantages, clip_coef=0.2)
    assert loss.item() == pytest.approx((-1.2 + 0.8 - 2.2 - 0.5) / 4)
    loss.backward()
    # d/dlogπ of −Â·r/N is −Â·r/N where unclipped, 0 where the clipped term is the max.
    np.testing.assert_allclose(newlogprob.grad.numpy(), [0.0, 0.0, -2.2 / 4, -0.5 / 4], atol=1e-12)


def test_value_loss_clipping():
    old = torch.tensor([0.0, 0.0])
    new = torch.tensor([1.0, 0.1], requires_grad=True)
    returns = torch.tensor([2.0, 2.0])
    # sample 0: unclipped (1−2)² = 1, clipped (0.2−2)² = 3.24 -> 3.24 (no gradient to V);
    # sample 1: inside the clip range: (0.1−2)² = 3.61 for both.
    loss = value_loss(new, old, returns, clip_coef=0.2)
    assert loss.item() == pytest.approx((3.24 + 3.61) / 2)
    loss.backward()
    np.testing.assert_allclose(new.grad.numpy(), [0.0, 2 * (0.1 - 2) / 2], rtol=1e-6)


def test_value_loss_is_the_mean_over_value_heads():
    """ML-Agents' trust_region_value_loss: each head's mean, then the mean over heads."""
    old = torch.zeros(2, 2)
    new = torch.tensor([[1.0, 0.0], [0.1, 0.0]])
    returns = torch.tensor([[2.0, 1.0], [2.0, 3.0]])
    head0 = (3.24 + 3.61) / 2          # the one-head example above
    head1 = (1.0 + 9.0) / 2            # V = V_old = 0: (1 − 0)², (3 − 0)²
    assert value_loss(new, old, returns, 0.2).item() == pytest.approx((head0 + head1) / 2)


def test_linear_schedules_follow_ml_agents():
    assert decayed(3e-4, 1e-10, "linear", 0, 100) == pytest.approx(3e-4)
    assert decayed(3e-4, 1e-10, "linear", 50, 100) == pytest.approx(1.5e-4, rel=1e-6)
    assert decayed(0.2, 0.1, "linear", 500, 100) == pytest.approx(0.1)
    assert decayed(0.2, 0.1, "constant", 50, 100) == 0.2


def _bandit_trajectories(policy: PPOPolicy, rng: np.random.Generator, n: int) -> list[Trajectory]:
    """One-step episodes: reward −|env_a − 0.5| for the action the environment gets
    (clamp(a, −3, 3) / 3), then the episode terminates."""
    obs = rng.normal(size=(n, 2)).astype(np.float32)
    actions, logprobs, values = policy.act(obs)
    rewards = -np.abs(policy.env_actions(actions)[:, 0] - 0.5).astype(np.float32)
    return [Trajectory(obs[i:i + 1], actions[i:i + 1], logprobs[i:i + 1], values[i:i + 1],
                       rewards[i:i + 1], obs[i], True) for i in range(n)]


@pytest.mark.slow
def test_ppo_learns_a_continuous_bandit():
    cfg = PPOConfig(learning_rate=3e-3, lr_schedule="constant", buffer_size=256, minibatch_size=64,
                    num_epochs=4, ent_coef=0.0, max_steps=10_000)
    net = NetworkConfig(normalize=True, hidden_units=32, num_layers=1)
    learner = PPOLearner(2, CONTINUOUS, cfg, net, seed=0, num_threads=1)
    policy = PPOPolicy(2, CONTINUOUS, net, seed=1)
    rng = np.random.default_rng(2)
    probe = rng.normal(size=(64, 2)).astype(np.float32)
    policy.load_weights(learner.weights())
    start = float(policy.env_actions(policy.act(probe, deterministic=True)[0]).mean())
    for i in range(12):
        metrics = learner.update(_bandit_trajectories(policy, rng, 256))
        policy.load_weights(learner.weights())
        assert policy.version == learner.version == i + 1
    assert set(metrics) >= METRICS and all(np.isfinite(v) for v in metrics.values())
    end = float(policy.env_actions(policy.act(probe, deterministic=True)[0]).mean())
    assert abs(start) < 0.1
    assert abs(end - 0.5) < 0.15, (start, end)
    assert learner.agent_steps_trained == learner.agent_steps_collected == 12 * 256


def test_discrete_masking_never_samples_a_masked_action():
    net = NetworkConfig(hidden_units=16, num_layers=1)
    policy = PPOPolicy(4, DISCRETE, net, seed=0)
    rng = np.random.default_rng(0)
    n = 2000
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    masks = rng.random((n, 5)) < 0.5
    masks[np.arange(n), rng.integers(0, 3, n)] = True  # at least one allowed action per branch
    masks[np.arange(n), 3 + rng.integers(0, 2, n)] = True
    actions, logprobs, _ = policy.act(obs, action_mask=masks)
    assert actions.shape == (n, 2) and actions.dtype == np.int64
    assert masks[np.arange(n), actions[:, 0]].all()
    assert masks[np.arange(n), 3 + actions[:, 1]].all()
    assert np.isfinite(logprobs).all()
    det, _, _ = policy.act(obs, action_mask=masks, deterministic=True)
    assert masks[np.arange(n), det[:, 0]].all() and masks[np.arange(n), 3 + det[:, 1]].all()
    # Without masks every action of each branch shows up.
    free, _, _ = policy.act(obs)
    assert set(free[:, 0]) == {0, 1, 2} and set(free[:, 1]) == {0, 1}


def test_discrete_update_with_masks_learns_the_best_allowed_action():
    cfg = PPOConfig(learning_rate=3e-3, lr_schedule="constant", buffer_size=256, minibatch_size=64,
                    ent_coef=0.0, max_steps=10_000)
    spec = SimpleNamespace(continuous_size=0, discrete_branches=(3,))
    net = NetworkConfig(hidden_units=16, num_layers=1)
    learner = PPOLearner(2, spec, cfg, net, seed=0)
    policy = PPOPolicy(2, spec, net, seed=0)
    rng = np.random.default_rng(0)
    masks = np.tile([True, False, True], (256, 1))  # action 1 (the best) is never allowed
    for _ in range(10):
        policy.load_weights(learner.weights())
        obs = rng.normal(size=(256, 2)).astype(np.float32)
        actions, logprobs, values = policy.act(obs, action_mask=masks)
        assert not (actions == 1).any()
        rewards = np.array([0.0, 1.0, 0.5], np.float32)[actions[:, 0]]
        trajs = [Trajectory(obs[i:i + 1], actions[i:i + 1], logprobs[i:i + 1], values[i:i + 1],
                            rewards[i:i + 1], obs[i], True, masks[i:i + 1]) for i in range(256)]
        learner.update(trajs)
    policy.load_weights(learner.weights())
    det, _, _ = policy.act(obs, action_mask=masks, deterministic=True)
    assert (det[:, 0] == 2).mean() > 0.9


def _random_trajectories(rng, n_traj=4, length=16, offset=10.0):
    trajs = []
    for k in range(n_traj):
        obs = (rng.normal(size=(length, 3)) * 3 + offset).astype(np.float32)
        trajs.append(Trajectory(obs, rng.normal(size=(length, 1)).astype(np.float32),
                                np.full(length, -1.0, np.float32), np.zeros(length, np.float32),
                                rng.normal(size=length).astype(np.float32), obs[-1], k % 2 == 0))
    return trajs


def test_normaliser_state_travels_with_weights_and_state_dict():
    cfg = PPOConfig(buffer_size=64, minibatch_size=16, max_steps=1000)
    net = NetworkConfig(normalize=True, hidden_units=16, num_layers=2)
    learner = PPOLearner(3, CONTINUOUS, cfg, net, seed=0)
    rng = np.random.default_rng(0)
    learner.update(_random_trajectories(rng))
    assert np.allclose(learner.normalizer.mean, 10.0, atol=1.5)

    # learner -> actor
    policy = PPOPolicy(3, CONTINUOUS, net)
    policy.load_weights(learner.weights())
    np.testing.assert_array_equal(policy.normalizer.mean, learner.normalizer.mean)
    np.testing.assert_array_equal(policy.normalizer.var, learner.normalizer.var)
    assert policy.normalizer.count == learner.normalizer.count

    # the export module folds the normalisation in and matches the deterministic policy
    obs = (rng.normal(size=(8, 3)) * 3 + 10).astype(np.float32)
    det, _, _ = policy.act(obs, deterministic=True)
    with torch.no_grad():
        exported = learner.export_module()(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(exported, np.clip(det, -3, 3) / 3, atol=1e-5)

    # checkpoint round trip, through torch.save / torch.load(weights_only=True)
    buf = io.BytesIO()
    torch.save(learner.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    restored = PPOLearner(3, CONTINUOUS, cfg, net, seed=123)
    restored.load_state_dict(state)
    assert restored.version == learner.version == 1
    assert restored.agent_steps_trained == learner.agent_steps_trained == 64
    np.testing.assert_array_equal(restored.normalizer.mean, learner.normalizer.mean)
    for k, v in learner.model.state_dict().items():
        torch.testing.assert_close(restored.model.state_dict()[k], v)
    # identical state -> identical next update
    trajs = _random_trajectories(rng)
    assert restored.update(trajs) == learner.update(trajs)


def test_weights_are_detached_cpu_copies():
    net = NetworkConfig(hidden_units=8, num_layers=1)
    learner = PPOLearner(3, CONTINUOUS, PPOConfig(buffer_size=64, minibatch_size=16), net, seed=0)
    weights = learner.weights()
    assert weights["normalizer"] is None and weights["version"] == 0
    before = {k: v.clone() for k, v in weights["model"].items()}
    learner.update(_random_trajectories(np.random.default_rng(0)))
    changed = [k for k in before if not torch.equal(before[k], weights["model"][k])]
    assert not changed  # the published copy does not alias the live parameters
    policy = PPOPolicy(3, CONTINUOUS, NetworkConfig(normalize=True, hidden_units=8, num_layers=1))
    with pytest.raises(ValueError, match="normalize"):
        policy.load_weights(learner.weights())


def test_actors_get_the_actor_without_the_critic_and_act_as_with_the_whole_network():
    net = NetworkConfig(hidden_units=8, num_layers=1)
    learner = PPOLearner(3, CONTINUOUS, PPOConfig(buffer_size=64, minibatch_size=16), net, seed=0)
    learner.update(_random_trajectories(np.random.default_rng(0)))
    published, whole = learner.weights(), learner.weights(include_critic=True)
    critic = sorted(set(whole["model"]) - set(published["model"]))
    assert critic and all(k.split(".")[0] in ("critic", "value_heads") for k in critic)
    assert learner.parameter_count() == sum(p.numel() for p in learner.model.parameters())
    obs = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    acted = []
    for weights in (published, whole):
        policy = PPOPolicy(3, CONTINUOUS, net, seed=7)
        policy.load_weights(weights)
        acted.append(policy.act(obs, deterministic=True)[0])
    np.testing.assert_array_equal(acted[0], acted[1])
    actor_key = next(k for k in published["model"] if k.startswith("actor"))
    del published["model"][actor_key]
    with pytest.raises(RuntimeError, match=actor_key):  # only the critic may be left out
        PPOPolicy(3, CONTINUOUS, net).load_weights(published)


def test_bad_action_specs_and_config_values_are_rejected():
    with pytest.raises(ValueError, match="neither"):
        PPOPolicy(2, SimpleNamespace(continuous_size=0, discrete_branches=()), NetworkConfig())
    with pytest.raises(ValueError, match="ppo.clip_coef"):
        PPOConfig(clip_coef=1.5)
    with pytest.raises(ValueError, match="ppo.buffer_size must be an int >= batch_size"):
        PPOConfig(buffer_size=32, minibatch_size=64)
