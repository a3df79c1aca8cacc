"""Actors, the local backend and the sync/async wirings over in-process fake streams (no builds)."""
from __future__ import annotations

import functools

import numpy as np
import psutil
import pytest

from tests.runtime.fakes import BANDIT, BEHAVIOR, FakeStream, two_behaviors
from tests.runtime.helpers import live_descendants
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.local import LocalProcessBackend
from unity_rl.runtime.messages import ActorFailedError, BehaviorWeights, PolicyWeights, Rollout
from unity_rl.algorithms.ppo.host import PPOHost
from unity_rl.algorithms.ppo.acting import ppo_policy
from unity_rl.runtime.runners import AsyncRunner, SyncRunner

NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=1)


def plan(segment_steps: int = 64, time_horizon: int = 16) -> BehaviorPlan:
    return BehaviorPlan(functools.partial(ppo_policy, network_cfg=NET), segment_steps,
                        time_horizon)


def spec(actor_id: int, *, sync: bool, segment_steps: int = 64, stream_factory=None,
         **stream_kwargs) -> ActorSpec:
    factory = stream_factory or functools.partial(FakeStream, seed=actor_id, build=actor_id,
                                                  **stream_kwargs)
    return ActorSpec(
        actor_id=actor_id, stream=StreamSettings("fake"), plans=(("Fake", plan(segment_steps)),),
        default_plan=plan(segment_steps), wait_for_new_weights=sync, seed=actor_id,
        stream_factory=factory)


def host_for(info, buffer_size: int = 128, drop_lag: int | None = None) -> PPOHost:
    learner = PPOLearner(info.obs_dim, info.action_spec,
                         PPOConfig(buffer_size=buffer_size, minibatch_size=32, num_epochs=1), NET,
                         seed=0)
    return PPOHost(learner, buffer_steps=buffer_size, drop_lag=drop_lag)


def weights_of(host: PPOHost, publication: int) -> PolicyWeights:
    return PolicyWeights(publication, {BEHAVIOR: BehaviorWeights(host.version, host.weights())})


def test_actor_collects_segments_tagged_with_its_weights_version():
    actor = Actor(spec(0, sync=True, segment_steps=50))
    info = actor.start()
    fake = info.behaviors[BEHAVIOR]
    assert (fake.obs_dim, fake.num_agents) == (3, 4)
    host = host_for(fake)
    host.version = 7
    actor.set_weights(weights_of(host, 3))
    rollout = actor.collect()
    assert rollout.publication == 3
    segment = rollout.segments[BEHAVIOR]
    assert segment.policy_version == 7
    # only finished trajectories (time horizon 16 or an episode end): one step can finish
    # up to one 16-step piece per agent
    assert 50 <= segment.agent_steps < 50 + 16 * fake.num_agents
    assert segment.agent_steps == sum(len(t.rewards) for t in segment.trajectories)
    lengths = [len(t.rewards) for t in segment.trajectories]
    assert max(lengths) == 16 and all(n == 16 or t.terminated or n < 16
                                      for n, t in zip(lengths, segment.trajectories))
    stream = actor.stream
    actor.close()
    assert stream.closed


def test_segment_cuts_follow_time_horizon_unless_asked_to_cut_at_segment_end():
    def collect(cut: bool):
        cut_plan = plan(40)._replace(time_horizon=1000, cut_at_segment_end=cut)
        actor = Actor(ActorSpec(actor_id=0, stream=StreamSettings("fake"),
                                plans=(("Fake", cut_plan),), wait_for_new_weights=True,
                                stream_factory=functools.partial(FakeStream, max_step=1000)))
        info = actor.start()
        actor.set_weights(weights_of(host_for(info.behaviors[BEHAVIOR]), 1))
        segment = actor.collect().segments[BEHAVIOR]
        actor.close()
        return segment

    # ML-Agents: with a horizon of 1000 a trajectory ends only with its episode (the fake's
    # agents fall after a few dozen steps): one trajectory per finished episode, each terminated
    whole = collect(False)
    assert whole.agent_steps >= 40
    assert len(whole.trajectories) == len(whole.episode_returns)
    assert all(t.terminated for t in whole.trajectories)
    assert [len(t.rewards) for t in whole.trajectories] == whole.episode_lengths
    # segment cuts: every open trajectory is cut too (not terminated: bootstrapped)
    cut = collect(True)
    assert len(cut.trajectories) > len(cut.episode_returns)
    assert sum(not t.terminated for t in cut.trajectories) >= 4 - len(cut.episode_returns)


