"""Launch errors, ports, logs and orphan-free shutdown."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tests.conftest import BUILDS_DIR, REPO_ROOT
from tests.interrupts import sigint_as_in_a_terminal
from unity_rl import UnityVecEnv
from unity_rl.envs.launcher import BuildLaunchError, RestartQuota, resolve_env_path
from unity_rl.envs.ports import PortInUseError

BALL = str(BUILDS_DIR / "3DBall")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids, timeout=30.0):
    """The pids of ``pids`` still alive (zombies count as gone) once all exit or ``timeout``
    passes: poll, as a process killed or told to stop exits when the scheduler lets it."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while True:
        alive = [p for p in alive if _alive(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def test_wrong_path_names_it_and_says_what_to_do(tmp_path):
    with pytest.raises(BuildLaunchError, match=r"No Unity build found at '.*NoSuchGame'.*--env"):
        resolve_env_path(str(tmp_path / "NoSuchGame"))


def test_not_executable_says_chmod(tmp_path):
    build = tmp_path / "Game.x86_64"
    build.write_text("#!/bin/sh\n")
    with pytest.raises(BuildLaunchError, match="chmod"):
        resolve_env_path(str(tmp_path / "Game"))


def test_taken_port_is_named(free_base_port):
    port = free_base_port(1)
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", port))
        sock.listen()
        with pytest.raises(PortInUseError, match=f"Port {port} .*in use by pid {os.getpid()}"):
            UnityVecEnv(BALL, base_port=port, timeout_wait=10)


def test_same_port_twice_in_one_machine_is_refused(free_base_port):
    port = free_base_port(1)
    with UnityVecEnv(BALL, base_port=port, timeout_wait=30):
        with pytest.raises(PortInUseError, match=str(port)):
            UnityVecEnv(BALL, base_port=port, timeout_wait=30)


@pytest.mark.slow
def test_startup_timeout_quotes_the_log_and_leaves_nothing(tmp_path, free_base_port):
    build = tmp_path / "Silent.x86_64"
    build.write_text(textwrap.dedent("""\
        #!/bin/sh
        # writes a line to its log, then never connects
        while [ $# -gt 0 ]; do [ "$1" = "-logFile" ] && echo "booting scene" > "$2"; shift; done
        exec sleep 600
        """))
    build.chmod(0o755)
    before = {p.pid for p in psutil.process_iter()}
    with pytest.raises(BuildLaunchError, match=r"did not connect within 2 s(.|\n)*booting scene"):
        UnityVecEnv(str(tmp_path / "Silent"), base_port=free_base_port(1), timeout_wait=2,
                    log_dir=str(tmp_path / "logs"))
    leftovers = [p for p in psutil.process_iter(["name", "cmdline"])
                 if p.pid not in before and "sleep" in (p.info["name"] or "")]
    assert wait_gone([p.pid for p in leftovers]) == []


@pytest.mark.slow
def test_close_leaves_no_build_process(free_base_port):
    env = UnityVecEnv(BALL, num_builds=2, base_port=free_base_port(2), timeout_wait=30)
    pids = env.builds.pids()
    assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
    env.close()
    env.close()
    assert wait_gone(pids) == []


SCRIPT = """
import sys, time
from unity_rl import UnityVecEnv
with UnityVecEnv({env!r}, num_builds=2, base_port={port}, timeout_wait=30) as env:
    env.reset()
    print(" ".join(map(str, env.builds.pids())), flush=True)
    while True:
        env.step(env.action_space.sample())
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_signals_to_the_python_side_leave_no_build(sig, free_base_port):
    code = SCRIPT.format(env=BALL, port=free_base_port(2))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=REPO_ROOT, text=True,
                            preexec_fn=sigint_as_in_a_terminal)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
        time.sleep(0.5)
        proc.send_signal(sig)
        proc.wait(timeout=20)
        assert wait_gone(pids) == [], f"builds left after {sig.name}"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_crash_option_with_quota_restarts_then_fails(free_base_port):
    quota = RestartQuota(max_lifetime_restarts=1, rate_limit_n=-1)
    from unity_rl.envs.launcher import BuildFailedError
    with UnityVecEnv(BALL, base_port=free_base_port(1), timeout_wait=30, restart_quota=quota,
                     env_args=["--standin-crash-after", "40"]) as env:
        env.reset()
        restarts_seen = 0
        with pytest.raises(BuildFailedError, match="exited"):
            for _ in range(100):
                _, _, _, _, info = env.step(env.action_space.sample())
                restarts_seen += int(info.get("build_restarted", [False])[0])
        assert restarts_seen == 1
