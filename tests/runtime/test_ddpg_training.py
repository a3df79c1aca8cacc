"""DDPG training: transitions from trajectories, the actor's policy, sync and Ape-X runs, resume."""
from __future__ import annotations

import dataclasses
import functools
import math
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np
import pytest
import torch
from mlagents_envs.base_env import ActionSpec

from tests.runtime.fakes import BEHAVIOR, FakeStream
from tests.runtime.helpers import REPO_ROOT, checkpoint_entry, live_descendants
from tests.runtime.test_collector import act, result
from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.replay import ReplayBuffer, SharedReplayBuffer, restore_replay
from unity_rl.experience import StepExtras, Trajectory, TransitionBatch
from unity_rl.config import ConfigError, FrozenMap, apply_overrides, load_config
from unity_rl.metrics import read_progress
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.runtime.collector import TrajectoryCollector
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.messages import BehaviorWeights, PolicyWeights, Rollout
from unity_rl.runtime.runners import AsyncRunner, SyncRunner
from unity_rl.algorithms.ddpg.acting import DDPGActorPolicy, ddpg_policy
from unity_rl.algorithms.offpolicy.acting import carried_priorities, trajectories_to_transitions
from unity_rl.algorithms.offpolicy.host import OffPolicyHost
from unity_rl.training.trainer import train

CONFIG = REPO_ROOT / "configs" / "ddpg" / "3dball.yaml"
BALL = REPO_ROOT / "unity_builds" / "3DBall.x86_64"
BASIC = REPO_ROOT / "unity_builds" / "Basic.x86_64"
NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=1)
SPEC = ActionSpec.create_continuous(2)


# ----------------------------------------------------------------------------------------------
# Trajectories -> transitions
# ----------------------------------------------------------------------------------------------

def traj(obs: list[float], last: float, terminated: bool) -> Trajectory:
    n = len(obs)
    return Trajectory(obs=np.array([[v, -v] for v in obs], np.float32),
                      actions=np.full((n, 1), 0.5, np.float32),
                      logprobs=np.zeros(n, np.float32), values=np.full(n, np.nan, np.float32),
                      rewards=np.arange(1, n + 1, dtype=np.float32) / 10,
                      last_obs=np.array([last, -last], np.float32), terminated=terminated)


def test_transitions_chain_observations_and_flag_only_a_real_end():
    batch = trajectories_to_transitions([traj([1, 2, 3], 4, terminated=True),
                                         traj([5, 6], 7, terminated=False)])
    np.testing.assert_array_equal(batch.obs[:, 0], [1, 2, 3, 5, 6])
    np.testing.assert_array_equal(batch.next_obs[:, 0], [2, 3, 4, 6, 7])
    np.testing.assert_array_equal(batch.next_obs[:, 1], [-2, -3, -4, -6, -7])
    np.testing.assert_array_equal(batch.terminated, [0, 0, 1, 0, 0])
    np.testing.assert_allclose(batch.rewards, [.1, .2, .3, .1, .2])
    assert batch.action_masks is None
    assert all(a.dtype == np.float32 for a in batch[:5])
    with pytest.raises(ValueError):
        trajectories_to_transitions([])


def transitions_of(steps) -> TransitionBatch:
    """Drives a collector with hand-made results for agent 0 (time horizon 2)."""
    c = TrajectoryCollector(time_horizon=2)
    for kind, *args in steps:
        if kind == "decide":
            act(c, result(decisions=[(0, args[0], 0.1)]))
        else:  # "end": obs, reward, interrupted
            c.observe(result(terminals=[(0, *args)]))
    return trajectories_to_transitions(c.flush())


def test_termination_does_not_bootstrap():
    b = transitions_of([("decide", 1.0), ("end", 9.0, -1.0, False)])
    assert (b.obs[0, 0], b.next_obs[0, 0], b.rewards[0], b.terminated[0]) == (1, 9, -1, 1)


def test_truncation_bootstraps_from_the_final_observation():
    b = transitions_of([("decide", 1.0), ("end", 9.0, 0.1, True)])
    assert (b.next_obs[0, 0], b.terminated[0]) == (9, 0)


def test_time_horizon_and_segment_cuts_bootstrap_from_the_next_decision():
    b = transitions_of([("decide", 1.0), ("decide", 2.0), ("decide", 3.0), ("decide", 4.0)])
    # horizon 2 cuts after the 2nd reward (at obs 3); flush cuts the rest at obs 4 (still pending)
    np.testing.assert_array_equal(b.obs[:, 0], [1, 2, 3])
    np.testing.assert_array_equal(b.next_obs[:, 0], [2, 3, 4])
    np.testing.assert_array_equal(b.terminated, [0, 0, 0])


