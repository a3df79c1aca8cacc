"""Actors, the local backend and the sync/async wirings over in-process fake streams (no builds)."""
from __future__ import annotations

import functools

import numpy as np
import psutil
import pytest

from tests.runtime.fakes import FakeStream
from tests.runtime.helpers import live_descendants
from unity_rl.algos.nets import NetworkConfig
from unity_rl.algos.ppo import PPOConfig, PPOLearner
from unity_rl.runtime.actor import Actor, ActorSpec, StreamSettings
from unity_rl.runtime.local import LocalProcessBackend
from unity_rl.runtime.messages import ActorFailedError, PolicyWeights
from unity_rl.runtime.policies import ppo_policy
from unity_rl.runtime.runners import AsyncRunner, SyncRunner

NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=1)


def spec(actor_id: int, *, sync: bool, segment_steps: int = 64, **stream_kwargs) -> ActorSpec:
    return ActorSpec(
        actor_id=actor_id, stream=StreamSettings("fake"),
        policy_factory=functools.partial(ppo_policy, network_cfg=NET),
        segment_steps=segment_steps, time_horizon=16, wait_for_new_weights=sync, seed=actor_id,
        stream_factory=functools.partial(FakeStream, seed=actor_id, build=actor_id,
                                         **stream_kwargs))


def learner_for(info, buffer_size: int = 128) -> PPOLearner:
    return PPOLearner(info.obs_dim, info.action_spec,
                      PPOConfig(buffer_size=buffer_size, minibatch_size=32, num_epochs=1), NET,
                      num_threads=1, seed=0)


def test_actor_collects_segments_tagged_with_its_weights_version():
    actor = Actor(spec(0, sync=True, segment_steps=50))
    info = actor.start()
    assert (info.obs_dim, info.num_agents) == (3, 4)
    learner = learner_for(info)
    actor.set_weights(PolicyWeights(7, learner.weights()))
    segment = actor.collect()
    assert segment.policy_version == 7
    assert 50 <= segment.agent_steps < 50 + info.num_agents
    assert segment.agent_steps == sum(len(t.rewards) for t in segment.trajectories)
    assert all(len(t.rewards) <= 16 for t in segment.trajectories)
    stream = actor.stream
    actor.close()
    assert stream.closed


@pytest.mark.timeout(120)
def test_sync_wiring_gathers_one_segment_per_actor_and_versions_increase():
    specs = [spec(k, sync=True) for k in range(2)]
    with LocalProcessBackend(specs) as backend:
        infos = backend.start()
        assert [i.actor_id for i in infos] == [0, 1]
        learner = learner_for(infos[0])
        runner = SyncRunner(backend, learner)
        runner.start()
        for version in range(1, 4):
            done = runner.next_update()
            assert learner.version == version
            assert done.collected_steps == done.trained_steps >= 2 * 64
            assert done.metrics["Policy/Lag"] == 0.0
    assert live_descendants() == []


@pytest.mark.timeout(120)
def test_async_wiring_measures_lag_and_drops_stale_segments():
    # actor 1 is slow: its segments arrive late and carry old versions
    specs = [spec(0, sync=False, segment_steps=32), spec(1, sync=False, segment_steps=32,
                                                         step_delay=0.02)]
    with LocalProcessBackend(specs) as backend:
        learner = learner_for(backend.start()[0], buffer_size=64)
        runner = AsyncRunner(backend, learner, buffer_steps=64, max_policy_lag=1)
        runner.start()
        lags, dropped, collected, trained = [], 0, 0, 0
        for _ in range(8):
            done = runner.next_update()
            collected += done.collected_steps
            trained += done.trained_steps
            if np.isfinite(done.metrics["Policy/Lag Max"]):
                lags.append(done.metrics["Policy/Lag Max"])
                assert done.metrics["Policy/Lag Max"] <= 1
            dropped += done.metrics["Policy/Dropped Segments"]
        assert learner.version == 8
        assert max(lags) >= 1                       # actors did not wait for the learner
        assert dropped == runner.dropped_total
        assert collected >= trained >= 8 * 64
    assert live_descendants() == []


@pytest.mark.timeout(120)
def test_actor_exception_is_raised_in_learner_with_its_traceback():
    specs = [spec(0, sync=True), spec(1, sync=True, crash_after=40)]
    with LocalProcessBackend(specs) as backend:
        learner = learner_for(backend.start()[0])
        runner = SyncRunner(backend, learner)
        runner.start()
        with pytest.raises(ActorFailedError) as failure:
            for _ in range(10):
                runner.next_update()
    assert failure.value.actor_id == 1
    text = str(failure.value)
    assert "actor 1 failed" in text and "fake build crashed at step 41" in text
    assert "Traceback" in text and "fakes.py" in text
    assert live_descendants() == []


