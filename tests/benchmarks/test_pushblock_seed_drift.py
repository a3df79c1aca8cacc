"""The probe of benchmarks/pushblock_seed_drift.py reads the PushBlock stand-in's rows as meant
(no build, no training: the scene model's own observations)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from unity_rl.standin.scenes.blocks import PushBlockModel
from unity_rl.standin.side_channels import EnvironmentParameters

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "pushblock_seed_drift_mlagents.py"
spec = importlib.util.spec_from_file_location("pushblock_seed_drift_mlagents", SCRIPT)
drift = importlib.util.module_from_spec(spec)
sys.modules.setdefault(spec.name, drift)
spec.loader.exec_module(drift)


def _rows(heading_towards_block: bool) -> np.ndarray:
    """Flat rows (the sensors side by side, as both trainers store them) of 4 agents placed 3
    south of their block, facing it (heading 0 = +z) or facing away."""
    model = PushBlockModel(4, np.random.default_rng(0), EnvironmentParameters())
    idx = np.arange(4)
    model.reset(idx)
    model.block[:] = [0.0, 0.0]
    model.pos[:] = [0.0, -3.0]
    model.heading[:] = 0.0 if heading_towards_block else np.pi
    return np.concatenate(model.observe(idx), axis=1)


def test_block_straight_ahead_is_counted_only_when_facing_it():
    facing = drift.probe(_rows(True), np.zeros(4), np.arange(4.0), np.zeros(4))
    away = drift.probe(_rows(False), np.zeros(4), np.arange(4.0), np.zeros(4))
    assert facing["block_ahead_per_4096"] == 4096 and facing["block_seen_fraction"] == 1.0
    assert away["block_ahead_per_4096"] == 0 and away["block_seen_fraction"] == 0.0


def test_successes_entropy_and_value_correlation():
    rows = np.concatenate([_rows(True), _rows(False)])
    values = np.array([1.0] * 4 + [0.0] * 4)
    out = drift.probe(rows, np.array([-0.001] * 7 + [4.999]), values, np.full(8, -1.5))
    assert out["successes"] == 1 and out["rows"] == 8
    assert out["behaviour_entropy"] == 1.5
    assert out["corr_value_block_seen"] > 0.99  # higher values exactly where the block is seen
