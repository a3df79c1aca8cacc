"""The stand-in executables through the real mlagents_envs UnityEnvironment (1.1.0)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest
from mlagents_envs.base_env import ActionTuple
from mlagents_envs.exception import UnityEnvironmentException, UnityTimeOutException
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
from mlagents_envs.side_channel.environment_parameters_channel import (
    EnvironmentParametersChannel,
)

from tests.standin.conftest import BUILDS_DIR
from tests.waiting import wait_until

BALL = "3DBall?team=0"


def random_step(env, rng, name=None):
    """Random actions for every deciding agent of every behavior (or of ``name``), then step."""
    for behavior in [name] if name else list(env.behavior_specs):
        decision, _ = env.get_steps(behavior)
        spec = env.behavior_specs[behavior].action_spec
        cont = rng.uniform(-1, 1, (len(decision), spec.continuous_size)).astype(np.float32)
        disc = np.stack([rng.integers(0, b, len(decision)) for b in spec.discrete_branches],
                        axis=1).astype(np.int32) if spec.discrete_branches else None
        env.set_actions(behavior, ActionTuple(continuous=cont, discrete=disc))
    env.step()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_3dball_handshake_spec_and_first_decisions(open_env, tmp_path):
    env = open_env("3DBall")
    env.reset()
    assert list(env.behavior_specs) == [BALL]
    spec = env.behavior_specs[BALL]
    assert [o.shape for o in spec.observation_specs] == [(8,)]
    assert spec.action_spec.continuous_size == 2 and spec.action_spec.discrete_branches == ()
    decision, terminal = env.get_steps(BALL)
    assert decision.agent_id.tolist() == list(range(12)) and len(terminal) == 0
    obs = decision.obs[0]
    assert np.allclose(obs[:, 3], 4.0)  # balls dropped from height 4
    assert np.all(np.abs(obs[:, [2, 4]]) <= 1.5) and np.all(np.abs(obs[:, :2]) < 0.1)
    # The launcher execs: the process UnityEnvironment started is the player itself.
    cmdline = " ".join(psutil.Process(env._process.pid).cmdline())
    assert "unity_rl.standin 3DBall" in cmdline
    log = (tmp_path / "Player-0.log").read_text()
    assert "stand-in Unity player" in log and "training analytics" in log


def test_environment_parameters_change_the_scene(open_env, tmp_path):
    params = EnvironmentParametersChannel()
    engine = EngineConfigurationChannel()
    env = open_env("3DBall", side_channels=[params, engine])
    params.set_float_parameter("gravity", 0.0)
    engine.set_configuration_parameters(time_scale=20.0)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(60):  # 300 academy steps: with gravity, balls fall within ~3 s
        random_step(env, rng)
        decision, terminal = env.get_steps(BALL)
        assert len(terminal) == 0
        assert np.allclose(decision.obs[0][:, 3], 4.0)  # floating where they were dropped
    log = (tmp_path / "Player-0.log").read_text()
    assert "gravity = 0" in log and "time scale 20" in log


def test_random_actions_give_terminal_only_messages(open_env):
    env = open_env("3DBall")
    env.reset()
    rng = np.random.default_rng(1)
    for _ in range(300):
        random_step(env, rng)
        decision, terminal = env.get_steps(BALL)
        if len(terminal) and not len(decision):
            assert not terminal.interrupted.any()
            assert np.allclose(terminal.reward, -1.0)
            break
    else:
        pytest.fail("no message with only terminal steps")
    env.reset()  # RESET mid-run: every agent restarts, no terminal steps
    decision, terminal = env.get_steps(BALL)
    assert decision.agent_id.tolist() == list(range(12)) and len(terminal) == 0
    assert np.allclose(decision.obs[0][:, 3], 4.0)


def test_small_max_step_interrupts_and_agent_is_terminal_and_deciding(open_env):
    env = open_env("3DBall", ["--standin-max-step", "10"])
    env.reset()
    env.step()  # academy step 5
    env.step()  # academy step 10: every episode reached MaxStep during step 9's action
    decision, terminal = env.get_steps(BALL)
    assert terminal.agent_id.tolist() == list(range(12))
    assert terminal.interrupted.all()
    assert np.allclose(terminal.reward, 0.1)
    assert decision.agent_id.tolist() == list(range(12))  # same agents, new episodes
    assert np.allclose(decision.obs[0][:, 3], 4.0, atol=0.01)  # reset in step 9, one physics step
    assert np.allclose(decision.reward, 0.0)


def test_late_agents_and_decision_periods(open_env):
    env = open_env("3DBall", ["--standin-agents", "4", "--standin-late-agents", "1@7",
                              "--standin-decision-periods", "5,3"])
    env.reset()
    ids = [env.get_steps(BALL)[0].agent_id.tolist()]
    for _ in range(6):
        env.step()
        ids.append(env.get_steps(BALL)[0].agent_id.tolist())
    # agents 0, 2 decide every 5 steps, 1 and (late, from step 7) 3 every 3 steps
    # steps:  0          3       5       6       9       10      12
    assert ids == [[0, 1, 2], [1], [0, 2], [1], [1, 3], [0, 2], [1, 3]]


def test_basic_action_masks(open_env):
    env = open_env("Basic", ["--standin-basic-start", "0"])
    env.reset()
    spec = env.behavior_specs["Basic?team=0"]
    assert spec.action_spec.discrete_branches == (3,)
    assert [o.shape for o in spec.observation_specs] == [(20,)]
    decision, _ = env.get_steps("Basic?team=0")
    assert decision.obs[0][0].argmax() == 0
    assert decision.action_mask[0].tolist() == [[False, True, False]]
    env.set_actions("Basic?team=0", ActionTuple(discrete=np.array([[2]], np.int32)))
    env.step()
    decision, _ = env.get_steps("Basic?team=0")
    assert decision.obs[0][0].argmax() == 1
    assert decision.action_mask[0].tolist() == [[False, False, False]]
    assert np.allclose(decision.reward, -0.01)


@pytest.mark.slow
def test_visual_observations_decode(open_env):
    env = open_env("VisualBall")
    env.reset()
    spec = env.behavior_specs["VisualBall?team=0"]
    assert [o.shape for o in spec.observation_specs] == [(3, 84, 84), (2,)]
    random_step(env, np.random.default_rng(0))
    decision, _ = env.get_steps("VisualBall?team=0")
    image = decision.obs[0]
    assert image.shape == (4, 3, 84, 84) and image.dtype == np.float32
    assert 0.0 <= image.min() and image.max() <= 1.0 and image.std() > 0.05
    assert not np.allclose(image[0], image[1])


def test_two_behaviors(open_env):
    env = open_env("TwoBehaviors")
    env.reset()
    assert sorted(env.behavior_specs) == [BALL, "Basic?team=0"]
    assert env.behavior_specs[BALL].action_spec.continuous_size == 2
    assert env.behavior_specs["Basic?team=0"].action_spec.discrete_branches == (3,)
    assert env.get_steps(BALL)[0].agent_id.tolist() == [0, 1, 2, 3]
    assert env.get_steps("Basic?team=0")[0].agent_id.tolist() == [4, 5]
    rng = np.random.default_rng(0)
    random_step(env, rng)  # academy step 1: only Basic (period 1) decides
    assert len(env.get_steps(BALL)[0]) == 0
    assert env.get_steps("Basic?team=0")[0].agent_id.tolist() == [4, 5]
    for _ in range(4):
        random_step(env, rng)
    assert env.get_steps(BALL)[0].agent_id.tolist() == [0, 1, 2, 3]  # academy step 5


@pytest.mark.slow
def test_crash_exit_code(open_env):
    env = open_env("3DBall", ["--standin-crash-after", "12", "--standin-crash-code", "3"],
                   timeout_wait=10)
    env.reset()
    env.step()
    env.step()
    with pytest.raises(UnityEnvironmentException, match="return code 3"):
        env.step()  # the player exits after academy step 12, before the message of step 15


@pytest.mark.slow
def test_hang_stops_answering_but_stays_alive(open_env):
    env = open_env("3DBall", ["--standin-hang-after", "7"], timeout_wait=3)
    env.reset()
    env.step()
    process = env._process
    with pytest.raises(UnityTimeOutException):
        env.step()
    assert process.poll() is None
    process.kill()
    process.wait(5)


def test_close_leaves_no_process(open_env):
    env = open_env("Basic")
    env.reset()
    pid = env._process.pid
    process = psutil.Process(pid)
    assert process.is_running()
    env.close()
    wait_until(lambda: gone(pid), timeout=15, what=f"the player (pid {pid}) to exit")


@pytest.mark.slow
def test_player_exits_when_the_python_side_is_killed(free_base_port, tmp_path):
    script = textwrap.dedent(
        f"""
        import sys, time
        from mlagents_envs.environment import UnityEnvironment
        env = UnityEnvironment(file_name={str(BUILDS_DIR / "3DBall")!r},
                               base_port={free_base_port(1)}, no_graphics=True, timeout_wait=30)
        env.reset()
        env.step()
        print(env._process.pid, flush=True)
        time.sleep(120)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "GRPC_VERBOSITY": "ERROR"})
    player_pid = None
    try:
        player_pid = int(holder.stdout.readline())
        assert not gone(player_pid)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        wait_until(lambda: gone(player_pid), timeout=30,
                   what="the player to exit after its trainer was killed")
    finally:
        if holder.poll() is None:
            holder.kill()
        if player_pid is not None and not gone(player_pid):
            os.kill(player_pid, signal.SIGKILL)


