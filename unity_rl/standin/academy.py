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

The lifecycle above is one ordered loop over every agent of every behavior (decisions,
terminals, MaxStep, behavior switches) and stays in this module; the agents it runs, one
``Group`` per behavior, are ``unity_rl.standin.agent_groups``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from unity_rl.standin.agent_groups import NO_AGENTS, Group, plan_groups
from unity_rl.standin.options import PlayerOptions
from unity_rl.standin.scenes.base import BehaviorDef
from unity_rl.standin.side_channels import EnvironmentParameters
from unity_rl.standin.wire import AgentInfoBatch, encode_agent_infos, encode_output_message
from unity_rl.standin.wire_input import ActionBatch


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
            g.deciding = NO_AGENTS

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
                deciding = idx if k % g.uniform_period == 0 else NO_AGENTS
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
            g.deciding = NO_AGENTS
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
