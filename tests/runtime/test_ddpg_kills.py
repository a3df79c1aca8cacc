"""DDPG's Ape-X wiring (actors writing into the learner's shared replay buffer) survives actors
SIGKILLed at random moments — also while one holds the buffer's lock in the middle of a write:
the local backend re-creates the actor, the buffer recovers its lock, the learner goes on."""
from __future__ import annotations

import functools
import random
import time

import numpy as np
import pytest

from tests.runtime.fakes import BEHAVIOR, FakeStream
from tests.runtime.helpers import RandomKiller, assert_gone, live_descendants
from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.replay import SharedReplayBuffer
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.local import LocalProcessBackend
from unity_rl.algorithms.ddpg.acting import ddpg_policy
from unity_rl.algorithms.offpolicy.host import OffPolicyHost
from unity_rl.runtime.runners import AsyncRunner

NET = NetworkConfig(normalize=False, hidden_units=16, num_layers=1)
CFG = DDPGConfig(warmup_steps=64, buffer_size=20_000, batch_size=16, replay_ratio=0.25)
KILLS = 20


def actor_spec(actor_id: int) -> ActorSpec:
    plan = BehaviorPlan(functools.partial(ddpg_policy, network_cfg=NET, ddpg_cfg=CFG), 16, 8)
    return ActorSpec(actor_id=actor_id, stream=StreamSettings("fake"), plans=(("Fake", plan),),
                     wait_for_new_weights=False, seed=actor_id,
                     stream_factory=functools.partial(FakeStream, seed=actor_id, build=actor_id,
                                                      num_agents=8, step_delay=0.002))


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_apex_survives_20_actor_kills_at_random_times():
    rng = random.Random(3)
    with LocalProcessBackend([actor_spec(0), actor_spec(1)], max_restarts=-1) as backend:
        info = backend.start()[0].behaviors[BEHAVIOR]
        replay = SharedReplayBuffer(CFG.buffer_size, info.obs_dim, 2, 0, lock_timeout=10.0)
        learner = DDPGLearner(info.obs_shapes, info.action_spec, CFG, NET.hidden_units,
                              NET.num_layers, NET.normalize, seed=0)
        host = OffPolicyHost(learner, replay, name="ddpg", num_actors=2,
                             replay_handle=replay.handle())
        runner = AsyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        killer = RandomKiller(backend, rng, kills=KILLS, pause=(0.05, 0.6)).start()
        while killer.alive():
            runner.next_update()
        assert killer.errors == []
        steps, updates = host.agent_steps, host.updates
        deadline = time.monotonic() + 60
        while host.agent_steps < steps + 200 or host.updates <= updates:  # still learning
            assert time.monotonic() < deadline, "the run stalled after the kills"
            runner.next_update()
        assert backend.restarts == KILLS
        # the actors are still writing: the size the locked snapshot saw lies between two reads
        before = len(replay)
        snapshot_size = replay.state_dict()["size"]  # takes the lock, so it must be free
        assert 0 < before <= snapshot_size <= len(replay)
        sample = replay.sample(256)
        assert np.isfinite(sample.obs).all() and np.isfinite(sample.rewards).all()
        host.close()
    assert_gone(killer.killed)
    assert live_descendants() == []
