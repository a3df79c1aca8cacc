"""Self-play end to end on the SoccerTwos stand-in with Unity's ``poca/SoccerTwos.yaml`` (scaled
down), sync and async: one learner for both teams, ``Self-play/ELO`` written, the learning team
changes (a full reset), snapshots saved; ``--resume`` restores snapshots, ELO and the learning
team; every process ends."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.runtime.helpers import REPO_ROOT, live_descendants
from unity_rl.checkpoint import CheckpointManager
from unity_rl.config import FrozenMap, apply_overrides, load_config
from unity_rl.training.trainer import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CONFIG = REPO_ROOT / "tests" / "fixtures" / "mlagents_configs" / "poca" / "SoccerTwos.yaml"
BUILD = REPO_ROOT / "unity_builds" / "SoccerTwos.x86_64"


def small(base_port: int, mode: str, max_steps: int = 1600):
    cfg = apply_overrides(load_config(CONFIG), env=str(BUILD), base_port=base_port, num_envs=1,
                          num_actors=1, mode=mode, seed=2, no_graphics=True, timeout_wait=30,
                          env_args=("--standin-agents", "8"))
    [(name, b)] = cfg.behaviors.items()
    hp = dataclasses.replace(b.hyperparameters, buffer_size=256, minibatch_size=128, num_epochs=1)
    net = dataclasses.replace(b.network_settings, hidden_units=16)
    sp = dataclasses.replace(b.self_play, save_steps=200, team_change=700, swap_steps=150)
    b = dataclasses.replace(b, hyperparameters=hp, network_settings=net, max_steps=max_steps,
                            summary_freq=400, time_horizon=32, self_play=sp,
                            checkpoint_interval=max_steps)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: b}))


def scalars(run_dir, behavior: str) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / behavior))
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_soccer_twos_self_play_trains_one_learner(tmp_path, free_base_port, mode):
    run_dir = tmp_path / "run"
    result = train(small(free_base_port(1), mode), run_dir, resume=False, console=False)
    assert not result.interrupted and list(result.behaviors) == ["SoccerTwos"]
    tags = scalars(run_dir, "SoccerTwos")
    assert "Self-play/ELO" in tags and "Losses/Baseline Loss" in tags
    state = CheckpointManager(run_dir).load()
    ghost = state["behaviors"]["SoccerTwos"]["learner"]["ghost"]
    assert ghost["last_team_change"] > 0  # the learning team changed at least once
    assert len(ghost["policy_snapshots"]) >= 3 and ghost["ghost_step"] > 0
    assert state["self_play"]["controller"]["learning_team"] in (0, 1)
    assert (run_dir / "SoccerTwos.onnx").exists()
    assert live_descendants() == []


def test_resume_restores_snapshots_elo_and_learning_team(tmp_path, free_base_port, monkeypatch):
    from unity_rl.training import selfplay

    run_dir = tmp_path / "run"
    train(small(free_base_port(1), "sync", max_steps=900), run_dir, resume=False, console=False)
    first = CheckpointManager(run_dir).load()
    g1 = first["behaviors"]["SoccerTwos"]["learner"]["ghost"]
    restored = {}
    load_brain, load_run = selfplay.SelfPlayHost.load_state_dict, selfplay.SelfPlay.load_state_dict

    def spy_brain(self, state):
        load_brain(self, state)
        restored["ghost"] = self.ghost.state_dict()

    def spy_run(self, state):
        load_run(self, state)
        restored["learning_team"] = self.controller.learning_team

    monkeypatch.setattr(selfplay.SelfPlayHost, "load_state_dict", spy_brain)
    monkeypatch.setattr(selfplay.SelfPlay, "load_state_dict", spy_run)
    train(small(free_base_port(1), "sync", max_steps=1400), run_dir, resume=True, console=False)
    assert restored["learning_team"] == first["self_play"]["controller"]["learning_team"]
    for key in ("policy_elos", "snapshot_counter", "current_opponent", "ghost_step",
                "learning_team", "last_team_change"):
        assert restored["ghost"][key] == g1[key], key
    second = CheckpointManager(run_dir).load()
    g2 = second["behaviors"]["SoccerTwos"]["learner"]["ghost"]
    # snapshot 0 is the initial policy of the first session (a fresh ghost would hold the
    # resumed weights there), and the schedules continued from where they were
    for key, value in g1["policy_snapshots"][0].items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, g2["policy_snapshots"][0][key])
    assert g2["ghost_step"] > g1["ghost_step"] and g2["last_save"] >= g1["last_save"]
    assert g2["last_team_change"] >= g1["last_team_change"] > 0
    assert live_descendants() == []
