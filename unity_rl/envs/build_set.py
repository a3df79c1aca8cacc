"""N builds of one executable, stepped concurrently, with lone restarts of failed builds.

Contract:
- ``reset()`` resets every build and returns one ``BuildOutput`` per build;
- ``send_step(b, actions)`` hands build b the actions of its agents that requested decisions
  (per behavior, rows in the order of the last ``DecisionSteps``) and returns at once;
- ``receive(builds)`` yields each build's ``BuildOutput`` as soon as it arrives; every build's
  communicator notifies one shared queue, so waiting for N builds is one blocking wait. A build that exits or does not answer within ``step_timeout`` is stopped
  and relaunched alone on its port (when the ``RestartQuota`` allows, else ``BuildFailedError``);
  its output then comes from the fresh build's reset and carries ``restarted`` = the reason.
  The other builds are not touched: their agents keep their episodes.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from mlagents_envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from mlagents_envs.exception import (
    UnityCommunicatorStoppedException,
    UnityEnvironmentException,
    UnityTimeOutException,
)

from unity_rl.envs.communicator import PROCESS_POLL_INTERVAL, UnityBuild
from unity_rl.envs.launcher import (
    BuildFailedError,
    LaunchSettings,
    RestartQuota,
    launch_build,
    log_path,
    log_tail,
    stop_build,
)

logger = logging.getLogger(__name__)

BUILD_FAILURES = (UnityEnvironmentException, UnityTimeOutException,
                  UnityCommunicatorStoppedException, EOFError, OSError)


class BuildOutput(NamedTuple):
    """One build's answer: the steps of every behavior it reported."""

    build: int
    """Index of the build."""
    steps: dict[str, tuple[DecisionSteps, TerminalSteps]]
    """Behavior name -> (decision steps, terminal steps) of this message."""
    restarted: str | None
    """None normally; the failure reason when the build was restarted and this is its reset."""


