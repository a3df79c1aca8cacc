"""Curiosity and RND end to end on the Pyramids stand-in: Unity's ``ppo/Pyramids.yaml`` and
``ppo/PyramidsRND.yaml`` (scaled down) in sync and async runs, SAC with both signals; ML-Agents'
TensorBoard tags; the signals' state in checkpoints and on resume."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tests.runtime.helpers import REPO_ROOT, checkpoint_entry, live_descendants
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.config import FrozenMap, apply_overrides, load_config, parse_config
import yaml

pytestmark = pytest.mark.slow

CONFIGS = REPO_ROOT / "tests" / "fixtures" / "mlagents_configs"
BUILD = str(REPO_ROOT / "unity_builds" / "Pyramids.x86_64")


def scaled(cfg, port: int, *, max_steps: int, mode: str = "sync", num_envs: int = 1,
           **hp):
    """One behavior's config with a small network, buffer and summary window."""
    cfg = apply_overrides(cfg, env=BUILD, num_envs=num_envs, num_actors=num_envs, base_port=port,
                          mode=mode, seed=3, no_graphics=True, timeout_wait=30,
                          env_args=("--standin-agents", "4"))
    [(name, b)] = list(cfg.behaviors.items())
    signals = tuple(s if s.name == "extrinsic" else dataclasses.replace(
        s, network_settings=dataclasses.replace(s.network_settings, hidden_units=16))
        for s in b.reward_signals)
    b = dataclasses.replace(b, hyperparameters=dataclasses.replace(b.hyperparameters, **hp),
                            network_settings=NetworkConfig(hidden_units=32, num_layers=1),
                            reward_signals=signals, max_steps=max_steps, summary_freq=128,
                            checkpoint_interval=100_000, time_horizon=32)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: b}))


def tags(run_dir: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "Pyramids"))
    events.Reload()
    return set(events.Tags()["scalars"])


def test_ppo_curiosity_reports_mlagents_tags_checkpoints_and_resumes(tmp_path, free_base_port):
    from unity_rl.training.trainer import train

    port = free_base_port(1)
    base = load_config(CONFIGS / "ppo" / "Pyramids.yaml")
    cfg = scaled(base, port, max_steps=512, buffer_size=256, minibatch_size=64)
    run_dir = tmp_path / "run"
    result = train(cfg, run_dir, resume=False, console=False)
    assert not result.interrupted
    assert {"Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss",
            "Policy/Curiosity Value Estimate", "Policy/Extrinsic Value Estimate"} <= tags(run_dir)
    state = checkpoint_entry(run_dir, "Pyramids")["learner"]["reward_signals"]["curiosity"]
    assert state["has_updated_once"]
    weights = {k: v.clone() for k, v in state["modules"].items()}
    assert state["optimizer"]["state"], "the signal's Adam has stepped"

    cfg2 = scaled(base, port, max_steps=1024, buffer_size=256, minibatch_size=64)
    train(cfg2, run_dir, resume=True, console=False)
    resumed = checkpoint_entry(run_dir, "Pyramids")["learner"]["reward_signals"]["curiosity"]
    steps = [s["step"] for s in resumed["optimizer"]["state"].values()]
    before = [s["step"] for s in state["optimizer"]["state"].values()]
    assert min(float(a) - float(b) for a, b in zip(steps, before)) > 0  # it went on training
    assert any(not torch.equal(weights[k], resumed["modules"][k]) for k in weights)
    assert live_descendants() == []


@pytest.mark.timeout(180)
def test_ppo_rnd_async_trains_the_signal_in_the_learner(tmp_path, free_base_port):
    from unity_rl.training.trainer import train

    cfg = scaled(load_config(CONFIGS / "ppo" / "PyramidsRND.yaml"), free_base_port(2),
                 max_steps=768, mode="async", num_envs=2, buffer_size=256, minibatch_size=64)
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    assert not result.interrupted
    assert {"Losses/RND Loss", "Policy/Rnd Value Estimate"} <= tags(tmp_path / "run")
    state = checkpoint_entry(tmp_path / "run", "Pyramids")["learner"]["reward_signals"]["rnd"]
    assert state["optimizer"]["state"]
    assert live_descendants() == []


SAC_SIGNALS = """behaviors:
  Pyramids:
    trainer_type: sac
    hyperparameters: {batch_size: 32, buffer_size: 10000, buffer_init_steps: 64,
                      steps_per_update: 10.0, reward_signal_steps_per_update: 5.0}
    reward_signals:
      extrinsic: {gamma: 0.995, strength: 2.0}
      curiosity: {strength: 0.02}
      rnd: {strength: 0.01}
"""


def test_sac_with_curiosity_and_rnd(tmp_path, free_base_port):
    """SAC re-evaluates both signals on every sampled minibatch and updates them at
    reward_signal_steps_per_update: ML-Agents' count of signal updates."""
    from unity_rl.training.trainer import train

    cfg = scaled(parse_config(yaml.safe_load(SAC_SIGNALS)), free_base_port(1), max_steps=600)
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    assert not result.interrupted
    assert {"Losses/Curiosity Forward Loss", "Losses/RND Loss", "Losses/Q1 Loss"} <= tags(
        tmp_path / "run")
    sac = checkpoint_entry(tmp_path / "run", "Pyramids")["learner"]["sac"]
    hp = cfg.behaviors["Pyramids"].hyperparameters
    due = -(-(sac["agent_steps"] - hp.warmup_steps) // hp.reward_signal_steps_per_update) - 1
    assert sac["reward_signal_updates"] == due > 0
    assert live_descendants() == []
