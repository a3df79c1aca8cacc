"""``trainer_type: sac`` end to end on the stand-ins: Unity's SAC configs (scaled down) in sync
and async (Ape-X shared replay) runs, local and Ray, continuous and discrete; ML-Agents' update
count; resume with ``save_replay_buffer``; SAC beside PPO in one run."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.runtime.helpers import REPO_ROOT, checkpoint_entry, live_descendants
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.config import FrozenMap, apply_overrides, load_config
from unity_rl.metrics import read_progress
from unity_rl.training.trainer import train

pytestmark = pytest.mark.slow

UNITY_CONFIGS = REPO_ROOT / "tests" / "fixtures" / "mlagents_configs"
SAC_CONFIGS = UNITY_CONFIGS / "sac"
BUILDS = REPO_ROOT / "unity_builds"
NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=1)


def tiny_sac(scene: str, base_port: int, *, mode: str = "sync", num_envs: int = 1,
             num_actors: int = 1, max_steps: int = 1500, backend: str = "local",
             ray_address: str | None = None, **hp):
    """Unity's sac/<scene>.yaml with a small network, batch and summary window."""
    cfg = load_config(SAC_CONFIGS / f"{scene}.yaml")
    options = dict(env=str(BUILDS / f"{scene}.x86_64"), num_envs=num_envs, num_actors=num_actors,
                   base_port=base_port, mode=mode, seed=5, no_graphics=True, timeout_wait=30)
    if backend == "ray":
        options.update(backend="ray", ray_address=ray_address)
    cfg = apply_overrides(cfg, **options)
    [(name, b)] = list(cfg.behaviors.items())
    hp = dataclasses.replace(b.hyperparameters, **{"batch_size": 32, **hp})
    b = dataclasses.replace(b, hyperparameters=hp, max_steps=max_steps, summary_freq=500,
                            network_settings=NET, checkpoint_interval=100_000)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: b}))


def mlagents_updates(steps: int, hp) -> int:
    """Updates ML-Agents' OffPolicyTrainer has done after ``steps`` agent-steps."""
    return max(0, math.ceil((steps - hp.warmup_steps) / hp.steps_per_update) - 1)


def check_sac_run(run_dir: Path, result, cfg, behavior: str) -> dict:
    hp = cfg.behaviors[behavior].hyperparameters
    state = checkpoint_entry(run_dir, behavior)["learner"]
    assert state["agent_steps"] == result.agent_steps >= cfg.behaviors[behavior].max_steps
    assert 0 < state["updates"] <= mlagents_updates(result.agent_steps, hp)
    assert state["sac"]["updates"] == state["updates"]
    rows = read_progress(run_dir / behavior / "progress.csv")
    assert rows[-1]["agent_steps"] == result.agent_steps
    onnx_path = run_dir / f"{behavior}.onnx"
    names = [o.name for o in onnx.load(str(onnx_path)).graph.output]
    assert names[:2] == ["version_number", "memory_size"]
    assert live_descendants() == []
    return state


@pytest.mark.timeout(180)
def test_sync_3dball_pays_ml_agents_updates_and_resume_restores_the_replay(tmp_path, free_base_port):
    port = free_base_port(1)
    cfg = tiny_sac("3DBall", port, max_steps=1200, save_replay_buffer=True, steps_per_update=4.0)
    first = train(cfg, tmp_path / "run", resume=False, console=False)
    state = check_sac_run(tmp_path / "run", first, cfg, "3DBall")
    hp = cfg.behaviors["3DBall"].hyperparameters
    assert state["updates"] == mlagents_updates(first.agent_steps, hp)   # sync pays every one
    assert state["replay"]["size"] == first.agent_steps
    saved_obs = state["replay"]["obs"].copy()

    cfg2 = tiny_sac("3DBall", port, max_steps=2400, save_replay_buffer=True, steps_per_update=4.0)
    second = train(cfg2, tmp_path / "run", resume=True, console=False)
    state2 = checkpoint_entry(tmp_path / "run", "3DBall")["learner"]
    assert state2["agent_steps"] == second.agent_steps >= 2400
    np.testing.assert_array_equal(state2["replay"]["obs"][:first.agent_steps], saved_obs)
    assert state2["updates"] == mlagents_updates(second.agent_steps, hp)
    assert live_descendants() == []


@pytest.mark.timeout(180)
def test_async_basic_discrete_on_a_shared_replay_keeps_the_update_ratio(tmp_path, free_base_port):
    """Basic: one discrete branch; async on the local backend: the actors write transitions
    (with their action masks) into the shared replay themselves."""
    cfg = tiny_sac("Basic", free_base_port(2), mode="async", num_envs=2, num_actors=2,
                   max_steps=3000, save_replay_buffer=True)
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    state = check_sac_run(tmp_path / "run", result, cfg, "Basic")
    replay = state["replay"]
    assert replay["mask_dim"] == 3 and replay["action_masks"].shape == (replay["size"], 3)
    actions = replay["actions"][:, 0]
    assert set(np.unique(actions)) <= {0.0, 1.0, 2.0} and len(np.unique(actions)) > 1
    rows = read_progress(tmp_path / "run" / "Basic" / "progress.csv")
    assert any(math.isfinite(r["policy_lag"]) for r in rows)
    hp = cfg.behaviors["Basic"].hyperparameters
    # the learner never trains ahead of the data: at most ML-Agents' count
    assert state["updates"] <= mlagents_updates(result.agent_steps, hp)


