"""``UnityParallelEnv``: an optional PettingZoo ``ParallelEnv`` view over an ``AgentStream``.

Needs ``pip install pettingzoo`` (the ``pettingzoo`` extra); nothing else in unity_rl imports
this module. Documented in docs/adapter.md ("PettingZoo").

Contract:
- one PettingZoo agent per Unity agent, named ``f"{label}/{build}/{agent_id}"``, where ``label``
  is the behavior's short name (``3DBall``), or its full name (``Soccer?team=1``) when two
  selected behaviors share a short name;
- ``possible_agents`` holds every agent seen so far and grows when Unity agents appear late;
  ``observation_space(agent)``/``action_space(agent)`` are the behavior's spaces (one object per
  behavior);
- ``agents`` is always **the agents that must get an action at the next ``step()``**: every
  agent with a pending Unity decision, nothing else. ``step(actions)`` takes exactly those
  keys;
- between two ``step()`` calls each build is stepped (empty Unity steps over terminal-only
  messages included) until some agent of it requests a decision; builds are driven one by one
  (``AgentStream.builds``), so they need not be in phase. Within one build, the live agents of
  a behavior must decide together: if some do and others do not, ``DecisionTimingError``. A
  behavior that does not decide at a step (TwoBehaviors: 3DBall every 5 steps, Basic every
  step) is simply absent from that step's dicts and from ``agents``; ``live_agents`` lists every
  agent whose episode is running;
- an episode end is reported once, with ``terminated`` (real end) or ``truncated`` (Unity's
  interrupted, or the build restarted) and the final observation, and the agent leaves
  ``agents``. With ``revive=True`` (default), when Unity starts its next episode the agent
  comes back at the next ``step()`` with the fresh observation (reward 0). If the fresh decision
  arrived in the same ``step()`` as the end, the next ``step()`` returns the revived agents
  without stepping their build (it waits for their actions; the actions given for its other
  agents are kept and sent with theirs at the following ``step()``). With
  ``revive=False`` an ended agent stays out until ``reset()`` and Unity's decisions for it get
  zero actions (nobody observes them);
- ``infos[agent]``: ``behavior``, ``build``, ``agent_id``, ``group_id`` (its
  ``SimpleMultiAgentGroup``, 0: none; unique per build) and ``group_reward`` (the group reward
  of this transition, beside ``rewards[agent]``); ``action_mask`` (bool, True =
  allowed) for discrete behaviors; at an episode end ``episode = {"r": return, "l": actions}``
  and ``build_restarted`` when the build was restarted.

Size (about 420 lines, left whole on purpose): one class whose state (pending decisions, held
actions, revival queues, groups, per-build stepping) every public call reads and writes; split
in two, the halves would share that state through each other's attributes. The small helpers
(``_Out``, ``_zero_action``, ``_stack_actions``) are its own.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np

try:
    from pettingzoo import ParallelEnv
except ImportError as exc:  # pragma: no cover - exercised through a subprocess test
    raise ImportError(
        "unity_rl.envs.pettingzoo_env needs PettingZoo: pip install pettingzoo "
        "(or pip install 'unity-rl[pettingzoo]')") from exc

from gymnasium import spaces

from mlagents_envs.base_env import ActionTuple

from unity_rl.envs.agent_stream import AgentStream
from unity_rl.envs.batches import decision_batch, empty_steps, terminal_batch
from unity_rl.envs.behavior import (
    ALL_BEHAVIORS,
    OtherBehaviors,
    OtherBehaviorsMode,
    observation_keys,
    short_name,
    single_action_space,
    single_observation_space,
    to_action_tuple,
)
from unity_rl.envs.build_set import BuildOutput
from unity_rl.envs.closing import ClosesBuilds
from unity_rl.envs.slots import DecisionTimingError
from unity_rl.envs.types import AgentKey

__all__ = ["DecisionTimingError", "UnityParallelEnv"]

MAX_EMPTY_STEPS = 100_000
"""Unity steps one ``step()`` may take without any agent requesting a decision."""

_USE_STREAM = ("The PettingZoo view needs the live agents of a behavior in one build to decide "
               "at the same Unity step; use unity_rl.AgentStream(behaviors=...).step_all, which follows "
               "each agent's own timing.")


class UnityParallelEnv(ClosesBuilds, ParallelEnv):
    """PettingZoo ``ParallelEnv`` over the agents of an ``AgentStream``; see the module doc."""

    metadata = {"name": "unity_rl_parallel_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, env_path: str, *, behaviors: Sequence[str] | str = ALL_BEHAVIORS,
                 revive: bool = True, other_behaviors: OtherBehaviorsMode = "error",
                 **stream_kwargs: Any):
        """``stream_kwargs``: any other ``AgentStream`` keyword (``settings=LaunchSettings(...)``,
        ``num_builds``, ``restart_quota``, or any launch setting: ``base_port``, ``env_args``,
        ``seed``, ``timeout_wait``, ...)."""
        stream = AgentStream(env_path, behaviors=behaviors, other_behaviors=other_behaviors,
                             **stream_kwargs)
        try:
            self._attach(stream, revive, other_behaviors)
        except BaseException:
            stream.close()
            raise

    @classmethod
    def from_stream(cls, stream: AgentStream, *, revive: bool = True,
                    other_behaviors: OtherBehaviorsMode = "error") -> "UnityParallelEnv":
        """Takes over an open stream: its builds and behavior selection (do not step the
        stream afterwards; ``close()`` closes it)."""
        env = cls.__new__(cls)
        env._attach(stream, revive, other_behaviors)
        return env

    def _attach(self, stream: AgentStream, revive: bool,
                other_behaviors: OtherBehaviorsMode) -> None:
        self.stream = stream
        self.builds = stream.builds
        self.revive = bool(revive)
        self.behavior_names: list[str] = list(stream.behavior_names)
        self._specs = dict(stream.specs)
        self._others = OtherBehaviors(other_behaviors, self.behavior_names,
                                      "Select it with behaviors=[...] (or ALL_BEHAVIORS)")
        shorts = [short_name(n) for n in self.behavior_names]
        self._label = {n: (s if shorts.count(s) == 1 else n)
                       for n, s in zip(self.behavior_names, shorts)}
        self._by_label = {label: n for n, label in self._label.items()}
        png = self.builds.png_observations
        self._png = {n: tuple(png.get(n, ())) or (False,) * len(self._specs[n].observation_specs)
                     for n in self.behavior_names}
        self._obs_spaces = {n: single_observation_space(self._specs[n], self._png[n])
                            for n in self.behavior_names}
        self._act_spaces = {n: single_action_space(self._specs[n].action_spec)
                            for n in self.behavior_names}
        self._obs_keys = {n: (observation_keys(self._specs[n])
                              if isinstance(self._obs_spaces[n], spaces.Dict) else None)
                          for n in self.behavior_names}
        self.possible_agents: list[str] = []
        self._keys: dict[str, AgentKey] = {}
        self._closed = False
        self._needs_reset = True
        self._fresh_builds = True
        self._clear()

    def _clear(self) -> None:
        self.agents: list[str] = []
        self._pending: dict[str, Any] = {}      # reported, awaiting an action
        self._unreported: dict[str, tuple] = {}  # revived in the step that ended them
        self._group: dict[str, int] = {}  # agent -> group id at its latest message (0: none)
        self._next_group: dict[str, int] = {}  # group id of an unreported revival
        self._held: dict[str, Any] = {}         # actions waiting for their build's Unity step
        self._live: set[str] = set()            # episode running
        self._dead: set[str] = set()            # revive=False: out until reset()
        self._rows: list[dict[str, list[str]]] = [
            {n: [] for n in self.behavior_names} for _ in range(self.builds.num_builds)]
        self._last_obs: dict[str, Any] = {}
        self._return: dict[str, float] = defaultdict(float)
        self._length: dict[str, int] = defaultdict(int)

    # -- spaces ------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_spaces[self.behavior_of(agent)]

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_spaces[self.behavior_of(agent)]

    def behavior_of(self, agent: str) -> str:
        """The agent's full behavior name (also for agents not seen yet)."""
        key = self._keys.get(agent)
        if key is not None:
            return key.behavior
        label = agent.rsplit("/", 2)[0]
        if label not in self._by_label:
            raise KeyError(f"'{agent}' is not an agent name of this env: names are "
                           f"'<behavior>/<build>/<agent_id>' with <behavior> one of "
                           f"{sorted(self._by_label)}")
        return self._by_label[label]

    def agent_name(self, key: AgentKey) -> str:
        return f"{self._label[key.behavior]}/{key.build}/{key.agent_id}"

    @property
    def live_agents(self) -> list[str]:
        """Agents whose episode is running, whether or not they decide at this step."""
        return [a for a in self.possible_agents if a in self._live]

    # -- API ---------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict | None = None):
        """Unity's RESET for every build (every agent starts an episode; no ends reported).
        ``seed``: ML-Agents takes a seed only at launch, so a seed relaunches the builds with
        seeds ``seed + i`` (not right after construction with the construction seed).
        ``options`` is ignored. Returns ``(observations, infos)`` of the agents that decide
        first (after a RESET: all of them)."""
        self._check_open()
        if seed is not None and not (self._fresh_builds and seed == self.builds.seed):
            self.builds.relaunch_all(seed)
        self._fresh_builds = False
        self._needs_reset = True
        self._clear()
        out, ended_now = _Out(), set()
        for output in self.builds.reset():
            self._process(output, out, ended_now)
        self._advance(out, ended_now)
        self._needs_reset = False
        return out.obs, out.infos

    def step(self, actions: Mapping[str, Any]):
        """``actions``: one per agent of ``agents``, exactly. Returns ``(observations, rewards,
        terminations, truncations, infos)`` for the agents that decide now and those whose
        episode ended (see the module doc for revival steps)."""
        self._check_open()
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        missing = set(self.agents) - set(actions)
        extra = set(actions) - set(self.agents)
        if missing or extra:
            raise KeyError(f"step() takes one action per agent of env.agents, exactly: "
                           f"missing {sorted(missing)}, not expected {sorted(extra)} "
                           f"(agents that do not decide now, or whose episode ended, take none)")
        for agent, action in actions.items():
            self._held[agent] = action
            self._length[agent] += 1
        self._pending = {}
        out, ended_now = _Out(), set()
        revived, self._unreported = self._unreported, {}
        for agent, (obs, mask) in revived.items():  # their builds wait for their actions
            self._group[agent] = self._next_group.pop(agent, self._group.get(agent, 0))
            self._report_decision(out, agent, obs, mask, 0.0)
        self._advance(out, ended_now)
        return out.as_tuple()

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            self.stream.close()

    # -- internals ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the env is closed")

    def _waits(self, b: int) -> bool:
        """Build b is not stepped now: some agent of it must get an action from the user, or
        (revive=False) none of its agents is in an episode any more."""
        for rows in self._rows[b].values():
            if any(a in self._pending or a in self._unreported for a in rows):
                return True
        return not self.revive and not any(self._keys[a].build == b for a in self._live)

    def _advance(self, out: "_Out", ended_now: set[str]) -> None:
        """Steps every build that does not wait (with the held actions, zeros for
        revive=False agents, nothing in empty steps) until each waits; then checks that the
        live agents of each behavior of a build decide together."""
        for _ in range(MAX_EMPTY_STEPS):
            to_step = [b for b in range(self.builds.num_builds) if not self._waits(b)]
            if not to_step:
                break
            for b in to_step:
                self.builds.send_step(b, self._actions_for_unity(b))
            for output in self.builds.receive(to_step):
                self._process(output, out, ended_now)
        else:
            raise RuntimeError(f"no agent requested a decision in {MAX_EMPTY_STEPS} Unity steps")
        self._check_alignment()
        self.agents = list(self._pending)

    def _actions_for_unity(self, b: int) -> dict[str, ActionTuple]:
        actions = {}
        for name, rows in self._rows[b].items():
            if not rows:
                continue
            chosen = []
            for agent in rows:
                if agent in self._held:
                    chosen.append(self._held.pop(agent))
                elif agent in self._dead:
                    chosen.append(_zero_action(self._act_spaces[name]))
                else:  # pragma: no cover - bookkeeping invariant
                    raise RuntimeError(f"internal error: no action for pending agent {agent}")
            actions[name] = to_action_tuple(_stack_actions(chosen), self._specs[name].action_spec)
        return actions

    def _process(self, output: BuildOutput, out: "_Out", ended_now: set[str]) -> None:
        """Records one build's message: episode ends, then decisions."""
        b, restarted = output.build, output.restarted
        self._others.check(b, output.steps)
        if restarted is not None:  # the old process's agents: their episodes are cut
            for agent in [a for a in self.possible_agents
                          if a in self._live and self._keys[a].build == b]:
                self._end(out, agent, self._last_obs.get(agent), 0.0, True, restarted)
                ended_now.add(agent)
            for agent in [a for a in self._held if self._keys[a].build == b]:
                del self._held[agent]
        for name in self.behavior_names:
            spec = self._specs[name]
            dec_steps, term_steps = output.steps.get(name) or empty_steps(spec)
            term = terminal_batch(b, name, term_steps, self._png[name])
            for i, key in enumerate(term.keys):
                agent = self.agent_name(key)
                if agent not in self._live:
                    continue  # revive=False agent ending again, or an agent never seen
                self._group[agent] = int(term.group_id[i])
                self._end(out, agent, self._row_obs(name, term.obs, i), float(term.reward[i]),
                          bool(term.interrupted[i]), None, float(term.group_reward[i]))
                ended_now.add(agent)
            dec = decision_batch(b, name, dec_steps, spec, self._png[name])
            self._rows[b][name] = [self.agent_name(k) for k in dec.keys]
            for i, key in enumerate(dec.keys):
                agent = self._rows[b][name][i]
                if agent in self._dead:
                    continue  # gets zeros
                if agent not in self._keys:
                    self._keys[agent] = key
                    self.possible_agents.append(agent)
                obs = self._row_obs(name, dec.obs, i)
                mask = None if dec.action_mask is None else dec.action_mask[i]
                reward, group_reward = float(dec.reward[i]), float(dec.group_reward[i])
                if agent not in self._live:  # first decision of an episode: no reward yet
                    self._live.add(agent)
                    self._return[agent], self._length[agent] = 0.0, 0
                    reward = group_reward = 0.0
                self._last_obs[agent] = obs
                if agent in ended_now:
                    self._unreported[agent] = (obs, mask)  # reported at the next step
                    self._next_group[agent] = int(dec.group_id[i])
                else:
                    self._group[agent] = int(dec.group_id[i])
                    self._report_decision(out, agent, obs, mask, reward, group_reward)

    def _end(self, out: "_Out", agent: str, obs, reward: float, interrupted: bool,
             restarted: str | None, group_reward: float = 0.0) -> None:
        self._return[agent] += reward
        out.obs[agent] = obs
        out.rewards[agent] = reward
        out.terminations[agent] = not interrupted
        out.truncations[agent] = interrupted
        info = self._base_info(agent, group_reward)
        info["episode"] = {"r": self._return[agent], "l": self._length[agent]}
        if restarted is not None:
            info["build_restarted"] = restarted
        out.infos[agent] = info
        self._live.discard(agent)
        self._pending.pop(agent, None)
        if not self.revive:
            self._dead.add(agent)

    def _report_decision(self, out: "_Out", agent: str, obs, mask, reward: float,
                         group_reward: float = 0.0) -> None:
        self._return[agent] += reward
        out.obs[agent] = obs
        out.rewards[agent] = reward
        out.terminations[agent] = False
        out.truncations[agent] = False
        info = self._base_info(agent, group_reward)
        if mask is not None:
            info["action_mask"] = mask
        out.infos[agent] = info
        self._pending[agent] = None

    def _base_info(self, agent: str, group_reward: float) -> dict:
        key = self._keys[agent]
        return {"behavior": key.behavior, "build": key.build, "agent_id": key.agent_id,
                "group_id": self._group.get(agent, 0), "group_reward": group_reward}

    def _row_obs(self, name: str, obs: list[np.ndarray], i: int):
        keys = self._obs_keys[name]
        if keys is None:
            return obs[0][i]
        return {k: o[i] for k, o in zip(keys, obs)}

    def _check_alignment(self) -> None:
        """Within one build, the live agents of a behavior decide together or not at all."""
        deciding: dict[tuple[int, str], set[str]] = defaultdict(set)
        for agent in [*self._pending, *self._unreported, *self._held]:
            key = self._keys[agent]
            deciding[key.build, key.behavior].add(agent)
        for (b, name), agents in deciding.items():
            waiting = sorted(a for a in self._live if a not in agents
                             and self._keys[a].build == b and self._keys[a].behavior == name)
            if waiting:
                raise DecisionTimingError(
                    f"Agents of behavior '{name}' in build {b} decide at different Unity "
                    f"steps: {sorted(agents)[:5]} request a decision now, {waiting[:5]} "
                    f"(in an episode) do not (mixed decision periods, or an agent that "
                    f"vanished without ending). {_USE_STREAM}")


class _Out:
    """The five dicts of one ``step()``."""

    def __init__(self) -> None:
        self.obs: dict[str, Any] = {}
        self.rewards: dict[str, float] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.infos: dict[str, dict] = {}

    def as_tuple(self):
        return self.obs, self.rewards, self.terminations, self.truncations, self.infos


def _zero_action(space: spaces.Space):
    if isinstance(space, spaces.Dict):
        return {k: _zero_action(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Discrete):
        return 0
    return np.zeros(space.shape, space.dtype)


def _stack_actions(actions: list):
    """Per-agent actions -> the batched form ``AgentStream.step_all`` takes."""
    if isinstance(actions[0], Mapping):
        return {k: np.stack([np.asarray(a[k]) for a in actions]) for k in actions[0]}
    return np.stack([np.asarray(a) for a in actions])