@pytest.mark.slow
def test_player_is_silent_on_stdout_and_stderr(open_env, tmp_path, monkeypatch):
    out = open(tmp_path / "stdout", "wb")
    err = open(tmp_path / "stderr", "wb")
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):  # what UnityEnvironment does, with the console captured
        kwargs["stdout"], kwargs["stderr"] = out, err
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    env = open_env("Basic", ["-unknownUnityFlag", "--standin-max-step", "3"], log_folder=None)
    monkeypatch.undo()
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(6):
        random_step(env, rng)
    env.close()
    out.close()
    err.close()
    assert (tmp_path / "stdout").read_bytes() == b""
    assert (tmp_path / "stderr").read_bytes() == b""


@pytest.mark.slow
def test_no_trainer_and_bad_options_exit_quietly(tmp_path, free_base_port):
    launcher = str(BUILDS_DIR / "3DBall.x86_64")
    port = str(free_base_port(1))
    result = subprocess.run([launcher, "--mlagents-port", port, "--standin-connect-timeout",
                             "0.5", "-logFile", str(tmp_path / "a.log")],
                            capture_output=True, timeout=30)
    assert result.returncode == 1 and result.stdout == b"" and result.stderr == b""
    assert "no trainer answered" in (tmp_path / "a.log").read_text()
    result = subprocess.run([launcher, "--mlagents-port", port, "--standin-agents", "many",
                             "-logFile", str(tmp_path / "b.log")], capture_output=True, timeout=30)
    assert result.returncode == 2 and result.stdout == b"" and result.stderr == b""
    assert "--standin-agents expects an integer" in (tmp_path / "b.log").read_text()


@pytest.mark.slow
def test_sigterm_ends_the_player_promptly(open_env):
    env = open_env("3DBall")
    env.reset()
    process = env._process
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == -signal.SIGTERM
    assert time.monotonic() - started < 10   # the signal's default action, not a timeout


@pytest.mark.slow
def test_slow_build_and_realtime_pacing(open_env):
    env = open_env("3DBall", ["--standin-step-delay", "0.02"])
    env.reset()
    started = time.monotonic()
    env.step()
    env.step()  # 10 academy steps at >= 20 ms each
    assert time.monotonic() - started >= 0.2
    env = open_env("Basic", ["--standin-realtime"])  # no time scale sent: 50 steps/s
    env.reset()
    started = time.monotonic()
    for _ in range(10):
        env.step()
    assert time.monotonic() - started >= 0.18


@pytest.mark.slow
def test_handshake_seed_drives_the_scene(open_env):
    first = []
    for args in ([], [], ["--standin-seed", "6"]):
        env = open_env("3DBall", args, seed=5)
        env.reset()
        first.append(env.get_steps(BALL)[0].obs[0])
        env.close()
    assert np.array_equal(first[0], first[1])
    assert not np.allclose(first[0], first[2])
