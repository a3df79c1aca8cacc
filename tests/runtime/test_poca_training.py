"""``trainer_type: poca`` end to end: Unity's DungeonEscape config (scaled down) on the
DungeonEscape stand-in, sync and async: groups reach the learner, an update runs (POCA's
losses, ``Environment/Group Cumulative Reward``), the actor alone is exported to ONNX, and
every process ends. With ``curiosity`` beside the extrinsic signal (ML-Agents' POCA warns, then
trains it): the signal's losses, value and baseline estimates, and its state in the checkpoint."""
from __future__ import annotations

import dataclasses

import pytest

from tests.runtime.helpers import (REPO_ROOT, checkpoint_entry, live_descendants,
                                   replace_behavior, scalars, small_group_config)
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.config import CuriosityConfig
from unity_rl.training.trainer import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CONFIG = REPO_ROOT / "tests" / "fixtures" / "mlagents_configs" / "poca" / "DungeonEscape.yaml"
BUILD = REPO_ROOT / "unity_builds" / "DungeonEscape.x86_64"


def small(base_port: int, mode: str):
    return small_group_config(CONFIG, BUILD, base_port, mode, agents=9, max_steps=1200,
                              time_horizon=16)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_dungeon_escape_trains_and_exports_the_actor(tmp_path, free_base_port, mode):
    run_dir = tmp_path / "run"
    result = train(small(free_base_port(1), mode), run_dir, resume=False, console=False)
    assert not result.interrupted
    tags = scalars(run_dir, "DungeonEscape")
    for tag in ("Losses/Policy Loss", "Losses/Value Loss", "Losses/Baseline Loss",
                "Policy/Extrinsic Baseline Estimate", "Environment/Group Cumulative Reward"):
        assert tag in tags, sorted(tags)
    assert all(v == v for v in tags["Losses/Baseline Loss"])  # no NaN from masked members
    import onnx

    model = onnx.load(str(result.policy_path))
    inputs = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim[1:]]
              for i in model.graph.input}
    # the actor only, on the agent's own observations, as ML-Agents exports POCA
    assert inputs["obs_0"] == [10] and inputs["obs_1"] == [360] and inputs["obs_2"] == [1]
    assert "action_masks" in inputs
    assert live_descendants() == []


def test_dungeon_escape_trains_a_curiosity_signal_beside_the_group_reward(tmp_path, free_base_port):
    cfg = small(free_base_port(1), "sync")
    [b] = cfg.behaviors.values()
    curiosity = CuriosityConfig("curiosity", gamma=0.99, strength=0.02, learning_rate=3e-4,
                                network_settings=NetworkConfig(hidden_units=16, num_layers=1))
    cfg = replace_behavior(cfg, reward_signals=(*b.reward_signals, curiosity))
    run_dir = tmp_path / "run"
    result = train(cfg, run_dir, resume=False, console=False)
    assert not result.interrupted
    tags = scalars(run_dir, "DungeonEscape")
    for tag in ("Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss",
                "Policy/Curiosity Value Estimate", "Policy/Curiosity Baseline Estimate",
                "Losses/Baseline Loss", "Environment/Group Cumulative Reward"):
        assert tag in tags, sorted(tags)
    assert all(v == v for v in tags["Losses/Curiosity Forward Loss"])
    state = checkpoint_entry(run_dir, "DungeonEscape")["learner"]["reward_signals"]["curiosity"]
    assert state["has_updated_once"] and state["optimizer"]["state"], "the signal trained"
    assert live_descendants() == []


def test_dungeon_escape_trains_with_memory_and_exports_a_recurrent_actor(tmp_path, free_base_port):
    from unity_rl.algorithms.network_config import MemoryConfig

    cfg = small(free_base_port(1), "sync")
    [b] = cfg.behaviors.values()
    cfg = replace_behavior(cfg, network_settings=dataclasses.replace(
        b.network_settings, memory=MemoryConfig(sequence_length=8, memory_size=16)))
    run_dir = tmp_path / "run"
    result = train(cfg, run_dir, resume=False, console=False)
    assert not result.interrupted
    tags = scalars(run_dir, "DungeonEscape")
    assert "Losses/Baseline Loss" in tags and all(v == v for v in tags["Losses/Baseline Loss"])
    import onnx

    model = onnx.load(str(result.policy_path))
    inputs = {i.name for i in model.graph.input}
    outputs = {o.name for o in model.graph.output}
    assert "recurrent_in" in inputs and "recurrent_out" in outputs  # ML-Agents' recurrent contract
    assert live_descendants() == []
