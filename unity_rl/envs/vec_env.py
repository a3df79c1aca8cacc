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
``infos`` always has ``agent_id`` and ``build`` per slot, and ``action_mask`` (True = allowed)
for discrete behaviors.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from unity_rl.envs.agent_stream import make_launch_settings
from unity_rl.envs.behavior import (
    OtherBehaviors,
    OtherBehaviorsMode,
    allowed_mask,
    convert_obs,
    obs_dtype,
    observation_keys,
    select_behavior,
    single_action_space,
    single_observation_space,
    to_action_tuple,
)
from unity_rl.envs.build_set import BuildOutput, BuildSet
from unity_rl.envs.launcher import RestartQuota


class DecisionTimingError(RuntimeError):
    """Agents' decision timing cannot be represented as a lock-step vector."""


class AgentSetChangedError(RuntimeError):
    """An agent appeared or vanished after the slots were fixed."""


_USE_STREAM = ("UnityVecEnv steps all slots in lock-step; use unity_rl.AgentStream, which "
               "follows each agent's own timing and agent set.")


class _Step:
    """Scratch state of one vector step."""

    def __init__(self, num_envs: int):
        self.reward = np.zeros(num_envs, np.float32)
        self.terminated = np.zeros(num_envs, bool)
        self.truncated = np.zeros(num_envs, bool)
        self.decided = np.zeros(num_envs, bool)
        self.ended = np.zeros(num_envs, bool)
        self.restarted = np.zeros(num_envs, bool)
        self.final: dict[int, tuple[Any, dict]] = {}


