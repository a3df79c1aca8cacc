"""The agents of a stand-in scene, one ``Group`` per behavior, as Unity lays them out.

- ``plan_groups``: the scene's behaviors with the stand-in options applied (agent counts per
  area, decision periods, late agents, MaxStep) as ``GroupPlan``s; options that clash raise
  ``OptionError`` naming the flag;
- ``Group``: one behavior's agents — their lifecycle state (episode start, reward since the last
  decision, stored actions, pending terminal infos) next to the scene model's physical state; in a
  pool, agents move between the pool's behaviors at an episode start (Unity's Agent.SetModel);
- ``brain_parameters_bytes``: a behavior's BrainParametersProto, as Unity sends it once.

The order in which the academy runs them is ``unity_rl.standin.academy``'s contract.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from unity_rl.standin.options import OptionError, PlayerOptions
from unity_rl.standin.scenes.base import BehaviorDef, SceneModel
from unity_rl.standin.wire import AgentInfoBatch, ObsEncoder

NO_AGENTS = np.zeros(0, dtype=np.int64)
"""An empty index array (no agent)."""


@dataclass(frozen=True)
class GroupPlan:
    """Layout of one behavior after options: how many agents, their periods and arrivals."""

    behavior: BehaviorDef
    agents: int
    periods: tuple[int, ...]
    """One per agent."""
    appear_at: tuple[int, ...]
    """Per agent: total academy steps after which it appears (0 = present from the start)."""
    max_step: int


def plan_groups(
    behaviors: Sequence[BehaviorDef], opts: PlayerOptions, num_areas: int = 1
) -> list[GroupPlan]:
    """Applies the stand-in options to a scene's behaviors; raises OptionError when they clash."""
    if opts.agents is not None and len(opts.agents) not in (1, len(behaviors)):
        raise OptionError(
            f"--standin-agents has {len(opts.agents)} values; this scene has "
            f"{len(behaviors)} behavior(s): give one value, or one per behavior"
        )
    plans = []
    for i, bdef in enumerate(behaviors):
        n = bdef.agents if opts.agents is None else opts.agents[i % len(opts.agents)]
        n *= max(1, num_areas)
        if opts.decision_periods is not None:
            periods = tuple(opts.decision_periods[j % len(opts.decision_periods)] for j in range(n))
        else:
            p = opts.decision_period or bdef.decision_period
            periods = (p,) * n
        appear = [0] * n
        if opts.late_agents is not None:
            count, step = opts.late_agents
            if count >= n:
                raise OptionError(
                    f"--standin-late-agents {count}@{step} would leave behavior {bdef.name} "
                    f"with no agent at the start ({n} agents)"
                )
            for j in range(n - count, n):
                appear[j] = step
        max_step = bdef.max_step if opts.max_step is None else opts.max_step
        plans.append(GroupPlan(bdef, n, periods, tuple(appear), max_step))
    pools: dict[str, int] = {}
    for plan in plans:  # behaviors whose agents switch between them share one set of agents
        pool = plan.behavior.pool
        if pool and pools.setdefault(pool, plan.agents) != plan.agents:
            raise OptionError(f"the behaviors of pool {pool!r} share their agents: give them "
                              f"the same --standin-agents count")
        if pool and opts.late_agents is not None:
            raise OptionError("--standin-late-agents: not supported in a scene whose agents "
                              "switch behavior")
    return plans


def brain_parameters_bytes(name: str, model: SceneModel, spec=None) -> bytes:
    """Serialized BrainParametersProto for a behavior, as Unity's ToBrainParametersProto."""
    from mlagents_envs.communicator_objects.brain_parameters_pb2 import BrainParametersProto

    spec = spec or model.spec
    bp = BrainParametersProto(brain_name=name, is_training=True)
    bp.action_spec.num_continuous_actions = spec.continuous
    bp.action_spec.num_discrete_actions = len(spec.branches)
    bp.action_spec.discrete_branch_sizes.extend(spec.branches)
    # Fields kept for trainers older than API 1.3 (hybrid actions), as Unity still fills them.
    if spec.continuous and not spec.branches:
        bp.vector_action_size_deprecated.append(spec.continuous)
        bp.vector_action_space_type_deprecated = 1  # continuous
    elif spec.branches and not spec.continuous:
        bp.vector_action_size_deprecated.extend(spec.branches)
        bp.vector_action_space_type_deprecated = 0  # discrete
    return bp.SerializeToString()


