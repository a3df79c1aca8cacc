"""unity_rl.testing: mock builds of a user's spec, through the real UnityEnvironment path."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from gymnasium import spaces

from unity_rl import AgentStream, UnityVecEnv
from unity_rl.config import apply_overrides, parse_config
from unity_rl.envs.agent_stream import ALL_BEHAVIORS
from unity_rl.standin.academy import Academy
from unity_rl.standin.options import OptionError, parse_args
from unity_rl.standin.scenes import SCENES
from unity_rl.testing import (MockBehavior, MockObservation, MockSpecError, mock_build,
                              parse_spec, sensor_names)

pytestmark = pytest.mark.timeout(120)

CAMERA = MockBehavior(
    "Camera", agents=2, decision_period=1, max_step=12,
    observations=(MockObservation((3, 20, 20), "png"), MockObservation((4,))), continuous=2)
HYBRID = MockBehavior(
    "Hybrid", agents=3, decision_period=2, max_step=16,
    observations=(MockObservation((2, 5, 6)), MockObservation((10,))),
    continuous=1, branches=(3, 2), masks=True)


@pytest.fixture(scope="module")
def two_behaviors(tmp_path_factory):
    return mock_build(tmp_path_factory.mktemp("mock"), [CAMERA, HYBRID])


def _run_episodes(env, steps: int):
    """Random actions (seeded: the run is deterministic); returns the last obs and info and
    how many episodes ended terminated and truncated."""
    obs, info = env.reset()
    env.action_space.seed(0)
    terminated = truncated = 0
    for _ in range(steps):
        obs, reward, term, trunc, info = env.step(env.action_space.sample())
        assert np.all(np.isfinite(reward)) and np.all(reward <= 1.0) and np.all(reward >= -0.1)
        assert env.single_observation_space.contains({k: v[0] for k, v in obs.items()})
        terminated += int(term.sum())
        truncated += int(trunc.sum())
    return obs, info, terminated, truncated


def test_launcher_is_an_executable_with_its_spec_next_to_it(two_behaviors):
    assert two_behaviors.name == "Mock.x86_64" and os.access(two_behaviors, os.X_OK)
    spec = json.loads((two_behaviors.parent / "Mock.json").read_text())
    assert [b["name"] for b in spec["behaviors"]] == ["Camera", "Hybrid"]
    assert parse_spec(spec) == [CAMERA, HYBRID]
    text = two_behaviors.read_text()
    assert "exec \"$py\" -m unity_rl.standin Mock --standin-spec" in text
    assert "UNITY_RL_PYTHON" in text


@pytest.mark.slow
def test_camera_behavior_spaces_steps_and_both_episode_ends(two_behaviors, free_base_port):
    with UnityVecEnv(two_behaviors, base_port=free_base_port(1), behavior_name="Camera",
                     other_behaviors="zeros") as env:
        assert env.num_envs == 2
        assert env.single_observation_space == spaces.Dict({
            "CameraSensor": spaces.Box(0, 255, (3, 20, 20), np.uint8),
            "VectorSensor_size4": spaces.Box(-np.inf, np.inf, (4,), np.float32)})
        assert env.single_action_space == spaces.Box(-1, 1, (2,), np.float32)
        obs, _, terminated, truncated = _run_episodes(env, 60)
        assert obs["CameraSensor"].dtype == np.uint8
        # The image shows the code: left half (t0 + 1) / 2, right half (t1 + 1) / 2, and the
        # vector's first two entries are the same code.
        image = obs["CameraSensor"][0].astype(np.float32) / 255
        np.testing.assert_allclose(image[:, :, :10], obs["VectorSensor_size4"][0, 0], atol=0.003)
        np.testing.assert_allclose(image[:, :, 10:], obs["VectorSensor_size4"][0, 1], atol=0.003)
        assert truncated > 0 and terminated > 0   # MaxStep 12 and hits, 2 agents x 60 steps


@pytest.mark.slow
def test_hybrid_behavior_with_masks_and_decision_period(two_behaviors, free_base_port):
    with UnityVecEnv(two_behaviors, base_port=free_base_port(1), behavior_name="Hybrid",
                     other_behaviors="zeros") as env:
        assert env.num_envs == 3
        assert env.single_observation_space == spaces.Dict({
            "GridSensor": spaces.Box(-np.inf, np.inf, (2, 5, 6), np.float32),
            "VectorSensor_size10": spaces.Box(-np.inf, np.inf, (10,), np.float32)})
        assert env.single_action_space == spaces.Dict({
            "continuous": spaces.Box(-1, 1, (1,), np.float32),
            "discrete": spaces.MultiDiscrete([3, 2])})
        obs, info, terminated, truncated = _run_episodes(env, 80)
        grid, vector = obs["GridSensor"], obs["VectorSensor_size10"]
        assert grid.dtype == np.float32
        # Code length 1 + 3 + 2 = 6 = grid width: column j shows component j exactly.
        np.testing.assert_array_equal(grid[:, 0, 0, :], vector[:, :6])
        target = vector[:, 1:4].argmax(axis=1)
        # Masks (True = allowed here): exactly (target + 1) % 3 is unavailable in branch 0.
        mask = info["action_mask"]
        assert mask.shape == (3, 5) and mask[:, 3:].all()
        np.testing.assert_array_equal(np.flatnonzero(~mask[0, :3]), [(target[0] + 1) % 3])
        assert truncated > 0 and terminated > 0


@pytest.mark.slow
def test_agent_stream_sees_every_behavior_with_its_timing(two_behaviors, free_base_port):
    with AgentStream(two_behaviors, base_port=free_base_port(1),
                     behaviors=ALL_BEHAVIORS) as stream:
        assert stream.behavior_names == ["Camera?team=0", "Hybrid?team=0"]
        specs = stream.specs
        assert specs["Hybrid?team=0"].action_spec.continuous_size == 1
        assert specs["Hybrid?team=0"].action_spec.discrete_branches == (3, 2)
        results = stream.reset_all()
        hybrid_decisions = []
        for _ in range(8):
            actions = {}
            for name, r in results.items():
                n = len(r.decisions.keys)
                if name.startswith("Hybrid"):
                    hybrid_decisions.append(n)
                if n:
                    tuple_ = specs[name].action_spec.random_action(n)
                    actions[name] = ({"continuous": tuple_.continuous,
                                      "discrete": tuple_.discrete}
                                     if name.startswith("Hybrid") else tuple_.continuous)
            results = stream.step_all(actions)
        assert hybrid_decisions == [3, 0, 3, 0, 3, 0, 3, 0]   # decision period 2


@pytest.mark.slow
def test_same_seed_same_observations(tmp_path, free_base_port):
    path = mock_build(tmp_path, [MockBehavior("Vec", agents=2, observations=(
        MockObservation((6,)),), branches=(4,))])
    firsts = []
    for _ in range(2):
        with UnityVecEnv(path, base_port=free_base_port(1), seed=7) as env:
            obs, _ = env.reset(seed=7)
            firsts.append(obs)
    np.testing.assert_array_equal(firsts[0], firsts[1])


@pytest.mark.parametrize("spec, message", [
    ({"behaviors": [{"name": "A"}]}, r"behaviors\[0\]: no actions"),
    ([{"name": "A", "continuous": 1, "observations": [{"shape": [20, 20],
                                                        "compression": "png"}]}],
     r"behaviors\[0\]\.observations\[0\]\.shape: expected \[n\]"),
    ([{"name": "A", "continuous": 1, "observations": [{"shape": [8], "compression": "jpg"}]}],
     r"behaviors\[0\]\.observations\[0\]\.compression"),
    ([{"name": "A", "branches": [3, 0]}], r"behaviors\[0\]\.branches\[1\]: must be >= 1"),
    ([{"name": "A", "continuous": 1, "branchez": [2]}], r"behaviors\[0\]\.branchez: unknown"),
    ([{"name": "A", "continuous": 1, "masks": True}], r"behaviors\[0\]\.masks: .*branches"),
    ([{"name": "A", "continuous": 1, "agents": 0}], r"behaviors\[0\]\.agents: must be >= 1"),
    ([{"name": "A", "branches": [2]}, {"name": "A?team=0", "continuous": 1}],
     r"behaviors\[1\]\.name: 'A\?team=0' is already behaviors\[0\]"),
    ([], r"behaviors: at least one"),
])
def test_invalid_specs_name_the_field(spec, message):
    with pytest.raises(MockSpecError, match=message):
        parse_spec(spec)


def test_default_sensor_names_are_unique_and_unity_like():
    obs = [MockObservation((1, 6, 9), "png"), MockObservation((5, 4, 6), "png", name="Cam5"),
           MockObservation((4,)), MockObservation((4,)), MockObservation((2, 3, 3))]
    assert sensor_names(obs) == ["CameraSensor", "Cam5", "VectorSensor_size4_2",
                                 "VectorSensor_size4_3", "GridSensor"]
    with pytest.raises(MockSpecError, match=r"observations\[1\]\.name: repeats"):
        MockBehavior("A", continuous=1, observations=(MockObservation((2,), name="x"),
                                                      MockObservation((3,), name="x")))


def test_invalid_spec_in_python_and_in_the_player(tmp_path, free_base_port):
    with pytest.raises(MockSpecError, match=r"behavior\.decision_period: must be >= 1"):
        MockBehavior("A", continuous=1, decision_period=0)
    with pytest.raises(MockSpecError, match=r"behavior\.observations\[0\]\.shape"):
        mock_build(tmp_path, [MockBehavior("A", continuous=1,
                                           observations=[{"shape": [3, 4, 4, 4]}])])
    # A spec edited by hand: the player logs the error and exits with code 2.
    path = mock_build(tmp_path, [MockBehavior("A", continuous=1)])
    (tmp_path / "Mock.json").write_text('{"behaviors": [{"name": "A", "continuous": -1}]}')
    log = tmp_path / "player.log"
    proc = subprocess.run([str(path), "-logFile", str(log), "--mlagents-port",
                           str(free_base_port(1))],
                          timeout=30)
    assert proc.returncode == 2
    assert "behaviors[0].continuous: must be >= 0" in log.read_text()
    with pytest.raises(OptionError, match="needs --standin-spec"):
        SCENES["Mock"](parse_args([]))


def test_in_process_academy_from_the_spec_option():
    opts = parse_args(["--standin-spec", json.dumps([HYBRID.to_json()]),
                       "--standin-agents", "4"])
    academy = Academy(SCENES["Mock"](opts), opts, seed=3)
    [group] = academy.groups
    assert group.name == "Hybrid?team=0" and group.n == 4 and group.uniform_period == 2
    message = academy.begin_step()
    [batch] = message.batches["Hybrid?team=0"]
    assert batch.action_mask.shape == (4, 5) and batch.action_mask.sum() == 4


@pytest.mark.slow
def test_one_behavior_mock_trains(tmp_path, free_base_port):
    from unity_rl.training.trainer import train

    path = mock_build(tmp_path / "build", [MockBehavior(
        "Picker", agents=8, max_step=20, observations=(MockObservation((6,)),),
        branches=(4,))])
    cfg = parse_config({"behaviors": {"Picker": {
        "trainer_type": "ppo",
        "hyperparameters": {"batch_size": 64, "buffer_size": 256, "num_epoch": 1},
        "network_settings": {"hidden_units": 16, "num_layers": 1},
        "max_steps": 768, "time_horizon": 32, "summary_freq": 256}}})
    cfg = apply_overrides(cfg, env=str(path), num_envs=1, base_port=free_base_port(1),
                          mode="sync", num_actors=1, seed=1, no_graphics=True,
                          torch_device="cpu")
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    assert not result.interrupted
    assert result.agent_steps >= 768 and result.policy_version >= 3
    assert result.episodes > 0 and np.isfinite(result.mean_return)
    assert result.checkpoint_path.exists()
