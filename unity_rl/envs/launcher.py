"""Launching, watching and stopping Unity build processes.

Contract:
- build i of a run is worker ``worker_id_start + i`` and listens on ``base_port + worker_id``;
  a taken port is reported before launching, naming the port and its owner;
- each build writes its own log file ``<log_dir>/Player-<worker_id>.log``; a start-up timeout
  or a crash is reported with the tail of that log;
- ``stop_build`` always leaves no process behind (polite close, then kill of the whole session);
- ``RestartQuota`` decides whether a failed build may be restarted (lifetime count and a rate
  limit, as mlagents-learn's ``--max-lifetime-restarts`` / ``--restarts-rate-limit-*``).
Every build starts from one ``LaunchSettings`` (declared, with its defaults, in
``unity_rl/envs/settings.py``; importable from here too).
"""
from __future__ import annotations

import collections
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from mlagents_envs.exception import UnityEnvironmentException, UnityTimeOutException
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
from mlagents_envs.side_channel.environment_parameters_channel import (
    EnvironmentParametersChannel,
)

from unity_rl.envs.communicator import UnityBuild, send_environment_parameter  # noqa: F401 - re-exported
from unity_rl.envs.ports import acquire_port_lock, check_port_free
from unity_rl.envs.settings import DEFAULTS, LaunchSettings  # noqa: F401 - re-exported
from unity_rl.errors import UserError

logger = logging.getLogger(__name__)

EXECUTABLE_SUFFIXES = (".x86_64", ".x86", ".app", ".exe")


class BuildLaunchError(UserError, RuntimeError):
    """A build could not be started; the message says which, why, and what to do."""


class BuildFailedError(UserError, RuntimeError):
    """A build died or hung and may not be restarted (quota spent)."""


@dataclass
class RestartQuota:
    """Restart budget shared by the builds of a run; -1 disables a limit. Defaults: the
    ``LaunchSettings`` declaration's (``from_settings`` takes a run's)."""

    max_lifetime_restarts: int = DEFAULTS.max_lifetime_restarts
    """Restarts allowed over the whole run."""
    rate_limit_n: int = DEFAULTS.restarts_rate_limit_n
    """Restarts allowed within one rate-limit period."""
    rate_limit_period_s: float = float(DEFAULTS.restarts_rate_limit_period_s)
    """Length of the rate-limit period in seconds."""
    _history: collections.deque = field(default_factory=collections.deque, repr=False)
    _lifetime: int = field(default=0, repr=False)

    def try_consume(self, now: float | None = None) -> str | None:
        """Takes one restart; returns None if allowed, else why the quota is spent."""
        now = time.monotonic() if now is None else now
        if 0 <= self.max_lifetime_restarts <= self._lifetime:
            return f"all {self.max_lifetime_restarts} lifetime restarts are used"
        while self._history and now - self._history[0] > self.rate_limit_period_s:
            self._history.popleft()
        if 0 <= self.rate_limit_n <= len(self._history):
            return (f"{self.rate_limit_n} restart(s) per {self.rate_limit_period_s:g} s "
                    f"allowed and that many happened already")
        self._lifetime += 1
        self._history.append(now)
        return None

    @property
    def restarts(self) -> int:
        return self._lifetime

    @classmethod
    def from_settings(cls, settings: LaunchSettings) -> "RestartQuota":
        """The quota ``settings`` declare (max_lifetime_restarts, restarts_rate_limit_*)."""
        return cls(*settings.restart_limits)


def resolve_env_path(env_path: str | None) -> str:
    """Returns the executable for ``env_path`` or raises BuildLaunchError saying what to do."""
    if env_path is None:
        raise BuildLaunchError("No Unity build given: pass --env (env_settings.env_path, or "
                               "LaunchSettings(env_path=...)) with the path to your build's "
                               "executable; connecting to the Unity Editor is not supported.")
    path = Path(env_path).expanduser()
    stem = path
    if path.suffix in EXECUTABLE_SUFFIXES:
        stem = path.with_suffix("")
    candidates = [stem.with_name(stem.name + s) for s in (".x86_64", ".x86")] + [stem, path]
    for candidate in candidates:
        if candidate.is_file():
            if not os.access(candidate, os.X_OK):
                raise BuildLaunchError(
                    f"The Unity build '{candidate}' is not executable: run "
                    f"`chmod +x {candidate}`."
                )
            return str(candidate.resolve())
    looked = ", ".join(f"'{c}'" for c in dict.fromkeys(str(c) for c in candidates))
    raise BuildLaunchError(
        f"No Unity build found at '{env_path}' (looked for {looked}). Pass --env with the path "
        f"to your build's executable, e.g. unity_builds/3DBall for the bundled stand-in."
    )


