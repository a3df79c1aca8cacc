"""Async flow control: a host that owes too many updates (replay-ratio hosts: gradient updates;
PPO: full buffers) holds the actors (``unity_rl.max_update_backlog``), the runner pauses and resumes them (``Control.paused``), and a
paused actor collects nothing until resumed."""
from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

from tests.runtime.fakes import BEHAVIOR
from tests.runtime.test_ddpg_training import ScriptedBackend, host_for, random_rollout
from tests.runtime.test_wirings import counting_host, host_for as ppo_host_for, rollout, spec, weights_of
from unity_rl.algorithms.ddpg.config import DDPGConfig
from unity_rl.config import ConfigError, parse_config
from unity_rl.runtime.actor import Actor
from unity_rl.runtime.actor_loop import actor_loop
from unity_rl.runtime.messages import Command, Control, FromActor, ToActor
from unity_rl.runtime.runners import AsyncRunner, SyncRunner


class RecordingBackend(ScriptedBackend):
    """Pre-made rollouts; records publications (``versions``) and controls."""

    def __init__(self, rollouts, num_actors=2):
        super().__init__(rollouts, num_actors)
        self.controls: list[Control] = []

    def control(self, change: Control) -> None:
        self.controls.append(change)


class OnePerPublicationBackend(RecordingBackend):
    """One actor whose i-th rollout arrives only after publication i (the actor sends one
    rollout while the learner trains on the one before)."""

    def __init__(self, rollouts):
        super().__init__(rollouts, num_actors=1)
        self.released = 0

    def receive(self, timeout=None):
        if self.rollouts and self.released < len(self.versions):
            self.released += 1
            return self.rollouts.pop(0)
        if timeout is not None:
            return None
        raise AssertionError("the runner blocked waiting for a rollout")


def ddpg_host(max_backlog):
    cfg = DDPGConfig(warmup_steps=0, replay_ratio=1.0, buffer_size=1000, batch_size=8)
    host = host_for(cfg)
    host.updates_per_round = 40
    host.max_backlog = max_backlog
    return host


def test_runner_pauses_the_actors_beyond_the_bound_and_resumes_them_at_half_of_it():
    host = ddpg_host(max_backlog=100)
    backend = RecordingBackend([random_rollout(k % 2, 0, 100, k) for k in range(3)])
    runner = AsyncRunner(backend, {BEHAVIOR: host})
    runner.start()
    owed, paused = [], []
    while True:
        done = runner.next_update().behaviors[BEHAVIOR]
        owed.append(host.updates_owed())
        paused.append(done.metrics["Runtime/Actors Paused"])
        if not runner.paused and runner.pauses:
            break
    # 300 owed, 40 paid per round: held from 260 (> 100) until 20 (<= 50), not at 100 or 60
    assert owed == [260, 220, 180, 140, 100, 60, 20]
    assert paused == [1, 1, 1, 1, 1, 1, 0]
    assert backend.controls == [Control(paused=True), Control(paused=False)]


def test_without_a_bound_or_in_sync_the_actors_are_never_paused():
    host = ddpg_host(max_backlog=None)
    backend = RecordingBackend([random_rollout(k % 2, 0, 100, k) for k in range(3)])
    runner = AsyncRunner(backend, {BEHAVIOR: host})
    runner.start()
    runner.next_update()
    assert host.updates_owed() == 260 and backend.controls == [] and not runner.paused

    sync_host = ddpg_host(max_backlog=10)
    backend = RecordingBackend([random_rollout(1, 1, 60, 1), random_rollout(0, 1, 60, 0)])
    SyncRunner(backend, {BEHAVIOR: sync_host}).next_update()   # sync pays all it owes
    assert sync_host.updates_owed() == 0 and backend.controls == []


def test_a_host_holds_only_once_it_can_train():
    host = ddpg_host(max_backlog=5)
    host.cfg = DDPGConfig(warmup_steps=0, replay_ratio=1.0, buffer_size=1000, batch_size=64)
    host.agent_steps = 50                       # owed 49, but fewer rows than one minibatch
    assert host.updates_owed() > 5 and not host.holds_collection()


def test_ppo_hosts_hold_only_with_a_bound_and_more_full_buffers_than_it():
    actor = Actor(spec(0, sync=False))
    try:
        info = actor.start().behaviors[BEHAVIOR]
    finally:
        actor.close()
    assert ppo_host_for(info).holds_collection() is False
    unbounded, pipelined, one_ahead = (counting_host(buffer_steps=100),
                                       counting_host(buffer_steps=100),
                                       counting_host(buffer_steps=100))
    pipelined.max_backlog, one_ahead.max_backlog = 0, 1
    for steps, holds in ((99, (False, False, False)), (1, (False, True, False)),
                         (150, (False, True, True))):
        for host in (unbounded, pipelined, one_ahead):
            host.accept(rollout(0, 0, steps).segments[BEHAVIOR])
        assert (unbounded.holds_collection(), pipelined.holds_collection(),
                one_ahead.holds_collection()) == holds
    pipelined.train(sync=False)                 # the update takes the whole buffer
    assert not pipelined.holds_collection()


