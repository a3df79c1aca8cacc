"""Self-play end to end on the SoccerTwos stand-in with Unity's ``poca/SoccerTwos.yaml`` (scaled
down), sync and async: one learner for both teams, ``Self-play/ELO`` written, the learning team
changes (a full reset), snapshots saved; ``--resume`` restores snapshots, ELO and the learning
team; every process ends."""
from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.helpers import REPO_ROOT, live_descendants, scalars, small_group_config
from unity_rl.checkpoint import CheckpointManager
from unity_rl.training.trainer import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CONFIG = REPO_ROOT / "tests" / "fixtures" / "mlagents_configs" / "poca" / "SoccerTwos.yaml"
BUILD = REPO_ROOT / "unity_builds" / "SoccerTwos.x86_64"


def small(base_port: int, mode: str, max_steps: int = 1600):
    return small_group_config(CONFIG, BUILD, base_port, mode, agents=8, max_steps=max_steps,
                              time_horizon=32, checkpoint_interval=max_steps,
                              self_play=dict(save_steps=200, team_change=700, swap_steps=150))


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