def test_actor_steps_every_behavior_and_a_rollout_ends_with_the_first_full_segment():
    bandit_plan = BehaviorPlan(functools.partial(ppo_policy, network_cfg=NET), 10, 4)
    actor = Actor(ActorSpec(
        actor_id=0, stream=StreamSettings("fake"),
        plans=(("Fake", plan(40)), ("Bandit", bandit_plan)), wait_for_new_weights=True,
        stream_factory=two_behaviors))
    info = actor.start()
    assert sorted(info.behaviors) == [BANDIT, BEHAVIOR]
    assert info.behaviors[BANDIT].action_spec.discrete_branches == (3,)
    hosts = {name: host_for(b) for name, b in info.behaviors.items()}
    actor.set_weights(PolicyWeights(1, {n: BehaviorWeights(h.version, h.weights())
                                        for n, h in hosts.items()}))
    rollout = actor.collect()
    assert sorted(rollout.segments) == [BANDIT, BEHAVIOR]
    # the bandit (2 one-step episodes per step) fills its 10 first; the other lane keeps its
    # open trajectories for a later rollout
    assert 10 <= rollout.segments[BANDIT].agent_steps < 10 + 2
    assert rollout.segments[BANDIT].episode_returns             # bandit episodes are 1 step
    assert rollout.segments[BEHAVIOR].agent_steps < 40
    actor.close()


def test_a_behavior_without_settings_is_an_error_naming_it():
    actor = Actor(ActorSpec(actor_id=0, stream=StreamSettings("fake"), plans=(("Fake", plan()),),
                            wait_for_new_weights=True, stream_factory=two_behaviors))
    with pytest.raises(ValueError, match=r"behavior 'Bandit\?team=0' but the config has no "
                                         r"settings for it .* behaviors.Bandit"):
        actor.start()
    actor.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sync_wiring_gathers_one_segment_per_actor_and_versions_increase():
    specs = [spec(k, sync=True) for k in range(2)]
    with LocalProcessBackend(specs) as backend:
        infos = backend.start()
        assert [i.actor_id for i in infos] == [0, 1]
        host = host_for(infos[0].behaviors[BEHAVIOR])
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        for version in range(1, 4):
            done = runner.next_update().behaviors[BEHAVIOR]
            assert host.version == host.learner.version == version
            assert done.collected_steps >= 2 * 64
            assert done.metrics["Policy/Lag"] == 0.0
    assert live_descendants() == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_async_wiring_measures_lag_and_drops_stale_segments():
    # actor 1 is slow: its segments arrive late and carry old versions
    specs = [spec(0, sync=False, segment_steps=32), spec(1, sync=False, segment_steps=32,
                                                         step_delay=0.02)]
    with LocalProcessBackend(specs) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR], buffer_size=64, drop_lag=1)
        runner = AsyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        lags, dropped, collected, updates = [], 0, 0, 0
        while updates < 8:
            done = runner.next_update().behaviors[BEHAVIOR]
            collected += done.collected_steps
            if done.metrics is None:
                continue
            updates += 1
            if np.isfinite(done.metrics["Policy/Lag Max"]):
                lags.append(done.metrics["Policy/Lag Max"])
                assert done.metrics["Policy/Lag Max"] <= 1
            dropped += done.metrics["Policy/Dropped Segments"]
        assert host.version == 8
        assert max(lags) >= 1                       # actors did not wait for the learner
        assert collected >= 8 * 64
    assert live_descendants() == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_actor_exception_is_raised_in_learner_with_its_traceback():
    specs = [spec(0, sync=True), spec(1, sync=True, crash_after=40)]
    with LocalProcessBackend(specs) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        with pytest.raises(ActorFailedError) as failure:
            for _ in range(10):
                runner.next_update()
    assert failure.value.actor_id == 1
    text = str(failure.value)
    assert "actor 1 failed" in text and "fake build crashed at step 41" in text
    assert "Traceback" in text and "fakes.py" in text
    assert live_descendants() == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_killed_actor_without_restarts_is_reported_by_name():
    specs = [spec(0, sync=True), spec(1, sync=True)]
    with LocalProcessBackend(specs, max_restarts=0) as backend:
        host = host_for(backend.start()[0].behaviors[BEHAVIOR])
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        runner.next_update()
        psutil.Process(backend.pids()[1]).kill()
        with pytest.raises(ActorFailedError, match=r"actor 1 failed: its process .* exited .*"
                                                   r"not restarted: all 0 lifetime restarts"):
            for _ in range(10):
                runner.next_update()
    assert live_descendants() == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_failure_while_starting_stops_the_other_actors():
    bad = spec(1, sync=True, stream_factory=functools.partial(FakeStream,
                                                              start_error="no build here"))
    backend = LocalProcessBackend([spec(0, sync=True), bad])
    with pytest.raises(ActorFailedError, match="actor 1 failed: builtins.RuntimeError: no build here"):
        backend.start()
    assert live_descendants() == []


