"""``MultiBehaviorVecEnv``: every behavior of shared builds at once, gymnasium-flavoured.

Contract:
- one slot per agent per behavior (builds x agents, fixed at the first reset, ordered by build
  then agent id), exactly as ``UnityVecEnv`` has for its one behavior (the same bookkeeping:
  ``unity_rl.envs.slots.BehaviorSlots``);
- ``reset()`` -> ``(obs, infos)`` and ``step(actions)`` -> ``(obs, rewards, terminated,
  truncated, infos)``, each a dict keyed by the behavior's full name, whose values are what
  ``UnityVecEnv`` returns for that behavior (batched obs, ``[n]`` arrays, infos with
  ``agent_id``, ``build``, ``group_id``, ``group_reward``, ``action_mask`` for discrete behaviors, ``final_obs``/``final_info``);
- **the rule for behaviors that do not decide at a step**: a step's dicts hold only the
  behaviors whose agents all requested a decision (``ready_behaviors``); ``step(actions)`` takes
  actions for exactly those behaviors (the keys of the previous result), sends them, and steps
  each build (repeating empty steps over terminal-only messages) until its message holds
  decisions of some behavior. A behavior absent from a result keeps accumulating its agents'
  rewards and episode ends, which are reported (SAME_STEP autoreset: ``final_obs``/
  ``final_info``, first observation of the next episode as ``obs``) at its next decision;
- a behavior whose agents decide at different steps (within a build, or across builds after a
  lone restart of one build) raises ``DecisionTimingError``; agents appearing or vanishing raise
  ``AgentSetChangedError``; both point to ``AgentStream.step_all``;
- agents of behaviors not selected never get silent zeros (``other_behaviors`` as in
  ``AgentStream``).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from unity_rl.envs.agent_stream import AgentStream
from unity_rl.envs.behavior import ALL_BEHAVIORS, OtherBehaviors, OtherBehaviorsMode
from unity_rl.envs.build_set import BuildOutput
from unity_rl.envs.closing import ClosesBuilds
from unity_rl.envs.launcher import RestartQuota
from unity_rl.envs.settings import LaunchSettings
from unity_rl.envs.slots import (
    AgentSetChangedError,
    BehaviorSlots,
    DecisionTimingError,
    SlotStep,
)

__all__ = ["AgentSetChangedError", "DecisionTimingError", "MultiBehaviorVecEnv"]

_USE_STEP_ALL = ("MultiBehaviorVecEnv steps each behavior's slots in lock-step; use "
                 "unity_rl.AgentStream(behaviors=...).step_all, which follows each agent's own "
                 "timing and agent set.")


class MultiBehaviorVecEnv(ClosesBuilds):
    """All selected behaviors of ``num_builds`` builds; one slot per agent per behavior."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env_path: str | None = None, *, settings: LaunchSettings | None = None,
                 behaviors: Sequence[str] | str = ALL_BEHAVIORS, num_builds: int | None = None,
                 restart_quota: RestartQuota | None = None,
                 other_behaviors: OtherBehaviorsMode = "error", **launch: Any):
        """Launches builds as ``AgentStream`` does (``settings`` with ``env_path``,
        ``num_builds`` and any ``LaunchSettings`` field as a keyword on top)."""
        stream = AgentStream(env_path, settings=settings, num_builds=num_builds,
                             behaviors=behaviors, restart_quota=restart_quota,
                             other_behaviors=other_behaviors, **launch)
        self._attach(stream.builds, stream.behavior_names, other_behaviors)

    @classmethod
    def from_stream(cls, stream: AgentStream,
                    other_behaviors: OtherBehaviorsMode = "error") -> "MultiBehaviorVecEnv":
        """Takes over an open ``AgentStream`` (its builds and behavior selection); the stream
        must not be stepped afterwards. Its builds are reset once here."""
        return cls.from_build_set(stream.builds, stream.behavior_names, other_behaviors)

    @classmethod
    def from_build_set(cls, builds, behaviors: Sequence[str],
                       other_behaviors: OtherBehaviorsMode = "error") -> "MultiBehaviorVecEnv":
        """Wraps launched builds (a ``BuildSet`` or a test double) for ``behaviors`` (full
        names as the builds report them)."""
        env = cls.__new__(cls)
        env._attach(builds, list(behaviors), other_behaviors)
        return env

    def _attach(self, builds, behaviors: list[str], other_behaviors: OtherBehaviorsMode) -> None:
        self.builds = builds
        self._closed = False
        try:
            self.behavior_names: list[str] = sorted(behaviors)
            self._others = OtherBehaviors(
                other_behaviors, self.behavior_names,
                "Select it with behaviors=[...] (or ALL_BEHAVIORS)")
            first = self.builds.reset()
            for out in first:
                self._others.check(out.build, out.steps)
            png = self.builds.png_observations
            specs = self.builds.behavior_specs
            self.specs = {n: specs[n] for n in self.behavior_names}
            self._slots = {
                n: BehaviorSlots(n, specs[n], tuple(png.get(n, ())), first, _USE_STEP_ALL)
                for n in self.behavior_names}
        except BaseException:
            self.close()
            raise
        self._pending_first: list[BuildOutput] | None = first
        self._scratch: dict[str, SlotStep] = {n: s.new_step() for n, s in self._slots.items()}
        self.ready_behaviors: list[str] = []
        """Behaviors in the last result: the ones ``step`` needs actions for."""

    # -- spaces ------------------------------------------------------------------------------
    @property
    def num_envs(self) -> dict[str, int]:
        """Behavior -> number of slots (builds x agents)."""
        return {n: s.num_envs for n, s in self._slots.items()}

    @property
    def single_observation_spaces(self) -> dict[str, spaces.Space]:
        return {n: s.single_observation_space for n, s in self._slots.items()}

    @property
    def single_action_spaces(self) -> dict[str, spaces.Space]:
        return {n: s.single_action_space for n, s in self._slots.items()}

    @property
    def observation_spaces(self) -> dict[str, spaces.Space]:
        """Batched: one row per slot of the behavior."""
        return {n: s.observation_space for n, s in self._slots.items()}

    @property
    def action_spaces(self) -> dict[str, spaces.Space]:
        return {n: s.action_space for n, s in self._slots.items()}

    # -- API ---------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Restarts every agent; returns ``(obs, infos)`` for every behavior that decides at
        the first step (with Unity's RESET: all of them)."""
        fresh_with_seed = self._pending_first is not None and seed == self.builds.seed
        if seed is not None and not fresh_with_seed:
            self.builds.relaunch_all(seed)  # ML-Agents takes a seed only at launch
            self._pending_first = None
        outputs = self._pending_first or self.builds.reset()
        self._pending_first = None
        for out in outputs:
            self._others.check(out.build, out.steps)
        self._scratch = {n: s.new_step() for n, s in self._slots.items()}
        for name, slots in self._slots.items():
            for out in outputs:
                if len(out.steps[name][0]):
                    slots.remap_build(out)
                slots.take_decisions(out, self._scratch[name])
            slots.reset_episodes()
        ready = self._ready()
        obs = {n: self._slots[n].observation() for n in ready}
        infos = {n: self._slots[n].infos(self._scratch[n]) for n in ready}
        self._restart_scratch(ready)
        return obs, infos

    def step(self, actions: Mapping[str, Any]):
        """``actions[name]``: one row per slot of ``name``, for exactly the behaviors of the
        last result (``ready_behaviors``). Returns dicts for the behaviors that decide next."""
        if self._pending_first is not None:
            raise RuntimeError("call reset() before step()")
        given, needed = set(actions), set(self.ready_behaviors)
        if given != needed:
            raise KeyError(
                f"step() needs actions for exactly the behaviors of the last result "
                f"{sorted(needed)} (got {sorted(given)}): the others have no pending decision")
        for b in range(self.builds.num_builds):
            self.builds.send_step(
                b, {n: self._slots[n].action_tuple(b, actions[n]) for n in self.ready_behaviors})
        incomplete = list(range(self.builds.num_builds))
        while incomplete:
            again = []
            for out in self.builds.receive(incomplete):
                self._others.check(out.build, out.steps)
                decided = [self._slots[n].absorb(out, self._scratch[n])
                           for n in self.behavior_names]
                if not any(decided):
                    self.builds.send_step(out.build, {})
                    again.append(out.build)
            incomplete = again
        ready = self._ready()
        obs, rewards, terminated, truncated, infos = {}, {}, {}, {}, {}
        for n in ready:
            slots, scratch = self._slots[n], self._scratch[n]
            slots.finish_episodes(scratch)
            obs[n] = slots.observation()
            rewards[n], terminated[n], truncated[n] = (
                scratch.reward, scratch.terminated, scratch.truncated)
            infos[n] = slots.infos(scratch)
        self._restart_scratch(ready)
        return obs, rewards, terminated, truncated, infos

    def _ready(self) -> list[str]:
        ready = []
        for n in self.behavior_names:
            decided = self._scratch[n].decided
            if decided.all():
                ready.append(n)
            elif decided.any():
                slots = self._slots[n]
                late = sorted(set(slots.build_of_slot[~decided].tolist()))
                raise DecisionTimingError(
                    f"Agents of '{n}' in builds {late} did not request a decision at the step "
                    f"where its agents in the other builds did (the builds' decision phases "
                    f"differ, e.g. after a lone restart). " + _USE_STEP_ALL)
        if not ready:
            raise DecisionTimingError(
                "No behavior decided in every build at this step. " + _USE_STEP_ALL)
        self.ready_behaviors = ready
        return ready

    def _restart_scratch(self, names: list[str]) -> None:
        for n in names:
            self._scratch[n] = self._slots[n].new_step()

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            self.builds.close()

