"""Curiosity and RND beside the reference tests: their YAML keys and defaults (Unity's
Pyramids configs), the learned-signal seam in SAC (re-evaluated per minibatch, updated at
``reward_signal_steps_per_update``, checkpointed), and ``SignalBatch``'s rows."""
from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.config import (CuriosityConfig, RewardSignalConfig,
                                                       RNDConfig)
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.learner import SACLearner
from unity_rl.algorithms.sac.losses import backup
from unity_rl.config import ConfigError, dump_config, load_config, parse_config
from unity_rl.experience import Trajectory, TransitionBatch

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "mlagents_configs"
HYBRID = SimpleNamespace(continuous_size=2, discrete_branches=(3,))
SIGNALS = (RewardSignalConfig("extrinsic"),
           CuriosityConfig("curiosity", strength=0.02, network_settings=NetworkConfig(hidden_units=16)),
           RNDConfig("rnd", strength=0.01, network_settings=NetworkConfig(hidden_units=8, num_layers=3)))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


BASE = """behaviors:
  B:
    trainer_type: ppo
    reward_signals:
      extrinsic: {gamma: 0.99, strength: 1.0}
"""


def test_unity_pyramids_configs_load_with_mlagents_meaning():
    curiosity = load_config(CONFIGS / "ppo" / "Pyramids.yaml").behaviors["Pyramids"]
    assert [s.name for s in curiosity.reward_signals] == ["extrinsic", "curiosity"]
    c = curiosity.reward_signals[1]
    assert isinstance(c, CuriosityConfig)
    assert (c.gamma, c.strength, c.learning_rate, c.network_settings.hidden_units,
            c.network_settings.num_layers) == (0.99, 0.02, 3e-4, 256, 2)
    rnd = load_config(CONFIGS / "ppo" / "PyramidsRND.yaml").behaviors["Pyramids"].reward_signals[1]
    assert isinstance(rnd, RNDConfig)
    assert (rnd.strength, rnd.learning_rate, rnd.network_settings.hidden_units,
            rnd.network_settings.num_layers) == (0.01, 1e-4, 64, 3)


def test_defaults_encoding_size_and_strict_keys(tmp_path):
    cfg = load_config(write(tmp_path, BASE + "      curiosity: {strength: 0.1}\n"
                                             "      rnd: {encoding_size: 32}\n"))
    _, curiosity, rnd = cfg.behaviors["B"].reward_signals
    assert curiosity.learning_rate == 3e-4 and rnd.learning_rate == 1e-4  # ML-Agents' code defaults
    assert curiosity.network_settings.hidden_units == 128  # NetworkSettings' default
    assert rnd.network_settings.hidden_units == 32  # encoding_size without network_settings
    cfg = load_config(write(tmp_path, BASE + "      rnd: {encoding_size: 32, network_settings: "
                                             "{hidden_units: 8}}\n"))
    assert cfg.behaviors["B"].reward_signals[1].network_settings.hidden_units == 8  # ignored
    again = parse_config(dump_config(cfg))
    assert again.behaviors["B"].reward_signals == cfg.behaviors["B"].reward_signals
    with pytest.raises(ConfigError, match="use_actions"):
        load_config(write(tmp_path, BASE + "      curiosity: {use_actions: true}\n"))
    with pytest.raises(ConfigError, match="learning_rate"):
        load_config(write(tmp_path, BASE + "      rnd: {learning_rate: -1}\n"))


def test_signal_batch_from_a_trajectory_and_from_replay_rows():
    obs = np.arange(12, dtype=np.float32).reshape(4, 3)
    actions = np.array([[0.5, -1.0, 2], [0.1, 0.2, 0], [1, 1, 1], [0, 0, 2]], np.float32)
    traj = Trajectory(obs, actions, np.zeros((4, 3), np.float32), np.zeros(4, np.float32),
                      np.arange(4, dtype=np.float32), np.full(3, 9, np.float32), False,
                      interrupted=True)
    b = SignalBatch.from_trajectory(traj, 2)
    np.testing.assert_array_equal(b.next_obs, np.concatenate([obs[1:], np.full((1, 3), 9)]))
    np.testing.assert_array_equal(b.discrete_actions[:, 0], [2, 0, 1, 2])
    np.testing.assert_array_equal(b.continuous_actions, actions[:, :2])
    np.testing.assert_array_equal(b.done, [0, 0, 0, 1])  # ML-Agents' DONE: interrupted too
    assert b.size == 4 and b.rows(np.array([3, 1])).env_rewards.tolist() == [3.0, 1.0]
    replay = TransitionBatch(obs, actions, np.ones(4, np.float32), obs + 1, np.zeros(4, np.float32))
    r = SignalBatch.from_transitions(replay, 2)
    np.testing.assert_array_equal(r.next_obs, obs + 1)
    assert r.mask.tolist() == [1, 1, 1, 1]