# ----------------------------------------------------------------------------------------------
# The wirings against a scripted backend (no processes): exact lag and drop accounting
# ----------------------------------------------------------------------------------------------

class ScriptedBackend:
    """Hands out pre-made rollouts; records broadcasts."""

    def __init__(self, rollouts, num_actors=2):
        self.rollouts = list(rollouts)
        self.num_actors = num_actors
        self.broadcasts = []

    def broadcast(self, weights):
        self.broadcasts.append((weights.version, {n: w.version
                                                  for n, w in weights.behaviors.items()}))

    def receive(self, timeout=None):
        if not self.rollouts:
            if timeout is not None:
                return None
            raise AssertionError("the runner waited for a rollout that will never come")
        return self.rollouts.pop(0)


class CountingLearner:
    def __init__(self, version=0):
        self.version = version
        self.trained = []
        self.collected = []
        self.agent_steps_collected = 0

    def weights(self):
        return {"version": self.version}

    def update(self, trajectories, collected_steps=None, episode_length=None, lags=None):
        self.trained.append(sum(len(t.rewards) for t in trajectories))
        self.collected.append(collected_steps)
        self.version += 1
        return {"Losses/Policy Loss": 0.0}


def rollout(actor_id, version, steps, returns=(), behavior=BEHAVIOR):
    from unity_rl.experience import Segment, Trajectory
    traj = Trajectory(np.zeros((steps, 1), np.float32), np.zeros((steps, 1), np.float32),
                      np.zeros(steps, np.float32), np.zeros(steps, np.float32),
                      np.zeros(steps, np.float32), np.zeros(1, np.float32), False)
    segment = Segment([traj], version, actor_id, steps, list(returns), [10] * len(returns))
    return Rollout(actor_id, 0, {behavior: segment})


def counting_host(version=0, buffer_steps=100, drop_lag=2) -> PPOHost:
    host = PPOHost(CountingLearner(), buffer_steps=buffer_steps, drop_lag=drop_lag)
    host.version = version
    return host