class UnityVecEnv(VectorEnv):
    """Every agent of the chosen behavior in ``num_builds`` builds is one slot."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env_path: str, *, num_builds: int = 1, base_port: int = 5005,
                 worker_id_start: int = 0, no_graphics: bool = True, time_scale: float = 20.0,
                 env_args: Sequence[str] = (), seed: int = 0, timeout_wait: float = 60.0,
                 behavior_name: str | None = None, log_dir: str | None = None,
                 step_timeout: float | None = None, restart_quota: RestartQuota | None = None,
                 env_parameters: Mapping[str, Any] | None = None,
                 other_behaviors: OtherBehaviorsMode = "error"):
        settings = make_launch_settings(
            env_path, base_port=base_port, worker_id_start=worker_id_start,
            no_graphics=no_graphics, time_scale=time_scale, env_args=env_args,
            timeout_wait=timeout_wait, step_timeout=step_timeout, log_dir=log_dir,
            env_parameters=env_parameters)
        self._attach(BuildSet(settings, num_builds, seed, restart_quota), behavior_name,
                     other_behaviors)

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
                "ALL_BEHAVIORS) to drive several")
            for out in first:
                self._others.check(out.build, out.steps)
            self._setup(first)
        except BaseException:
            self.close()
            raise
        self._pending_first: list[BuildOutput] | None = first

    # -- set-up ---------------------------------------------------------------------------
    def _setup(self, first: list[BuildOutput]) -> None:
        self.spec_ = self.builds.behavior_specs[self.behavior_name]
        self._action_spec = self.spec_.action_spec
        self._obs_keys = observation_keys(self.spec_)
        png = tuple(self.builds.png_observations.get(self.behavior_name, ()))
        self._png = png or (False,) * len(self.spec_.observation_specs)
        ids = [np.sort(out.steps[self.behavior_name][0].agent_id) for out in first]
        counts = [len(i) for i in ids]
        self.num_envs = int(sum(counts))
        if self.num_envs == 0:
            raise AgentSetChangedError(
                f"Behavior '{self.behavior_name}' has no agent requesting a decision at reset.")
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        self._build_slots = [np.arange(starts[b], starts[b + 1]) for b in range(len(ids))]
        self._ids = ids
        self._order = [s.copy() for s in self._build_slots]
        self.single_observation_space = single_observation_space(self.spec_, self._png)
        self.single_action_space = single_action_space(self._action_spec)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._obs = [np.zeros((self.num_envs, *o.shape), obs_dtype(png))
                     for o, png in zip(self.spec_.observation_specs, self._png)]
        self._mask = (np.ones((self.num_envs, sum(self._action_spec.discrete_branches)), bool)
                      if self._action_spec.discrete_branches else None)
        self._agent_id = np.concatenate(ids).astype(np.int64)
        self._build_of_slot = np.repeat(np.arange(len(ids)), counts)
        self._episode_return = np.zeros(self.num_envs, np.float64)
        self._episode_length = np.zeros(self.num_envs, np.int64)

    # -- gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        fresh_with_seed = self._pending_first is not None and seed == self.builds.seed
        if seed is not None and not fresh_with_seed:
            self.builds.relaunch_all(seed)  # ML-Agents takes a seed only at launch
            self._pending_first = None
        outputs = self._pending_first or self.builds.reset()
        self._pending_first = None
        scratch = _Step(self.num_envs)
        for out in outputs:
            self._remap_build(out)
            self._take_decisions(out, scratch)
        self._episode_return[:] = 0.0
        self._episode_length[:] = 0
        return self._observation(), self._infos(scratch)

    def step(self, actions):
        if self._pending_first is not None:
            raise RuntimeError("call reset() before step()")
        scratch = _Step(self.num_envs)
        for b in range(self.builds.num_builds):
            self._send(b, actions)
        incomplete = list(range(self.builds.num_builds))
        while incomplete:
            again = []
            for out in self.builds.receive(incomplete):
                if not self._absorb(out, scratch):
                    self.builds.send_step(out.build, {})
                    again.append(out.build)
            incomplete = again
        self._finish_episodes(scratch)
        return (self._observation(), scratch.reward, scratch.terminated, scratch.truncated,
                self._infos(scratch))

    def close_extras(self, **kwargs) -> None:
        if not self._closed:
            self._closed = True
            self.builds.close()

    def __enter__(self) -> "UnityVecEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if not getattr(self, "_closed", True):
            self.close()

    # -- one step's bookkeeping ---------------------------------------------------------------
    def _send(self, b: int, actions) -> None:
        slots = self._order[b]
        if isinstance(actions, dict):
            rows = {k: np.asarray(v)[slots] for k, v in actions.items()}
        else:
            rows = np.asarray(actions)[slots]
        self.builds.send_step(b, {self.behavior_name: to_action_tuple(rows, self._action_spec)})

    def _absorb(self, out: BuildOutput, scratch: _Step) -> bool:
        """Folds one build answer into ``scratch``; True once all its slots have decided."""
        b = out.build
        slots = self._build_slots[b]
        self._others.check(b, out.steps)
        if out.restarted is not None:
            self._cut_for_restart(b, scratch)
            self._remap_build(out)
        self._take_terminals(out, scratch)
        self._take_decisions(out, scratch)
        decided = scratch.decided[slots]
        if decided.all():
            return True
        if decided.any():
            raise DecisionTimingError(
                f"In build {b}, agents {self._agent_id[slots[decided]].tolist()} requested a "
                f"decision while agents {self._agent_id[slots[~decided]].tolist()} did not "
                f"(different decision periods or offsets). " + _USE_STREAM)
        return False

    def _slots_of(self, b: int, agent_ids: np.ndarray) -> np.ndarray:
        ids = self._ids[b]
        pos = np.searchsorted(ids, agent_ids)
        pos_ok = np.minimum(pos, len(ids) - 1)
        if len(agent_ids) and not np.array_equal(ids[pos_ok], agent_ids):
            unknown = sorted(set(agent_ids.tolist()) - set(ids.tolist()))
            raise AgentSetChangedError(
                f"Agents {unknown} of build {b} appeared after reset (the slots hold agents "
                f"{ids.tolist()}). " + _USE_STREAM)
        return self._build_slots[b][pos_ok]

    def _take_terminals(self, out: BuildOutput, scratch: _Step) -> None:
        term = out.steps[self.behavior_name][1]
        if len(term) == 0:
            return
        slots = self._slots_of(out.build, term.agent_id)
        obs = convert_obs(term.obs, self._png)
        scratch.reward[slots] += term.reward
        self._episode_return[slots] += term.reward
        scratch.terminated[slots] = ~term.interrupted
        scratch.truncated[slots] = term.interrupted
        scratch.ended[slots] = True
        for row, slot in enumerate(slots.tolist()):
            scratch.final[slot] = (self._pack([o[row] for o in obs]), {})

    def _take_decisions(self, out: BuildOutput, scratch: _Step) -> None:
        dec = out.steps[self.behavior_name][0]
        slots = self._slots_of(out.build, dec.agent_id)
        if scratch.decided[slots].any():
            raise DecisionTimingError(
                f"Agents {self._agent_id[slots[scratch.decided[slots]]].tolist()} of build "
                f"{out.build} requested two decisions within one vector step while others "
                f"waited. " + _USE_STREAM)
        reward = np.where(scratch.ended[slots], 0.0, dec.reward).astype(np.float32)
        scratch.reward[slots] += reward
        self._episode_return[slots] += reward
        for i, o in enumerate(convert_obs(dec.obs, self._png)):
            self._obs[i][slots] = o
        if self._mask is not None:
            self._mask[slots] = allowed_mask(dec, self._action_spec)
        scratch.decided[slots] = True
        self._order[out.build] = slots

    def _cut_for_restart(self, b: int, scratch: _Step) -> None:
        """The build died: its agents' episodes end as truncated, at their last observation."""
        for slot in self._build_slots[b].tolist():
            if slot not in scratch.final:
                scratch.final[slot] = (self._pack([o[slot] for o in self._obs]), {})
        scratch.truncated[self._build_slots[b]] = True
        scratch.ended[self._build_slots[b]] = True
        scratch.restarted[self._build_slots[b]] = True

    def _remap_build(self, out: BuildOutput) -> None:
        """After a (re)start, slots of build b map to its agents in id order."""
        b = out.build
        ids = np.sort(out.steps[self.behavior_name][0].agent_id)
        if len(ids) != len(self._build_slots[b]):
            raise AgentSetChangedError(
                f"Build {b} now has {len(ids)} agents of '{self.behavior_name}' instead of "
                f"{len(self._build_slots[b])}. " + _USE_STREAM)
        self._ids[b] = ids
        self._agent_id[self._build_slots[b]] = ids

    def _finish_episodes(self, scratch: _Step) -> None:
        self._episode_length += 1
        for slot, (final_obs, info) in scratch.final.items():
            info.update(episode={"r": float(self._episode_return[slot]),
                                 "l": int(self._episode_length[slot])},
                        agent_id=int(self._agent_id[slot]),
                        build=int(self._build_of_slot[slot]),
                        build_restarted=bool(scratch.restarted[slot]))
        ended = scratch.ended
        self._episode_return[ended] = 0.0
        self._episode_length[ended] = 0

    # -- outputs --------------------------------------------------------------------------
    def _pack(self, per_obs: list[np.ndarray]):
        if len(per_obs) == 1:
            return per_obs[0].copy()
        return {k: v.copy() for k, v in zip(self._obs_keys, per_obs)}

    def _observation(self):
        if len(self._obs) == 1:
            return self._obs[0].copy()
        return {k: v.copy() for k, v in zip(self._obs_keys, self._obs)}

    def _infos(self, scratch: _Step) -> dict:
        all_true = np.ones(self.num_envs, bool)
        infos: dict[str, Any] = {"agent_id": self._agent_id.copy(), "_agent_id": all_true,
                                 "build": self._build_of_slot.copy(), "_build": all_true}
        if self._mask is not None:
            infos["action_mask"] = self._mask.copy()
            infos["_action_mask"] = all_true
        if scratch.restarted.any():
            infos["build_restarted"] = scratch.restarted.copy()
            infos["_build_restarted"] = scratch.restarted.copy()
        for slot, (final_obs, info) in sorted(scratch.final.items()):
            infos = self._add_info(infos, {"final_obs": final_obs, "final_info": info}, slot)
        return infos
