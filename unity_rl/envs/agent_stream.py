"""Per-agent experience stream over N builds: the API trainers use.

Contract:
- ``reset()`` and ``step(actions)`` return a ``StepResult``: the agents of the chosen behavior
  that request a decision now (``decisions``) and those whose episode ended since the last call
  (``terminals``), across all builds, each row keyed by ``AgentKey(build, behavior, agent_id)``.
- ``step(actions)`` takes one action row per row of the previous ``decisions`` (same order) and
  advances every build by one Unity step. Nothing is assumed about decision timing: an agent can
  be in ``terminals`` and ``decisions`` of the same result (its episode ended and the next began),
  a result may hold only terminals, agents may appear late or disappear.
- Several behaviors: ``behaviors=[...]`` (short or full names) or ``behaviors=ALL_BEHAVIORS``
  selects them; ``reset_all()``/``step_all({name: actions})`` return one ``StepResult`` per
  selected behavior (every one present, possibly empty) and step every build once per call.
  ``behavior_names`` (full, sorted) and ``specs`` exist in single mode too.
- Agents of behaviors that are not selected never get silent zeros: ``other_behaviors="error"``
  (default) raises ``UnselectedBehaviorError`` at the step where they request decisions;
  ``"zeros"`` sends them zero actions (logged once at INFO).
- Observations: PNG-compressed ones are uint8 [n, C, H, W]; all others float32 as sent.
- Groups: every row carries the protocol's ``group_id`` (0: no group; unique per build, so a
  group is ``(build, group_id)``) and ``group_reward`` (the group reward since the agent's
  previous decision), in ``decisions`` and ``terminals`` alike (docs/adapter.md, "Groups").
- When a build fails and is restarted, every agent it hosted appears in ``terminals`` with
  ``interrupted=True`` (its last observation as the final one, reward 0) and ``restarted`` names
  the build: the other builds' agents are not disturbed.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
from mlagents_envs.base_env import BehaviorSpec

from unity_rl.envs.batches import (
    concat_decisions,
    concat_terminals,
    cut_episodes,
    decision_batch,
    empty_steps,
    row_slices,
    terminal_batch,
)
from unity_rl.envs.behavior import (
    ALL_BEHAVIORS,
    OtherBehaviors,
    OtherBehaviorsMode,
    select_behavior,
    select_behaviors,
    to_action_tuple,
)
from unity_rl.envs.build_set import BuildOutput, BuildSet
from unity_rl.envs.launcher import RestartQuota
from unity_rl.envs.settings import DEFAULTS, LaunchSettings
from unity_rl.envs.types import DecisionBatch, TerminalBatch

__all__ = ["ALL_BEHAVIORS", "AgentStream", "StepResult"]

logger = logging.getLogger(__name__)


class StepResult(NamedTuple):
    """What one ``reset()``/``step()`` of the stream reports."""

    decisions: DecisionBatch
    """Agents waiting for an action, rows ordered by build."""
    terminals: TerminalBatch
    """Agents whose episode ended, rows ordered by build."""
    restarted: dict[int, str]
    """Build -> failure reason, for builds restarted during this call."""


class AgentStream:
    """Per-agent view of ``num_builds`` copies of one Unity build, for one or several behaviors."""

    def __init__(self, env_path: str | None = None, *, settings: LaunchSettings | None = None,
                 num_builds: int | None = None, behavior_name: str | None = None,
                 behaviors: Sequence[str] | None = None,
                 restart_quota: RestartQuota | None = None,
                 other_behaviors: OtherBehaviorsMode = "error", **launch: Any):
        """Launches the builds of ``settings`` (default: ``LaunchSettings()``, mlagents-learn's
        defaults) with ``env_path`` and the ``launch`` keywords (any ``LaunchSettings`` field:
        ``base_port``, ``seed``, ``time_scale``, ``no_graphics``, ``timeout_wait``,
        ``env_parameters``...) on top; ``num_builds`` is ``num_envs``. The builds get
        ``seed + i`` (0 + i for seed -1) and ``restart_quota`` or the settings' quota."""
        if behaviors is not None and behavior_name is not None:
            raise ValueError("pass either behavior_name= (one behavior) or behaviors= "
                             "(several, or ALL_BEHAVIORS), not both")
        launch_settings = (settings or DEFAULTS).for_env_classes(env_path, num_builds, **launch)
        self._open(launch_settings, launch_settings.num_envs, launch_settings.build_seed,
                   restart_quota, behavior_name, behaviors, other_behaviors)

    @classmethod
    def from_settings(cls, launch: LaunchSettings, *, num_builds: int = 1,
                      worker_id_start: int = 0, seed: int = 0,
                      behaviors: Sequence[str] | str = ALL_BEHAVIORS,
                      other_behaviors: OtherBehaviorsMode = "error",
                      restart_quota: RestartQuota | None = None) -> "AgentStream":
        """A stream over builds started with the run's ``LaunchSettings`` (engine settings,
        areas, timeouts... as the trainer's config says), from worker ``worker_id_start``."""
        settings = launch.for_env_classes(worker_id_start=worker_id_start)
        self = cls.__new__(cls)
        self._open(settings, num_builds, seed, restart_quota, None, behaviors, other_behaviors)
        return self

    def _open(self, settings, num_builds, seed, restart_quota, behavior_name, behaviors,
              other_behaviors) -> None:
        self.builds = BuildSet(settings, num_builds, seed, restart_quota)
        try:
            self._attach(behavior_name, behaviors, other_behaviors)
        except BaseException:
            self.builds.close()
            raise

    def _attach(self, behavior_name, behaviors, other_behaviors) -> None:
        first = self.builds.reset()
        specs, path = self.builds.behavior_specs, self.builds.settings.env_path
        self._single = behaviors is None
        self.behavior_names: list[str] = (
            [select_behavior(specs, behavior_name, path)] if self._single
            else select_behaviors(specs, behaviors, path))
        self.specs: dict[str, BehaviorSpec] = {n: specs[n] for n in self.behavior_names}
        hint = ("Select it with behaviors=[...] (or behaviors=ALL_BEHAVIORS, "
                f"'{ALL_BEHAVIORS}')")
        self._others = OtherBehaviors(other_behaviors, self.behavior_names, hint)
        self._rows: dict[str, list[slice]] = {}
        self._last: dict[str, dict[int, DecisionBatch]] = {n: {} for n in self.behavior_names}
        self._pending_first: dict[str, StepResult] | None = self._merge(first)

    # -- single-behavior API ----------------------------------------------------------------
    @property
    def behavior_name(self) -> str:
        """The behavior's full name (only when exactly one behavior is selected)."""
        return self._only()

    @property
    def spec(self) -> BehaviorSpec:
        return self.specs[self._only()]

    def _only(self) -> str:
        if len(self.behavior_names) != 1:
            raise AttributeError(
                f"this stream drives several behaviors {self.behavior_names}: use "
                f"behavior_names/specs and reset_all()/step_all()")
        return self.behavior_names[0]

    @property
    def log_dir(self) -> str:
        return self.builds.settings.log_dir

    def reset(self) -> StepResult:
        """Restarts every agent's episode (no terminals are reported for the cut episodes)."""
        return self.reset_all()[self._only()]

    def step(self, actions) -> StepResult:
        """Sends one action row per row of the last ``decisions`` and steps every build once."""
        name = self._only()
        return self.step_all({name: actions})[name]

    # -- multi-behavior API -----------------------------------------------------------------
    def reset_all(self) -> dict[str, StepResult]:
        """Like ``reset()``, one ``StepResult`` per selected behavior."""
        results = self._pending_first or self._merge(self.builds.reset())
        self._pending_first = None
        return results

    def step_all(self, actions: Mapping[str, Any]) -> dict[str, StepResult]:
        """``actions[name]``: one row per row of that behavior's last ``decisions`` (omit or
        leave empty for a behavior without decisions). Steps every build once."""
        if self._pending_first is not None:
            raise RuntimeError("call reset() before step()")
        unknown = set(actions) - set(self.behavior_names)
        if unknown:
            raise KeyError(f"actions for behaviors {sorted(unknown)} that are not selected "
                           f"(selected: {self.behavior_names})")
        for b in range(self.builds.num_builds):
            self.builds.send_step(b, self._build_actions(b, actions))
        return self._merge(list(self.builds.receive(range(self.builds.num_builds))))

    def _build_actions(self, b: int, actions: Mapping[str, Any]) -> dict:
        out = {}
        for name in self.behavior_names:
            rows = self._rows[name][b]
            if rows.stop == rows.start:
                continue
            if name not in actions:
                raise KeyError(f"no actions for behavior '{name}', which has "
                               f"{self._rows[name][-1].stop} pending decisions")
            chunk = _take_rows(actions[name], rows)
            out[name] = to_action_tuple(chunk, self.specs[name].action_spec)
        return out

    def set_environment_parameters(self, parameters: Mapping[str, Any]) -> None:
        """Environment parameters (floats or sampler specs) for every build, from its next step
        or reset on (the scene reads them at its next episode); builds restarted later start
        with them."""
        self.builds.set_environment_parameters(parameters)

    def close(self) -> None:
        self.builds.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- merging builds' outputs -------------------------------------------------------------
    def _merge(self, outputs: list[BuildOutput]) -> dict[str, StepResult]:
        outputs = sorted(outputs, key=lambda out: out.build)
        restarted = {out.build: out.restarted for out in outputs if out.restarted is not None}
        for out in outputs:
            self._others.check(out.build, out.steps)
        png = self.builds.png_observations
        return {name: self._merge_behavior(name, outputs, restarted, png.get(name, ()))
                for name in self.behavior_names}

    def _merge_behavior(self, name: str, outputs: list[BuildOutput],
                        restarted: dict[int, str], png) -> StepResult:
        spec = self.specs[name]
        png = tuple(png) or (False,) * len(spec.observation_specs)
        decisions, terminals = [], []
        for out in outputs:
            if out.restarted is not None:
                cut = cut_episodes(self._last[name].get(out.build))
                if cut is not None:
                    terminals.append(cut)
            dec_steps, term_steps = out.steps.get(name) or empty_steps(spec)
            dec = decision_batch(out.build, name, dec_steps, spec, png)
            decisions.append(dec)
            terminals.append(terminal_batch(out.build, name, term_steps, png))
            self._last[name][out.build] = dec
        self._rows[name] = row_slices([len(d.keys) for d in decisions])
        return StepResult(concat_decisions(decisions), concat_terminals(terminals), restarted)


def _take_rows(actions, rows: slice):
    if isinstance(actions, Mapping):
        return {k: np.asarray(v)[rows] for k, v in actions.items()}
    return np.asarray(actions)[rows]