@pytest.mark.timeout(120)
def test_killed_actor_is_reported_by_name():
    specs = [spec(0, sync=True), spec(1, sync=True)]
    with LocalProcessBackend(specs) as backend:
        learner = learner_for(backend.start()[0])
        runner = SyncRunner(backend, learner)
        runner.start()
        runner.next_update()
        psutil.Process(backend.pids()[1]).kill()
        with pytest.raises(ActorFailedError, match=r"actor 1 failed: its process .* exited"):
            for _ in range(10):
                runner.next_update()
    assert live_descendants() == []


@pytest.mark.timeout(120)
def test_failure_while_starting_stops_the_other_actors():
    bad = ActorSpec(actor_id=1, stream=StreamSettings("fake"),
                    policy_factory=functools.partial(ppo_policy, network_cfg=NET),
                    segment_steps=8, time_horizon=4, wait_for_new_weights=True,
                    stream_factory=functools.partial(FakeStream, start_error="no build here"))
    backend = LocalProcessBackend([spec(0, sync=True), bad])
    with pytest.raises(ActorFailedError, match="actor 1 failed: builtins.RuntimeError: no build here"):
        backend.start()
    assert live_descendants() == []


# ----------------------------------------------------------------------------------------------
# The wirings against a scripted backend (no processes): exact lag and drop accounting
# ----------------------------------------------------------------------------------------------

class ScriptedBackend:
    """Hands out pre-made segments; records broadcasts."""

    def __init__(self, segments, num_actors=2):
        self.segments = list(segments)
        self.num_actors = num_actors
        self.broadcasts = []

    def broadcast(self, weights):
        self.broadcasts.append(weights.version)

    def receive(self, timeout=None):
        if not self.segments:
            if timeout is not None:
                return None
            raise AssertionError("the runner waited for a segment that will never come")
        return self.segments.pop(0)


class CountingLearner:
    def __init__(self, version=0):
        self.version = version
        self.trained = []

    def weights(self):
        return {"version": self.version}

    def update(self, trajectories):
        self.trained.append(sum(len(t.rewards) for t in trajectories))
        self.version += 1
        return {"Losses/Policy Loss": 0.0}


def segment(actor_id, version, steps, returns=()):
    from unity_rl.algos.types import Segment, Trajectory
    traj = Trajectory(np.zeros((steps, 1), np.float32), np.zeros((steps, 1), np.float32),
                      np.zeros(steps, np.float32), np.zeros(steps, np.float32),
                      np.zeros(steps, np.float32), np.zeros(1, np.float32), False)
    return Segment([traj], version, actor_id, steps, list(returns), [10] * len(returns))


def test_async_runner_drops_segments_beyond_the_lag_bound():
    learner = CountingLearner(version=5)
    backend = ScriptedBackend([segment(0, 5, 40), segment(1, 2, 40, returns=[1.0]),  # lag 3
                               segment(0, 4, 40), segment(1, 5, 40)])
    runner = AsyncRunner(backend, learner, buffer_steps=100, max_policy_lag=2)
    runner.start()
    done = runner.next_update()
    assert learner.trained == [120]             # the lag-3 segment was not trained on
    assert done.collected_steps == 160 and done.trained_steps == 120
    assert done.episode_returns == [1.0]        # its episodes still count
    assert done.metrics["Policy/Dropped Segments"] == 1 and runner.dropped_total == 1
    assert done.metrics["Policy/Lag"] == pytest.approx((0 + 1 + 0) / 3)
    assert done.metrics["Policy/Lag Max"] == 1
    assert backend.broadcasts == [5, 6]


def test_async_runner_takes_what_has_already_arrived():
    learner = CountingLearner()
    backend = ScriptedBackend([segment(0, 0, 60), segment(1, 0, 60), segment(0, 0, 60)])
    runner = AsyncRunner(backend, learner, buffer_steps=100, max_policy_lag=2)
    runner.next_update()
    assert learner.trained == [180]


def test_sync_runner_rejects_two_segments_from_one_actor():
    backend = ScriptedBackend([segment(0, 0, 10), segment(0, 0, 10)])
    with pytest.raises(RuntimeError, match="two segments in one sync round"):
        SyncRunner(backend, CountingLearner()).next_update()


def test_unknown_backend_and_mode_are_errors():
    from unity_rl.runtime.backend import make_backend
    from unity_rl.runtime.runners import make_runner

    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        make_backend("nope", [spec(0, sync=True)])
    with pytest.raises(ValueError, match="unknown mode 'both'"):
        make_runner("both", ScriptedBackend([]), CountingLearner(), buffer_steps=1,
                    max_policy_lag=0)
