"""Reward signals as providers, one value head per signal, and the auxiliary-update seam.

A test-only signal ``bonus`` (1 per step, ``ignore_done``, with a learned part) is registered by
monkeypatching the registry with this module, which exports it as ``PROVIDER``.
"""
from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.auxiliary import AuxiliaryUpdate
from unity_rl.algorithms.gae import compute_gae
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo import learner as ppo_module
from unity_rl.algorithms.ppo.host import PPOAlgorithm, PPOHost
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner, PPOPolicy
from unity_rl.algorithms.reward_signals import registry
from unity_rl.algorithms.reward_signals.base import RewardSignal, SignalBatch
from unity_rl.algorithms.reward_signals.config import EXTRINSIC_ONLY, RewardSignalConfig
from unity_rl.experience import Segment, Trajectory
from unity_rl.config import ConfigError, dump_config, parse_config
from unity_rl.runtime.algorithm import HostContext
from unity_rl.runtime.messages import BehaviorInfo

SPEC = SimpleNamespace(continuous_size=2, discrete_branches=())
NET = NetworkConfig(hidden_units=16, num_layers=2)
EXTRINSIC = RewardSignalConfig("extrinsic", gamma=0.9, strength=2.0)
BONUS = RewardSignalConfig("bonus", gamma=0.5, strength=0.25)