def test_async_runner_drops_segments_beyond_the_lag_bound():
    host = counting_host(version=5)
    backend = ScriptedBackend([rollout(0, 5, 40), rollout(1, 2, 40, returns=[1.0]),  # lag 3
                               rollout(0, 4, 40), rollout(1, 5, 40)])
    runner = AsyncRunner(backend, {BEHAVIOR: host})
    runner.start()
    done = runner.next_update().behaviors[BEHAVIOR]
    assert host.learner.trained == [120]         # the lag-3 segment was not trained on
    assert host.learner.collected == [160]       # but its steps drive the schedules
    assert done.collected_steps == 160
    assert done.episode_returns == [1.0]        # its episodes still count
    assert done.metrics["Policy/Dropped Segments"] == 1
    assert done.metrics["Policy/Lag"] == pytest.approx((0 + 1 + 0) / 3)
    assert done.metrics["Policy/Lag Max"] == 1
    assert backend.broadcasts == [(1, {BEHAVIOR: 5}), (2, {BEHAVIOR: 6})]


def test_async_runner_takes_what_has_already_arrived():
    host = counting_host()
    backend = ScriptedBackend([rollout(0, 0, 60), rollout(1, 0, 60), rollout(0, 0, 60)])
    AsyncRunner(backend, {BEHAVIOR: host}).next_update()
    assert host.learner.trained == [180]


def test_async_runner_trains_each_behavior_when_its_own_buffer_is_full():
    fake, bandit = counting_host(buffer_steps=100), counting_host(buffer_steps=10)
    backend = ScriptedBackend([rollout(0, 0, 30), rollout(0, 0, 12, behavior=BANDIT)])
    runner = AsyncRunner(backend, {BEHAVIOR: fake, BANDIT: bandit})
    done = runner.next_update()
    assert bandit.learner.trained == [12] and fake.learner.trained == []
    assert done.behaviors[BANDIT].metrics is not None
    assert done.behaviors[BEHAVIOR].metrics is None and done.behaviors[BEHAVIOR].collected_steps == 30
    assert backend.broadcasts == [(1, {BEHAVIOR: 0, BANDIT: 1})]  # one publication, all weights


def test_a_finished_behavior_is_no_longer_trained():
    fake, bandit = counting_host(buffer_steps=10), counting_host(buffer_steps=10)
    backend = ScriptedBackend([rollout(0, 0, 30), rollout(0, 0, 12, behavior=BANDIT)])
    runner = AsyncRunner(backend, {BEHAVIOR: fake, BANDIT: bandit})
    runner.finish(BANDIT)
    done = runner.next_update()
    assert fake.learner.trained == [30] and bandit.learner.trained == []
    assert done.behaviors[BANDIT].collected_steps == 12   # still counted


@pytest.mark.parametrize("runner_class", [SyncRunner, AsyncRunner])
def test_on_arrival_sees_the_arrived_data_before_any_host_trains(runner_class):
    host = counting_host(buffer_steps=100)
    backend = ScriptedBackend([rollout(0, 0, 60, returns=[2.0]), rollout(1, 0, 60)])
    runner = runner_class(backend, {BEHAVIOR: host})
    seen = []
    runner.on_arrival = lambda parts: seen.append((dict(parts), list(host.learner.trained)))
    runner.start()
    done = runner.next_update().behaviors[BEHAVIOR]
    assert host.learner.trained == [120] and done.metrics is not None
    (parts, trained_then), = seen
    assert trained_then == []                       # called before the update
    arrived = parts[BEHAVIOR]
    assert arrived.collected_steps == 120 and arrived.episode_returns == [2.0]
    assert arrived.metrics is None
    assert (done.collected_steps, done.episode_returns) == (120, [2.0])  # the round says it too


def test_sync_runner_rejects_two_rollouts_from_one_actor():
    backend = ScriptedBackend([rollout(0, 0, 10), rollout(0, 0, 10)])
    with pytest.raises(RuntimeError, match="two rollouts in one sync round"):
        SyncRunner(backend, {BEHAVIOR: counting_host()}).next_update()


def test_unknown_backend_and_mode_are_errors():
    from unity_rl.training.wiring import make_backend
    from unity_rl.runtime.runners import make_runner

    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        make_backend("nope", [spec(0, sync=True)])
    with pytest.raises(ValueError, match="unknown mode 'both'"):
        make_runner("both", ScriptedBackend([]), {BEHAVIOR: counting_host()})