def test_carried_priorities_need_every_row():
    a, b = traj([1, 2], 3, False), traj([4], 5, True)
    assert carried_priorities([a, b]) is None
    a = a._replace(extras=StepExtras(priorities=np.array([0.5, 0.25], np.float32)))
    assert carried_priorities([a, b]) is None
    b = b._replace(extras=StepExtras(priorities=np.array([2.0], np.float32)))
    np.testing.assert_allclose(carried_priorities([a, b]), [0.5, 0.25, 2.0])


# ----------------------------------------------------------------------------------------------
# The actor's policy, in an Actor over a fake stream
# ----------------------------------------------------------------------------------------------

def host_for(cfg: DDPGConfig, replay=None, handle=None, obs_dim: int = 3) -> OffPolicyHost:
    learner = DDPGLearner(obs_dim, SPEC, cfg, NET.hidden_units, NET.num_layers, NET.normalize,
                          seed=0)
    replay = replay if replay is not None else ReplayBuffer(cfg.buffer_size, obs_dim, 2, 0,
                                                            prioritized=cfg.prioritized)
    return OffPolicyHost(learner, replay, name="ddpg", num_actors=1, replay_handle=handle)


def fake_actor(cfg: DDPGConfig) -> Actor:
    plan = BehaviorPlan(functools.partial(ddpg_policy, network_cfg=NET, ddpg_cfg=cfg), 64, 16)
    spec = ActorSpec(actor_id=0, stream=StreamSettings("fake"), plans=(("Fake", plan),),
                     wait_for_new_weights=True, seed=0,
                     stream_factory=functools.partial(FakeStream, max_step=10))
    return Actor(spec)


def publish(actor: Actor, host: OffPolicyHost) -> None:
    host.version += 1
    actor.set_weights(PolicyWeights(host.version, {BEHAVIOR: BehaviorWeights(host.version,
                                                                             host.weights())}))


def collect(actor: Actor):
    return actor.collect().segments[BEHAVIOR]


def test_actor_policy_warms_up_then_follows_mu_and_sends_its_segments():
    cfg = DDPGConfig(warmup_steps=40, buffer_size=1000, batch_size=8, noise_sigma=0.0)
    actor = fake_actor(cfg)
    actor.start()
    host = host_for(cfg)
    publish(actor, host)
    policy: DDPGActorPolicy = actor.lanes[BEHAVIOR].policy
    ended = []
    policy.episodes_ended = ended.extend  # the Actor reports terminal agents
    segment = collect(actor)
    assert ended and segment.trajectories and segment.episode_returns
    actions = np.concatenate([t.actions for t in segment.trajectories])
    assert np.abs(actions).max() <= 1 and actions.std() > 0.3   # warm-up: uniform in [-1, 1]
    assert np.isnan(np.concatenate([t.values for t in segment.trajectories])).all()
    assert all(t.extras.priorities is None for t in segment.trajectories)
    host.accept(segment)
    assert len(host.replay) == host.agent_steps == segment.agent_steps
    # after warm-up, noise 0: actions are mu(obs), deterministic
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    a1, logp, values = policy.act(obs, agent_keys=list(range(5)))
    np.testing.assert_allclose(a1, policy.act(obs, deterministic=True)[0], atol=1e-6)
    assert logp.shape == values.shape == (5,)
    actor.close()


def test_prioritized_actor_computes_initial_priorities():
    cfg = DDPGConfig(warmup_steps=0, buffer_size=1000, batch_size=8, prioritized=True)
    actor = fake_actor(cfg)
    actor.start()
    host = host_for(cfg)
    publish(actor, host)
    segment = collect(actor)
    priorities = carried_priorities(segment.trajectories)
    assert priorities is not None and (priorities >= 0).all()
    assert np.isnan(np.concatenate([t.values for t in segment.trajectories])).all()
    policy = actor.lanes[BEHAVIOR].policy.policy
    expected = policy.td_errors(trajectories_to_transitions(segment.trajectories))
    np.testing.assert_allclose(priorities, expected, rtol=1e-5)
    host.accept(segment)
    metrics = host._train(3)
    assert metrics["Runtime/Updates This Round"] == 3 and host.updates == 3
    actor.close()