class Bonus(RewardSignal):
    """1 per step; bootstraps even after a real end (as curiosity); counts its updates."""

    ignore_done = True

    def __init__(self, config, obs_shapes=None, action_spec=None, device="cpu"):
        super().__init__(config, obs_shapes, action_spec, device)
        self.updates = 0

    def rewards(self, batch) -> np.ndarray:
        return np.ones(batch.size, np.float32)

    def update(self, batch):
        self.updates += 1
        self.sizes = getattr(self, "sizes", []) + [batch.size]
        return {"Losses/Bonus Loss": float(self.updates)}

    def state_dict(self) -> dict:
        return {"updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.updates = int(state["updates"])


PROVIDER = Bonus


@pytest.fixture
def bonus_registered(monkeypatch):
    monkeypatch.setitem(registry.REWARD_SIGNALS, "bonus", __name__)


def _trajectories(rng, n_traj=4, length=16, obs_dim=3):
    policy = PPOPolicy(obs_dim, SPEC, NET, seed=1)
    policy.load_weights(PPOLearner(obs_dim, SPEC, PPOConfig(), NET, seed=0).weights())
    out = []
    for k in range(n_traj):
        obs = rng.normal(size=(length, obs_dim)).astype(np.float32)
        actions, logprobs, values = policy.act(obs)
        out.append(Trajectory(obs, actions, logprobs, values,
                              rng.normal(size=length).astype(np.float32),
                              rng.normal(size=obs_dim).astype(np.float32), k % 2 == 0))
    return out


def test_every_registered_signal_is_a_provider_and_extrinsic_is_the_env_reward():
    for name in registry.reward_signal_names():
        assert issubclass(registry.provider_class(name), RewardSignal)
    (extrinsic,) = registry.make_reward_signals((EXTRINSIC,), (3,), SPEC)
    traj = _trajectories(np.random.default_rng(0), 1)[0]
    np.testing.assert_array_equal(extrinsic.rewards(SignalBatch.from_trajectory(traj, 2)),
                                  traj.rewards)
    assert (extrinsic.name, extrinsic.gamma, extrinsic.strength) == ("extrinsic", 0.9, 2.0)
    assert extrinsic.update is None and not extrinsic.ignore_done
    with pytest.raises(KeyError, match="known"):
        registry.provider_class("gial")


def test_signal_rows_carry_observations_only_when_a_signal_reads_them():
    from unity_rl.algorithms.reward_signals.base import reads_observations
    (extrinsic,) = registry.make_reward_signals((EXTRINSIC,), (3,), SPEC)
    assert not reads_observations([extrinsic])            # extrinsic reads rewards only
    for name in registry.reward_signal_names():           # every other provider reads them
        assert registry.provider_class(name).reads_observations == (name != "extrinsic")
    traj = _trajectories(np.random.default_rng(0), 1)[0]
    full = SignalBatch.from_trajectory(traj, 2)
    bare = SignalBatch.from_trajectory(traj, 2, observations=False)
    assert full.obs.shape == (len(traj.rewards), 3) and bare.obs.shape == (len(traj.rewards), 0)
    np.testing.assert_array_equal(full.next_obs[-1], traj.last_obs)
    for a, b in zip(full[2:], bare[2:]):                  # the other fields are the same
        if a.shape == b.shape:
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(extrinsic.rewards(bare), extrinsic.rewards(full))


def test_observations_are_copied_only_when_normalised():
    from unity_rl.algorithms.encoders import ObservationLayout
    layout = ObservationLayout([(3,), (2, 4, 4)])
    rows = np.random.default_rng(0).random((5, 3 + 32)).astype(np.float32)
    assert np.shares_memory(layout.normalize(None, rows), rows)
    normalizer = layout.make_normalizer(True)
    layout.update(normalizer, rows)
    out = layout.normalize(normalizer, rows)
    assert not np.shares_memory(out, rows)
    np.testing.assert_array_equal(out[:, 3:], rows[:, 3:])       # images as they are
    assert not np.allclose(out[:, :3], rows[:, :3])               # vectors normalised


def test_one_value_head_per_signal_gae_per_signal_and_the_mean_advantage(monkeypatch,
                                                                          bonus_registered):
    """ML-Agents' _process_trajectory: per signal, GAE(γ_k, λ) on r_k·strength_k with its own
    head's values (bootstrapped after a real end when ignore_done); the policy's advantage is the
    mean over signals, normalised over the buffer; head k regresses on its own returns."""
    seen = {}
    surrogate, vloss = ppo_module.clipped_surrogate_loss, ppo_module.value_loss
    monkeypatch.setattr(ppo_module, "clipped_surrogate_loss", lambda new, old, adv, eps, *mask: seen.setdefault(
        "adv", adv.detach().clone()) is None or surrogate(new, old, adv, eps, *mask))
    monkeypatch.setattr(ppo_module, "value_loss", lambda new, old, ret, eps, *mask: seen.setdefault(
        "ret", ret.detach().clone()) is None or vloss(new, old, ret, eps, *mask))
    cfg = PPOConfig(buffer_size=64, minibatch_size=64, num_epochs=1, gae_lambda=0.8)
    learner = PPOLearner(3, SPEC, cfg, NET, seed=0, reward_signals=(EXTRINSIC, BONUS))
    assert learner.model.value_head_names == ["extrinsic", "bonus"]
    trajs = _trajectories(np.random.default_rng(0))
    with torch.no_grad():
        values = [learner.model.get_value(torch.from_numpy(t.obs)).numpy() for t in trajs]
        last = [learner.model.get_value(torch.from_numpy(t.last_obs[None])).numpy()[0] for t in trajs]
    metrics = learner.update(trajs)

    adv, ret = [], []
    for t, v, l in zip(trajs, values, last):
        a0, r0 = compute_gae(t.rewards * 2.0, v[:, 0], l[0], t.terminated, 0.9, 0.8)
        a1, r1 = compute_gae(np.full(16, 0.25, np.float32), v[:, 1], l[1], False, 0.5, 0.8)
        adv.append((a0 + a1) / 2)
        ret.append(np.stack([r0, r1], 1))
    adv, ret = np.concatenate(adv), np.concatenate(ret)
    adv = (adv - adv.mean()) / (adv.std() + 1e-10)
    perm = np.random.default_rng(0).permutation(64)  # the learner's first shuffle
    np.testing.assert_allclose(seen["adv"].numpy(), adv[perm], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(seen["ret"].numpy(), ret[perm], rtol=1e-5, atol=1e-5)
    assert {"Policy/Extrinsic Value Estimate", "Policy/Bonus Value Estimate"} <= set(metrics)


def test_extrinsic_only_equals_the_default_learner():
    trajs = _trajectories(np.random.default_rng(0))
    cfg = PPOConfig(buffer_size=64, minibatch_size=32)
    a = PPOLearner(3, SPEC, cfg, NET, seed=0)
    b = PPOLearner(3, SPEC, cfg, NET, seed=0, reward_signals=EXTRINSIC_ONLY)
    assert a.update(trajs) == b.update(trajs)


def test_policy_follows_the_value_heads_of_its_weights_and_checkpoints_check_them(bonus_registered):
    learner = PPOLearner(3, SPEC, PPOConfig(), NET, seed=0, reward_signals=(EXTRINSIC, BONUS))
    policy = PPOPolicy(3, SPEC, NET)
    policy.load_weights(learner.weights())
    assert policy.model.value_head_names == ["extrinsic", "bonus"]
    obs = np.zeros((2, 3), np.float32)
    assert policy.act(obs)[2].shape == (2,)  # the first head's value
    with pytest.raises(ValueError, match="value heads"):
        PPOLearner(3, SPEC, PPOConfig(), NET, seed=0).load_state_dict(learner.state_dict())


class FakeAux:
    """An auxiliary update beside PPO's (BC will be one): counts its calls."""

    name = "fake"

    def __init__(self):
        self.calls, self.sizes = 0, []

    def update(self, trajectories):
        self.calls += 1
        self.sizes.append(sum(len(t.rewards) for t in trajectories))
        return {"Losses/Fake Loss": 0.5 * self.calls}

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = int(state["calls"])


def test_auxiliary_updates_run_once_after_each_ppo_update_report_and_checkpoint(bonus_registered):
    aux = FakeAux()
    assert isinstance(aux, AuxiliaryUpdate)
    cfg = PPOConfig(buffer_size=64, minibatch_size=32)
    learner = PPOLearner(3, SPEC, cfg, NET, seed=0, reward_signals=(EXTRINSIC, BONUS))
    host = PPOHost(learner, buffer_steps=64, drop_lag=None, auxiliary=[aux])
    rng = np.random.default_rng(0)
    order = []
    update = learner.update
    learner.update = lambda *a, **k: order.append("ppo") or update(*a, **k)
    bonus = learner.reward_signals[1]
    for round_ in (1, 2):
        host.accept(Segment(_trajectories(rng), host.version, 0, 64, [], []))
        metrics = host.train(sync=True)
        # the learned signal trains once per PPO minibatch (2 of 32 rows x 3 epochs), the
        # auxiliary update once after the PPO update
        assert aux.calls == round_ and aux.sizes[-1] == 64
        assert bonus.updates == 6 * round_ and bonus.sizes[-6:] == [32] * 6
        assert metrics["Losses/Fake Loss"] == 0.5 * round_
        assert metrics["Losses/Bonus Loss"] == np.mean(range(6 * round_ - 5, 6 * round_ + 1))
        assert "Losses/Policy Loss" in metrics
    assert order == ["ppo", "ppo"]

    buf = io.BytesIO()
    torch.save(host.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    assert state["auxiliary"] == {"fake": {"calls": 2}}
    assert state["reward_signals"] == {"extrinsic": {}, "bonus": {"updates": 12}}
    restored_aux = FakeAux()
    restored = PPOHost(PPOLearner(3, SPEC, cfg, NET, seed=1, reward_signals=(EXTRINSIC, BONUS)),
                       buffer_steps=64, drop_lag=None, auxiliary=[restored_aux])
    restored.load_state_dict(state)
    assert restored_aux.calls == 2 and restored.learner.reward_signals[1].updates == 12
    with pytest.raises(ValueError, match="unique"):
        PPOHost(learner, buffer_steps=64, drop_lag=None, auxiliary=[FakeAux(), FakeAux()])


def test_config_signals_reach_the_learner_in_yaml_order(bonus_registered):
    raw = {"behaviors": {"B": {"reward_signals": {
        "bonus": {"gamma": 0.5, "strength": 0.25},
        "extrinsic": {"gamma": 0.9, "strength": 2.0}}}}}
    cfg = parse_config(raw)
    behavior = cfg.behaviors["B"]
    assert behavior.reward_signals == (BONUS, EXTRINSIC)
    assert behavior.gamma == 0.9 and behavior.reward_strength == 2.0
    assert parse_config(dump_config(cfg)) == cfg
    assert list(dump_config(cfg)["behaviors"]["B"]["reward_signals"]) == ["bonus", "extrinsic"]
    host = PPOAlgorithm(cfg, "B", behavior).make_host(
        BehaviorInfo("B", ((3,),), SPEC, 1), HostContext("cpu", 0, 1, "sync", 2))
    assert host.learner.model.value_head_names == ["bonus", "extrinsic"]
    with pytest.raises(ConfigError, match="extrinsic reward alone"):
        parse_config({"behaviors": {"B": {"trainer_type": "ddpg", **raw["behaviors"]["B"]}}})


def test_signal_reward_per_episode_is_the_mean_step_reward_times_the_episode_length(
        bonus_registered):
    """``Policy/<Signal> Reward`` (ML-Agents: each episode's strength-scaled sum): the buffer's
    mean reward per step times the mean length of the episodes that ended meanwhile."""
    cfg = PPOConfig(buffer_size=64, minibatch_size=32, num_epochs=1)
    learner = PPOLearner(3, SPEC, cfg, NET, seed=0, reward_signals=(EXTRINSIC, BONUS))
    host = PPOHost(learner, buffer_steps=64, drop_lag=None)
    trajs = _trajectories(np.random.default_rng(0))
    host.accept(Segment(trajs, host.version, 0, 64, [1.0, 2.0], [100, 300]))
    metrics = host.train(sync=True)
    mean_step = np.mean(np.concatenate([t.rewards for t in trajs])) * 2.0  # strength 2
    assert metrics["Policy/Extrinsic Reward"] == pytest.approx(mean_step * 200, rel=1e-5)
    assert metrics["Policy/Bonus Reward"] == pytest.approx(0.25 * 200)
    host.accept(Segment(trajs, host.version, 0, 64, [], []))  # no episode ended
    assert "Policy/Bonus Reward" not in host.train(sync=True)