@pytest.mark.timeout(240)
def test_sac_beside_ppo_in_one_run(tmp_path, free_base_port):
    """TwoBehaviors: 3DBall trained by SAC, Basic by PPO, one learner each."""
    sac = tiny_sac("3DBall", free_base_port(1), max_steps=1000)
    ppo = load_config(UNITY_CONFIGS / "Basic.yaml")
    basic = ppo.behaviors["Basic"]
    basic = dataclasses.replace(basic, max_steps=1000, summary_freq=500,
                                hyperparameters=dataclasses.replace(
                                    basic.hyperparameters, buffer_size=256, minibatch_size=32))
    cfg = dataclasses.replace(sac, behaviors=FrozenMap({"3DBall": sac.behaviors["3DBall"],
                                                        "Basic": basic}))
    cfg = apply_overrides(cfg, env=str(BUILDS / "TwoBehaviors.x86_64"))
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    assert not result.interrupted
    assert checkpoint_entry(tmp_path / "run", "3DBall")["learner"]["sac"]["updates"] > 0
    assert (tmp_path / "run" / "3DBall.onnx").exists() and (tmp_path / "run" / "Basic.onnx").exists()
    assert live_descendants() == []


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sac_runs_on_ray(mode, ray_cluster, tmp_path, free_base_port):
    """Over Ray the segments carry their transitions to the learner's replay."""
    cfg = tiny_sac("3DBall", free_base_port(2), mode=mode, num_envs=2, num_actors=2,
                   max_steps=2000, backend="ray", ray_address=ray_cluster.address)
    result = train(cfg, tmp_path / "run", resume=False, console=False)
    assert not result.interrupted and result.agent_steps >= 2000
    state = checkpoint_entry(tmp_path / "run", "3DBall")["learner"]
    assert state["updates"] > 0 and result.policy_path.exists()


# -- faults: what holds for PPO holds for SAC ------------------------------------------------------

@pytest.mark.timeout(300)
def test_async_sac_survives_a_killed_build_and_a_killed_actor(tmp_path, free_base_port,
                                                              monkeypatch):
    """Ape-X SAC: a build SIGKILLed is restarted alone, then an actor SIGKILLed (maybe in the
    middle of a replay write) is re-created; the run reaches max_steps on a sound replay."""
    import os
    import signal
    import threading

    from tests.waiting import wait_until
    from unity_rl.training import wiring
    from unity_rl.training.wiring import make_backend

    made = []

    def remember(name, specs, **options):
        made.append(make_backend(name, specs, **options))
        return made[-1]

    monkeypatch.setattr(wiring, "make_backend", remember)
    run_dir = tmp_path / "run"
    cfg = tiny_sac("3DBall", free_base_port(2), mode="async", num_envs=2, max_steps=6000,
                   save_replay_buffer=True)
    facts: dict = {}

    def kill_things() -> None:
        try:
            csv = run_dir / "3DBall" / "progress.csv"
            wait_until(lambda: made and csv.exists() and len(csv.read_text().splitlines()) > 2,
                       timeout=150, what="the run to train")
            backend = made[0]
            build = backend.build_pids()[0][0]
            os.kill(build, signal.SIGKILL)
            facts["build"] = build
            wait_until(lambda: build not in (backend.build_pids()[0] or [build])
                       and len(backend.build_pids()[0]) == 2, timeout=120,
                       what="the build to be restarted")
            facts["actor"] = backend.actor_pids()[0]
            os.kill(facts["actor"], signal.SIGKILL)
            wait_until(lambda: backend.actor_restarts()[0] == 1, timeout=120,
                       what="the actor to be re-created")
        except BaseException as err:  # reported by the main thread
            facts["error"] = repr(err)

    killer = threading.Thread(target=kill_things, daemon=True)
    killer.start()
    result = train(cfg, run_dir, resume=False, console=False)
    killer.join(timeout=60)
    assert "error" not in facts, facts
    assert not result.interrupted and result.agent_steps >= 6000
    state = checkpoint_entry(run_dir, "3DBall")["learner"]
    replay = state["replay"]
    assert replay["size"] > 0 and np.isfinite(replay["obs"]).all()
    assert state["updates"] > 0
    assert live_descendants() == []


@pytest.mark.timeout(300)
def test_sigkilled_sac_trainer_resumes_with_its_replay(tmp_path, free_base_port):
    import subprocess
    import sys
    import time

    import psutil

    from unity_rl.checkpoint import CheckpointManager

    port = free_base_port(2)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests" / "runtime" / "run_train.py"), str(run_dir),
         str(port), "async", "10000000", "--sac"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while CheckpointManager(run_dir).latest() is None:  # every 2000 steps
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.5)
        root = psutil.Process(proc.pid)
        tree = [root] + root.children(recursive=True)
        proc.kill()
        # the orphans close their builds before the pipes they inherited reach EOF: on a loaded
        # 2-core machine that once took over 30 s (they must still all be gone, below)
        proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    _, alive = psutil.wait_procs(tree, timeout=20)
    assert alive == [], [p.cmdline() for p in alive]
    saved = checkpoint_entry(run_dir, "3DBall")["learner"]
    assert saved["replay"] is not None and saved["replay"]["size"] > 0
    cfg = tiny_sac("3DBall", port, mode="async", num_envs=2,
                   max_steps=saved["agent_steps"] + 1000, save_replay_buffer=True,
                   steps_per_update=4.0)
    result = train(cfg, run_dir, resume=True, console=False)
    state = checkpoint_entry(run_dir, "3DBall")["learner"]
    assert result.agent_steps >= saved["agent_steps"] + 1000
    # the rows saved before the kill are still there, in front of the new ones
    n = saved["replay"]["size"]
    np.testing.assert_array_equal(state["replay"]["obs"][:n], saved["replay"]["obs"][:n])
    assert state["updates"] > saved["updates"]
    assert live_descendants() == []
