"""Per-agent experience stream over N builds: the API trainers use.

Contract:
- ``reset()`` and ``step(actions)`` return a ``StepResult``: the agents of the chosen behavior
  that request a decision now (``decisions``) and those whose episode ended since the last call
  (``terminals``), across all builds, each row keyed by ``AgentKey(build, behavior, agent_id)``.
- ``step(actions)`` takes one action row per row of the previous ``decisions`` (same order) and
  advances every build by one Unity step. Nothing is assumed about decision timing: an agent can
  be in ``terminals`` and ``decisions`` of the same result (its episode ended and the next began),
  a result may hold only terminals, agents may appear late or disappear.
- When a build fails and is restarted, every agent it hosted appears in ``terminals`` with
  ``interrupted=True`` (its last observation as the final one, reward 0) and ``restarted`` names
  the build: the other builds' agents are not disturbed.
"""
from __future__ import annotations

import logging
import tempfile
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
from mlagents_envs.base_env import BehaviorSpec

from unity_rl.envs.behavior import (
    allowed_mask,
    convert_obs,
    select_behavior,
    to_action_tuple,
)
from unity_rl.envs.build_set import BuildOutput, BuildSet
from unity_rl.envs.launcher import LaunchSettings, RestartQuota
from unity_rl.envs.types import AgentKey, DecisionBatch, TerminalBatch

logger = logging.getLogger(__name__)


class StepResult(NamedTuple):
    """What one ``reset()``/``step()`` of the stream reports."""

    decisions: DecisionBatch
    """Agents waiting for an action, rows ordered by build."""
    terminals: TerminalBatch
    """Agents whose episode ended, rows ordered by build."""
    restarted: dict[int, str]
    """Build -> failure reason, for builds restarted during this call."""


def make_launch_settings(env_path: str, *, base_port: int, worker_id_start: int,
                         no_graphics: bool, time_scale: float, env_args: Sequence[str],
                         timeout_wait: float, step_timeout: float | None,
                         log_dir: str | None,
                         env_parameters: Mapping[str, Any] | None = None) -> LaunchSettings:
    return LaunchSettings(
        env_path=str(env_path), base_port=base_port, worker_id_start=worker_id_start,
        no_graphics=no_graphics, time_scale=time_scale, env_args=tuple(env_args),
        timeout_wait=timeout_wait,
        step_timeout=timeout_wait if step_timeout is None else step_timeout,
        log_dir=log_dir if log_dir is not None else tempfile.mkdtemp(prefix="unity_rl_logs_"),
        env_parameters=tuple((env_parameters or {}).items()),
    )


