"""SAC on the algorithm seam (``trainer_type: sac``): ``SACLearner`` and ``SACActingPolicy``
plugged into the generic off-policy host (``unity_rl.algorithms.offpolicy``: replay placement,
ML-Agents' update rule through ``SACConfig.updates_owed``, lag, replay checkpoints)."""
from __future__ import annotations

import functools
from typing import Any

from unity_rl.algorithms.offpolicy.algorithm import OffPolicyAlgorithm
from unity_rl.algorithms.sac.acting import sac_policy
from unity_rl.algorithms.sac.learner import SACLearner, action_parts
from unity_rl.runtime.algorithm import HostContext
from unity_rl.runtime.messages import BehaviorInfo


class SACAlgorithm(OffPolicyAlgorithm):
    """``trainer_type: sac``: continuous, discrete and hybrid actions."""

    name = "sac"

    def action_size(self, action_spec: Any) -> int:
        continuous, branches = action_parts(action_spec)
        return continuous + len(branches)

    def mask_size(self, action_spec: Any) -> int:
        return sum(action_parts(action_spec)[1])

    def make_learner(self, info: BehaviorInfo, ctx: HostContext) -> SACLearner:
        cfg = self.behavior_cfg
        return SACLearner(info.obs_shapes, info.action_spec, cfg.hyperparameters,
                          cfg.network_settings, cfg.reward_signals, device=ctx.device,
                          seed=ctx.seed, goal_indices=info.goal_indices)

    def make_host(self, info: BehaviorInfo, ctx: HostContext):
        host = super().make_host(info, ctx)
        cfg = self.behavior_cfg
        if cfg.behavioral_cloning is not None:  # once per SAC update step, as ML-Agents
            from unity_rl.algorithms.sac.imitation import make_behavioral_cloning

            host.auxiliary.append(make_behavioral_cloning(
                cfg.behavioral_cloning, host.learner, lambda: host.agent_steps, seed=ctx.seed,
                pairing=self.run_cfg.unity_rl.demo_pairing, behavior=self.section))
        return host

    def policy_factory(self):
        return functools.partial(sac_policy, network_cfg=self.behavior_cfg.network_settings,
                                 sac_cfg=self.behavior_cfg.hyperparameters)