def log_path(settings: LaunchSettings, worker_id: int) -> Path | None:
    if settings.log_dir is None:
        return None
    return Path(settings.log_dir) / f"Player-{worker_id}.log"


def log_tail(path: Path | None, lines: int = 20) -> str:
    """Last lines of a build log, formatted for an error message."""
    if path is None:
        return "(no log folder was set)"
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"(log file {path} does not exist)"
    body = "\n".join("    " + line for line in text) or "    (empty)"
    return f"last lines of {path}:\n{body}"


def launch_build(settings: LaunchSettings, build: int, seed: int) -> UnityBuild:
    """Starts build ``build`` and completes the handshake; raises BuildLaunchError on failure."""
    executable = resolve_env_path(settings.env_path)
    worker_id = settings.worker_id_start + build
    port = settings.base_port + worker_id
    port_lock = acquire_port_lock(port)
    try:
        env = _start(settings, executable, build, worker_id, port, seed)
    except BaseException:
        port_lock.release()
        raise
    env.port_lock = port_lock
    return env


def _start(settings: LaunchSettings, executable: str, build: int, worker_id: int, port: int,
           seed: int) -> UnityBuild:
    check_port_free(port, build=build)
    if settings.log_dir is not None:
        Path(settings.log_dir).mkdir(parents=True, exist_ok=True)
    engine = EngineConfigurationChannel()
    engine.set_configuration_parameters(
        width=settings.width, height=settings.height, quality_level=settings.quality_level,
        time_scale=settings.time_scale, target_frame_rate=settings.target_frame_rate,
        capture_frame_rate=settings.capture_frame_rate)
    parameters = EnvironmentParametersChannel()
    for name, value in settings.env_parameters:
        send_environment_parameter(parameters, name, value, seed)
    try:
        env = UnityBuild(
            file_name=executable,
            worker_id=worker_id,
            base_port=settings.base_port,
            seed=seed,
            no_graphics=settings.no_graphics or (settings.no_graphics_monitor and worker_id > 0),
            num_areas=settings.num_areas,
            timeout_wait=max(1, int(round(settings.timeout_wait))),
            additional_args=list(settings.env_args or ()),
            side_channels=[engine, parameters],
            log_folder=str(Path(settings.log_dir).resolve()) if settings.log_dir else None,
        )
    except UnityTimeOutException as err:
        raise BuildLaunchError(
            f"Build {build} ('{executable}', port {port}) did not connect within "
            f"{settings.timeout_wait:g} s. Raise --timeout-wait if it is just slow to start; "
            f"{log_tail(log_path(settings, worker_id))}"
        ) from err
    except UnityEnvironmentException as err:
        raise BuildLaunchError(
            f"Build {build} ('{executable}', port {port}) failed to start: {err} "
            f"{log_tail(log_path(settings, worker_id))}"
        ) from err
    env.set_answer_timeout(settings.answer_timeout)
    return env


def stop_build(env: UnityBuild, grace_s: float = 5.0) -> None:
    """Closes ``env`` politely, then kills its process group if anything is left."""
    process = env.process
    pid = process.pid if process is not None else None
    try:
        env._close(timeout=grace_s)  # noqa: SLF001 - the documented close with a short wait
    except Exception as err:  # a dead or hung build may fail to close politely
        logger.debug("closing build pid %s raised %r; killing it", pid, err)
    if pid is not None:
        kill_process_tree(pid)
    lock = getattr(env, "port_lock", None)
    if lock is not None:
        lock.release()


def kill_process_tree(pid: int) -> None:
    """SIGKILLs ``pid``, its descendants and its session (builds run in their own session)."""
    try:
        root = psutil.Process(pid)
        family = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # no such group: the build had already exited
    for proc in family:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(family, timeout=5)
