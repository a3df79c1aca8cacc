"""The Ray backend on a two-node Ray cluster on loopback (``ray_cluster``, one per session).

End to end through ``train`` on the 3DBall stand-in: PPO and DDPG, sync and async, with actors
on both nodes; an actor killed mid-run (SIGKILL or ``ray.kill``) is replaced and the run finishes
its steps; an exhausted restart budget names the actor; a SIGKILLed trainer leaves nothing.
Backend-level checks over in-process fake streams (no builds): the actor loop, not the driver,
decides when to collect (a sync actor sends one rollout per publication and stops stepping, an
async one goes on), a sync replacement waits for the next round, actor errors and start
failures with tracebacks, a hung actor, an actor no node can place, the leftover-build clean-up,
and a private Ray instance.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.runtime.fakes import BEHAVIOR, FakeStream
from tests.runtime.helpers import assert_gone, REPO_ROOT, live_descendants, tiny_config
from tests.waiting import wait_until
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.checkpoint import CheckpointManager
from unity_rl.config import FrozenMap, apply_overrides, load_config
from unity_rl.metrics import read_progress
from unity_rl.training import trainer, wiring
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.training.wiring import make_backend
from unity_rl.runtime.algorithm import BehaviorPlan
from unity_rl.runtime.messages import ActorFailedError, BehaviorWeights, PolicyWeights
from unity_rl.algorithms.ppo.acting import ppo_policy

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(240)]

NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=1)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

def ray_config(address: str, base_port: int, **kwargs):
    """tests.runtime.helpers.tiny_config (PPO) on the Ray cluster at ``address``."""
    return apply_overrides(tiny_config(base_port, **kwargs), backend="ray", ray_address=address)


@pytest.fixture
def backends(monkeypatch):
    """Records every backend ``train`` creates (to inspect placement and restarts)."""
    made = []

    def recording(name, specs, **options):
        backend = make_backend(name, specs, **options)
        made.append(backend)
        return backend

    monkeypatch.setattr(wiring, "make_backend", recording)
    return made


def builds_on_ports(ports) -> list[psutil.Process]:
    """Live processes (on this machine, any node) serving one of ``ports``."""
    wanted = {str(p) for p in ports}
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            args = proc.info["cmdline"] or []
            if any(a == "--mlagents-port" and b in wanted for a, b in zip(args, args[1:])) \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.Error:
            continue
    return out


def assert_no_builds_left(ports) -> None:
    wait_until(lambda: not builds_on_ports(ports), timeout=60, interval=0.2,
               what=f"the builds on ports {list(ports)} to exit",
               describe=lambda: [p.pid for p in builds_on_ports(ports)])




def kill_when_training(backends, run_dir, actor_id: int, how: str, rows: int = 2):
    """A thread that kills actor ``actor_id`` once ``rows`` updates are logged; returns
    (thread, facts) where facts receives the killed pid and the update count at the kill."""
    facts: dict = {}

    def run() -> None:
        csv = run_dir / "3DBall" / "progress.csv"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if backends and csv.exists() and len(csv.read_text().splitlines()) > rows:
                break
            time.sleep(0.1)
        else:
            facts["error"] = "the run did not train"
            return
        backend = backends[0]
        facts["pid"] = backend.actor_pids()[actor_id]
        facts["updates"] = len(csv.read_text().splitlines()) - 1
        if how == "ray.kill":
            ray.kill(backend.actor_handles()[actor_id], no_restart=True)
        else:  # the actor's process dies (on its node; here every node is this machine)
            os.kill(facts["pid"], signal.SIGKILL)

    thread = threading.Thread(target=run, daemon=True, name="killer")
    thread.start()
    return thread, facts


def fake_spec(actor_id: int, *, sync: bool, **stream_kwargs) -> ActorSpec:
    plan = BehaviorPlan(functools.partial(ppo_policy, network_cfg=NET), 64, 16)
    return ActorSpec(
        actor_id=actor_id, stream=StreamSettings("fake"), plans=(("Fake", plan),),
        wait_for_new_weights=sync, seed=actor_id,
        stream_factory=functools.partial(FakeStream, seed=actor_id, build=actor_id,
                                         **stream_kwargs))


def weights_for(info, version: int) -> PolicyWeights:
    fake = info.behaviors[BEHAVIOR]
    learner = PPOLearner(fake.obs_shapes, fake.action_spec,
                         PPOConfig(buffer_size=128, minibatch_size=32), NET, seed=0)
    return PolicyWeights(version, {BEHAVIOR: BehaviorWeights(version, learner.weights())})


# ----------------------------------------------------------------------------------------------
# end to end: train() over the cluster
# ----------------------------------------------------------------------------------------------

def test_sync_ppo_runs_on_both_nodes(ray_cluster, backends, tmp_path, free_base_port):
    port = free_base_port(2)
    cfg = ray_config(ray_cluster.address, port, mode="sync", max_steps=2400)
    result = trainer.train(cfg, tmp_path / "run", resume=False, console=False)

    assert not result.interrupted and result.agent_steps >= 2400
    assert result.policy_version >= 4
    [backend] = backends
    nodes = backend.node_ids()
    assert len(set(nodes)) == 2, nodes            # SPREAD: one actor on each node
    assert backend.restarts == 0
    rows = read_progress(tmp_path / "run" / "3DBall" / "progress.csv")
    assert len(rows) == result.policy_version
    assert all(r["policy_lag"] == 0 for r in rows)  # sync stays lockstep over Ray
    assert result.policy_path.exists() and result.torch_policy_path.exists()
    assert sorted(p.name for p in (tmp_path / "run" / "run_logs").iterdir()) == \
        ["Player-0.log", "Player-1.log"]
    assert not ray.is_initialized()               # the backend connected, so it disconnected
    assert_no_builds_left([port, port + 1])
    assert_gone(backend.actor_pids())
    assert live_descendants() == []


@pytest.mark.parametrize("mode, how", [("sync", "SIGKILL"), ("async", "ray.kill")])
def test_killed_actor_is_replaced_and_the_run_finishes(mode, how, ray_cluster, backends,
                                                       tmp_path, free_base_port):
    port = free_base_port(2)
    run_dir = tmp_path / "run"
    cfg = ray_config(ray_cluster.address, port, mode=mode, max_steps=4800)
    killer, facts = kill_when_training(backends, run_dir, actor_id=0, how=how)
    result = trainer.train(cfg, run_dir, resume=False, console=False)
    killer.join(5)

    assert "error" not in facts and "pid" in facts
    assert not result.interrupted and result.agent_steps >= 4800
    [backend] = backends
    assert backend.restarts == 1 and backend.actor_restarts() == [1, 0]
    rows = read_progress(run_dir / "3DBall" / "progress.csv")
    assert len(rows) == result.policy_version > facts["updates"]  # the learner kept training
    if mode == "sync":
        # every round needs a segment of each actor: the replacement took part in the rest
        first, second = backend.incarnations()[0]
        assert first[1] == facts["pid"] != second[1]
        assert all(r["policy_lag"] == 0 for r in rows)
        assert result.policy_version - facts["updates"] >= 2
    # async: the other actor carried on alone; the replacement joins once its builds are up
    # (seconds), which a run this short may not wait for. Either way nothing is left behind.
    assert_gone(pid for incarnation in backend.incarnations() for _, pid in incarnation)
    assert_no_builds_left([port, port + 1])


def test_exhausted_restarts_name_the_actor_and_keep_the_learner(ray_cluster, backends, tmp_path,
                                                                free_base_port):
    port = free_base_port(2)
    run_dir = tmp_path / "run"
    cfg = ray_config(ray_cluster.address, port, mode="async", max_steps=50_000,
                     max_lifetime_restarts=0)
    killer, facts = kill_when_training(backends, run_dir, actor_id=1, how="ray.kill")
    with pytest.raises(ActorFailedError) as failure:
        trainer.train(cfg, run_dir, resume=False, console=False)
    killer.join(5)

    assert failure.value.actor_id == 1
    text = str(failure.value)
    assert text.startswith("actor 1 failed") and "not restarted" in text
    assert "0 lifetime restarts" in text
    assert CheckpointManager(run_dir).latest() is not None  # the learner's state was saved
    assert_no_builds_left([port, port + 1])
    assert not ray.is_initialized()


def test_sigkilled_trainer_leaves_no_actor_and_no_build(ray_cluster, tmp_path, free_base_port):
    """The driver dies without stopping anything: Ray ends its actors (they share the fate of
    their owner) and their builds quit once the trainer side of their connection is gone."""
    port = free_base_port(2)
    script = f"""
