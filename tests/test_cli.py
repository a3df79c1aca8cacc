"""The ``unity-rl`` command: flags, clear one-line errors, run-folder rules, and end-to-end runs
on the 3DBall stand-in (tiny budgets)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.interrupts import sigint_as_in_a_terminal
from unity_rl.cli import main
from unity_rl.cli.parser import build_parser
from unity_rl.cli.run_folder import prepare_run_dir
from unity_rl.cli.train_command import _train_overrides, resolve_train_config
from unity_rl.errors import CliError
from tests.runtime.helpers import live_descendants
from unity_rl.checkpoint import CheckpointManager
from unity_rl.training.wiring import training_sections

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG = REPO_ROOT / "configs" / "ppo" / "3dball.yaml"
STANDIN = REPO_ROOT / "unity_builds" / "3DBall"

TRAIN_FLAGS = ("--env", "--num-envs", "--base-port", "--run-id", "--resume", "--force", "--mode",
               "--num-actors", "--seed", "--max-steps", "--time-scale", "--no-graphics",
               "--graphics", "--env-args", "--timeout-wait", "--results-dir", "--torch-device",
               "--torch-threads", "--max-lifetime-restarts", "--restarts-rate-limit-n",
               "--restarts-rate-limit-period-s", "--backend", "--ray-address", "--behavior",
               "--max-update-backlog")


def _cli(*args: str, timeout: float = 120, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, GRPC_VERBOSITY="ERROR")
    return subprocess.run([sys.executable, "-m", "unity_rl", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def fake_build(tmp_path) -> Path:
    """An executable that is not a Unity build (never launched by these tests)."""
    path = tmp_path / "FakeBuild.x86_64"
    path.write_text("#!/bin/sh\nexit 3\n")
    path.chmod(0o755)
    return path


def _clean_error(code: int, err: str) -> str:
    assert code == 1, err
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.startswith("unity-rl: error: ")]
    assert lines, err
    return lines[-1]


# -- flags --------------------------------------------------------------------------------------

def test_help_lists_every_flag():
    result = _cli("train", "--help")
    assert result.returncode == 0, result.stderr
    for flag in TRAIN_FLAGS:
        assert flag in result.stdout, flag
    for command in ("evaluate", "export", "random"):
        assert _cli(command, "--help").returncode == 0


def test_env_args_take_the_rest_of_the_line():
    args = build_parser().parse_args(
        ["train", "c.yaml", "--env", "b", "--env-args", "-logFile", "-", "--foo", "3"])
    assert args.config == "c.yaml" and args.env_args == ["-logFile", "-", "--foo", "3"]
    values = _train_overrides(args, "b")
    assert values["env_args"] == ("-logFile", "-", "--foo", "3")
    assert values.get("resume") is None and values.get("force") is None  # the YAML decides


def test_resume_and_force_are_exclusive(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--resume", "--force"])
    assert exc.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_overrides_reach_the_config(tmp_path, fake_build):
    args = build_parser().parse_args(
        ["train", str(CONFIG), "--env", str(fake_build), "--num-envs", "2", "--base-port", "6000",
         "--run-id", "r1", "--results-dir", str(tmp_path), "--mode", "async",
         "--num-actors", "2", "--max-update-backlog", "0", "--lag-correction", "decoupled",
         "--seed", "7", "--max-steps", "1234",
         "--time-scale", "5", "--graphics", "--timeout-wait", "9", "--torch-device", "cpu", "--torch-threads", "3",
         "--max-lifetime-restarts", "3", "--restarts-rate-limit-n", "2",
         "--restarts-rate-limit-period-s", "30", "--env-args", "-x", "1"])
    cfg, run_dir, resume = resolve_train_config(args)
    assert run_dir == tmp_path / "r1" and resume is False
    env = cfg.env_settings
    assert (env.num_envs, env.base_port, env.seed, env.timeout_wait) == (2, 6000, 7, 9)
    assert (env.max_lifetime_restarts, env.restarts_rate_limit_n,
            env.restarts_rate_limit_period_s) == (3, 2, 30)
    assert tuple(env.env_args) == ("-x", "1") and Path(env.env_path) == fake_build.resolve()
    assert cfg.engine_settings.time_scale == 5 and cfg.engine_settings.no_graphics is False
    assert cfg.unity_rl.mode == "async" and cfg.unity_rl.num_actors == 2
    assert cfg.unity_rl.max_update_backlog == 0 and cfg.unity_rl.lag_correction == "decoupled"
    assert cfg.torch_settings.device == "cpu" and cfg.unity_rl.torch_threads == 3
    behavior = cfg.behaviors["3DBall"]
    assert behavior.max_steps == 1234 and behavior.hyperparameters.max_steps == 1234


def test_behavior_flag_keeps_that_behavior_only(tmp_path, fake_build):
    import yaml

    data = yaml.safe_load(CONFIG.read_text())
    data["behaviors"]["Other"] = dict(data["behaviors"]["3DBall"], max_steps=7)
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump(data))
    args = build_parser().parse_args(["train", str(two), "--env", str(fake_build),
                                          "--behavior", "Other?team=0"])
    cfg, _, _ = resolve_train_config(args)
    assert cfg.unity_rl.behavior == "Other?team=0"
    sections, default = training_sections(cfg)
    assert list(sections) == ["Other"] and sections["Other"].max_steps == 7 and default is None


def test_behavior_flag_without_settings_is_a_clear_error(tmp_path, fake_build, capsys):
    code = main(["train", str(CONFIG), "--env", str(fake_build), "--behavior", "Nope",
                     "--results-dir", str(tmp_path / "results")])
    message = _clean_error(code, capsys.readouterr().err)
    assert "--behavior Nope" in message and "3DBall" in message


@pytest.mark.slow
def test_a_build_behavior_without_settings_is_a_clear_error(tmp_path, free_base_port, capsys):
    basic_only = tmp_path / "basic.yaml"
    basic_only.write_text("behaviors:\n  Basic:\n    trainer_type: ppo\n")
    code = main(["train", str(basic_only), "--env", str(REPO_ROOT / "unity_builds" / "TwoBehaviors"),
                     "--base-port", str(free_base_port(1)), "--no-graphics",
                     "--results-dir", str(tmp_path / "results")])
    message = _clean_error(code, capsys.readouterr().err)
    assert "behavior '3DBall?team=0'" in message and "behaviors.3DBall" in message
    assert live_descendants() == []


# -- clear errors -------------------------------------------------------------------------------

def test_unknown_config_key_exits_1_naming_the_key(tmp_path, fake_build, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.read_text().replace("    time_horizon: 1000",
                                              "    time_horizon: 1000\n    bogus_setting: 3"))
    code = main(["train", str(bad), "--env", str(fake_build),
                     "--results-dir", str(tmp_path / "results")])
    line = _clean_error(code, capsys.readouterr().err)
    assert "bogus_setting" in line and "bad.yaml" in line
    assert not (tmp_path / "results").exists()


def test_wrong_env_path_exits_1(tmp_path, capsys):
    code = main(["train", str(CONFIG), "--env", str(tmp_path / "NoSuchBuild"),
                     "--results-dir", str(tmp_path / "results")])
    line = _clean_error(code, capsys.readouterr().err)
    assert "No Unity build found" in line and "NoSuchBuild" in line
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_wrong_env_path_through_the_console_script(tmp_path):
    result = _cli("train", "--env", str(tmp_path / "Missing.x86_64"),
                  "--results-dir", str(tmp_path / "results"))
    _clean_error(result.returncode, result.stderr)


def test_existing_run_without_flags_says_resume_or_force(tmp_path, fake_build, capsys):
    run_dir = tmp_path / "results" / "ppo"
    run_dir.mkdir(parents=True)
    (run_dir / "configuration.yaml").write_text("behaviors: {}\n")
    code = main(["train", str(CONFIG), "--env", str(fake_build),
                     "--results-dir", str(tmp_path / "results")])
    line = _clean_error(code, capsys.readouterr().err)
    assert "--resume" in line and "--force" in line and "'ppo'" in line
    assert (run_dir / "configuration.yaml").read_text() == "behaviors: {}\n"  # untouched


def test_resume_without_checkpoint_is_a_clear_error(tmp_path, fake_build, capsys):
    code = main(["train", str(CONFIG), "--env", str(fake_build), "--resume",
                     "--run-id", "nothing", "--results-dir", str(tmp_path / "results")])
    line = _clean_error(code, capsys.readouterr().err)
    assert "Cannot --resume run 'nothing'" in line and "no checkpoint" in line


def test_force_wipes_the_run_folder(tmp_path):
    run_dir = tmp_path / "ppo"
    CheckpointManager(run_dir, keep=1).save({"step": 5}, 5)
    (run_dir / "configuration.yaml").write_text("old")
    (run_dir / "progress.csv").write_text("old")
    with pytest.raises(CliError, match="--resume"):
        prepare_run_dir(run_dir, resume=False, force=False)
    prepare_run_dir(run_dir, resume=False, force=True)
    assert not run_dir.exists()
    prepare_run_dir(run_dir, resume=False, force=False)  # nothing there: fine


def test_force_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(CliError, match="does not look like a unity-rl run folder"):
        prepare_run_dir(tmp_path, resume=False, force=True)
    assert (tmp_path / "precious.txt").exists()


def test_port_in_use_is_a_clear_error(tmp_path, fake_build, free_base_port, capsys):
    port = free_base_port(1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", port))
        sock.listen()
        code = main(["train", str(CONFIG), "--env", str(fake_build), "--base-port", str(port),
                         "--results-dir", str(tmp_path / "results")])
    line = _clean_error(code, capsys.readouterr().err)
    assert f"Port {port}" in line and "--base-port" in line


def test_evaluate_and_export_need_a_run(tmp_path, capsys):
    code = main(["evaluate", "--run-id", "ghost", "--results-dir", str(tmp_path)])
    assert "No run 'ghost'" in _clean_error(code, capsys.readouterr().err)
    (tmp_path / "empty").mkdir()
    code = main(["export", "--run-id", "empty", "--results-dir", str(tmp_path)])
    assert "has no checkpoint yet" in _clean_error(code, capsys.readouterr().err)


def test_sigterm_becomes_a_keyboard_interrupt_that_exits_143():
    from unity_rl.interrupts import Terminated, exit_status, sigterm_raises

    before = signal.getsignal(signal.SIGTERM)  # not always SIG_DFL: ray.init() installs one
    with sigterm_raises():
        with pytest.raises(Terminated) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert isinstance(stop.value, KeyboardInterrupt) and exit_status(stop.value) == 143
    assert exit_status(KeyboardInterrupt()) == 130
    assert signal.getsignal(signal.SIGTERM) is before


# -- end to end on the 3DBall stand-in (tiny budgets) ----------------------------------------------



def _tiny_config(tmp_path: Path, **behavior_changes) -> Path:
    """3dball.yaml with a small buffer and frequent checkpoints (a few seconds per update)."""
    import yaml

    data = yaml.safe_load(CONFIG.read_text())
    behavior = data["behaviors"]["3DBall"]
    behavior["hyperparameters"].update(buffer_size=1024, batch_size=256)
    behavior.update(summary_freq=1024, checkpoint_interval=1024, keep_checkpoints=3)
    behavior.update(behavior_changes)
    # one build, one sync actor unless a test passes flags: fixed layout, one port
    data["env_settings"]["num_envs"] = 1
    data["unity_rl"].update(mode="sync", num_actors=1)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _assert_all_gone(procs, timeout: float = 30.0) -> None:
    import psutil

    gone, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:  # clean up before failing, so one failure does not leak into others
        proc.kill()
    assert not alive, f"processes left behind: {[(p.pid, p.name()) for p in alive]}"


def _start_train(*args: str) -> subprocess.Popen:
    env = dict(os.environ, GRPC_VERBOSITY="ERROR")
    return subprocess.Popen([sys.executable, "-m", "unity_rl", "train", *args], cwd=REPO_ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_in_a_terminal)


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"train exited early with {proc.returncode}:\n{out}\n{err}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail("timed out waiting for the training run")


def _csv_steps(run_dir: Path) -> list[int]:
    from unity_rl.metrics import read_progress

    path = run_dir / "3DBall" / "progress.csv"
    return [int(r["agent_steps"]) for r in read_progress(path)] if path.exists() else []


@pytest.mark.slow
def test_train_evaluate_export_and_run_folder_rules(tmp_path, free_base_port):
    import onnxruntime as ort
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = _tiny_config(tmp_path)
    results = tmp_path / "results"
    common = ["--results-dir", str(results), "--run-id", "e2e", "--seed", "3"]
    port = str(free_base_port(1))
    result = _cli("train", str(config), "--max-steps", "2048", "--base-port", port, *common,
                  timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = results / "e2e"
    assert "Finished after" in result.stdout
    assert (run_dir / "configuration.yaml").is_file() and (run_dir / "3DBall.onnx").is_file()
    steps = _csv_steps(run_dir)
    assert steps and steps[-1] >= 2048
    assert CheckpointManager(run_dir).latest_step() == steps[-1]
    events = EventAccumulator(str(run_dir / "3DBall"))
    events.Reload()
    assert "Environment/Cumulative Reward" in events.Tags()["scalars"]
    assert "Losses/Policy Loss" in events.Tags()["scalars"]

    again = _cli("train", str(config), "--base-port", port, *common)
    line = _clean_error(again.returncode, again.stderr)
    assert "--resume" in line and "--force" in line

    evaluated = _cli("evaluate", "--run-id", "e2e", "--results-dir", str(results),
                     "--episodes", "12", "--base-port", port, timeout=240)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "mean return" in evaluated.stdout and "over 12 episodes" in evaluated.stdout

    onnx_path = tmp_path / "exported.onnx"
    exported = _cli("export", "--run-id", "e2e", "--results-dir", str(results),
                    "--output", str(onnx_path))
    assert exported.returncode == 0, exported.stderr
    session = ort.InferenceSession(str(onnx_path))
    assert [i.name for i in session.get_inputs()] == ["obs_0"]
    assert "deterministic_continuous_actions" in [o.name for o in session.get_outputs()]

    forced = _cli("train", str(config), "--max-steps", "1024", "--force", "--base-port", port,
                  *common, timeout=240)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert _csv_steps(run_dir)[0] <= 1024 + 1024  # a fresh progress.csv, not appended
    assert CheckpointManager(run_dir).latest_step() < steps[-1]


@pytest.mark.slow
def test_train_async_two_actors(tmp_path, free_base_port):
    config = _tiny_config(tmp_path)
    result = _cli("train", str(config), "--mode", "async", "--num-actors", "2", "--num-envs", "2",
                  "--max-steps", "2048", "--base-port", str(free_base_port(2)),
                  "--results-dir", str(tmp_path / "results"), "--run-id", "async", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = tmp_path / "results" / "async"
    assert _csv_steps(run_dir)[-1] >= 2048
    assert (run_dir / "3DBall.onnx").is_file()


@pytest.mark.slow
def test_resume_after_sigkill_continues_the_step_count(tmp_path, free_base_port):
    config = _tiny_config(tmp_path, max_steps=1_000_000)
    results = tmp_path / "results"
    port = str(free_base_port(1))
    common = ["--results-dir", str(results), "--run-id", "killed", "--base-port", port]
    run_dir = results / "killed"
    manager = CheckpointManager(run_dir)
    proc = _start_train(str(config), *common)
    try:
        _wait_for(lambda: (manager.latest_step() or 0) >= 2048, proc, timeout=180)
        family = _descendants(proc.pid)
        proc.kill()  # SIGKILL: no clean-up at all in the trainer
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_all_gone(family)  # actors die with the trainer and close their builds

    saved = manager.latest_step()
    assert saved is not None and saved >= 2048
    state = manager.load()
    assert state["agent_steps"] == saved
    rows_before = [s for s in _csv_steps(run_dir) if s <= saved]

    resumed = _cli("train", "--resume", "--max-steps", str(saved + 1024), *common, timeout=240)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    steps = _csv_steps(run_dir)
    assert steps[:len(rows_before)] == rows_before           # history kept
    assert steps[len(rows_before)] > saved                   # counting continues from the checkpoint
    assert steps == sorted(steps) and steps[-1] >= saved + 1024
    assert manager.latest_step() == steps[-1]
    assert not list((run_dir / "checkpoints").glob(".*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_checkpoints_and_leaves_no_processes(tmp_path, free_base_port, sig):
    config = _tiny_config(tmp_path, max_steps=1_000_000)
    run_dir = tmp_path / "results" / "stopped"
    proc = _start_train(str(config), "--results-dir", str(tmp_path / "results"),
                        "--run-id", "stopped", "--base-port", str(free_base_port(2)),
                        "--num-envs", "2")
    try:
        _wait_for(lambda: len(_csv_steps(run_dir)) >= 1, proc, timeout=180)
        family = _descendants(proc.pid)
        assert family, "the trainer started no processes?"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), out + err
    assert "Traceback" not in err, err
    assert "Interrupted after" in out and "--resume" in out
    _assert_all_gone(family, timeout=10)
    manager = CheckpointManager(run_dir)
    assert manager.latest_step() >= _csv_steps(run_dir)[-1]  # a final checkpoint at the stop
    assert (run_dir / "3DBall.onnx").is_file()


@pytest.mark.slow
def test_random_smoke_job(free_base_port):
    result = _cli("random", "--steps", "600", "--base-port", str(free_base_port(1)), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "agent-steps/s" in result.stdout and "3DBall" in result.stdout


@pytest.mark.slow
def test_ddpg_train_evaluate_and_export(tmp_path, free_base_port):
    import onnxruntime as ort

    results = tmp_path / "results"
    common = ["--results-dir", str(results), "--run-id", "ddpg"]
    port = str(free_base_port(2))
    trained = _cli("train", str(REPO_ROOT / "configs/ddpg/3dball.yaml"), "--max-steps", "1500",
                   "--base-port", port, *common, timeout=240)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    evaluated = _cli("evaluate", "--run-id", "ddpg", "--results-dir", str(results),
                     "--episodes", "1", "--base-port", port, timeout=240)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "mean return" in evaluated.stdout
    onnx_path = tmp_path / "ddpg.onnx"
    exported = _cli("export", *common, "--output", str(onnx_path))
    assert exported.returncode == 0, exported.stderr
    session = ort.InferenceSession(str(onnx_path))
    action = session.run(["deterministic_continuous_actions"],
                         {"obs_0": np.zeros((3, 8), np.float32)})[0]
    assert action.shape == (3, 2) and np.all(np.abs(action) <= 1.0)
