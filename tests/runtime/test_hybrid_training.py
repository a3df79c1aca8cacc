"""Hybrid actions train end to end: the FoodCollector stand-in (3 continuous + 1 branch of 2)
with Unity's own FoodCollector config."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.runtime.helpers import REPO_ROOT, live_descendants
from unity_rl.config import FrozenMap, apply_overrides, load_config
from unity_rl.metrics import read_progress
from unity_rl.training.trainer import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

UNITY_CONFIG = REPO_ROOT.parent / "shared" / "mlagents_learn" / "configs" / "FoodCollector.yaml"
BUILD = REPO_ROOT / "unity_builds" / "FoodCollector.x86_64"


def food_config(base_port: int, config: Path):
    cfg = apply_overrides(load_config(config), env=str(BUILD), base_port=base_port, num_envs=2,
                          num_actors=1, mode="sync", seed=1, no_graphics=True, timeout_wait=30)
    [(name, behavior)] = cfg.behaviors.items()
    hp = dataclasses.replace(behavior.hyperparameters, buffer_size=2048, minibatch_size=256)
    behavior = dataclasses.replace(behavior, hyperparameters=hp, max_steps=24_000,
                                   summary_freq=4000)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))


@pytest.mark.skipif(not UNITY_CONFIG.is_file(), reason="Unity's example configs live in "
                    "../shared/mlagents_learn (beside the checkout); this test races their "
                    "FoodCollector.yaml")
def test_hybrid_policy_learns_food_collector(tmp_path, free_base_port):
    result = train(food_config(free_base_port(2), UNITY_CONFIG), tmp_path / "run",
                   resume=False, console=False)
    rows = read_progress(tmp_path / "run" / "FoodCollector" / "progress.csv")
    returns = [r["mean_return"] for r in rows if r["mean_return"] == r["mean_return"]]  # no NaN
    first, last = returns[0], returns[-1]
    # random play averages about 0.2 per 1000-step episode; learning reaches food repeatedly
    assert last > first + 0.5, [r["mean_return"] for r in rows]
    assert result.policy_path is not None and result.policy_path.is_file()  # both heads exported
    import onnx

    outputs = {o.name for o in onnx.load(str(result.policy_path)).graph.output}
    assert {"continuous_actions", "discrete_actions"} <= outputs
    assert live_descendants() == []