class Group:
    """The agents of one behavior: lifecycle state next to the scene model's physical state."""

    def __init__(self, plan: GroupPlan, model: SceneModel, ids: np.ndarray):
        self.name = plan.behavior.name
        self.name_bytes = self.name.encode()
        self.model = model
        # a pool's behaviors may differ in shape (StrikersVsGoalie): the model's spec_for says
        self.spec = model.spec_for(self.name) if hasattr(model, "spec_for") else model.spec
        self.n = plan.agents
        self.ids = ids
        self.periods = np.asarray(plan.periods, dtype=np.int64)
        self.uniform_period = plan.periods[0] if len(set(plan.periods)) == 1 else None
        self.appear_at = np.asarray(plan.appear_at, dtype=np.int64)
        self.max_step = plan.max_step
        self.active = self.appear_at == 0
        self.active_idx = np.flatnonzero(self.active)
        self.waiting = bool((~self.active).any())
        self.subscribed = bool(self.active.any())
        self.brain_sent = False
        self.episode_start = np.zeros(self.n, dtype=np.int64)
        """Academy total step count when each agent's episode began: its step count (Unity's
        Agent.StepCount) is ``academy.total_steps - episode_start``."""
        self.first_start = 0
        """min(episode_start) over present agents: no MaxStep can be due before
        first_start + max_step."""
        self.reward = np.zeros(self.n, dtype=np.float32)
        self.info_done = np.zeros(self.n, dtype=bool)
        self.continuous = np.zeros((self.n, self.spec.continuous), dtype=np.float32)
        self.discrete = np.zeros((self.n, len(self.spec.branches)), dtype=np.int32)
        self.pending: list[AgentInfoBatch] = []
        self.deciding = NO_AGENTS
        self.decided_now = NO_AGENTS
        """Agents that requested a decision at the current academy step."""
        self.between = getattr(model, "acts_between_decisions", True)
        """DecisionRequester.TakeActionsBetweenDecisions: False -> ``act`` only at decisions."""
        self.encoders = [ObsEncoder(s) for s in self.spec.obs]
        self.grouped = hasattr(model, "group_id")
        """The model puts agents in SimpleMultiAgentGroups (``group_id``, ``group_reward``)."""
        self.sleeps = hasattr(model, "asleep")
        """The model disables agents for a while (``asleep``: no decisions, no actions)."""
        self._brain_bytes: bytes | None = None
        self.pool: list[Group] | None = None
        """The groups of this behavior's pool (shared agents and model), in pool order."""

    def join_pool(self, pool: list["Group"]) -> None:
        """Shares agents with ``pool`` (whose first group holds them all before any reset)."""
        self.pool = pool
        if pool[0] is not self:
            self.active[:] = False
            self.active_idx = NO_AGENTS
            self.subscribed = self.waiting = False

    @property
    def brain_bytes(self) -> bytes:
        if self._brain_bytes is None:
            self._brain_bytes = brain_parameters_bytes(self.name, self.model, self.spec)
        return self._brain_bytes

    def restart(self, idx: np.ndarray, now: int) -> None:
        """_AgentReset at academy total step ``now``: a new episode for ``idx`` (scene state,
        step count, stored actions)."""
        if len(idx) == 0:
            return
        self.model.reset(idx)
        self.episode_start[idx] = now
        if len(self.active_idx):
            self.first_start = int(self.episode_start[self.active_idx].min())
        self.continuous[idx] = 0.0
        self.discrete[idx] = 0
        if self.pool is not None:
            self._switch(idx)

    def _switch(self, idx: np.ndarray) -> None:
        """Unity's Agent.SetModel at episode start: agents of ``idx`` move, with their lifecycle
        state, to the behavior of the pool that ``model.behavior_of`` names."""
        target = np.asarray(self.model.behavior_of(idx))
        for pos, other in enumerate(self.pool):
            moving = idx[target == pos]
            if other is self or not len(moving):
                continue
            for name in ("episode_start", "reward", "info_done", "continuous", "discrete"):
                getattr(other, name)[moving] = getattr(self, name)[moving]
            self.active[moving] = False
            other.active[moving] = True
            other.subscribed = True
            other._refresh()
        self._refresh()

    def _refresh(self) -> None:
        self.active_idx = np.flatnonzero(self.active)
        if len(self.active_idx):
            self.first_start = int(self.episode_start[self.active_idx].min())

    def group_fields(self, idx: np.ndarray) -> dict:
        """``group_ids``/``group_rewards`` of an info batch for ``idx`` (SimpleMultiAgentGroup:
        the model's ``group_id`` and ``group_reward``, the latter drained as Unity zeroes
        m_GroupReward once sent); nothing for a scene without groups."""
        if not self.grouped:
            return {}
        rewards = self.model.group_reward[idx].copy()
        self.model.group_reward[idx] = 0.0
        return {"group_ids": self.model.group_id[idx], "group_rewards": rewards}

    def step_count(self, now: int) -> np.ndarray:
        """Unity's Agent.StepCount of every agent (meaningful for present agents)."""
        return now - self.episode_start
