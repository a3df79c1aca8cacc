"""Fixtures for runtime tests: a two-node Ray cluster on this machine's loopback (one per session).

``ray_cluster`` starts a head and one more node with ``ray start --block``, both with token
authentication and one shared random token, and points this test process at it through the
environment (RAY_AUTH_MODE / RAY_AUTH_TOKEN), so that head, node and driver agree. Starting it
costs 10-25 s on a small machine: every Ray test shares it.

The ``ray start`` processes are detached from the test process (started through a launcher that
exits at once), so the cluster is never among this process's descendants: the other tests'
"no process left behind" checks keep working while it runs. At the end both are terminated (each
takes its node's processes with it) and anything left that mentions the cluster's private temp
dir is killed: other Ray instances on the machine are never touched (no ``ray stop``).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_START_TIMEOUT_S = 120.0

_LAUNCHER = """
import subprocess, sys
log = open(sys.argv[1], "w")
proc = subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL, start_new_session=True)
print(proc.pid)
"""
"""Starts a command in its own session and exits: the command is re-parented away from us."""


class RayCluster(NamedTuple):
    address: str
    """'127.0.0.1:PORT' of the head's GCS."""
    num_nodes: int
    temp_dir: str
    """Ray's root temp dir of both nodes (private to this cluster)."""
    env: dict
    """Environment the nodes run with (auth mode and token included)."""
    pids: tuple[int, ...]
    """The ``ray start --block`` processes (head first)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ray_start(args: list[str], env: dict, log: Path, what: str) -> int:
    """Runs ``ray start --block ARGS`` detached; returns its pid once the node is up."""
    ray_bin = Path(sys.executable).with_name("ray")
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(log), str(ray_bin), "start", "--block", *args],
        env=env, capture_output=True, text=True, check=True)
    pid = int(launched.stdout.strip())
    deadline = time.monotonic() + RAY_START_TIMEOUT_S
    while "Ray runtime started" not in _read(log):
        if not _alive(pid) or time.monotonic() > deadline:
            _terminate(pid)
            raise RuntimeError(f"`ray start` of the {what} failed:\n{_read(log)[-4000:]}")
        time.sleep(0.2)
    return pid


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _terminate(pid: int) -> None:
    """SIGTERM (``ray start --block`` then stops its node), SIGKILL of its group if it lingers."""
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _processes_mentioning(text: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(text in part for part in proc.info["cmdline"] or ()):
                out.append(proc)
        except psutil.Error:
            continue
    return out


def _refresh_ray_auth() -> None:
    """Makes an already imported ray see the current RAY_AUTH_MODE / RAY_AUTH_TOKEN.

    Ray reads its auth mode into its C++ config when it is imported (test modules import it at
    collection, before this fixture runs) and caches the token once loaded; this re-reads both,
    as ray's own ``_enable_token_auth`` does.
    """
    if "ray" not in sys.modules:
        return  # read from the environment when ray is imported
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@pytest.fixture(scope="session")
def ray_cluster():
    """A two-node Ray cluster (head + one node, one CPU each) on 127.0.0.1 for the session."""
    pytest.importorskip("ray")
    port = _free_port()
    # Ray's socket paths must fit in 107 bytes: a short private temp dir, not pytest's tmp_path.
    temp_dir = tempfile.mkdtemp(prefix="urt")
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    env = dict(os.environ, **auth, RAY_USAGE_STATS_ENABLED="0", GRPC_VERBOSITY="ERROR",
               PYTHONPATH=pythonpath)
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", f"--temp-dir={temp_dir}",
              "--disable-usage-stats"]
    saved = {k: os.environ.get(k) for k in auth}
    pids: list[int] = []
    try:
        pids.append(_ray_start(
            ["--head", f"--port={port}", "--include-dashboard=false",
             f"--ray-client-server-port={_free_port()}",
             f"--dashboard-agent-listen-port={_free_port()}", *common],
            env, Path(temp_dir) / "head.out", "head"))
        address = f"127.0.0.1:{port}"
        pids.append(_ray_start(
            [f"--address={address}", f"--dashboard-agent-listen-port={_free_port()}", *common],
            env, Path(temp_dir) / "node.out", "second node"))
        os.environ.update(auth)  # the driver (this process) must use the cluster's token
        _refresh_ray_auth()
        yield RayCluster(address, 2, temp_dir, env, tuple(pids))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _refresh_ray_auth()
        for pid in reversed(pids):
            _terminate(pid)
        leftovers = _processes_mentioning(temp_dir)
        for proc in leftovers:
            try:
                proc.kill()
            except psutil.Error:
                continue
        psutil.wait_procs(leftovers, timeout=10)
        shutil.rmtree(temp_dir, ignore_errors=True)
