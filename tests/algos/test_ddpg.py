"""DDPG: config checks, the TD target on hand batches, Polyak averaging, a bandit, shipping."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from mlagents_envs.base_env import ActionSpec

from unity_rl.algorithms.ddpg.learner import (DDPGConfig, DDPGLearner, DDPGPolicy, continuous_action_size,
                                 updates_owed)
from unity_rl.algorithms.noise import GaussianNoise, OrnsteinUhlenbeckNoise
from unity_rl.replay import ReplayBuffer
from unity_rl.experience import TransitionBatch

SPEC = ActionSpec.create_continuous(2)


def make_learner(cfg: DDPGConfig | None = None, obs_dim: int = 4, normalize: bool = False,
                 spec=SPEC, seed: int = 0, hidden: int = 32) -> DDPGLearner:
    return DDPGLearner(obs_dim, spec, cfg or DDPGConfig(), hidden_units=hidden, num_layers=2,
                       normalize=normalize, seed=seed)


def random_batch(n: int, obs_dim: int = 4, act_dim: int = 2, seed: int = 0) -> TransitionBatch:
    rng = np.random.default_rng(seed)
    return TransitionBatch(
        obs=rng.normal(size=(n, obs_dim)).astype(np.float32),
        actions=rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
        rewards=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, obs_dim)).astype(np.float32),
        terminated=(rng.random(n) < 0.3).astype(np.float32),
    )


# -- config and spec -------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [
    ("gamma", 1.5), ("tau", 0.0), ("actor_lr", 0.0), ("batch_size", 0),
    ("exploration_noise", "uniform"), ("policy_delay", 0), ("per_alpha", -0.1),
    ("buffer_size", 10),
])
def test_config_rejects_out_of_range_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        DDPGConfig(**{field: value})


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DDPGConfig().gamma = 0.5  # type: ignore[misc]


@pytest.mark.parametrize("spec", [ActionSpec.create_discrete((3, 2)), ActionSpec(2, (3,))])
def test_discrete_or_hybrid_spec_suggests_ppo(spec):
    with pytest.raises(ValueError, match="PPO"):
        make_learner(spec=spec)
    with pytest.raises(ValueError, match="PPO"):
        DDPGPolicy(4, spec, DDPGConfig(), 32, 2, False)
    assert continuous_action_size(SPEC) == 2


def test_updates_owed_respects_warmup_and_ratio():
    cfg = DDPGConfig(warmup_steps=100, replay_ratio=0.5)
    assert updates_owed(99, 0, cfg) == 0
    assert updates_owed(100, 0, cfg) == 0
    assert updates_owed(140, 0, cfg) == 20
    assert updates_owed(140, 15, cfg) == 5


# -- the algorithm -----------------------------------------------------------------------------
@pytest.mark.slow
def test_td_target_bootstraps_on_truncation_not_on_termination():
    cfg = DDPGConfig(gamma=0.9)
    learner = make_learner(cfg)
    obs = np.array([[0.1, -0.2, 0.3, 0.4]] * 2, np.float32)
    final_obs = np.array([[1.0, 2.0, -1.0, 0.5]] * 2, np.float32)
    batch = TransitionBatch(obs=obs, actions=np.zeros((2, 2), np.float32),
                            rewards=np.array([0.5, 0.5], np.float32), next_obs=final_obs,
                            terminated=np.array([1.0, 0.0], np.float32))  # row 1 truncated
    with torch.no_grad():
        s_next = torch.as_tensor(final_obs[:1])
        q_next = learner.critic_target(s_next, learner.actor_target(s_next)).item()
    y = learner.td_target(batch)
    assert y[0] == pytest.approx(0.5)  # terminated: r only
    assert y[1] == pytest.approx(0.5 + 0.9 * q_next, rel=1e-6)  # truncated: r + γQ'(s', μ'(s'))
    assert q_next != 0.0


def test_targets_move_by_exactly_tau_per_update():
    tau = 0.1
    learner = make_learner(DDPGConfig(tau=tau))
    old_targets = [[p.clone() for p in net.parameters()]
                   for net in (learner.actor_target, learner.critic_target)]
    learner.update(random_batch(32))
    for old, target, online in zip(old_targets, (learner.actor_target, learner.critic_target),
                                   (learner.actor, learner.critic)):
        for p_old, p_target, p_online in zip(old, target.parameters(), online.parameters()):
            torch.testing.assert_close(p_target, (1 - tau) * p_old + tau * p_online)
        assert any(not torch.equal(a, b) for a, b in zip(old, target.parameters()))


def test_policy_delay_updates_actor_and_targets_every_other_step():
    learner = make_learner(DDPGConfig(policy_delay=2))
    actor_before = [p.clone() for p in learner.actor.parameters()]
    learner.update(random_batch(16, seed=1))
    assert all(torch.equal(a, b) for a, b in zip(actor_before, learner.actor.parameters()))
    learner.update(random_batch(16, seed=2))
    assert not all(torch.equal(a, b) for a, b in zip(actor_before, learner.actor.parameters()))


def test_update_reports_metrics_and_td_errors_and_uses_is_weights():
    learner = make_learner()
    batch = random_batch(16)
    y = learner.td_target(batch)
    with torch.no_grad():
        q = learner.critic(torch.as_tensor(batch.obs), torch.as_tensor(batch.actions)).numpy()
    metrics, td_errors = learner.update(batch, importance_weights=np.ones(16, np.float32))
    assert set(metrics) >= {"Losses/Q Loss", "Losses/Policy Loss", "Policy/Q Mean"}
    assert all(isinstance(v, float) for v in metrics.values())
    np.testing.assert_allclose(td_errors, np.abs(y - q), rtol=1e-5, atol=1e-6)
    assert metrics["Losses/Q Loss"] == pytest.approx(np.mean((y - q) ** 2), rel=1e-5)
    # Zero IS weights zero the critic's loss: a fresh Adam then leaves the critic unchanged.
    fresh = make_learner()
    critic_before = [p.clone() for p in fresh.critic.parameters()]
    metrics, _ = fresh.update(batch, importance_weights=np.zeros(16, np.float32))
    assert metrics["Losses/Q Loss"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(critic_before, fresh.critic.parameters()))


@pytest.mark.slow
def test_learns_a_one_step_continuous_bandit():
    """One state, one step, reward = −(a − 0.3)², terminated: μ(s) must approach 0.3."""
    cfg = DDPGConfig(actor_lr=3e-3, critic_lr=3e-3, batch_size=128, buffer_size=2048)
    learner = DDPGLearner(3, ActionSpec.create_continuous(1), cfg, hidden_units=64,
                          num_layers=2, normalize=True, seed=0)
    rng = np.random.default_rng(0)
    n = 2048
    obs = np.tile(np.float32([1.0, -2.0, 0.5]), (n, 1))
    actions = rng.uniform(-1, 1, (n, 1)).astype(np.float32)  # uniform behaviour (warm-up)
    buffer = ReplayBuffer(n, 3, 1, seed=0)
    buffer.add(TransitionBatch(obs, actions, -((actions[:, 0] - 0.3) ** 2), obs,
                               np.ones(n, np.float32)))
    start = learner.make_policy().act(obs[:1], noise=False)
    for _ in range(400):
        learner.update(buffer.sample(cfg.batch_size))
    a = learner.make_policy().act(obs[:1], noise=False)
    assert abs(start.item() - 0.3) > 0.1
    assert abs(a.item() - 0.3) < 0.05, a


# -- actor side and checkpoints ------------------------------------------------------------
def test_policy_export_and_learner_agree_after_shipping_weights():
    learner = make_learner(normalize=True)
    for seed in range(3):
        learner.update(random_batch(32, seed=seed))
    policy = DDPGPolicy(4, SPEC, DDPGConfig(), 32, 2, normalize=True, seed=0)
    policy.load_weights(learner.weights())
    assert policy.version == 3
    obs = random_batch(8, seed=9).obs * 10  # beyond the clip range too
    a_policy = policy.act(obs, noise=False)
    with torch.no_grad():
        a_export = learner.export_module()(torch.as_tensor(obs)).numpy()
        a_learner = learner.actor(torch.as_tensor(learner.normalizer.normalize(obs))).numpy()
    np.testing.assert_allclose(a_policy, a_learner, atol=1e-6)
    np.testing.assert_allclose(a_export, a_learner, atol=1e-5)
    noisy = policy.act(obs)
    assert noisy.shape == (8, 2) and noisy.dtype == np.float32
    assert np.all(np.abs(noisy) <= 1.0) and not np.allclose(noisy, a_policy)


def test_policy_td_errors_match_learner_with_critic_weights():
    # Without normalisation: the learner folds each batch into its normaliser before the step.
    learner = make_learner()
    learner.update(random_batch(32))
    policy = DDPGPolicy(4, SPEC, DDPGConfig(), 32, 2, normalize=False)
    policy.load_weights(learner.weights())
    batch = random_batch(8, seed=5)
    with pytest.raises(RuntimeError, match="include_critic"):
        policy.td_errors(batch)
    policy.load_weights(learner.weights(include_critic=True))
    _, td_errors = learner.update(batch)  # td_errors are computed before the step's changes
    np.testing.assert_allclose(policy.td_errors(batch), td_errors, rtol=1e-4, atol=1e-5)


def test_warmup_plays_uniform_random_actions():
    policy = DDPGPolicy(4, SPEC, DDPGConfig(warmup_steps=100), 32, 2, False, seed=0)
    obs = np.zeros((500, 4), np.float32)
    assert policy.is_warming_up(99) and not policy.is_warming_up(100)
    warm = policy.explore(obs, agent_steps=0)
    assert warm.min() < -0.9 and warm.max() > 0.9 and abs(warm.mean()) < 0.1
    after = policy.explore(obs, agent_steps=100)  # μ(0) + N(0, 0.1²)
    assert after.std() < 0.2


def test_state_dict_round_trip_continues_identically():
    cfg = DDPGConfig(policy_delay=2)
    a = make_learner(cfg, normalize=True, seed=1)
    for seed in range(3):
        a.update(random_batch(16, seed=seed))
    b = make_learner(cfg, normalize=True, seed=2)
    b.load_state_dict(a.state_dict())
    batch = random_batch(16, seed=7)
    ma, mb = a.update(batch), b.update(batch)
    assert ma.metrics == mb.metrics
    np.testing.assert_array_equal(ma.td_errors, mb.td_errors)
    for x, y in zip(a.actor_target.parameters(), b.actor_target.parameters()):
        torch.testing.assert_close(x, y)
    assert b.weights()["version"] == 4


def test_ou_noise_is_per_agent_and_resettable():
    noise = OrnsteinUhlenbeckNoise(2, sigma=0.2, theta=0.15, seed=0)
    x1 = noise(2, keys=["a", "b"])
    x2 = noise(2, keys=["b", "a"])  # order changed: state follows the key, not the row
    assert set(noise.state) == {"a", "b"}
    np.testing.assert_allclose(noise.state["a"], x2[1])
    # Correlated: the next value is pulled from the previous one, not from zero.
    big = OrnsteinUhlenbeckNoise(1, sigma=0.2, seed=1)
    xs = np.array([big(1, keys=["k"])[0, 0] for _ in range(3000)])
    assert np.corrcoef(xs[:-1], xs[1:])[0, 1] > 0.7
    noise.reset(["a"])
    assert set(noise.state) == {"b"}
    noise.reset()
    assert noise.state == {}
    assert x1.shape == (2, 2) and x1.dtype == np.float32
    g = GaussianNoise(2, sigma=0.1, seed=0)(1000)
    assert abs(g.std() - 0.1) < 0.01


def test_ou_policy_noise_keys_and_reset():
    policy = DDPGPolicy(4, SPEC, DDPGConfig(exploration_noise="ou", warmup_steps=0), 32, 2,
                        False, seed=0)
    obs = np.zeros((3, 4), np.float32)
    policy.act(obs, agent_keys=[(0, 7), (0, 8), (1, 7)])
    assert len(policy.noise.state) == 3
    policy.reset_noise([(0, 8)])
    assert (0, 8) not in policy.noise.state


def test_parameter_count_is_the_actor_and_the_critic_without_their_targets():
    learner = make_learner()
    trained = [*learner.actor.parameters(), *learner.critic.parameters()]
    assert learner.parameter_count() == sum(p.numel() for p in trained)
