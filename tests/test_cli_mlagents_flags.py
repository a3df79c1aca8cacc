"""mlagents-learn's run flags end to end: engine settings and num_areas reach the builds,
--initialize-from starts from another run's learners, --inference runs without training."""
from __future__ import annotations

import pytest

from tests.runtime.helpers import checkpoint_entry, live_descendants
from tests.test_cli import _cli, _csv_steps, _tiny_config
from unity_rl.checkpoint import CheckpointManager

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_engine_settings_and_num_areas_reach_the_build(tmp_path, free_base_port):
    """The stand-in logs what the engine-configuration channel and the handshake brought."""
    results = tmp_path / "results"
    result = _cli("train", str(_tiny_config(tmp_path)), "--max-steps", "1024",
                  "--base-port", str(free_base_port(1)), "--results-dir", str(results),
                  "--run-id", "engine", "--width", "100", "--height", "60",
                  "--quality-level", "2", "--time-scale", "10", "--target-frame-rate", "30",
                  "--capture-frame-rate", "25", "--num-areas", "2", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    log = (results / "engine" / "run_logs" / "Player-0.log").read_text()
    for line in ("screen resolution 100x60", "quality level 2", "time scale 10",
                 "target frame rate 30", "capture frame rate 25", "num_areas 2"):
        assert line in log, log[-2000:]
    saved = (results / "engine" / "configuration.yaml").read_text()
    assert "num_areas: 2" in saved and "capture_frame_rate: 25" in saved
    assert live_descendants() == []


def test_defaults_are_mlagents_learns(tmp_path, free_base_port):
    results = tmp_path / "results"
    result = _cli("train", str(_tiny_config(tmp_path)), "--max-steps", "512",
                  "--base-port", str(free_base_port(1)), "--results-dir", str(results),
                  "--run-id", "defaults", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    log = (results / "defaults" / "run_logs" / "Player-0.log").read_text()
    for line in ("screen resolution 84x84", "quality level 5", "time scale 20",
                 "target frame rate -1", "capture frame rate 60", "num_areas 1"):
        assert line in log, log[-2000:]


def test_initialize_from_and_inference(tmp_path, free_base_port):
    results = tmp_path / "results"
    config = str(_tiny_config(tmp_path))
    port = str(free_base_port(1))
    common = ["--base-port", port, "--results-dir", str(results)]
    first = _cli("train", config, "--max-steps", "2048", "--run-id", "first", *common,
                 timeout=240)
    assert first.returncode == 0, first.stdout + first.stderr
    trained = checkpoint_entry(results / "first")

    second = _cli("train", config, "--max-steps", "1024", "--run-id", "second",
                  "--initialize-from", "first", *common, timeout=240)
    assert second.returncode == 0, second.stdout + second.stderr
    entry = checkpoint_entry(results / "second")
    assert 1024 <= entry["agent_steps"] < trained["agent_steps"]       # fresh step count
    assert entry["learner"]["host_version"] > trained["learner"]["host_version"]  # its learner
    # ... with fresh schedules (ML-Agents resets the step): collected steps count from zero
    assert entry["learner"]["agent_steps_collected"] < trained["learner"]["agent_steps_collected"]

    before = CheckpointManager(results / "first").latest()
    played = _cli("train", "--resume", "--inference", "--run-id", "first", "--max-steps", "600",
                  *common, timeout=240)
    assert played.returncode == 0, played.stdout + played.stderr
    assert CheckpointManager(results / "first").latest() == before      # nothing trained
    assert checkpoint_entry(results / "first")["agent_steps"] == trained["agent_steps"]
    played_steps = _csv_steps(results / "first" / "inference")           # its own rows
    assert played_steps and 600 <= played_steps[-1] < trained["agent_steps"]

    missing = _cli("train", config, "--run-id", "third", "--initialize-from", "nope", *common)
    assert missing.returncode == 1 and "--initialize-from nope" in missing.stderr
    assert live_descendants() == []
