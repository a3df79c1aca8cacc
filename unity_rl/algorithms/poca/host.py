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
- The algorithm is ``PPOAlgorithm`` with this learner and host (its ``make_host``, the BC
  update included).
- ``behavioral_cloning``: PPO's BC update (``ppo/imitation.py``) on the POCA actor (PPO's
  network), the host's auxiliary update, run once after each POCA update: ML-Agents'
  ``TorchOptimizer`` gives POCA a ``BCModule`` as it gives PPO one, and POCA's trainer is an
  ``OnPolicyTrainer``, whose ``_update_policy`` runs ``bc_module.update()`` after the epochs.
"""
from __future__ import annotations

import numpy as np

from unity_rl.algorithms.poca.learner import POCALearner
from unity_rl.algorithms.ppo.host import PPOAlgorithm, PPOHost
from unity_rl.experience import Segment
from unity_rl.runtime.algorithm import BehaviorPlan


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


class POCAAlgorithm(PPOAlgorithm):
    """``trainer_type: poca``: PPO's algorithm with ``POCALearner`` and ``POCAHost``; the actors'
    policy copies are the actor alone (``shared_critic`` layout) and collect groups."""

    learner_class = POCALearner
    host_class = POCAHost

    def plan(self) -> BehaviorPlan:
        return self._plan(shared_critic=True, collect_groups=True)
