"""Lock-step slots of one behavior over N builds: the bookkeeping behind ``UnityVecEnv`` and
``MultiBehaviorVecEnv``.

A slot is one agent of the behavior: slots = builds x agents, fixed at the first reset (the agents
present then, ordered by build then agent id). ``BehaviorSlots`` folds the builds' answers
(``BuildOutput``) into per-slot observations, rewards, group ids and group rewards, episode ends
(``final_obs``/``final_info``, SAME_STEP autoreset) and action masks, and raises ``DecisionTimingError`` /
``AgentSetChangedError`` where the agents cannot be represented in lock-step.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space
from mlagents_envs.base_env import ActionTuple, BehaviorSpec

from unity_rl.envs.behavior import (
    allowed_mask,
    convert_obs,
    obs_dtype,
    observation_keys,
    single_action_space,
    single_observation_space,
    to_action_tuple,
)
from unity_rl.envs.build_set import BuildOutput


class DecisionTimingError(RuntimeError):
    """Agents' decision timing cannot be represented as a lock-step vector."""


class AgentSetChangedError(RuntimeError):
    """An agent appeared or vanished after the slots were fixed."""


USE_STREAM = ("UnityVecEnv steps all slots in lock-step; use unity_rl.AgentStream, which "
              "follows each agent's own timing and agent set.")


class SlotStep:
    """Scratch state of one vector step of one behavior."""

    def __init__(self, num_envs: int):
        self.reward = np.zeros(num_envs, np.float32)
        self.group_reward = np.zeros(num_envs, np.float32)
        self.terminated = np.zeros(num_envs, bool)
        self.truncated = np.zeros(num_envs, bool)
        self.decided = np.zeros(num_envs, bool)
        self.ended = np.zeros(num_envs, bool)
        self.restarted = np.zeros(num_envs, bool)
        self.final: dict[int, tuple[Any, dict]] = {}


