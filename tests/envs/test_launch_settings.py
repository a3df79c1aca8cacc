"""Launch settings declared once (``unity_rl/envs/settings.py``): the CLI's flags, the config's
sections and the env classes all read the one ``LaunchSettings``, and overrides stack
defaults < YAML < flags < keywords. No build is launched here."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from unity_rl.cli.parser import build_parser
from unity_rl.cli.train_command import resolve_train_config
from unity_rl.config import ConfigError, LaunchSettings, RunConfig, apply_overrides, parse_config
from unity_rl.config.dump import dump_config
from unity_rl.envs.launcher import RestartQuota
from unity_rl.envs.settings import (
    DEFAULTS,
    ENGINE_SECTION,
    ENV_SECTION,
    field_docs,
    flag_fields,
    launch_arguments,
    section_fields,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
MINIMAL = {"behaviors": {"3DBall": {"trainer_type": "ppo"}}}
COMMANDS = {"train": [], "evaluate": ["--run-id", "r"], "random": []}


class Launched(Exception):
    """Raised by the BuildSet stand-in once it has recorded what it was given."""


@pytest.fixture
def recorded(monkeypatch):
    """Replaces BuildSet (where the env classes and evaluate import it) by a recorder."""
    calls: list[dict] = []

    def fake(settings, num_builds, seed=0, restart_quota=None):
        calls.append(dict(settings=settings, num_builds=num_builds, seed=seed,
                          restart_quota=restart_quota))
        raise Launched

    import unity_rl.envs.agent_stream as agent_stream
    import unity_rl.envs.build_set as build_set
    import unity_rl.envs.vec_env as vec_env
    for module in (build_set, vec_env, agent_stream):
        monkeypatch.setattr(module, "BuildSet", fake)
    return calls


# -- one declaration ----------------------------------------------------------------------------

def test_every_field_has_a_docstring_and_every_yaml_key_a_flag():
    names = [f.name for f in dataclasses.fields(LaunchSettings)]
    assert sorted(field_docs()) == sorted(names)
    assert all(field_docs().values())
    yaml_keys = {f.name for s in (ENV_SECTION, ENGINE_SECTION) for f in section_fields(s)}
    assert {f.name for f in flag_fields()} == yaml_keys
    # ML-Agents' keys and order in the two sections
    assert [f.name for f in section_fields(ENV_SECTION)] == [
        "env_path", "env_args", "base_port", "num_envs", "num_areas", "seed", "timeout_wait",
        "max_lifetime_restarts", "restarts_rate_limit_n", "restarts_rate_limit_period_s"]
    assert [f.name for f in section_fields(ENGINE_SECTION)] == [
        "width", "height", "quality_level", "time_scale", "target_frame_rate",
        "capture_frame_rate", "no_graphics", "no_graphics_monitor"]


def test_mlagents_learn_defaults():
    d = LaunchSettings()
    assert (d.num_envs, d.base_port, d.no_graphics, d.time_scale, d.timeout_wait) == (
        1, 5005, False, 20.0, 60)
    assert (d.width, d.height, d.quality_level, d.target_frame_rate, d.capture_frame_rate) == (
        84, 84, 5, -1, 60)
    assert (d.num_areas, d.seed, d.env_args, d.env_path) == (1, -1, None, None)
    assert d.restart_limits == (10, 1, 60.0)
    quota = RestartQuota()
    assert (quota.max_lifetime_restarts, quota.rate_limit_n, quota.rate_limit_period_s) == \
        d.restart_limits


def test_the_time_scale_default_is_written_once():
    pattern = re.compile(r"time_scale\b[^=\n]*[=:][^=\n]*\b20(\.0)?\b")
    hits = [f"{path.relative_to(REPO_ROOT)}:{i}"
            for path in (REPO_ROOT / "unity_rl").rglob("*.py")
            for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert len(hits) == 1 and hits[0].startswith("unity_rl/envs/settings.py:"), hits


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_defaults_are_the_declared_defaults(command):
    args = build_parser().parse_args([command, *COMMANDS[command]])
    given = launch_arguments(args)
    assert set(given) == {f.name for f in flag_fields()}
    assert all(v is None for v in given.values())  # not given: the config decides
    cfg = apply_overrides(RunConfig(), **given)
    assert cfg.launch == LaunchSettings() == DEFAULTS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_help_states_each_declared_default(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for f in flag_fields():
        assert f.metadata["flag"] in text
        if f.default is not None and not isinstance(f.default, bool):
            shown = f"{f.default:g}" if isinstance(f.default, float) else str(f.default)
            assert re.search(rf"{re.escape(f.metadata['flag'])} \S+ .*?default {shown}\)", text)


def test_every_flag_reaches_its_field():
    argv = ["train", "--num-envs", "3", "--base-port", "6000", "--num-areas", "2", "--seed", "4",
            "--timeout-wait", "9", "--max-lifetime-restarts", "2", "--restarts-rate-limit-n",
            "-1", "--restarts-rate-limit-period-s", "30", "--width", "64", "--height", "48",
            "--quality-level", "1", "--time-scale", "7.5", "--target-frame-rate", "30",
            "--capture-frame-rate", "25", "--no-graphics", "--no-graphics-monitor",
            "--env", "b", "--env-args", "-x", "1"]
    launch = apply_overrides(RunConfig(), **launch_arguments(
        build_parser().parse_args(argv))).launch
    assert launch == LaunchSettings(
        env_path="b", env_args=("-x", "1"), base_port=6000, num_envs=3, num_areas=2, seed=4,
        timeout_wait=9, max_lifetime_restarts=2, restarts_rate_limit_n=-1,
        restarts_rate_limit_period_s=30, width=64, height=48, quality_level=1, time_scale=7.5,
        target_frame_rate=30, capture_frame_rate=25, no_graphics=True, no_graphics_monitor=True)
    graphics = build_parser().parse_args(["train", "--graphics"])
    assert launch_arguments(graphics)["no_graphics"] is False


# -- overrides stack ----------------------------------------------------------------------------

def test_yaml_over_defaults_and_flags_over_yaml(tmp_path):
    import yaml

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({
        **MINIMAL, "env_settings": {"num_envs": 3, "base_port": 6000, "seed": 5},
        "engine_settings": {"time_scale": 5, "width": 100, "no_graphics": True}}))
    build = tmp_path / "Build.x86_64"
    build.write_text("#!/bin/sh\n")
    build.chmod(0o755)
    args = build_parser().parse_args(
        ["train", str(config), "--env", str(build), "--num-envs", "2", "--graphics",
         "--height", "60"])
    cfg, _, _ = resolve_train_config(args)
    launch = cfg.launch_settings("logs")
    assert (launch.num_envs, launch.no_graphics, launch.height) == (2, False, 60)   # flags
    assert (launch.base_port, launch.seed, launch.time_scale, launch.width) == (6000, 5, 5.0, 100)
    assert (launch.quality_level, launch.timeout_wait) == (5, 60)                 # defaults
    assert cfg.env_settings is cfg.launch and cfg.engine_settings.time_scale == 5.0


def test_keywords_over_settings_in_the_env_classes(recorded):
    from unity_rl import AgentStream, UnityVecEnv
    from unity_rl.envs.multi_vec_env import MultiBehaviorVecEnv

    base = LaunchSettings(env_path="a", time_scale=5.0, base_port=6000, seed=3, num_envs=2)
    with pytest.raises(Launched):
        UnityVecEnv(settings=base, time_scale=8.0)
    with pytest.raises(Launched):
        AgentStream("b", settings=base, num_builds=4, env_parameters={"mass": 2.0})
    with pytest.raises(Launched):
        MultiBehaviorVecEnv("c", base_port=7000, timeout_wait=30, env_args=["-x"])
    first, second, third = recorded
    assert first["settings"].time_scale == 8.0 and first["settings"].base_port == 6000
    assert (first["num_builds"], first["seed"]) == (2, 3)
    assert first["settings"].log_dir is not None  # a temporary folder for the Player logs
    assert second["settings"].env_path == "b" and second["num_builds"] == 4
    assert second["settings"].env_parameters == (("mass", 2.0),)
    s = third["settings"]
    assert (s.env_path, s.base_port, s.timeout_wait, s.env_args, s.time_scale) == (
        "c", 7000, 30, ("-x",), 20.0)
    assert third["seed"] == 0  # seed -1: UnityEnvironment's 0


def test_bad_keywords_and_values_are_named():
    with pytest.raises(TypeError, match="time_scael.*time_scale"):
        LaunchSettings().with_overrides(time_scael=3)
    with pytest.raises(ValueError, match=r"num_envs must be an int >= 1, got 0"):
        LaunchSettings(num_envs=0)
    with pytest.raises(ValueError, match=r"time_scale must be a number > 0, got -1"):
        DEFAULTS.for_env_classes("x", time_scale=-1)
    with pytest.raises(ValueError, match="no Unity build given"):
        DEFAULTS.for_env_classes()
    with pytest.raises(ValueError, match="num_builds=2 and num_envs=3"):
        DEFAULTS.for_env_classes("x", 2, num_envs=3)
    assert DEFAULTS.for_env_classes("x", 2, num_envs=2).num_envs == 2
    with pytest.raises(ConfigError, match=r"engine_settings.*'time_scale'.*> 0"):
        parse_config({**MINIMAL, "engine_settings": {"time_scale": 0}})
    with pytest.raises(ConfigError, match=r"env_settings.*'num_envs'.*65535"):
        parse_config({**MINIMAL, "env_settings": {"base_port": 65535, "num_envs": 2}})
    with pytest.raises(ConfigError, match=r"--time-scale: must be a number > 0"):
        apply_overrides(RunConfig(), time_scale=0)


def test_dump_keeps_both_sections():
    cfg = parse_config({**MINIMAL, "env_settings": {"num_envs": 2, "env_args": ["-a"]},
                        "engine_settings": {"time_scale": 4}})
    data = dump_config(cfg)
    assert data["env_settings"]["num_envs"] == 2 and data["env_settings"]["env_args"] == ["-a"]
    assert data["engine_settings"]["time_scale"] == 4.0
    assert "time_scale" not in data["env_settings"] and "worker_id_start" not in data["env_settings"]
    assert parse_config(data).launch == cfg.launch


# -- evaluate and random ------------------------------------------------------------------------

def _run_config(**values) -> RunConfig:
    return apply_overrides(parse_config(MINIMAL), **values)


def test_evaluate_honours_num_envs_over_the_run_config(recorded):
    from unity_rl.evaluate import open_vec_env

    run = _run_config(num_envs=3, time_scale=5, width=100, seed=7)
    parser = build_parser()
    for argv, builds in ((["--num-envs", "2", "--time-scale", "8"], 2), ([], 3)):
        args = parser.parse_args(["evaluate", "--run-id", "r", *argv])
        with pytest.raises(Launched):
            open_vec_env(args, "build", run, behavior=None)
        call = recorded.pop()
        s = call["settings"]
        assert call["num_builds"] == builds == s.num_envs
        assert (s.width, s.seed, call["seed"]) == (100, 7, 7)          # the run's
        assert s.time_scale == (8.0 if argv else 5.0)                  # the flag wins
        assert s.env_path == "build" and s.log_dir is not None


def test_random_takes_the_same_flags_over_the_defaults(recorded):
    from unity_rl.evaluate import open_vec_env

    parser = build_parser()
    with pytest.raises(Launched):
        open_vec_env(parser.parse_args(["random"]), "build", None, behavior=None)
    with pytest.raises(Launched):
        open_vec_env(parser.parse_args(["random", "--num-envs", "2", "--seed", "4",
                                        "--width", "32"]), "build", None, behavior=None)
    default, flagged = recorded
    assert default["settings"] == dataclasses.replace(
        DEFAULTS, env_path="build", log_dir=default["settings"].log_dir)
    assert (flagged["num_builds"], flagged["seed"], flagged["settings"].width) == (2, 4, 32)
    with pytest.raises(ConfigError, match="--num-envs"):
        open_vec_env(parser.parse_args(["random", "--num-envs", "0"]), "build", None, None)


def test_module_imports_neither_torch_nor_mlagents():
    import subprocess
    import sys

    code = ("import sys, unity_rl.envs.settings; "
            "print(sorted(m for m in ('torch', 'mlagents_envs') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO_ROOT).stdout
    assert out.strip() == "[]"
