"""Sync actors' partial rollouts (``ActorSpec.partial_interval_s``): what finished so far goes
out during a collection; the learner counts it on arrival; the hosts accept the same data in
the same order as with one rollout per collection."""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from tests.runtime.fakes import BANDIT, BEHAVIOR, FakeStream, two_behaviors
from tests.runtime.helpers import live_descendants
from tests.runtime.test_wirings import (
    NET,
    ScriptedBackend,
    counting_host,
    host_for,
    plan,
    rollout,
    spec,
    weights_of,
)
from unity_rl.algorithms.ppo.acting import ppo_policy
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.local import LocalProcessBackend
from unity_rl.runtime.messages import BehaviorWeights, PolicyWeights
from unity_rl.runtime.runners import SyncRunner


def collect_twice(actor_spec: ActorSpec, interval: float | None):
    """Two collections of one actor; per collection (its partial rollouts, its final one)."""
    actor = Actor(dataclasses.replace(actor_spec, partial_interval_s=interval))
    info = actor.start()
    actor.set_weights(PolicyWeights(1, {n: BehaviorWeights(0, host_for(b).weights())
                                        for n, b in info.behaviors.items()}))
    collections = []
    for _ in range(2):
        partials = []
        final = actor.collect(send_partial=partials.append)
        collections.append((partials, final))
    actor.close()
    return collections


def trajectories(rollouts, name=BEHAVIOR):
    return [t for r in rollouts for t in r.segments[name].trajectories]


def test_partial_rollouts_split_each_collection_without_changing_it():
    actor_spec = spec(0, sync=True, segment_steps=60)
    whole = collect_twice(actor_spec, None)
    split = collect_twice(actor_spec, 0.0)
    assert all(partials == [] for partials, _ in whole)
    for (_, alone), (partials, final) in zip(whole, split):
        assert len(partials) >= 2
        assert all(not r.final for r in partials) and final.final and alone.final
        assert all(r.segments[BEHAVIOR].trajectories for r in partials)  # sent when some ended
        # the partials then the final hold the collection's trajectories, in order, and it
        # ended at the same step (rows already sent count toward segment_steps)
        pieces, one = trajectories([*partials, final]), trajectories([alone])
        assert len(pieces) == len(one)
        for a, b in zip(pieces, one):
            assert np.array_equal(a.obs, b.obs) and np.array_equal(a.actions, b.actions)
            assert np.array_equal(a.rewards, b.rewards) and a.terminated == b.terminated
        assert sum(r.segments[BEHAVIOR].agent_steps for r in [*partials, final]) == \
            alone.segments[BEHAVIOR].agent_steps
        assert [x for r in [*partials, final] for x in r.segments[BEHAVIOR].episode_returns] \
            == alone.segments[BEHAVIOR].episode_returns


def test_a_lane_cut_at_the_segment_end_keeps_its_trajectories_for_the_final_rollout():
    bandit_plan = BehaviorPlan(functools.partial(ppo_policy, network_cfg=NET), 10, 4,
                               cut_at_segment_end=True)
    actor_spec = ActorSpec(actor_id=0, stream=StreamSettings("fake"),
                           plans=(("Fake", plan(1000)), ("Bandit", bandit_plan)),
                           wait_for_new_weights=True, stream_factory=two_behaviors)
    collections = collect_twice(actor_spec, 0.0)
    assert any(partials for partials, _ in collections)
    for partials, final in collections:
        assert all(not r.segments[BANDIT].trajectories for r in partials)
        assert final.segments[BANDIT].agent_steps >= 10


class OrderLearner:
    """Records the trajectory lengths of each update, in the order the host kept them."""

    def __init__(self):
        self.version = 0
        self.updates = []
        self.agent_steps_collected = 0

    def weights(self):
        return {}

    def update(self, trajectories, collected_steps=None, episode_length=None, lags=None):
        self.updates.append([len(t.rewards) for t in trajectories])
        return {"Losses/Policy Loss": 0.0}


def test_sync_runner_counts_partials_on_arrival_and_hosts_accept_in_actor_order():
    from unity_rl.algorithms.ppo.host import PPOHost

    host = PPOHost(OrderLearner(), buffer_steps=30, drop_lag=None)
    partial = lambda actor, steps, returns=(): rollout(actor, 0, steps, returns)._replace(
        final=False)
    backend = ScriptedBackend([partial(1, 11, [1.0]), partial(0, 5), partial(0, 6),
                               rollout(1, 0, 13), rollout(0, 0, 7, [2.0])])
    runner = SyncRunner(backend, {BEHAVIOR: host})
    arrivals = []
    runner.on_arrival = lambda parts: arrivals.append(
        (parts[BEHAVIOR].collected_steps, list(host.learner.updates)))
    runner.start()
    done = runner.next_update().behaviors[BEHAVIOR]
    # three partials as they came, then the two finals together, all before the update
    assert arrivals == [(11, []), (5, []), (6, []), (13 + 7, [])]
    # actor 0's partials in its order, its final, then actor 1's: whatever the arrival order
    assert host.learner.updates == [[5, 6, 7, 11, 13]]
    assert done.collected_steps == 42 and sorted(done.episode_returns) == [1.0, 2.0]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_local_sync_rounds_with_partial_rollouts_complete():
    specs = [dataclasses.replace(spec(k, sync=True, segment_steps=80), partial_interval_s=0.0)
             for k in range(2)]
    with LocalProcessBackend(specs) as backend:
        infos = backend.start()
        host = host_for(infos[0].behaviors[BEHAVIOR], buffer_size=160)
        runner = SyncRunner(backend, {BEHAVIOR: host})
        arrived = []
        runner.on_arrival = lambda parts: arrived.append(parts[BEHAVIOR].collected_steps)
        runner.start()
        for version in range(1, 3):
            arrived.clear()
            done = runner.next_update().behaviors[BEHAVIOR]
            assert host.version == version
            assert len(arrived) > 1 and sum(arrived) == done.collected_steps >= 160
        assert backend.incarnation_rollouts() == [[2], [2]]  # finals only
    assert live_descendants() == []
