"""A curriculum on the WallJump stand-in (slow tier): lessons advance by progress, every build
receives each lesson's values (the stand-in logs what the environment-parameters side channel
brings, and each reset), ``require_reset`` resets the build, lesson numbers reach TensorBoard and
the checkpoint, and ``--resume`` starts the builds in the saved lessons.

Small: two behaviors of 1,200 agent-steps each, tiny thresholds, one build."""
from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from tests.runtime.helpers import REPO_ROOT
from unity_rl.checkpoint import CheckpointManager
from unity_rl.config import FrozenMap, apply_overrides, load_config
from unity_rl.training.trainer import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

WALLJUMP = REPO_ROOT / "unity_builds" / "WallJump.x86_64"

BEHAVIOR = """\
    trainer_type: ppo
    hyperparameters: {batch_size: 128, buffer_size: 384, num_epoch: 1}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 1200
    time_horizon: 64
    summary_freq: 384
"""
CONFIG = f"""\
behaviors:
  BigWallJump:
{BEHAVIOR}
  SmallWallJump:
{BEHAVIOR}
environment_parameters:
  big_wall_height:
    curriculum:
      - name: Lesson0
        completion_criteria: {{measure: progress, behavior: BigWallJump, threshold: 0.1,
                               min_lesson_length: 0}}
        value: {{sampler_type: uniform, sampler_parameters: {{min_value: 0.0, max_value: 4.0}}}}
      - name: Lesson1
        completion_criteria: {{measure: progress, behavior: BigWallJump, threshold: 0.4,
                               require_reset: true}}
        value: {{sampler_type: uniform, sampler_parameters: {{min_value: 4.0, max_value: 7.0}}}}
      - name: Lesson2
        value: 8.0
  small_wall_height:
    curriculum:
      - name: Lesson0
        completion_criteria: {{measure: progress, behavior: SmallWallJump, threshold: 0.2}}
        value: 1.5
      - name: Lesson1
        value: 4.0
"""


def config(tmp_path: Path, port: int, max_steps: int | None = None):
    path = tmp_path / "walljump.yaml"
    path.write_text(CONFIG)
    cfg = apply_overrides(load_config(path), env=str(WALLJUMP), num_envs=1, base_port=port,
                          seed=3, no_graphics=True, timeout_wait=60, num_actors=1)
    if max_steps is not None:
        cfg = dataclasses.replace(cfg, behaviors=FrozenMap({
            name: dataclasses.replace(b, max_steps=max_steps) for name, b in cfg.behaviors.items()}))
    return cfg


def parameter_lines(log: str) -> list[str]:
    return re.findall(r"environment parameter: (.*)", log)


def lesson_scalars(run_dir: Path, behavior: str, parameter: str) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / behavior))
    events.Reload()
    return [e.value for e in events.Scalars(f"Environment/Lesson Number/{parameter}")]


def test_walljump_lessons_advance_reach_the_build_and_resume(tmp_path, free_base_port):
    run_dir = tmp_path / "run"
    port = free_base_port(1)
    result = train(config(tmp_path, port), run_dir, resume=False, console=False)
    assert not result.interrupted

    log = (run_dir / "run_logs" / "Player-0.log").read_text(errors="replace")
    lines = parameter_lines(log)
    # seeds as mlagents-learn assigns them: run seed 3 + the lesson's offset over all
    # parameters (big: 3, 4, [5]; small: [6], [7])
    expected = ["big_wall_height ~ uniform(0, 4), seed 3", "small_wall_height = 1.5",
                "big_wall_height ~ uniform(4, 7), seed 4", "big_wall_height = 8",
                "small_wall_height = 4"]
    for line in expected:
        assert line in lines, (line, lines)
    order = [lines.index(line) for line in expected]
    assert order[:2] == sorted(order[:2]) and order[2] < order[3] and order[1] < order[4]
    # every parameter's current value is sent again at each change (as mlagents-learn does):
    # small_wall_height changes once, big_wall_height twice, so one small value comes twice
    assert max(lines.count("small_wall_height = 1.5"), lines.count("small_wall_height = 4")) >= 2
    # Lesson1 has require_reset: the build is reset with Lesson2's values (once: the others
    # have none); the stand-in logs each reset
    resets = [m.start() for m in re.finditer(r"RESET \(reset #", log)]
    assert len(resets) == 2 and resets[1] > log.index("environment parameter: big_wall_height = 8")

    state = CheckpointManager(run_dir).load()
    assert state["curriculum"]["lessons"] == {"big_wall_height": 2, "small_wall_height": 1}
    big = lesson_scalars(run_dir, "BigWallJump", "big_wall_height")
    assert big[0] == 0.0 and big[-1] == 2.0 and big == sorted(big)
    assert lesson_scalars(run_dir, "SmallWallJump", "small_wall_height")[-1] == 1.0

    # --resume: the builds start in the saved lessons
    resumed = train(config(tmp_path, port, max_steps=1600), run_dir, resume=True, console=False)
    assert not resumed.interrupted
    new_log = (run_dir / "run_logs" / "Player-0.log").read_text(errors="replace")
    after = parameter_lines(new_log[len(log):] if new_log.startswith(log) else new_log)
    assert after[:2] == ["big_wall_height = 8", "small_wall_height = 4"], after
    assert CheckpointManager(run_dir).load()["curriculum"]["lessons"] == \
        {"big_wall_height": 2, "small_wall_height": 1}