def test_shared_replay_actor_writes_transitions_and_sends_a_receipt():
    cfg = DDPGConfig(warmup_steps=0, buffer_size=500, batch_size=8)
    replay = SharedReplayBuffer(500, 3, 2, 0)
    host = host_for(cfg, replay=replay, handle=replay.handle())
    actor = fake_actor(cfg)
    try:
        actor.start()
        publish(actor, host)
        segment = collect(actor)
        assert segment.trajectories == [] and segment.agent_steps >= 64
        assert len(replay) == segment.agent_steps          # written by the actor's own view
        host.accept(segment)
        assert len(replay) == host.agent_steps == segment.agent_steps   # a receipt adds no row
        host._train(2)
        assert host.updates == 2
    finally:
        actor.close()
        host.close()
    with pytest.raises(FileNotFoundError):  # the learner's close unlinked the segment
        shared_memory.SharedMemory(name=host.replay_handle["name"])


def test_replay_restore_into_a_different_capacity_keeps_the_newest_rows():
    old = ReplayBuffer(8, 2, 1, prioritized=True)
    for start in (0, 6):  # 12 rows into 8: the ring wrapped
        n = 6
        obs = np.arange(start, start + n, dtype=np.float32)[:, None].repeat(2, 1)
        old.add(TransitionBatch(obs, np.zeros((n, 1), np.float32), np.zeros(n, np.float32), obs,
                                np.zeros(n, np.float32)), priorities=np.full(n, 0.5))
    new = ReplayBuffer(5, 2, 1, prioritized=True)
    restore_replay(new, old.state_dict())
    assert len(new) == 5
    assert sorted(new.state_dict()["obs"][:, 0]) == [7, 8, 9, 10, 11]
    same = ReplayBuffer(8, 2, 1, prioritized=True)
    restore_replay(same, old.state_dict())
    np.testing.assert_array_equal(same.state_dict()["obs"], old.state_dict()["obs"])


# ----------------------------------------------------------------------------------------------
# train() on the 3DBall stand-in
# ----------------------------------------------------------------------------------------------

def tiny_ddpg(base_port: int, *, mode: str = "sync", num_envs: int = 1, num_actors: int = 1,
              max_steps: int = 1500, prioritized: bool = False, env: Path = BALL,
              behavior: str | None = None):
    cfg = load_config(CONFIG)
    cfg = apply_overrides(cfg, env=str(env), num_envs=num_envs, num_actors=num_actors,
                          base_port=base_port, mode=mode, seed=5, no_graphics=True,
                          timeout_wait=30)
    [(name, b)] = list(cfg.behaviors.items())
    hp = dataclasses.replace(b.hyperparameters, warmup_steps=500, batch_size=32,
                             save_replay_buffer=True,
                             buffer_size=20_000, replay_ratio=0.25, prioritized=prioritized)
    b = dataclasses.replace(b, hyperparameters=hp, max_steps=max_steps, summary_freq=500,
                            network_settings=NET, checkpoint_interval=100_000)
    return dataclasses.replace(cfg, behaviors=FrozenMap({behavior or name: b}))


