"""A self-play lane in an actor (over a fake stream: fast): an opponent snapshot sent in a
``Control`` is loaded and kept while publications pass it by, its segments are tagged
``SNAPSHOT_VERSION``; a lane told to follow the learner again takes the next publication; a
control sent before the lanes exist (a re-created actor's start state) is applied once they do."""
from __future__ import annotations

import numpy as np

from tests.runtime.fakes import BEHAVIOR
from tests.runtime.test_wirings import host_for, spec, weights_of
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.messages import SNAPSHOT_VERSION, BehaviorWeights, Control, LanePolicy


def _first(state: dict) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(v)) for v in state.values()
                           if isinstance(v, np.ndarray)])[:8]


def test_fixed_lane_keeps_its_snapshot_until_told_to_follow():
    actor = Actor(spec(0, sync=True, segment_steps=20))
    try:
        info = actor.start()
        host = host_for(info.behaviors[BEHAVIOR])
        actor.set_weights(weights_of(host, 1))
        snapshot = {k: (v * 0 + 0.5 if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
                    for k, v in host.weights().items()}
        actor.apply_control(Control(lanes={BEHAVIOR: LanePolicy(
            BehaviorWeights(SNAPSHOT_VERSION, snapshot), fixed=True)}))
        lane = actor.lanes[BEHAVIOR]
        assert lane.fixed and lane.version == SNAPSHOT_VERSION
        host.version = 4
        actor.set_weights(weights_of(host, 2))  # a publication: the fixed lane passes it by
        assert lane.version == SNAPSHOT_VERSION and actor.publication == 2
        rollout = actor.collect()
        assert rollout.segments[BEHAVIOR].policy_version == SNAPSHOT_VERSION
        actor.apply_control(Control(lanes={BEHAVIOR: LanePolicy(
            BehaviorWeights(4, host.weights()), fixed=False)}, reset_episodes=True))
        assert not lane.fixed and lane.version == 4
        host.version = 5
        actor.set_weights(weights_of(host, 3))
        assert lane.version == 5
        assert actor.collect().segments[BEHAVIOR].policy_version == 5
    finally:
        actor.close()


def test_start_control_lanes_wait_for_the_lanes():
    first = Actor(spec(0, sync=True, segment_steps=20))
    try:
        weights = host_for(first.start().behaviors[BEHAVIOR]).weights()
    finally:
        first.close()
    actor = Actor(spec(1, sync=True, segment_steps=20))
    try:
        actor.apply_control(Control(lanes={BEHAVIOR: LanePolicy(
            BehaviorWeights(SNAPSHOT_VERSION, weights), fixed=True)}))  # before start: kept
        assert actor.lanes == {}
        actor.start()
        assert actor.lanes[BEHAVIOR].fixed
    finally:
        actor.close()