def _replay(rng: np.random.Generator, n: int = 32) -> TransitionBatch:
    actions = np.concatenate([rng.uniform(-1, 1, (n, 2)), rng.integers(0, 3, (n, 1))], 1)
    return TransitionBatch(rng.normal(size=(n, 6)).astype(np.float32), actions.astype(np.float32),
                           rng.normal(size=n).astype(np.float32),
                           rng.normal(size=(n, 6)).astype(np.float32),
                           (rng.random(n) < 0.2).astype(np.float32), np.ones((n, 3), np.uint8))


def test_sac_updates_signals_at_reward_signal_steps_per_update_and_checkpoints_them():
    cfg = SACConfig(batch_size=32, warmup_steps=100, steps_per_update=10.0,
                    reward_signal_steps_per_update=4.0)
    learner = SACLearner(6, HYBRID, cfg, NetworkConfig(hidden_units=16), SIGNALS, seed=0)
    # ML-Agents' loop: while (step - init) / n > rsspu: update; n += 1 (n starts at 1)
    n, done = 1, 0
    for step in (50, 100, 101, 105, 140, 333):
        learner.agent_steps = step
        while (step - cfg.warmup_steps) / n > cfg.reward_signal_steps_per_update:
            n += 1
        assert learner.reward_signal_updates_owed() == n - 1 - done
        for _ in range(learner.reward_signal_updates_owed()):
            metrics = learner.update_reward_signals(_replay(np.random.default_rng(step)))
            done += 1
        assert learner.reward_signal_updates == done
    assert set(metrics) == {"Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss",
                            "Losses/RND Loss"}
    curiosity = learner.reward_signals[1]
    batch = _replay(np.random.default_rng(99))
    rows = SignalBatch.from_transitions(batch, 2)
    assert curiosity.rewards(rows).max() > 0  # after its first update
    learner.update(batch)  # the SAC step re-evaluates the signals on its own minibatch

    buf = io.BytesIO()
    torch.save(learner.state_dict(), buf)
    buf.seek(0)
    restored = SACLearner(6, HYBRID, cfg, NetworkConfig(hidden_units=16), SIGNALS, seed=7)
    restored.load_state_dict(torch.load(buf, weights_only=True))
    assert restored.reward_signal_updates == done
    for ours, theirs in zip(learner.reward_signals[1:], restored.reward_signals[1:]):
        np.testing.assert_array_equal(ours.rewards(rows), theirs.rewards(rows))
    # and training goes on from the same optimiser state
    a, b = (s.update_reward_signals(_replay(np.random.default_rng(5))) for s in (learner, restored))
    assert a == pytest.approx(b)


def test_sac_backs_up_learned_signals_through_episode_ends():
    """``ignore_done``: curiosity and RND bootstrap V'(s') even where the episode terminated
    (ML-Agents' use_dones_in_backup), extrinsic does not."""
    learner = SACLearner(6, HYBRID, SACConfig(batch_size=8), NetworkConfig(hidden_units=8),
                         SIGNALS, seed=0)
    target = {k: torch.ones(4) for k in ("extrinsic", "curiosity", "rnd")}
    rewards = {k: torch.zeros(4) for k in target}
    dones = torch.tensor([1.0, 0.0, 1.0, 0.0])
    signals = {s.name: s for s in learner.reward_signals}

    def q_target(name):
        return backup(signals[name], target[name], dones, rewards[name]).tolist()

    assert q_target("extrinsic") == pytest.approx([0.0, 0.99, 0.0, 0.99])
    for name in ("curiosity", "rnd"):
        assert q_target(name) == pytest.approx([0.99] * 4)


def test_curiosity_reward_is_zero_until_its_first_update_and_clipped_at_one_over_strength():
    config = dataclasses.replace(SIGNALS[1], strength=0.5)
    learner = SACLearner(6, HYBRID, SACConfig(batch_size=8), NetworkConfig(hidden_units=8),
                         (SIGNALS[0], config), seed=0)
    curiosity = learner.reward_signals[1]
    rows = SignalBatch.from_transitions(_replay(np.random.default_rng(0)), 2)
    assert not curiosity.rewards(rows).any()
    curiosity.update(rows)
    big = rows._replace(next_obs=rows.next_obs * 1e3)
    rewards = curiosity.rewards(big)
    assert rewards.max() == pytest.approx(1 / 0.5) and math.isfinite(rewards.sum())