import sys
from pathlib import Path
from tests.runtime.test_ray_backend import ray_config
from unity_rl.training.trainer import train
cfg = ray_config({ray_cluster.address!r}, {port}, mode="async", max_steps=10_000_000)
train(cfg, Path(sys.argv[1]), resume=False, console=False)
"""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", script, str(run_dir)], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        csv = run_dir / "3DBall" / "progress.csv"
        while not (csv.exists() and len(csv.read_text().splitlines()) > 2):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the run did not train"
            time.sleep(0.2)
        actors = actor_processes()
        assert len(actors) == 2 and len(builds_on_ports([port, port + 1])) == 2
        proc.kill()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_gone(p.pid for p in actors)
    assert_no_builds_left([port, port + 1])


def actor_processes() -> list[psutil.Process]:
    """Ray workers that host an ``ActorHost`` now (their process title names the class)."""
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(part.startswith("ray::ActorHost") for part in proc.info["cmdline"] or ()):
                out.append(proc)
        except psutil.Error:
            continue
    return out


def tiny_ddpg_config(cluster, base_port: int, mode: str, max_steps: int):
    """configs/ddpg/3dball.yaml scaled down (short warm-up, small network and batch)."""
    cfg = load_config(REPO_ROOT / "configs" / "ddpg" / "3dball.yaml")
    cfg = apply_overrides(cfg, env=str(REPO_ROOT / "unity_builds" / "3DBall.x86_64"),
                          num_envs=2, num_actors=2, base_port=base_port, mode=mode, seed=5,
                          no_graphics=True, timeout_wait=30, backend="ray",
                          ray_address=cluster.address)
    [(name, behavior)] = list(cfg.behaviors.items())
    hp = dataclasses.replace(behavior.hyperparameters, warmup_steps=500, batch_size=32,
                             buffer_size=20_000, replay_ratio=0.25)
    behavior = dataclasses.replace(behavior, hyperparameters=hp, max_steps=max_steps,
                                   summary_freq=500, network_settings=NET,
                                   checkpoint_interval=100_000)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_ddpg_runs_on_both_nodes(mode, ray_cluster, backends, tmp_path, free_base_port):
    """sync: segments -> learner's replay; async (Ape-X) over Ray: segments carry their
    transitions to the learner's buffer (shared memory does not span nodes)."""
    port = free_base_port(2)
    cfg = tiny_ddpg_config(ray_cluster, port, mode, max_steps=3000)
    result = trainer.train(cfg, tmp_path / "run", resume=False, console=False)

    assert not result.interrupted and result.agent_steps >= 3000
    assert result.policy_version >= 2 and result.episodes > 0
    [backend] = backends
    assert len(set(backend.node_ids())) == 2 and backend.restarts == 0
    assert result.policy_path.exists()
    assert_no_builds_left([port, port + 1])
    assert_gone(backend.actor_pids())


