"""GOAL_SIGNAL observations travel from the BehaviorSpec to the policy copy and the learner."""
from __future__ import annotations

import functools

import numpy as np
from mlagents_envs.base_env import (ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec,
                                    ObservationType)

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.acting import ppo_policy
from unity_rl.runtime.actor import _Lane
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.messages import ActorInfo, BehaviorInfo, goal_indices_of


def _spec(goal: bool) -> BehaviorSpec:
    none = (DimensionProperty.NONE,)
    return BehaviorSpec([ObservationSpec((6,), none, ObservationType.DEFAULT, "vector"),
                         ObservationSpec((2,), none, ObservationType.GOAL_SIGNAL if goal
                                         else ObservationType.DEFAULT, "goal")],
                        ActionSpec(0, (5,)))


def test_goal_indices_come_from_the_observation_types():
    assert goal_indices_of(_spec(True).observation_specs) == (1,)
    assert goal_indices_of(_spec(False).observation_specs) == ()
    assert BehaviorInfo("B", ((3,),), None, 1).goal_indices == ()  # old call sites: no goals


def test_the_lane_hands_goal_indices_to_the_factory_only_when_there_are_goals():
    net = NetworkConfig(hidden_units=8, num_layers=1)
    plan = BehaviorPlan(functools.partial(ppo_policy, network_cfg=net), 16, 4)
    lane = _Lane("B?team=0", plan, _spec(True), seed=0)
    assert lane.goal_indices == (1,) and lane.policy.model.goal_conditioned
    calls = []

    def three_arguments(obs_shapes, action_spec, seed):  # a factory that knows nothing of goals
        calls.append(obs_shapes)
        return ppo_policy(obs_shapes, action_spec, seed, network_cfg=net)

    plain = _Lane("B?team=0", BehaviorPlan(three_arguments, 16, 4), _spec(False), seed=0)
    assert calls == [((6,), (2,))] and plain.goal_indices == ()
    info = ActorInfo(0, {"B": BehaviorInfo("B", ((6,), (2,)), lane.action_spec, 1, (1,))}, 0, ())
    assert info.layout()["B"][2] == (1,)  # actors that disagree on goals are refused
    assert np.asarray(lane.policy.act(np.zeros((2, 8), np.float32))[0]).shape == (2, 1)
