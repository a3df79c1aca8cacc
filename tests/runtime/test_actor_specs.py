"""What the trainer hands each actor: build ranges, ports, environment parameters."""
from __future__ import annotations

from pathlib import Path

from mlagents_envs.side_channel.environment_parameters_channel import (
    EnvironmentParametersChannel,
)

from unity_rl.config import load_config
from unity_rl.envs.launcher import send_environment_parameter
from unity_rl.training.wiring import actor_specs, make_algorithms

CONFIG = """
behaviors:
  3DBall:
    trainer_type: ppo
env_settings:
  env_path: unity_builds/3DBall
  num_envs: 3
environment_parameters:
  gravity: 4.5
  scale:
    sampler_type: uniform
    sampler_parameters: {min_value: 0.5, max_value: 1.5}
unity_rl:
  num_actors: 2
"""


def test_builds_split_over_actors_and_parameters_reach_every_stream(tmp_path: Path):
    path = tmp_path / "run.yaml"
    path.write_text(CONFIG)
    cfg = load_config(path)
    algorithms, default = make_algorithms(cfg)
    specs = actor_specs(cfg, algorithms, default, tmp_path, seed=1)
    assert [(s.stream.worker_id_start, s.stream.num_builds) for s in specs] == [(0, 2), (2, 1)]
    assert [s.stream.seed for s in specs] == [1, 3]          # build i of the run: seed + i
    for spec in specs:
        assert [name for name, _ in spec.plans] == ["3DBall"] and spec.default_plan is None
        launch = spec.stream.launch
        assert (launch.width, launch.height, launch.quality_level, launch.time_scale,
                launch.target_frame_rate, launch.capture_frame_rate, launch.num_areas) == \
            (84, 84, 5, 20.0, -1, 60, 1)                    # mlagents-learn's defaults
        params = dict(launch.env_parameters)
        assert set(params) == {"gravity", "scale"}
        channel = EnvironmentParametersChannel()
        for key, value in params.items():
            send_environment_parameter(channel, key, value, seed=1)
        assert len(channel.message_queue) == 2


def _specs(tmp_path: Path, extra: str):
    path = tmp_path / "run.yaml"
    path.write_text(CONFIG + extra)
    cfg = load_config(path)
    algorithms, default = make_algorithms(cfg)
    return actor_specs(cfg, algorithms, default, tmp_path, seed=1)


def test_async_actors_run_at_a_lower_cpu_priority_than_the_learner(tmp_path: Path):
    assert {s.niceness for s in _specs(tmp_path, "  mode: async\n")} == {10}
    assert {s.niceness for s in _specs(tmp_path, "  mode: sync\n")} == {0}
    assert {s.niceness for s in _specs(tmp_path, "  mode: async\n  actor_niceness: 0\n")} == {0}
    assert {s.niceness for s in _specs(tmp_path, "  actor_niceness: 5\n")} == {5}


def test_a_niceness_out_of_range_is_refused_naming_the_key(tmp_path: Path):
    import pytest

    from unity_rl.errors import ConfigError
    with pytest.raises(ConfigError, match="actor_niceness"):
        _specs(tmp_path, "  actor_niceness: 25\n")


def test_a_sync_learner_of_wide_networks_takes_the_cores_its_waiting_actors_leave(
        tmp_path: Path, monkeypatch):
    import os

    from unity_rl.training.wiring import (LARGE_LEARNER_PARAMETERS, SYNC_LEARNER_MAX_THREADS,
                                          learner_torch_threads)

    def threads(extra: str, units: int = 512, parameters: int = 0) -> int:
        path = tmp_path / "run.yaml"
        path.write_text(CONFIG.replace("    trainer_type: ppo\n", "    trainer_type: ppo\n"
                                       f"    network_settings: {{hidden_units: {units}}}\n")
                        + extra)
        return learner_torch_threads(load_config(path), parameters)

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert threads("  mode: sync\n") == 3
    assert threads("  mode: sync\n", units=256) == 3
    assert threads("  mode: sync\n", units=128) == 1      # narrow layers: threads cost more
    # narrow but large (GridWorld's hyper layers): Adam and the big layers gain from threads
    assert threads("  mode: sync\n", units=128, parameters=LARGE_LEARNER_PARAMETERS) == 3
    assert threads("  mode: sync\n", units=128, parameters=LARGE_LEARNER_PARAMETERS - 1) == 1
    assert threads("  mode: async\n", units=128, parameters=LARGE_LEARNER_PARAMETERS) == 1
    assert threads("  mode: async\n") == 1
    assert threads("  mode: async\n  torch_threads: 2\n") == 2
    assert threads("  mode: sync\n  torch_threads: 1\n") == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert threads("  mode: sync\n") == SYNC_LEARNER_MAX_THREADS == 4


def test_torch_threads_below_one_is_refused_naming_the_key(tmp_path: Path):
    import pytest

    from unity_rl.errors import ConfigError
    with pytest.raises(ConfigError, match="torch_threads"):
        _specs(tmp_path, "  torch_threads: 0\n")


def _child_niceness(niceness: int, out) -> None:
    import os

    from unity_rl.runtime.backend import lower_priority
    before = os.nice(0)
    lower_priority(niceness)
    out.put(os.nice(0) - before)


def test_lower_priority_adds_to_the_process_niceness():
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    for niceness in (0, 3):
        proc = ctx.Process(target=_child_niceness, args=(niceness, out))
        proc.start()
        got = out.get(timeout=60)
        proc.join(60)
        assert got == niceness