def test_pipelined_ppo_pauses_the_actors_for_each_update_and_resumes_them_after_it():
    """max_update_backlog 0: a full buffer pauses the actors before the update (they finish the
    rollout in hand), its publication resumes them; nothing is dropped."""
    host = counting_host(buffer_steps=100)
    host.max_backlog = 0
    backend = OnePerPublicationBackend([rollout(0, 0, 100), rollout(0, 0, 100),
                                        rollout(0, 1, 100)])
    runner = AsyncRunner(backend, {BEHAVIOR: host})
    runner.start()
    lags = []
    for _ in range(3):
        done = runner.next_update().behaviors[BEHAVIOR]
        lags.append(done.metrics["Policy/Lag Max"])
        assert done.metrics["Policy/Dropped Segments"] == 0 and not runner.paused
    assert host.learner.trained == [100, 100, 100] and lags == [0, 1, 1]
    assert backend.controls == [Control(paused=True), Control(paused=False)] * 3


def test_pause_is_part_of_the_control_state_a_replacement_actor_starts_with():
    state = Control(env_parameters={"gravity": 1.0})
    paused = state.updated(Control(paused=True))
    assert paused == Control(env_parameters={"gravity": 1.0}, paused=True)
    assert paused.updated(Control(paused=False)).paused is False
    assert paused.updated(Control(env_parameters={"mass": 2.0})).paused is True


def test_a_paused_actor_collects_nothing_until_resumed():
    inbox: queue.Queue = queue.Queue()
    outbox: queue.Queue = queue.Queue()
    actor_spec = spec(0, sync=False, segment_steps=16)
    probe = Actor(actor_spec)
    try:
        info = probe.start().behaviors[BEHAVIOR]
    finally:
        probe.close()
    weights = weights_of(ppo_host_for(info), 1)
    inbox.put(Command(ToActor.WEIGHTS, weights))
    inbox.put(Command(ToActor.CONTROL, control=Control(paused=True)))  # read after rollout 1
    thread = threading.Thread(target=actor_loop, args=(actor_spec, inbox, outbox), daemon=True)
    thread.start()
    try:
        assert outbox.get(timeout=30).kind is FromActor.READY
        assert outbox.get(timeout=30).kind is FromActor.SEGMENT
        with pytest.raises(queue.Empty):            # paused: no second rollout
            outbox.get(timeout=1.5)
        inbox.put(Command(ToActor.CONTROL, control=Control(paused=False)))
        resumed = outbox.get(timeout=30)
        assert resumed.kind is FromActor.SEGMENT
        assert np.isfinite(sum(s.agent_steps for s in resumed.payload.segments.values()))
    finally:
        inbox.put(Command(ToActor.STOP))
        thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.mark.parametrize("value", [-1, 1.5, "many"])
def test_a_bad_bound_is_a_config_error_naming_the_key(value):
    with pytest.raises(ConfigError, match="max_update_backlog"):
        parse_config({"behaviors": {"3DBall": {"trainer_type": "sac"}},
                          "unity_rl": {"max_update_backlog": value}})


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_async_apex_run_keeps_its_replay_ratio_within_the_bound(tmp_path, free_base_port):
    import dataclasses

    from tests.runtime.test_ddpg_training import check_run, tiny_ddpg
    from unity_rl.config import FrozenMap
    from unity_rl.training.trainer import train

    cfg = tiny_ddpg(free_base_port(2), mode="async", num_envs=2, num_actors=2, max_steps=1500)
    [(name, b)] = list(cfg.behaviors.items())
    hp = dataclasses.replace(b.hyperparameters, replay_ratio=4.0)  # the learner falls behind
    cfg = dataclasses.replace(
        cfg, behaviors=FrozenMap({name: dataclasses.replace(b, hyperparameters=hp)}),
        unity_rl=dataclasses.replace(cfg.unity_rl, segment_steps=16, max_update_backlog=40))
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    state = check_run(tmp_path / "run", result, cfg)["state"]
    owed = int((result.agent_steps - hp.warmup_steps) * hp.replay_ratio)
    # The bound is soft: rollouts collected while the learner trains one call (up to 200
    # updates), before the pause reaches the actors, still count; with 16-step segments on a
    # fast build that was up to ~600 updates (14% of the run) on a loaded machine. Without the
    # bound the same run realised 624 of 12,136 owed updates (5%).
    assert state["updates"] >= 0.75 * owed, (state["updates"], owed)