# ----------------------------------------------------------------------------------------------
# the backend alone, over fake streams
# ----------------------------------------------------------------------------------------------

def test_actor_exception_carries_its_traceback_and_stop_is_idempotent(ray_cluster):
    specs = [fake_spec(0, sync=False), fake_spec(1, sync=False, crash_after=5)]
    backend = make_backend("ray", specs, address=ray_cluster.address)
    try:
        infos = backend.start()
        assert [i.actor_id for i in infos] == [0, 1]
        assert infos[0].behaviors[BEHAVIOR].num_agents == 4
        assert backend.receive(timeout=0) is None     # nothing asked for yet: no rollout
        backend.broadcast(weights_for(infos[0], 3))
        def actor_0_rollout_is_sound() -> bool:
            rollout = backend.receive(timeout=30)
            segment = rollout.segments[BEHAVIOR]
            assert rollout.actor_id == 0 and rollout.publication == 3
            assert segment.policy_version == 3
            assert segment.trajectories[0].obs.flags.writeable
            return False

        with pytest.raises(ActorFailedError) as failure:   # whenever actor 1's crash arrives
            wait_until(actor_0_rollout_is_sound, timeout=120, interval=0,
                       what="actor 1's crash to be reported")
    finally:
        backend.stop()
        backend.stop()
    text = str(failure.value)
    assert failure.value.actor_id == 1 and "fake build crashed at step 6" in text
    assert "traceback in actor 1" in text and "RuntimeError" in text
    assert not ray.is_initialized()


