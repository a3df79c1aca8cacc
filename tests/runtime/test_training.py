"""``train`` end to end on the 3DBall stand-in builds: both wirings, resume, failures, signals."""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests.interrupts import sigint_as_in_a_terminal
from tests.runtime.helpers import REPO_ROOT, checkpoint_entry, live_descendants, tiny_config
from unity_rl.algorithms.update_halves import halves_side_by_side, set_learner_cores
from unity_rl.checkpoint import CheckpointError, CheckpointManager
from unity_rl.metrics import read_progress
from unity_rl.runtime.messages import ActorFailedError
from unity_rl.training.trainer import train
from unity_rl.training.wiring import split_builds

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_split_builds_gives_every_actor_distinct_workers():
    assert split_builds(5, 2) == [(0, 3), (3, 2)]
    assert split_builds(2, 2) == [(0, 1), (1, 1)]
    with pytest.raises(ValueError, match="num_actors"):
        split_builds(1, 2)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tiny_run_counts_steps_updates_and_lag(mode, tmp_path, free_base_port):
    cfg = tiny_config(free_base_port(2), mode=mode, max_steps=2400)
    result = train(cfg, tmp_path / "run", resume=False, console=False)

    assert not result.interrupted
    assert result.agent_steps >= 2400
    assert result.policy_version >= 4
    rows = read_progress(tmp_path / "run" / "3DBall" / "progress.csv")
    steps = [r["agent_steps"] for r in rows]
    assert steps == sorted(steps)
    if mode == "sync":  # every round fills the buffer: the last row is the last update's
        assert steps[-1] == result.agent_steps
    else:  # the round that crosses max_steps may bring steps without an update (no row)
        assert steps[-1] <= result.agent_steps
    assert len(rows) == result.policy_version          # one row per update
    lags = [r["policy_lag"] for r in rows]
    assert all(math.isfinite(lag) for lag in lags)
    if mode == "sync":
        assert all(lag == 0 for lag in lags)
    else:
        assert all(0 <= lag <= cfg.unity_rl.max_policy_lag for lag in lags)
    assert result.episodes > 0 and math.isfinite(result.mean_return)
    assert result.checkpoint_path.exists() and result.policy_path.exists()
    assert result.torch_policy_path.exists()
    assert sorted(p.name for p in (tmp_path / "run" / "run_logs").iterdir()) == \
        ["Player-0.log", "Player-1.log"]
    assert live_descendants() == []


def test_a_ppo_learner_on_two_cores_runs_its_update_halves_side_by_side(tmp_path, free_base_port,
                                                                        caplog):
    cfg = tiny_config(free_base_port(2), max_steps=1000)
    cfg = dataclasses.replace(cfg, unity_rl=dataclasses.replace(cfg.unity_rl, torch_threads=2))
    threads = torch.get_num_threads()
    try:
        with caplog.at_level(logging.INFO, logger="unity_rl.training.trainer"):
            result = train(cfg, tmp_path / "run", resume=False, console=False)
        assert halves_side_by_side() and torch.get_num_threads() == 1  # 1 thread per half
    finally:
        set_learner_cores(threads, split=False)
    assert result.agent_steps >= 1000 and result.policy_version >= 2
    assert "learner: 2 core(s), the update's halves side by side" in caplog.text


def test_sync_partial_rollouts_leave_what_the_learner_trains_on_unchanged(
        tmp_path, free_base_port, monkeypatch):
    import torch

    from unity_rl.runtime import runners
    from unity_rl.training import wiring

    partials = []
    gather = runners.gather_one_rollout_per_actor

    def counting_gather(backend, on_partial=None):
        return gather(backend, lambda r: (partials.append(r.actor_id), on_partial(r)))

    monkeypatch.setattr(runners, "gather_one_rollout_per_actor", counting_gather)

    def run(interval, name):
        monkeypatch.setattr(wiring, "PARTIAL_INTERVAL_S", interval)
        cfg = tiny_config(free_base_port(2), mode="sync", max_steps=2400)
        result = train(cfg, tmp_path / name, resume=False, console=False)
        rows = read_progress(tmp_path / name / "3DBall" / "progress.csv")
        return result, rows, torch.load(result.torch_policy_path)["weights"]

    whole, whole_rows, whole_weights = run(None, "whole")
    assert partials == []
    split, split_rows, split_weights = run(0.0, "split")  # a partial after every step it can
    assert sorted(set(partials)) == [0, 1] and len(partials) > 2 * split.policy_version
    assert (split.agent_steps, split.episodes) == (whole.agent_steps, whole.episodes)
    assert [(r["agent_steps"], r["episodes"], r["mean_return"]) for r in split_rows] == \
        [(r["agent_steps"], r["episodes"], r["mean_return"]) for r in whole_rows]
    def leaves(tree, prefix=""):
        if not isinstance(tree, dict):
            return {prefix: tree}
        return {k: v for key, sub in tree.items()
                for k, v in leaves(sub, f"{prefix}/{key}").items()}

    whole_leaves, split_leaves = leaves(whole_weights), leaves(split_weights)
    assert whole_leaves.keys() == split_leaves.keys()
    assert any(isinstance(v, torch.Tensor) for v in whole_leaves.values())
    for key, value in whole_leaves.items():
        same = (torch.equal(value, split_leaves[key]) if isinstance(value, torch.Tensor)
                else value == split_leaves[key])
        assert same, key
    assert live_descendants() == []


