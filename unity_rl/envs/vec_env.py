"""``UnityVecEnv``: one or several Unity builds as one ``gymnasium.vector.VectorEnv``.

Contract:
- a slot is one agent of the chosen behavior: slots = builds x agents, fixed at construction
  (the agents present at the first reset, ordered by build then agent id);
- autoreset is SAME_STEP: the step that ends an agent's episode returns, for that slot,
  ``terminated`` (a real end) or ``truncated`` (Unity's ``interrupted``, or a build restart),
  ``infos["final_obs"]``/``infos["final_info"]`` (with ``episode`` = {"r", "l"}) and, as its
  observation, the first observation of the agent's next episode. Unity resets that agent by
  itself: one agent's end never resets or disturbs another one;
- one ``step()`` may run several Unity steps: terminal-only messages are absorbed so that every
  slot has a pending decision when ``step()`` returns. The reward of a slot is the reward of its
  transition; a reward reported with the first decision of a new episode is dropped (no action
  of that episode caused it), as ML-Agents' trainers do;
- if agents of one build request decisions at different academy steps, or agents appear or
  vanish, the lock-step vector cannot represent it and a clear error points to ``AgentStream``.
- observations: PNG-compressed ones are uint8 (C, H, W) in Box(0, 255); all others float32 as
  sent in Box(-inf, inf);
- agents of other behaviors never get silent zeros: ``other_behaviors="error"`` (default)
  raises ``UnselectedBehaviorError`` when they request decisions, ``"zeros"`` sends zeros.
``infos`` always has ``agent_id``, ``build``, ``group_id`` (the slot's ``SimpleMultiAgentGroup``
at its latest decision, 0: none; unique per build) and ``group_reward`` (the group reward of the
slot's transition, summed like ``reward``) per slot, and ``action_mask`` (True = allowed) for
discrete behaviors; a ``final_info`` holds the ended episode's ``group_id``.
"""
from __future__ import annotations

from typing import Any

from gymnasium.vector import AutoresetMode, VectorEnv

from unity_rl.envs.behavior import OtherBehaviors, OtherBehaviorsMode, select_behavior
from unity_rl.envs.build_set import BuildOutput, BuildSet
from unity_rl.envs.closing import ClosesBuilds
from unity_rl.envs.launcher import RestartQuota
from unity_rl.envs.settings import DEFAULTS, LaunchSettings
from unity_rl.envs.slots import (
    USE_STREAM,
    AgentSetChangedError,
    BehaviorSlots,
    DecisionTimingError,
)

__all__ = ["AgentSetChangedError", "DecisionTimingError", "UnityVecEnv"]

_USE_STREAM = USE_STREAM


class UnityVecEnv(ClosesBuilds, VectorEnv):
    """Every agent of the chosen behavior in ``num_builds`` builds is one slot."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env_path: str | None = None, *, settings: LaunchSettings | None = None,
                 num_builds: int | None = None, behavior_name: str | None = None,
                 restart_quota: RestartQuota | None = None,
                 other_behaviors: OtherBehaviorsMode = "error", **launch: Any):
        """Launches builds as ``AgentStream`` does (``settings`` with ``env_path``,
        ``num_builds`` and any ``LaunchSettings`` field as a keyword on top)."""
        launch_settings = (settings or DEFAULTS).for_env_classes(env_path, num_builds, **launch)
        builds = BuildSet(launch_settings, launch_settings.num_envs, launch_settings.build_seed,
                          restart_quota)
        self._attach(builds, behavior_name, other_behaviors)

    @classmethod
    def from_build_set(cls, builds, behavior_name: str | None = None,
                       other_behaviors: OtherBehaviorsMode = "error") -> "UnityVecEnv":
        """Wraps already launched builds (a ``BuildSet`` or a test double with its API)."""
        env = cls.__new__(cls)
        env._attach(builds, behavior_name, other_behaviors)
        return env

    def _attach(self, builds, behavior_name: str | None,
                other_behaviors: OtherBehaviorsMode) -> None:
        self.builds = builds
        self._closed = False
        try:
            first = self.builds.reset()
            self.behavior_name = select_behavior(
                self.builds.behavior_specs, behavior_name, builds.settings.env_path)
            self._others = OtherBehaviors(
                other_behaviors, [self.behavior_name],
                "UnityVecEnv drives one behavior: use AgentStream(behaviors=[...] or "
                "ALL_BEHAVIORS) to drive several, or MultiBehaviorVecEnv")
            for out in first:
                self._others.check(out.build, out.steps)
            self._setup(first)
        except BaseException:
            self.close()
            raise
        self._pending_first: list[BuildOutput] | None = first

    def _setup(self, first: list[BuildOutput]) -> None:
        name = self.behavior_name
        self.spec_ = self.builds.behavior_specs[name]
        self._slots = BehaviorSlots(name, self.spec_,
                                    tuple(self.builds.png_observations.get(name, ())), first)
        self.num_envs = self._slots.num_envs
        self.single_observation_space = self._slots.single_observation_space
        self.single_action_space = self._slots.single_action_space
        self.observation_space = self._slots.observation_space
        self.action_space = self._slots.action_space

    # -- gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Restarts every agent's episode; returns ``(observations, infos)``, one row per slot.

        ``seed`` relaunches the builds with ``seed + build`` (ML-Agents takes a seed only at
        launch); ``options`` is unused. ``infos["action_mask"]`` (bool, True = allowed) is there
        for behaviors with discrete branches.
        """
        fresh_with_seed = self._pending_first is not None and seed == self.builds.seed
        if seed is not None and not fresh_with_seed:
            self.builds.relaunch_all(seed)  # ML-Agents takes a seed only at launch
            self._pending_first = None
        outputs = self._pending_first or self.builds.reset()
        self._pending_first = None
        scratch = self._slots.new_step()
        for out in outputs:
            self._slots.remap_build(out)
            self._slots.take_decisions(out, scratch)
        self._slots.reset_episodes()
        return self._slots.observation(), self._slots.infos(scratch)

    def step(self, actions):
        """Acts for every slot and advances the builds until every slot has its next decision.

        Returns ``(observations, rewards, terminated, truncated, infos)``. Autoreset is
        SAME_STEP (``metadata["autoreset_mode"]``): a slot whose episode ended in this step
        already holds the first observation of its next episode (Unity restarts the agent by
        itself; no other slot is touched), its final observation is in ``infos["final_obs"]``
        and its statistics in ``infos["final_info"]`` (masks ``_final_obs`` / ``_final_info``).
        ``truncated`` is Unity's ``interrupted`` (MaxStep, or a restarted build),
        ``terminated`` a real end. Do not call ``reset()`` after an episode end.
        """
        if self._pending_first is not None:
            raise RuntimeError("call reset() before step()")
        slots = self._slots
        scratch = slots.new_step()
        for b in range(self.builds.num_builds):
            self.builds.send_step(b, {self.behavior_name: slots.action_tuple(b, actions)})
        incomplete = list(range(self.builds.num_builds))
        while incomplete:
            again = []
            for out in self.builds.receive(incomplete):
                self._others.check(out.build, out.steps)
                if not slots.absorb(out, scratch):
                    self.builds.send_step(out.build, {})
                    again.append(out.build)
            incomplete = again
        slots.finish_episodes(scratch)
        return (slots.observation(), scratch.reward, scratch.terminated, scratch.truncated,
                slots.infos(scratch))

    def close_extras(self, **kwargs) -> None:
        if not self._closed:
            self._closed = True
            self.builds.close()