def steps_logged(path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_actor_loop_decides_when_to_collect(ray_cluster, tmp_path):
    """One publication: the sync actor (0) sends one rollout and stops stepping until the next;
    the async actor (1) keeps collecting with the weights it has."""
    logs = [tmp_path / "steps0", tmp_path / "steps1"]
    specs = [fake_spec(0, sync=True, step_log=str(logs[0])),
             fake_spec(1, sync=False, step_log=str(logs[1]))]
    backend = make_backend("ray", specs, address=ray_cluster.address)
    try:
        infos = backend.start()
        assert [steps_logged(log) for log in logs] == [0, 0]   # no weights: no steps
        backend.broadcast(weights_for(infos[0], 1))
        got = []
        while got.count((1, 1)) < 4 or (0, 1) not in got:
            rollout = backend.receive(timeout=60)
            got.append((rollout.actor_id, rollout.publication))
        # the async actor may send more than four while the sync actor's one is on its way
        assert got.count((0, 1)) == 1 and got.count((1, 1)) >= 4
        assert set(got) == {(0, 1), (1, 1)}
        waited = steps_logged(logs[0])
        time.sleep(1.5)                     # more than one wait slice of the sync loop
        assert steps_logged(logs[0]) == waited > 0             # it waits, not steps
        assert steps_logged(logs[1]) > 0
        backend.broadcast(weights_for(infos[0], 2))
        rollout = backend.receive(timeout=60)
        while rollout.actor_id != 0:
            assert rollout.publication in (1, 2)
            rollout = backend.receive(timeout=60)
        assert rollout.publication == 2 and steps_logged(logs[0]) > waited
    finally:
        backend.stop()
    assert_gone(backend.actor_pids())


def test_sync_replacement_of_an_actor_that_had_delivered_waits_for_the_next_round(ray_cluster):
    """Actor 1 dies after delivering its rollout of the round: its replacement must not send a
    second one for that round (the runner would get two from actor 1), only the next round's."""
    specs = [fake_spec(0, sync=True, step_delay=0.05), fake_spec(1, sync=True)]
    backend = make_backend("ray", specs, address=ray_cluster.address, max_restarts=1)
    try:
        infos = backend.start()
        backend.broadcast(weights_for(infos[0], 1))
        first = backend.receive(timeout=60)
        assert (first.actor_id, first.publication) == (1, 1)   # the fast one
        ray.kill(backend.actor_handles()[1], no_restart=True)
        second = backend.receive(timeout=60)
        assert (second.actor_id, second.publication) == (0, 1)
        extra = []
        deadline = time.monotonic() + 60
        while len(backend.incarnations()[1]) < 2:               # until the replacement is up
            assert time.monotonic() < deadline, "no replacement"
            extra.append(backend.receive(timeout=0.2))
        extra.append(backend.receive(timeout=1.5))
        assert [r for r in extra if r is not None] == []        # it waits for new weights
        assert backend.restarts == 1 and backend.dropped_rollouts == 0
        backend.broadcast(weights_for(infos[0], 2))
        got = sorted((r.actor_id, r.publication) for r in (backend.receive(timeout=60),
                                                           backend.receive(timeout=60)))
        assert got == [(0, 2), (1, 2)]
    finally:
        backend.stop()
    assert_gone(pid for incarnation in backend.incarnations() for _, pid in incarnation)


def test_a_start_failure_names_the_actor_with_its_traceback(ray_cluster):
    bad = dataclasses.replace(fake_spec(1, sync=True), stream_factory=functools.partial(
        FakeStream, start_error="no build here"))
    backend = make_backend("ray", [fake_spec(0, sync=True), bad], address=ray_cluster.address)
    with pytest.raises(ActorFailedError) as failure:
        backend.start()
    text = str(failure.value)
    assert failure.value.actor_id == 1 and failure.value.error is not None
    assert text.startswith("actor 1 failed: builtins.RuntimeError: no build here")
    assert "traceback in actor 1" in text and "fakes.py" in text
    assert backend.restarts == 0 and not ray.is_initialized()   # stopped and disconnected
    assert_gone(pid for pid in backend.actor_pids() if pid)


def test_without_address_a_local_ray_is_started_and_shut_down(ray_cluster):
    """In a fresh process (this one is connected to the session's cluster)."""
    script = """
import functools, json, sys
import ray
from tests.runtime.test_ray_backend import fake_spec, weights_for
from unity_rl.runtime.ray_backend import RayBackend
backend = RayBackend([fake_spec(0, sync=True), fake_spec(1, sync=True)], num_cpus=2)
infos = backend.start()
started = ray.is_initialized()
backend.broadcast(weights_for(infos[0], 0))
got = sorted(backend.receive(timeout=60).actor_id for _ in range(2))
backend.broadcast(weights_for(infos[0], 1))
again = sorted((r.actor_id, r.publication) for r in (backend.receive(timeout=60),
                                                       backend.receive(timeout=60)))
backend.stop()
print(json.dumps({"started": started, "got": got, "again": again,
                  "after": ray.is_initialized()}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"started": True, "got": [0, 1], "again": [[0, 1], [1, 1]], "after": False}
    assert live_descendants() == []  # the local Ray died with its driver


def test_hung_actor_is_replaced_until_its_budget_is_spent(ray_cluster, monkeypatch):
    from unity_rl.runtime import ray_backend

    monkeypatch.setattr(ray_backend, "LIVENESS_SLICE_S", 0.5)
    specs = [fake_spec(0, sync=True, step_delay=120.0)]   # its first step never ends
    backend = make_backend("ray", specs, address=ray_cluster.address, max_restarts=1,
                           heartbeat_timeout=1.5, stop_timeout=2.0)
    try:
        infos = backend.start()
        backend.broadcast(weights_for(infos[0], 0))
        with pytest.raises(ActorFailedError) as failure:
            backend.receive(timeout=60)
        assert backend.restarts == 1 and len(backend.incarnations()[0]) == 2
    finally:
        backend.stop()
    text = str(failure.value)
    assert text.startswith("actor 0 failed: it hung (no stream step for")
    assert "not restarted: all 1 lifetime restarts are used" in text
    assert_gone(pid for _, pid in backend.incarnations()[0])


def test_an_actor_no_node_can_place_is_a_clear_error(ray_cluster):
    backend = make_backend("ray", [fake_spec(0, sync=True)], address=ray_cluster.address,
                           num_cpus_per_actor=4, start_timeout=3.0)
    with pytest.raises(ActorFailedError, match=r"actor 0 failed: it was not up after 3 s.*"
                                               r"needs 4 CPU; the cluster has 2 CPUs"):
        backend.start()
    assert not ray.is_initialized()


def test_leftover_build_clean_up_kills_only_the_dead_incarnation_s_builds(ray_cluster):
    """A replacement may run builds on the same ports on the same node: the clean-up tells them
    apart by the tag they inherited from their actor, not by port."""
    from unity_rl.runtime import ray_backend

    def fake_build(tag: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)", "--mlagents-port", "5005"],
            env=dict(os.environ, **{ray_backend.TAG_ENV: tag}), start_new_session=True)

    old, new = fake_build("run-actor0.1"), fake_build("run-actor0.2")
    try:
        ray.init(address=ray_cluster.address, logging_level="WARNING")
        try:
            killed = ray.get(ray_backend._kill_builds.remote("run-actor0.1"), timeout=60)
        finally:
            ray.shutdown()
        assert killed == [old.pid]
        assert old.wait(10) is not None and new.poll() is None
    finally:
        for proc in (old, new):
            proc.kill()
            proc.wait()



@pytest.mark.parametrize("mode", ["sync", "async"])
def test_poca_groups_travel_over_ray(mode, ray_cluster, tmp_path, free_base_port):
    """POCA over Ray actors: the group data and group returns in segments reach the learner."""
    from tests.runtime.test_poca_training import scalars, small

    port = free_base_port(1)
    cfg = apply_overrides(small(port, mode), backend="ray", ray_address=ray_cluster.address)
    result = trainer.train(cfg, tmp_path / "run", resume=False, console=False)
    assert not result.interrupted and result.policy_path.exists()
    tags = scalars(tmp_path / "run", "DungeonEscape")
    assert "Losses/Baseline Loss" in tags and "Environment/Group Cumulative Reward" in tags
    assert_no_builds_left([port])