def test_resume_continues_steps_versions_and_wall_time(tmp_path, free_base_port):
    port = free_base_port(2)
    first = train(tiny_config(port, max_steps=1000), tmp_path / "run", resume=False,
                  console=False)
    state = CheckpointManager(tmp_path / "run").load()
    assert state["agent_steps"] == first.agent_steps
    assert checkpoint_entry(tmp_path / "run")["learner"]["host_version"] == first.policy_version

    second = train(tiny_config(port, max_steps=2000), tmp_path / "run", resume=True,
                   console=False)
    assert second.agent_steps >= 2000 > first.agent_steps
    assert second.policy_version > first.policy_version
    assert second.wall_seconds > first.wall_seconds
    assert second.episodes > first.episodes
    rows = read_progress(tmp_path / "run" / "3DBall" / "progress.csv")
    steps = [r["agent_steps"] for r in rows]
    assert steps == sorted(steps) and steps[0] < first.agent_steps < steps[-1]
    assert live_descendants() == []


def test_resume_without_checkpoint_is_an_error(tmp_path, free_base_port):
    with pytest.raises(CheckpointError, match="No checkpoint"):
        train(tiny_config(free_base_port(2)), tmp_path / "run", resume=True, console=False)


def test_build_crash_without_restarts_names_the_actor(tmp_path, free_base_port):
    cfg = tiny_config(free_base_port(2), env_args=("--standin-crash-after", "400"),
                      max_lifetime_restarts=0, max_steps=50_000)
    with pytest.raises(ActorFailedError) as failure:
        train(cfg, tmp_path / "run", resume=False, console=False)
    text = str(failure.value)
    assert f"actor {failure.value.actor_id} failed" in text
    assert "BuildFailedError" in text and "not restarted" in text
    assert "traceback in actor" in text
    assert live_descendants() == []
    # the learner was sound: its state is saved so the run can be resumed
    assert CheckpointManager(tmp_path / "run").latest() is not None


def _start_script(tmp_path: Path, port: int, mode: str = "async") -> subprocess.Popen:
    """The trainer in a new session: like a shell job, it leads its own process group."""
    return subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests" / "runtime" / "run_train.py"),
         str(tmp_path / "run"), str(port), mode, "10000000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        start_new_session=True, preexec_fn=sigint_as_in_a_terminal)


def _wait_for_training(proc: subprocess.Popen, run_dir: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        csv = run_dir / "3DBall" / "progress.csv"
        if csv.exists() and len(csv.read_text().splitlines()) >= 3:
            return
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.5)
    raise AssertionError("the run did not train within the timeout")


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root] + root.children(recursive=True)


@pytest.mark.parametrize("how", ["ctrl-c", "sigint", "sigterm"])
def test_signal_stops_cleanly_with_checkpoint_and_no_processes(how, tmp_path, free_base_port):
    proc = _start_script(tmp_path, free_base_port(2))
    try:
        _wait_for_training(proc, tmp_path / "run")
        tree = _tree(proc.pid)
        assert len(tree) >= 5  # trainer, 2 actors, 2 builds (plus the resource tracker)
        if how == "ctrl-c":   # a terminal sends SIGINT to the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["interrupted"] is True
    assert Path(result["checkpoint_path"]).exists()
    assert CheckpointManager(tmp_path / "run").latest_step() == result["agent_steps"]
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == []


def test_sigkilled_trainer_leaves_no_processes_and_resumes(tmp_path, free_base_port):
    port = free_base_port(2)
    proc = _start_script(tmp_path, port, mode="sync")
    try:
        _wait_for_training(proc, tmp_path / "run")
        deadline = time.monotonic() + 120
        while CheckpointManager(tmp_path / "run").latest() is None:  # every 2000 steps
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.5)
        tree = _tree(proc.pid)
        proc.kill()
        # its orphans close their builds before the pipes they inherited reach EOF (on a loaded
        # 2-core machine that can take tens of seconds; they must still all be gone, below)
        proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    gone, alive = psutil.wait_procs(tree, timeout=20)   # actors die with the trainer, close builds
    assert alive == [], [p.cmdline() for p in alive]
    saved = CheckpointManager(tmp_path / "run").latest_step()
    result = train(tiny_config(port, max_steps=saved + 500), tmp_path / "run", resume=True,
                   console=False)
    assert result.agent_steps >= saved + 500
