"""DDPG on the algorithm seam (``trainer_type: ddpg``): ``DDPGLearner`` and ``DDPGActorPolicy``
plugged into the generic off-policy host (``unity_rl.algorithms.offpolicy``: replay placement,
replay ratio, PER, lag, replay checkpoints — see ``offpolicy.host``)."""
from __future__ import annotations

import functools
from typing import Any

from unity_rl.algorithms.ddpg.acting import ddpg_policy
from unity_rl.algorithms.ddpg.learner import DDPGLearner, continuous_action_size
from unity_rl.algorithms.offpolicy.algorithm import OffPolicyAlgorithm
from unity_rl.runtime.algorithm import HostContext
from unity_rl.runtime.messages import BehaviorInfo


class DDPGAlgorithm(OffPolicyAlgorithm):
    """``trainer_type: ddpg``: continuous actions only."""

    name = "ddpg"

    def action_size(self, action_spec: Any) -> int:
        return continuous_action_size(action_spec)

    def make_learner(self, info: BehaviorInfo, ctx: HostContext) -> DDPGLearner:
        network = self.behavior_cfg.network_settings
        return DDPGLearner(info.obs_shapes, info.action_spec, self.behavior_cfg.hyperparameters,
                           network.hidden_units, network.num_layers, network.normalize,
                           device=ctx.device, seed=ctx.seed,
                           vis_encode_type=network.vis_encode_type,
                           goal_conditioning_type=network.goal_conditioning_type,
                           goal_indices=info.goal_indices)

    def policy_factory(self):
        return functools.partial(ddpg_policy, network_cfg=self.behavior_cfg.network_settings,
                                 ddpg_cfg=self.behavior_cfg.hyperparameters)