class BuildSet:
    """Launches ``num_builds`` builds and steps them concurrently."""

    def __init__(self, settings: LaunchSettings, num_builds: int, seed: int = 0,
                 restart_quota: RestartQuota | None = None):
        if num_builds < 1:
            raise ValueError(f"num_builds must be at least 1, got {num_builds}")
        self.settings = settings
        self.num_builds = num_builds
        self.seed = seed
        self.restart_quota = (restart_quota if restart_quota is not None
                              else RestartQuota.from_settings(settings))
        self.restart_count = [0] * num_builds
        self._builds: list[UnityBuild | None] = [None] * num_builds
        self._sent_at = [0.0] * num_builds
        # One token per message any build sends: what receive() blocks on.
        self._arrivals: queue.SimpleQueue = queue.SimpleQueue()
        self._launch_all()

    # -- lifecycle -------------------------------------------------------------------------
    def _launch_all(self) -> None:
        with ThreadPoolExecutor(max_workers=self.num_builds) as pool:
            futures = [pool.submit(launch_build, self.settings, b, self.seed + b)
                       for b in range(self.num_builds)]
            errors = []
            for b, future in enumerate(futures):
                try:
                    self._adopt(b, future.result())
                except Exception as err:  # collected, then re-raised after cleanup
                    errors.append(err)
        if errors:
            self.close()
            raise errors[0]

    def _adopt(self, b: int, env: UnityBuild) -> None:
        env.set_listener(lambda: self._arrivals.put(None))
        self._builds[b] = env

    def close(self) -> None:
        """Stops every build; safe to call twice."""
        for b, env in enumerate(self._builds):
            if env is not None:
                stop_build(env)
                self._builds[b] = None

    def relaunch_all(self, seed: int) -> None:
        """Stops every build and starts them again with seeds seed + i."""
        self.close()
        self.seed = seed
        self._launch_all()

    def build(self, b: int) -> UnityBuild:
        env = self._builds[b]
        if env is None:
            raise RuntimeError("the builds are closed")
        return env

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        """Specs reported by build 0 (all builds of a run are the same executable)."""
        return self.build(0).behavior_specs

    @property
    def png_observations(self) -> Mapping[str, tuple[bool, ...]]:
        """Behavior -> per observation, True where the builds send it PNG-compressed (uint8
        for us); learned from the messages (``ObservationProto.compression_type``)."""
        merged: dict[str, tuple[bool, ...]] = {}
        for env in reversed(self._builds):
            if env is not None:
                merged.update(env.png_observations)
        return merged

    def set_environment_parameters(self, parameters: Mapping[str, Any]) -> None:
        """Sends environment parameters (floats or sampler specs, as ``LaunchSettings.
        env_parameters``) to every build with its next step or reset; a build restarted later
        is launched with them too."""
        merged = dict(self.settings.env_parameters)
        merged.update(parameters)
        self.settings = dataclasses.replace(self.settings, env_parameters=tuple(merged.items()))
        for b in range(self.num_builds):
            self.build(b).set_environment_parameters(parameters, seed=self.seed + b)

    def pids(self) -> list[int]:
        return [env.process.pid for env in self._builds if env is not None and env.process]

    # -- stepping --------------------------------------------------------------------------
    def reset(self) -> list[BuildOutput]:
        for b in range(self.num_builds):
            self._send(b, UnityBuild.send_reset)
        return sorted(self.receive(range(self.num_builds)), key=lambda out: out.build)

    def send_step(self, b: int, actions: Mapping[str, ActionTuple]) -> None:
        env = self.build(b)
        for behavior, action in actions.items():
            env.set_actions(behavior, action)
        self._send(b, UnityBuild.send_step)

    def _send(self, b: int, send) -> None:
        self._sent_at[b] = time.monotonic()
        try:
            send(self.build(b))
        except BUILD_FAILURES as err:
            # The answer will never come; receive() notices the dead process and restarts it.
            logger.warning("sending to build %d failed: %r", b, err)

    def receive(self, builds: Iterable[int]) -> Iterator[BuildOutput]:
        """Yields the answer of each build in ``builds`` as it arrives."""
        waiting = list(builds)
        next_check = time.monotonic() + PROCESS_POLL_INTERVAL
        while waiting:
            ready = [b for b in waiting if self.build(b).has_answer()]
            for b in ready:
                waiting.remove(b)
                yield self._read(b)
            if ready or not waiting:
                continue
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + PROCESS_POLL_INTERVAL
                for b in list(waiting):
                    failure = self._check_waiting(b)
                    if failure is not None:
                        waiting.remove(b)
                        yield self._restart(b, failure)
                continue
            try:  # a token per arrival; a stale one only costs one more look
                self._arrivals.get(timeout=max(0.0, next_check - time.monotonic()))
            except queue.Empty:
                pass  # time to check the waiting builds' processes and deadlines

    def _read(self, b: int) -> BuildOutput:
        env = self.build(b)
        try:
            env.receive()
        except BUILD_FAILURES as err:
            return self._restart(b, f"its connection failed ({err!r})")
        steps = {name: env.get_steps(name) for name in env.behavior_specs}
        return BuildOutput(b, steps, None)

    def _check_waiting(self, b: int) -> str | None:
        """The reason build b must be restarted, or None if it may still answer."""
        env = self.build(b)
        try:
            env.check_alive()
        except UnityEnvironmentException as err:
            return f"it exited ({err})"
        waited = time.monotonic() - self._sent_at[b]
        if waited > self.settings.answer_timeout:
            return f"it did not answer within {self.settings.answer_timeout:g} s (hung)"
        return None

    def _restart(self, b: int, reason: str) -> BuildOutput:
        port = self.settings.base_port + self.settings.worker_id_start + b
        log = log_tail(log_path(self.settings, self.settings.worker_id_start + b))
        refusal = self.restart_quota.try_consume()
        if refusal is not None:
            raise BuildFailedError(
                f"Build {b} (port {port}) failed: {reason}. It is not restarted because "
                f"{refusal} (raise --max-lifetime-restarts / --restarts-rate-limit-n). {log}"
            )
        logger.warning("build %d (port %d) failed: %s; restarting it alone", b, port, reason)
        stop_build(self.build(b), grace_s=1.0)
        self._adopt(b, launch_build(self.settings, b, self.seed + b))
        self.restart_count[b] += 1
        self._send(b, UnityBuild.send_reset)
        fresh = next(self.receive([b]))
        return fresh._replace(restarted=reason)