def check_run(run_dir: Path, result, cfg) -> dict:
    hp = cfg.behaviors["3DBall"].hyperparameters
    state = checkpoint_entry(run_dir)["learner"]
    assert state["agent_steps"] == result.agent_steps >= cfg.behaviors["3DBall"].max_steps
    owed = int((result.agent_steps - hp.warmup_steps) * hp.replay_ratio)
    assert 0 < state["updates"] <= owed and state["ddpg"]["updates"] == state["updates"]
    assert state["version"] == result.policy_version >= 2
    assert state["replay"]["size"] >= result.agent_steps   # every collected step is stored
    rows = read_progress(run_dir / "3DBall" / "progress.csv")
    assert rows[-1]["agent_steps"] == result.agent_steps
    assert result.episodes > 0 and result.policy_path.exists()
    assert live_descendants() == []
    return {"state": state, "lags": [r["policy_lag"] for r in rows]}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_apex_run_two_actors_shared_prioritized_replay(tmp_path, free_base_port):
    cfg = tiny_ddpg(free_base_port(2), mode="async", num_envs=2, num_actors=2,
                    max_steps=2500, prioritized=True)
    res = train(cfg, tmp_path / "run", resume=False, console=False)
    out = check_run(tmp_path / "run", res, cfg)
    lags = [lag for lag in out["lags"] if math.isfinite(lag)]
    assert lags and all(lag >= 0 for lag in lags)
    replay = out["state"]["replay"]
    assert replay["prioritized"] and np.isfinite(replay["priorities"]).all()


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_sync_run_updates_at_the_replay_ratio_and_resume_restores_the_buffer(
        tmp_path, free_base_port):
    port = free_base_port(1)
    cfg = tiny_ddpg(port, max_steps=1000)
    first = train(cfg, tmp_path / "run", resume=False, console=False)
    out = check_run(tmp_path / "run", first, cfg)
    saved = out["state"]
    hp = cfg.behaviors["3DBall"].hyperparameters
    assert saved["updates"] == int((first.agent_steps - hp.warmup_steps) * hp.replay_ratio)
    assert saved["replay"]["size"] == first.agent_steps
    assert all(lag == 0 for lag in out["lags"])      # sync: actors act with the newest weights

    second = train(tiny_ddpg(port, max_steps=2000), tmp_path / "run", resume=True,
                   console=False)
    state = checkpoint_entry(tmp_path / "run")["learner"]
    assert state["agent_steps"] == second.agent_steps >= 2000
    assert state["replay"]["size"] == second.agent_steps       # old rows kept, new ones added
    np.testing.assert_array_equal(state["replay"]["obs"][:first.agent_steps],
                                  saved["replay"]["obs"])
    assert state["updates"] == int((second.agent_steps - hp.warmup_steps) * hp.replay_ratio)
    assert state["version"] > saved["version"]
    assert live_descendants() == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_discrete_behavior_is_a_one_line_error_suggesting_ppo(tmp_path, free_base_port, capsys):
    from unity_rl.cli import main

    cfg = tiny_ddpg(free_base_port(1), env=BASIC, behavior="Basic")
    with pytest.raises(ConfigError, match="PPO"):
        train(cfg, tmp_path / "run", resume=False, console=False)
    assert live_descendants() == []

    config = tmp_path / "basic_ddpg.yaml"
    config.write_text("behaviors:\n  Basic:\n    trainer_type: ddpg\n    max_steps: 1000\n")
    code = main(["train", str(config), "--env", str(BASIC), "--base-port",
                 str(free_base_port(1)), "--results-dir", str(tmp_path / "results"),
                 "--run-id", "basic"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1].startswith("unity-rl: error:") and "PPO" in err[-1]
    assert not any("Traceback" in line for line in err)
    assert live_descendants() == []


def test_host_state_round_trip_without_builds():
    cfg = DDPGConfig(warmup_steps=0, buffer_size=100, batch_size=4, save_replay_buffer=True)
    host = host_for(cfg)
    rng = np.random.default_rng(0)
    host.replay.add(TransitionBatch(rng.normal(size=(10, 3)).astype(np.float32),
                                    rng.uniform(-1, 1, (10, 2)).astype(np.float32),
                                    np.ones(10, np.float32),
                                    rng.normal(size=(10, 3)).astype(np.float32),
                                    np.zeros(10, np.float32)))
    host.agent_steps = 10
    host.train(sync=True)
    state = host.state_dict()
    other = host_for(cfg)
    other.load_state_dict(state)
    assert (other.updates, other.version, other.agent_steps, len(other.replay)) == (10, 1, 10, 10)
    for a, b in zip(host.policy_weights()["actor"].values(),
                    other.policy_weights()["actor"].values()):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------------------------
# The wirings over a scripted backend (no processes)
# ----------------------------------------------------------------------------------------------

class ScriptedBackend:
    """Hands out pre-made rollouts; a blocking receive with none left is a test failure."""

    def __init__(self, rollouts, num_actors=2):
        self.rollouts = list(rollouts)
        self.num_actors = num_actors
        self.versions = []

    def broadcast(self, weights):
        self.versions.append(weights.version)

    def receive(self, timeout=None):
        if self.rollouts:
            return self.rollouts.pop(0)
        if timeout is not None:
            return None
        raise AssertionError("the runner blocked waiting for a rollout")


def random_rollout(actor_id: int, version: int, steps: int, seed: int):
    from unity_rl.experience import Segment
    rng = np.random.default_rng(seed)
    t = Trajectory(rng.normal(size=(steps, 3)).astype(np.float32),
                   rng.uniform(-1, 1, (steps, 2)).astype(np.float32),
                   np.zeros(steps, np.float32), np.full(steps, np.nan, np.float32),
                   np.full(steps, 0.1, np.float32), rng.normal(size=3).astype(np.float32), True)
    return Rollout(actor_id, 0, {BEHAVIOR: Segment([t], version, actor_id, steps, [1.0], [steps])})


def test_sync_runner_pays_every_owed_update_and_publishes_once_per_round():
    cfg = DDPGConfig(warmup_steps=50, replay_ratio=0.5, buffer_size=1000, batch_size=8)
    host = host_for(cfg)
    host.version = 1
    backend = ScriptedBackend([random_rollout(1, 1, 60, 1), random_rollout(0, 1, 60, 0)])
    runner = SyncRunner(backend, {BEHAVIOR: host})
    runner.start()
    done = runner.next_update().behaviors[BEHAVIOR]
    assert done.collected_steps == 120 and host.updates == int((120 - 50) * 0.5)
    assert backend.versions == [1, 2] and done.metrics["Policy/Lag"] == 0
    assert done.episode_returns == [1.0, 1.0] and len(host.replay) == 120


@pytest.mark.slow
def test_apex_wiring_never_trains_ahead_of_the_data_nor_waits_while_it_owes():
    cfg = DDPGConfig(warmup_steps=0, replay_ratio=1.0, buffer_size=1000, batch_size=8)
    host = host_for(cfg)
    host.updates_per_round = 40
    backend = ScriptedBackend([random_rollout(k % 2, 0, 100, k) for k in range(3)])
    runner = AsyncRunner(backend, {BEHAVIOR: host})
    runner.start()
    first = runner.next_update().behaviors[BEHAVIOR]   # takes all three, pays 40 of 300
    assert first.collected_steps == 300 and host.updates == 40
    assert first.metrics["Runtime/Update Backlog"] == 260 and first.metrics["Policy/Lag"] == 0
    rounds = 1
    while host.updates_owed() > 0:                 # no data left, but it never blocks
        done = runner.next_update().behaviors[BEHAVIOR]
        assert done.collected_steps == 0 and math.isnan(done.metrics["Policy/Lag"])
        rounds += 1
    assert host.updates == 300 and rounds == 8 and backend.versions == list(range(1, 10))
    backend.rollouts.append(random_rollout(0, 2, 50, 9))
    late = runner.next_update().behaviors[BEHAVIOR]
    assert late.metrics["Policy/Lag"] == 8 - 2 and late.metrics["Policy/Lag Updates"] > 0
    more = runner.next_update().behaviors[BEHAVIOR]
    assert more.metrics["Runtime/Updates This Round"] == 10   # 50 = 40 + 10
    with pytest.raises(AssertionError, match="blocked"):  # caught up: now it waits for data
        runner.next_update()


@pytest.mark.slow
def test_checkpoint_skips_a_shared_buffer_a_live_process_keeps_locked():
    import multiprocessing as mp

    from tests.algos.test_replay import _hold_lock_forever

    cfg = DDPGConfig(warmup_steps=0, buffer_size=50, batch_size=4, save_replay_buffer=True)
    replay = SharedReplayBuffer(50, 3, 2, 0, lock_timeout=1.0)
    host = OffPolicyHost(host_for(cfg).learner, replay, name="ddpg", num_actors=1,
                         replay_handle=replay.handle())
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=_hold_lock_forever, args=(replay, ready, 0))
    try:
        assert host.state_dict()["replay"]["size"] == 0
        child.start()
        assert ready.wait(60)             # a live actor stuck while holding the lock
        state = host.state_dict()
        assert state["replay"] is None    # saved without the buffer, never a hang
        other = host_for(cfg)
        other.load_state_dict(state)      # resumes with an empty buffer
        assert len(other.replay) == 0
    finally:
        child.kill()
        child.join(10)
        host.close()


def test_replay_buffer_is_saved_only_when_asked():
    assert host_for(DDPGConfig(buffer_size=50, batch_size=4)).state_dict()["replay"] is None
    saved = host_for(DDPGConfig(buffer_size=50, batch_size=4, save_replay_buffer=True))
    assert saved.state_dict()["replay"]["size"] == 0


def test_replay_footprint_matches_the_documented_cost():
    from unity_rl.replay import replay_footprint

    assert replay_footprint(200_000, 8, 2) == (80, 16_000_000)   # configs/ddpg/3dball.yaml
    buffer = ReplayBuffer(10, 8, 2)
    buffer.add(TransitionBatch(np.zeros((10, 8), np.float32), np.zeros((10, 2), np.float32),
                               np.zeros(10, np.float32), np.zeros((10, 8), np.float32),
                               np.zeros(10, np.float32)))
    state = buffer.state_dict()
    assert sum(state[f].nbytes for f in TransitionBatch._fields if f in state) == 10 * 80
    assert replay_footprint(1, 8, 2, prioritized=True).bytes_per_transition == 96
