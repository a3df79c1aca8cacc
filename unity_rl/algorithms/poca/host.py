"""POCA on the algorithm seam (``trainer_type: poca``): PPO's rollout-buffer host in front of
``POCALearner``, and actors that collect groups.

- The plan is PPO's (the actors' policy copies are PPO's ``ppo_policy`` in its ``shared_critic``
  layout: the actor only) with ``collect_groups``: each actor's collector records every step's
  groupmates, group rewards and group returns (``unity_rl.runtime.groups``). Groups are formed
  within one actor (a group's members live in one build, which one actor drives).
- The host is ``PPOHost`` (buffer, lag handling, the ``buffer_size`` trigger, checkpoints) plus
  ``Environment/Group Cumulative Reward``: the mean group return of the agents whose episode
  ended with their group's since the last update (ML-Agents records it per such agent, a
  histogram over the summary period), reported with the update's metrics.
- ``behavioral_cloning``: PPO's BC update (``ppo/imitation.py``) on the POCA actor (PPO's
  network), the host's auxiliary update, run once after each POCA update: ML-Agents'
  ``TorchOptimizer`` gives POCA a ``BCModule`` as it gives PPO one, and POCA's trainer is an
  ``OnPolicyTrainer``, whose ``_update_policy`` runs ``bc_module.update()`` after the epochs.
"""
from __future__ import annotations

import functools

import numpy as np

from unity_rl.algorithms.poca.learner import POCALearner
from unity_rl.algorithms.ppo.acting import ppo_policy
from unity_rl.algorithms.ppo.host import PPOHost
from unity_rl.experience import Segment
from unity_rl.runtime.algorithm import Algorithm, BehaviorPlan, HostContext
from unity_rl.runtime.messages import BehaviorInfo


class POCAHost(PPOHost):
    """PPO's host with the group returns of the accepted segments (module doc)."""

    def __init__(self, learner: POCALearner, **kwargs):
        super().__init__(learner, **kwargs)
        self._group_returns: list[float] = []

    def accept(self, segment: Segment) -> int | None:
        self._group_returns.extend(segment.group_returns)
        return super().accept(segment)

    def train(self, sync: bool) -> dict[str, float]:
        metrics = super().train(sync)
        if self._group_returns:
            metrics["Environment/Group Cumulative Reward"] = float(np.mean(self._group_returns))
            self._group_returns = []
        return metrics


class POCAAlgorithm(Algorithm):
    """``trainer_type: poca``."""

    def plan(self) -> BehaviorPlan:
        rl = self.run_cfg.unity_rl
        return BehaviorPlan(
            policy_factory=functools.partial(
                ppo_policy, network_cfg=self.behavior_cfg.network_settings, shared_critic=True),
            segment_steps=rl.resolve_segment_steps(self.behavior_cfg),
            time_horizon=self.behavior_cfg.time_horizon,
            cut_at_segment_end=rl.trajectory_cuts == "segment",
            collect_groups=True,
            # with memory: segments in padded rows, as the buffer counts them (PPO's plan)
            sequence_length=self.behavior_cfg.network_settings.sequence_length)

    def make_host(self, info: BehaviorInfo, ctx: HostContext) -> POCAHost:
        cfg = self.behavior_cfg
        learner = POCALearner(info.obs_shapes, info.action_spec, cfg.hyperparameters,
                              cfg.network_settings, device=ctx.device, seed=ctx.seed,
                              reward_signals=cfg.reward_signals, goal_indices=info.goal_indices)
        host = POCAHost(learner, buffer_steps=cfg.hyperparameters.buffer_size,
                        drop_lag=ctx.max_policy_lag if ctx.mode == "async" else None)
        if cfg.behavioral_cloning is not None:  # once after each POCA update, as ML-Agents
            from unity_rl.algorithms.ppo.imitation import make_behavioral_cloning

            host.auxiliary.append(make_behavioral_cloning(
                cfg.behavioral_cloning, learner, lambda: host.collected_steps, seed=ctx.seed,
                pairing=self.run_cfg.unity_rl.demo_pairing, behavior=self.section))
        return host