class BehaviorSlots:
    """The slots of one behavior; ``first`` is the builds' reset answers that fix them."""

    _add_info = VectorEnv._add_info  # gymnasium's info batching (uses self.num_envs)

    def __init__(self, name: str, spec: BehaviorSpec, png: tuple[bool, ...],
                 first: list[BuildOutput], use_instead: str = USE_STREAM):
        self.name = name
        self.spec = spec
        self.action_spec = spec.action_spec
        self.use_instead = use_instead
        self.obs_keys = observation_keys(spec)
        self.png = tuple(png) or (False,) * len(spec.observation_specs)
        ids = [np.sort(out.steps[name][0].agent_id) for out in first]
        counts = [len(i) for i in ids]
        self.num_envs = int(sum(counts))
        if self.num_envs == 0:
            raise AgentSetChangedError(
                f"Behavior '{name}' has no agent requesting a decision at reset.")
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        self.build_slots = [np.arange(starts[b], starts[b + 1]) for b in range(len(ids))]
        self.ids = ids
        self.order = [s.copy() for s in self.build_slots]
        self.single_observation_space = single_observation_space(spec, self.png)
        self.single_action_space = single_action_space(self.action_spec)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.obs = [np.zeros((self.num_envs, *o.shape), obs_dtype(p))
                    for o, p in zip(spec.observation_specs, self.png)]
        self.mask = (np.ones((self.num_envs, sum(self.action_spec.discrete_branches)), bool)
                     if self.action_spec.discrete_branches else None)
        self.agent_id = np.concatenate(ids).astype(np.int64)
        self.group_id = np.zeros(self.num_envs, np.int64)
        """Each slot's group id at its latest decision (0: no group; unique per build)."""
        for out, slots in zip(first, self.build_slots):
            dec = out.steps[name][0]
            self.group_id[slots] = np.asarray(dec.group_id)[np.argsort(dec.agent_id)]
        self.build_of_slot = np.repeat(np.arange(len(ids)), counts)
        self.episode_return = np.zeros(self.num_envs, np.float64)
        self.episode_length = np.zeros(self.num_envs, np.int64)

    def new_step(self) -> SlotStep:
        return SlotStep(self.num_envs)

    def reset_episodes(self) -> None:
        self.episode_return[:] = 0.0
        self.episode_length[:] = 0

    # -- actions ------------------------------------------------------------------------------
    def action_tuple(self, b: int, actions) -> ActionTuple:
        """The rows of ``actions`` (one per slot) for build b, in the order of its last message."""
        slots = self.order[b]
        if isinstance(actions, dict):
            rows = {k: np.asarray(v)[slots] for k, v in actions.items()}
        else:
            rows = np.asarray(actions)[slots]
        return to_action_tuple(rows, self.action_spec)

    # -- answers ------------------------------------------------------------------------------
    def absorb(self, out: BuildOutput, scratch: SlotStep) -> bool:
        """Folds one build answer into ``scratch``; True once all slots of that build have
        decided, False while none has; DecisionTimingError when only some have."""
        b = out.build
        slots = self.build_slots[b]
        if out.restarted is not None:
            self.cut_for_restart(b, scratch)
            self.remap_build(out)
        self.take_terminals(out, scratch)
        self.take_decisions(out, scratch)
        decided = scratch.decided[slots]
        if decided.all():
            return True
        if decided.any():
            raise DecisionTimingError(
                f"In build {b}, agents {self.agent_id[slots[decided]].tolist()} of "
                f"'{self.name}' requested a decision while agents "
                f"{self.agent_id[slots[~decided]].tolist()} did not (different decision periods "
                f"or offsets). " + self.use_instead)
        return False

    def _slots_of(self, b: int, agent_ids: np.ndarray) -> np.ndarray:
        ids = self.ids[b]
        pos = np.searchsorted(ids, agent_ids)
        pos_ok = np.minimum(pos, len(ids) - 1)
        if len(agent_ids) and not np.array_equal(ids[pos_ok], agent_ids):
            unknown = sorted(set(agent_ids.tolist()) - set(ids.tolist()))
            raise AgentSetChangedError(
                f"Agents {unknown} of '{self.name}' in build {b} appeared after reset (the slots "
                f"hold agents {ids.tolist()}). " + self.use_instead)
        return self.build_slots[b][pos_ok]

    def take_terminals(self, out: BuildOutput, scratch: SlotStep) -> None:
        term = out.steps[self.name][1]
        if len(term) == 0:
            return
        slots = self._slots_of(out.build, term.agent_id)
        obs = convert_obs(term.obs, self.png)
        scratch.reward[slots] += term.reward
        scratch.group_reward[slots] += term.group_reward
        self.episode_return[slots] += term.reward
        scratch.terminated[slots] = ~term.interrupted
        scratch.truncated[slots] = term.interrupted
        scratch.ended[slots] = True
        for row, slot in enumerate(slots.tolist()):
            scratch.final[slot] = (self._pack([o[row] for o in obs]),
                                   {"group_id": int(term.group_id[row])})

    def take_decisions(self, out: BuildOutput, scratch: SlotStep) -> None:
        dec = out.steps[self.name][0]
        if len(dec) == 0:
            return
        slots = self._slots_of(out.build, dec.agent_id)
        if scratch.decided[slots].any():
            raise DecisionTimingError(
                f"Agents {self.agent_id[slots[scratch.decided[slots]]].tolist()} of "
                f"'{self.name}' in build {out.build} requested two decisions within one vector "
                f"step while others waited. " + self.use_instead)
        reward = np.where(scratch.ended[slots], 0.0, dec.reward).astype(np.float32)
        scratch.reward[slots] += reward
        scratch.group_reward[slots] += np.where(scratch.ended[slots], 0.0,
                                                dec.group_reward).astype(np.float32)
        self.group_id[slots] = dec.group_id
        self.episode_return[slots] += reward
        for i, o in enumerate(convert_obs(dec.obs, self.png)):
            self.obs[i][slots] = o
        if self.mask is not None:
            self.mask[slots] = allowed_mask(dec, self.action_spec)
        scratch.decided[slots] = True
        self.order[out.build] = slots

    def cut_for_restart(self, b: int, scratch: SlotStep) -> None:
        """The build died: its agents' episodes end as truncated, at their last observation."""
        for slot in self.build_slots[b].tolist():
            if slot not in scratch.final:
                scratch.final[slot] = (self._pack([o[slot] for o in self.obs]), {})
        scratch.truncated[self.build_slots[b]] = True
        scratch.ended[self.build_slots[b]] = True
        scratch.restarted[self.build_slots[b]] = True

    def remap_build(self, out: BuildOutput) -> None:
        """After a (re)start, slots of build b map to its agents in id order."""
        b = out.build
        ids = np.sort(out.steps[self.name][0].agent_id)
        if len(ids) != len(self.build_slots[b]):
            raise AgentSetChangedError(
                f"Build {b} now has {len(ids)} agents of '{self.name}' instead of "
                f"{len(self.build_slots[b])}. " + self.use_instead)
        self.ids[b] = ids
        self.agent_id[self.build_slots[b]] = ids

    def finish_episodes(self, scratch: SlotStep) -> None:
        self.episode_length += 1
        for slot, (final_obs, info) in scratch.final.items():
            info.update(episode={"r": float(self.episode_return[slot]),
                                 "l": int(self.episode_length[slot])},
                        agent_id=int(self.agent_id[slot]),
                        build=int(self.build_of_slot[slot]),
                        build_restarted=bool(scratch.restarted[slot]))
        ended = scratch.ended
        self.episode_return[ended] = 0.0
        self.episode_length[ended] = 0

    # -- outputs ------------------------------------------------------------------------------
    def _pack(self, per_obs: list[np.ndarray]):
        if len(per_obs) == 1:
            return per_obs[0].copy()
        return {k: v.copy() for k, v in zip(self.obs_keys, per_obs)}

    def observation(self):
        return self._pack(self.obs)

    def infos(self, scratch: SlotStep) -> dict:
        all_true = np.ones(self.num_envs, bool)
        infos: dict[str, Any] = {"agent_id": self.agent_id.copy(), "_agent_id": all_true,
                                 "build": self.build_of_slot.copy(), "_build": all_true,
                                 "group_id": self.group_id.copy(), "_group_id": all_true,
                                 "group_reward": scratch.group_reward.copy(),
                                 "_group_reward": all_true}
        if self.mask is not None:
            infos["action_mask"] = self.mask.copy()
            infos["_action_mask"] = all_true
        if scratch.restarted.any():
            infos["build_restarted"] = scratch.restarted.copy()
            infos["_build_restarted"] = scratch.restarted.copy()
        for slot, (final_obs, info) in sorted(scratch.final.items()):
            infos = self._add_info(infos, {"final_obs": final_obs, "final_info": info}, slot)
        return infos
