"""``unity-rl record-demo``: a policy played on a build, its first agent recorded as a Unity
``.demo`` (``evaluate.record_policy_demo`` + ``demos.EpisodeRecorder``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from unity_rl.cli import main
from unity_rl.demos import load_demo
from unity_rl.envs.vec_env import UnityVecEnv
from unity_rl.evaluate import record_policy_demo

HALLWAY = str(Path(__file__).resolve().parent.parent / "unity_builds" / "Hallway")


class Forward(torch.nn.Module):
    """Always action 1 (Hallway: forward), as an export module (obs[, mask] -> action)."""

    memory_size = 0

    def forward(self, obs, mask=None):
        return torch.ones(len(obs), 1, dtype=torch.int64)


def test_the_first_agent_is_recorded_as_unity_s_recorder_would(tmp_path, free_base_port):
    env = UnityVecEnv(HALLWAY, base_port=free_base_port(1), timeout_wait=30,
                      env_args=("--standin-max-step", "60"))
    try:
        recorder = record_policy_demo(env, Forward(), 2)
        path = tmp_path / "Forward.demo"
        recorder.write(str(path), env.spec_, behavior_name="Hallway")
    finally:
        env.close()
    assert len(recorder.episodes) == 2
    aligned = load_demo(str(path), env.spec_, pairing="aligned")
    assert aligned.behavior_name == "Hallway" and len(aligned.episodes) == 2
    for episode, recorded in zip(aligned.episodes, recorder.episodes):
        assert (episode.discrete_actions == 1).all()  # what the build received
        assert recorded.interrupted  # forward only never reaches a goal: MaxStep ends it
        np.testing.assert_allclose(episode.observations[0],
                                   recorded.observations[0][:len(episode)])
    shifted = load_demo(str(path)).episodes
    assert all(e.dones[-1] and e.interrupted[-1] for e in shifted)
    total = sum(float(e.rewards.sum()) for e in shifted)
    assert total == pytest.approx(sum(float(e.rewards.sum()) for e in recorder.episodes), abs=1e-5)


def test_record_demo_refuses_an_output_that_is_not_a_demo_file(tmp_path, capsys):
    code = main(["record-demo", "--run-id", "x", "--results-dir", str(tmp_path),
                     "--output", str(tmp_path / "out.txt")])
    assert code == 1
    assert ".demo" in capsys.readouterr().err