class AgentStream:
    """Per-agent view of ``num_builds`` copies of one Unity build."""

    def __init__(self, env_path: str, *, num_builds: int = 1, base_port: int = 5005,
                 worker_id_start: int = 0, no_graphics: bool = True, time_scale: float = 20.0,
                 env_args: Sequence[str] = (), seed: int = 0, timeout_wait: float = 60.0,
                 behavior_name: str | None = None, log_dir: str | None = None,
                 step_timeout: float | None = None, restart_quota: RestartQuota | None = None,
                 env_parameters: Mapping[str, Any] | None = None):
        settings = make_launch_settings(
            env_path, base_port=base_port, worker_id_start=worker_id_start,
            no_graphics=no_graphics, time_scale=time_scale, env_args=env_args,
            timeout_wait=timeout_wait, step_timeout=step_timeout, log_dir=log_dir,
            env_parameters=env_parameters)
        self.builds = BuildSet(settings, num_builds, seed, restart_quota)
        try:
            first = self.builds.reset()
            self.behavior_name = select_behavior(
                self.builds.behavior_specs, behavior_name, settings.env_path)
        except BaseException:
            self.builds.close()
            raise
        self.spec: BehaviorSpec = self.builds.behavior_specs[self.behavior_name]
        self._pending_first: list[BuildOutput] | None = first
        self._rows: list[slice] = []
        self._last_decisions: dict[int, DecisionBatch] = {}

    @property
    def log_dir(self) -> str:
        return self.builds.settings.log_dir

    def reset(self) -> StepResult:
        """Restarts every agent's episode (no terminals are reported for the cut episodes)."""
        outputs = self._pending_first or self.builds.reset()
        self._pending_first = None
        return self._merge(outputs)

    def step(self, actions) -> StepResult:
        """Sends one action row per row of the last ``decisions`` and steps every build once."""
        if self._pending_first is not None:
            raise RuntimeError("call reset() before step()")
        action_spec = self.spec.action_spec
        for b in range(self.builds.num_builds):
            rows = self._rows[b]
            chunk = _take_rows(actions, rows)
            self.builds.send_step(b, {self.behavior_name: to_action_tuple(chunk, action_spec)}
                                  if rows.stop > rows.start else {})
        return self._merge(list(self.builds.receive(range(self.builds.num_builds))))

    def close(self) -> None:
        self.builds.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- merging builds' outputs -------------------------------------------------------------
    def _merge(self, outputs: list[BuildOutput]) -> StepResult:
        outputs = sorted(outputs, key=lambda out: out.build)
        decisions, terminals, restarted = [], [], {}
        for out in outputs:
            if out.restarted is not None:
                restarted[out.build] = out.restarted
                cut = self._cut_episodes(out.build)
                if cut is not None:
                    terminals.append(cut)
            dec, term = self._batches(out)
            decisions.append(dec)
            terminals.append(term)
            self._last_decisions[out.build] = dec
        self._rows = _row_slices([len(d.keys) for d in decisions])
        return StepResult(_concat_decisions(decisions), _concat_terminals(terminals), restarted)

    def _batches(self, out: BuildOutput) -> tuple[DecisionBatch, TerminalBatch]:
        decision_steps, terminal_steps = out.steps[self.behavior_name]
        b, name = out.build, self.behavior_name
        dec = DecisionBatch(
            keys=[AgentKey(b, name, int(i)) for i in decision_steps.agent_id],
            obs=convert_obs(decision_steps.obs),
            reward=decision_steps.reward,
            action_mask=allowed_mask(decision_steps, self.spec.action_spec),
        )
        term = TerminalBatch(
            keys=[AgentKey(b, name, int(i)) for i in terminal_steps.agent_id],
            obs=convert_obs(terminal_steps.obs),
            reward=terminal_steps.reward,
            interrupted=terminal_steps.interrupted,
        )
        return dec, term

    def _cut_episodes(self, build: int) -> TerminalBatch | None:
        """Terminal rows (interrupted) for the agents a failed build hosted at its last step."""
        last = self._last_decisions.get(build)
        if last is None or not last.keys:
            return None
        n = len(last.keys)
        return TerminalBatch(last.keys, last.obs, np.zeros(n, np.float32), np.ones(n, bool))


def _take_rows(actions, rows: slice):
    if isinstance(actions, dict):
        return {k: np.asarray(v)[rows] for k, v in actions.items()}
    return np.asarray(actions)[rows]


def _row_slices(counts: list[int]) -> list[slice]:
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    return [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(len(counts))]


def _concat_obs(parts: list[list[np.ndarray]]) -> list[np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    return [np.concatenate(arrays, axis=0) for arrays in zip(*parts)]


def _concat_decisions(parts: list[DecisionBatch]) -> DecisionBatch:
    if len(parts) == 1:
        return parts[0]
    masks = [p.action_mask for p in parts]
    return DecisionBatch(
        keys=[k for p in parts for k in p.keys],
        obs=_concat_obs([p.obs for p in parts]),
        reward=np.concatenate([p.reward for p in parts]),
        action_mask=None if masks[0] is None else np.concatenate(masks),
    )


def _concat_terminals(parts: list[TerminalBatch]) -> TerminalBatch:
    if len(parts) == 1:
        return parts[0]
    return TerminalBatch(
        keys=[k for p in parts for k in p.keys],
        obs=_concat_obs([p.obs for p in parts]),
        reward=np.concatenate([p.reward for p in parts]),
        interrupted=np.concatenate([p.interrupted for p in parts]),
    )
