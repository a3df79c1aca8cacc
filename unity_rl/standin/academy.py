"""Unity's Academy and Agent lifecycle (ML-Agents 2.x/3.x), over vectorised scene models.

One ``Academy.EnvironmentStep`` in Unity runs, in this order (Academy.cs, Agent.cs)::

    AgentPreStep(k)      DecisionRequester: request a decision when k % period == 0, and an
                         action at every step (TakeActionsBetweenDecisions)
    k += 1               academy step count; every agent's episode step count += 1
    AgentSendState       agents that requested a decision put an info (obs, reward since their
                         previous decision, action mask) into the batch; reward := 0
    DecideAction         the communicator exchanges ONE message if the batch holds any info
                         (decisions, or terminal infos put during the previous step's AgentAct)
    AgentAct             every agent runs OnActionReceived with its stored action (the last
                         decision's, zeros after an episode reset); EndEpisode there puts a
                         terminal info (final obs and reward) into the batch *now*, to be sent
                         at the next step, and resets the agent at once; then MaxStep: an agent
                         whose episode step count reached MaxStep ends with max_step_reached
    physics              one fixed update of the scene (dt 0.02 s)

``begin_step`` runs the first four stages up to the exchange and returns the message to send
(or None when no agent has anything to send: no message for that academy step);
``apply_actions`` stores the reply's actions; ``end_step`` runs AgentAct and physics. Hence:

* a message exists only at an academy step where some agent decides or has a pending terminal;
  messages holding only terminal infos happen whenever an episode ends at a step k with k+1 not
  a decision step;
* an agent can be in a message twice: its terminal info (episode that ended at step k) and its
  first decision of the new episode (k+1 a decision step), terminal infos first;
* a second episode end before the agent's next decision sends no terminal (Unity's
  NotifyAgentDone returns early while the previous terminal info is the last one sent);
* RESET (``reset``) restarts every agent and the academy step count without terminal infos; the
  next message carries every present agent's first decision.

Agent ids are Unity's: a global counter in the order agents are initialised (behavior order,
then agent order; late agents after them), stable across episodes.

Size (about 490 lines): the lifecycle above is one ordered loop over every agent of every
behavior (decisions, terminals, MaxStep, behavior switches); splitting it would scatter the
order that the protocol tests check.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from unity_rl.standin.options import OptionError, PlayerOptions
from unity_rl.standin.scenes.base import BehaviorDef, SceneModel
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import (
    ActionBatch,
    AgentInfoBatch,
    ObsEncoder,
    encode_agent_infos,
    encode_output_message,
)

_EMPTY = np.zeros(0, dtype=np.int64)


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
        self.deciding = _EMPTY
        self.decided_now = _EMPTY
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
            self.active_idx = _EMPTY
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


@dataclass
class StepMessage:
    """The content of one output message, before encoding."""

    academy_step: int
    """Academy step count k of the EnvironmentStep that sends it (0 right after a reset)."""
    batches: dict[str, list[AgentInfoBatch]]
    """Per behavior, terminal batches (in the order episodes ended) then the decision batch."""


class Academy:
    """Lifecycle of all agents of a scene; see the module docstring for the exact timing."""

    def __init__(
        self,
        behaviors: Sequence[BehaviorDef],
        opts: PlayerOptions | None = None,
        seed: int = 0,
        parameters: EnvironmentParameters | None = None,
        num_areas: int = 1,
    ):
        opts = opts or PlayerOptions()
        self.parameters = parameters or EnvironmentParameters()
        plans = plan_groups(behaviors, opts, num_areas)
        names = [p.behavior.name for p in plans]
        if len(set(names)) != len(names):
            raise ValueError(f"behavior names must be unique: {names}")
        # Unity ids: one counter over agents in initialisation order.
        order = sorted(
            (appear, gi, j)
            for gi, plan in enumerate(plans)
            for j, appear in enumerate(plan.appear_at)
        )
        owner = list(range(len(plans)))  # a pool's behaviors share its first one's agents
        first_of: dict[str, int] = {}
        for gi, plan in enumerate(plans):
            if plan.behavior.pool:
                owner[gi] = first_of.setdefault(plan.behavior.pool, gi)
        order = [o for o in order if owner[o[1]] == o[1]]
        ids = [np.zeros(plan.agents, dtype=np.int64) for plan in plans]
        for next_id, (_, gi, j) in enumerate(order):
            ids[gi][j] = next_id
        seeds = np.random.SeedSequence(seed & 0xFFFFFFFF).spawn(len(plans))
        self.groups: list[Group] = []
        for gi, (plan, ss) in enumerate(zip(plans, seeds)):
            if owner[gi] != gi:
                self.groups.append(Group(plan, self.groups[owner[gi]].model, ids[owner[gi]]))
                continue
            model = plan.behavior.factory(
                plan.agents, np.random.default_rng(ss), self.parameters, opts
            )
            self.groups.append(Group(plan, model, ids[gi]))
        for gi in sorted(set(owner)):
            pool = [g for g, o in zip(self.groups, owner) if o == gi]
            if len(pool) > 1 or plans[gi].behavior.pool:
                for g in pool:
                    g.join_pool(pool)
        self.by_name = {g.name: g for g in self.groups}
        self.step_count = 0
        """Academy.StepCount: EnvironmentSteps since the last reset."""
        self.total_steps = 0
        """Academy.TotalStepCount: EnvironmentSteps since the start."""
        self.had_first_reset = False
        self.messages = 0
        self.decisions_sent: dict[str, int] = {}
        """Behavior name -> decision rows sent (the agent-steps a trainer counts, give or take
        the actions in flight)."""
        self.resets = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def reset(self) -> None:
        """RESET command (or the first step): every present agent starts a new episode."""
        self.step_count = 0
        self.had_first_reset = True
        self.resets += 1
        present = [g.active_idx for g in self.groups]  # before pools move agents around
        for g, idx in zip(self.groups, present):
            g.restart(idx, self.total_steps)
            g.reward[:] = 0.0
            g.info_done[:] = False
            g.pending = []
            g.deciding = _EMPTY

    def _arrivals(self) -> None:
        for g in self.groups:
            if not g.waiting:
                continue
            new = np.flatnonzero(~g.active & (g.appear_at <= self.total_steps))
            if len(new):
                g.active[new] = True
                g.active_idx = np.flatnonzero(g.active)
                g.waiting = bool((~g.active).any())
                g.subscribed = True
                g.restart(new, self.total_steps)
                g.reward[new] = 0.0
                g.info_done[new] = False

    def begin_step(self) -> StepMessage | None:
        """AgentPreStep to AgentSendState of one EnvironmentStep: the message to send, if any."""
        if not self.had_first_reset:
            self.reset()
        self._arrivals()
        k = self.step_count
        self.step_count += 1
        self.total_steps += 1
        batches: dict[str, list[AgentInfoBatch]] = {}
        send = False
        for g in self.groups:
            if not g.subscribed:
                continue
            idx = g.active_idx
            if g.uniform_period is not None:
                deciding = idx if k % g.uniform_period == 0 else _EMPTY
            else:
                deciding = idx[k % g.periods[idx] == 0]
            if g.sleeps and len(deciding):
                deciding = deciding[~g.model.asleep[deciding]]
            infos = g.pending
            g.pending = []
            if len(deciding):
                self.decisions_sent[g.name] = self.decisions_sent.get(g.name, 0) + len(deciding)
                infos.append(
                    AgentInfoBatch(
                        ids=g.ids[deciding],
                        rewards=g.reward[deciding],
                        done=False,
                        max_step_reached=None,
                        obs=g.model.observe(deciding),
                        action_mask=g.model.action_mask(deciding),
                        **g.group_fields(deciding),
                    )
                )
                g.reward[deciding] = 0.0
                g.info_done[deciding] = False
            g.deciding = deciding
            g.decided_now = deciding
            batches[g.name] = infos
            send = send or bool(infos)
        if not send:
            return None
        self.messages += 1
        return StepMessage(k, batches)

    def progress(self) -> str:
        """"academy step N; decisions sent: <behavior> n, ..." (the build's own counts)."""
        sent = ", ".join(f"{name} {n}" for name, n in sorted(self.decisions_sent.items()))
        return f"academy step {self.total_steps}; decisions sent: {sent or 'none'}"

    def apply_actions(self, actions: Mapping[str, ActionBatch]) -> None:
        """Stores the reply's actions, row by row, for the agents that requested a decision.

        Rows beyond the number of deciding agents are ignored; agents without a row act with
        zeros (Unity: no last action received for them); extra columns are dropped.
        """
        for g in self.groups:
            d = g.deciding
            if not len(d):
                continue
            g.deciding = _EMPTY
            batch = actions.get(g.name)
            cont = np.zeros((len(d), g.spec.continuous), dtype=np.float32)
            disc = np.zeros((len(d), len(g.spec.branches)), dtype=np.int32)
            if batch is not None and len(batch):
                c, k = batch.continuous, min(len(batch), len(d))
                dd = batch.discrete
                if g.spec.branches and not dd.shape[1] and c.shape[1] and not g.spec.continuous:
                    dd = c.astype(np.int32)  # deprecated flat vector from an old trainer
                w = min(c.shape[1], cont.shape[1])
                cont[:k, :w] = c[:k, :w]
                w = min(dd.shape[1], disc.shape[1])
                disc[:k, :w] = dd[:k, :w]
            if len(d) == g.n:
                g.continuous[:] = cont
                g.discrete[:] = disc
            else:
                g.continuous[d] = cont
                g.discrete[d] = disc

    def end_step(self) -> None:
        """AgentAct (actions, EndEpisode, MaxStep) and the physics update of one EnvironmentStep."""
        now = self.total_steps
        present = [g.active_idx for g in self.groups]  # agents act once, even if they switch
        stepped = set()
        for g, idx in zip(self.groups, present):
            if g.sleeps and len(idx):
                idx = idx[~g.model.asleep[idx]]
            if len(idx):
                acting = idx if g.between else idx[np.isin(idx, g.decided_now)]
                if len(acting) == g.n:  # everyone acts: whole arrays, no gathers
                    out = g.model.act(acting, g.continuous, g.discrete)
                else:
                    out = g.model.act(acting, g.continuous[acting], g.discrete[acting])
                reward, ended = out[0], out[1]
                if len(out) > 2 and out[2] is not None:  # per agent: SetReward (replace) or AddReward
                    g.reward[acting] = np.where(out[2], reward, g.reward[acting] + reward)
                elif len(acting) == g.n:
                    if g.model.set_reward:
                        g.reward[:] = reward
                    else:
                        g.reward += reward
                elif g.model.set_reward:
                    g.reward[acting] = reward
                else:
                    g.reward[acting] += reward
                if ended.any():
                    if len(out) > 3 and out[3] is not None and out[3].any():
                        cut = ended & out[3]  # GroupEpisodeInterrupted: max_step_reached
                        self._end_episodes(g, acting[cut], max_step_reached=True)
                        ended = ended & ~out[3]
                    self._end_episodes(g, acting[ended], max_step_reached=False)
                if 0 < g.max_step <= now - g.first_start:
                    cut = idx[now - g.episode_start[idx] >= g.max_step]
                    if len(cut):
                        self._end_episodes(g, cut, max_step_reached=True)
            if id(g.model) not in stepped:  # a pool's groups share one model
                stepped.add(id(g.model))
                g.model.physics_step()

    def _end_episodes(self, g: Group, idx: np.ndarray, max_step_reached: bool) -> None:
        notify = idx[~g.info_done[idx]]
        if len(notify):
            g.pending.append(
                AgentInfoBatch(
                    ids=g.ids[notify],
                    rewards=g.reward[notify],
                    done=True,
                    max_step_reached=np.full(len(notify), max_step_reached),
                    obs=g.model.observe(notify),
                    action_mask=None,
                    **g.group_fields(notify),
                )
            )
            g.reward[notify] = 0.0
            g.info_done[notify] = True
        g.restart(idx, self.total_steps)

    # -- wire -----------------------------------------------------------------------------------

    def encode(self, message: StepMessage, side_channel: bytes = b"") -> bytes:
        """The UnityMessageProto bytes of ``message``; announces brain parameters when due."""
        infos = []
        brains = []
        for g in self.groups:
            if not g.subscribed:
                continue
            body = b"".join(
                encode_agent_infos(b, g.encoders) for b in message.batches.get(g.name, ())
            )
            if body and not g.brain_sent:
                brains.append(g.brain_bytes)
                g.brain_sent = True
            infos.append((g.name_bytes, body))
        return encode_output_message(infos, brains, side_channel)

