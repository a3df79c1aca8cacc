"""One run trains every behavior of a build: the TwoBehaviors stand-in (3DBall + Basic)."""
from __future__ import annotations

import dataclasses
import math

import pytest

from tests.runtime.helpers import REPO_ROOT, checkpoint_entry, live_descendants
from unity_rl.config import ConfigError, FrozenMap, apply_overrides, load_config
from unity_rl.metrics import read_progress
from unity_rl.training.trainer import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

TWO = REPO_ROOT / "unity_builds" / "TwoBehaviors.x86_64"
CONFIG = REPO_ROOT / "configs" / "ppo" / "two_behaviors.yaml"


def two_config(base_port: int, *, mode: str, basic_steps: int, ball_steps: int,
               ball_trainer: str = "ppo", seed: int = 5):
    """configs/ppo/two_behaviors.yaml (Unity's 3DBall and Basic sections) on small budgets."""
    cfg = apply_overrides(load_config(CONFIG), env=str(TWO), base_port=base_port, num_envs=2,
                          num_actors=2, mode=mode, seed=seed, no_graphics=True, timeout_wait=30)
    ball, basic = cfg.behaviors["3DBall"], cfg.behaviors["Basic"]
    hp = dataclasses.replace(ball.hyperparameters, buffer_size=1024, minibatch_size=256)
    ball = dataclasses.replace(ball, hyperparameters=hp, max_steps=ball_steps, summary_freq=2048)
    # constant schedules: a short max_steps must not decay Basic's entropy bonus to nothing
    basic_hp = dataclasses.replace(basic.hyperparameters, lr_schedule="constant",
                                   ent_coef_schedule="constant", clip_coef_schedule="constant")
    basic = dataclasses.replace(basic, hyperparameters=basic_hp, max_steps=basic_steps,
                                summary_freq=1000)
    if ball_trainer == "ddpg":
        from unity_rl.algorithms.ddpg.learner import DDPGConfig
        ball = dataclasses.replace(ball, trainer_type="ddpg",
                                   hyperparameters=DDPGConfig(warmup_steps=500, batch_size=64,
                                                              buffer_size=20_000))
    return dataclasses.replace(cfg, behaviors=FrozenMap({"3DBall": ball, "Basic": basic}))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_both_behaviors_train_with_their_own_learner_files_and_budgets(mode, tmp_path,
                                                                       free_base_port):
    cfg = two_config(free_base_port(2), mode=mode, basic_steps=12000, ball_steps=3000, seed=2)
    run_dir = tmp_path / "run"
    result = train(cfg, run_dir, resume=False, console=False)

    assert sorted(result.behaviors) == ["3DBall", "Basic"]
    basic, ball = result.behaviors["Basic"], result.behaviors["3DBall"]
    assert basic.agent_steps >= 12000 and ball.agent_steps >= 3000
    for name in ("3DBall", "Basic"):
        assert (run_dir / f"{name}.onnx").is_file() and (run_dir / f"{name}.pt").is_file()
        rows = read_progress(run_dir / name / "progress.csv")
        assert rows and rows[-1]["agent_steps"] <= result.behaviors[name].agent_steps  # per update
        assert any(p.name.startswith("events") for p in (run_dir / name).iterdir())
        entry = checkpoint_entry(run_dir, name)
        assert entry["agent_steps"] == result.behaviors[name].agent_steps
    # each learner has its own schedule and version: Basic (buffer 256) updates far more often
    assert basic.policy_version > 2 * ball.policy_version >= 2
    # Basic learnt to walk to its large goal (random play averages about 0.2, the small goal
    # 0.07, the large one 0.93). Some seeds settle for the small goal, as with mlagents-learn:
    # the sync wiring is deterministic, so this seed is one that learns
    rows = read_progress(run_dir / "Basic" / "progress.csv")
    assert math.isfinite(rows[-1]["mean_return"])
    if mode == "sync":
        assert rows[-1]["mean_return"] > 0.5
    assert live_descendants() == []


def test_ppo_beside_ddpg_and_resume_with_two_behaviors(tmp_path, free_base_port):
    port = free_base_port(2)
    run_dir = tmp_path / "run"
    first = train(two_config(port, mode="sync", basic_steps=1000, ball_steps=1500,
                             ball_trainer="ddpg"), run_dir, resume=False, console=False)
    ball = checkpoint_entry(run_dir, "3DBall")
    assert ball["trainer_type"] == "ddpg" and "replay" in ball["learner"]
    assert checkpoint_entry(run_dir, "Basic")["trainer_type"] == "ppo"

    second = train(two_config(port, mode="sync", basic_steps=2000, ball_steps=2500,
                              ball_trainer="ddpg"), run_dir, resume=True, console=False)
    for name in ("3DBall", "Basic"):
        assert second.behaviors[name].agent_steps > first.behaviors[name].agent_steps
        steps = [r["agent_steps"] for r in read_progress(run_dir / name / "progress.csv")]
        assert steps == sorted(steps)
    assert live_descendants() == []


def test_behavior_flag_trains_one_and_gives_the_other_zero_actions(tmp_path, free_base_port):
    cfg = two_config(free_base_port(2), mode="sync", basic_steps=600, ball_steps=10)
    cfg = dataclasses.replace(cfg, unity_rl=dataclasses.replace(cfg.unity_rl, behavior="Basic"))
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    assert list(result.behaviors) == ["Basic"] and result.agent_steps >= 600
    assert not (tmp_path / "run" / "3DBall.onnx").exists()


def test_a_behavior_without_settings_is_a_config_error_naming_it(tmp_path, free_base_port):
    cfg = two_config(free_base_port(2), mode="sync", basic_steps=600, ball_steps=600)
    cfg = dataclasses.replace(cfg, behaviors=FrozenMap({"Basic": cfg.behaviors["Basic"]}))
    with pytest.raises(ConfigError, match=r"behavior '3DBall\?team=0'.*behaviors\.3DBall"):
        train(cfg, tmp_path / "run", resume=False, console=False)
    assert live_descendants() == []
