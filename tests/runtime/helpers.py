"""Tiny training configurations on the stand-ins, shared by tests and their subprocesses:
``tiny_config`` (3DBall, PPO), ``small_group_config`` (a POCA example config of Unity's on its
stand-in), ``replace_behavior``; and what the tests read back (``scalars``, ``checkpoint_entry``,
``live_descendants``)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import psutil

from tests.waiting import wait_until
from unity_rl.config import FrozenMap, RunConfig, apply_overrides, load_config

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPO_ROOT / "configs" / "ppo" / "3dball.yaml"
BALL = REPO_ROOT / "unity_builds" / "3DBall.x86_64"


def tiny_config(base_port: int, *, mode: str = "sync", num_envs: int = 2, num_actors: int = 2,
                max_steps: int = 2000, buffer_size: int = 480, checkpoint_interval: int = 100_000,
                env_args: tuple[str, ...] = (), max_lifetime_restarts: int = 10,
                segment_steps: int | None = None, timeout_wait: int = 30) -> RunConfig:
    """configs/ppo/3dball.yaml scaled down: small buffer, one epoch, small network."""
    cfg = load_config(CONFIG)
    cfg = apply_overrides(cfg, env=str(BALL), num_envs=num_envs, base_port=base_port, mode=mode,
                          num_actors=num_actors, seed=3, no_graphics=True,
                          env_args=tuple(env_args), timeout_wait=timeout_wait,
                          max_lifetime_restarts=max_lifetime_restarts,
                          segment_steps=segment_steps)
    [(name, behavior)] = list(cfg.behaviors.items())
    hp = dataclasses.replace(behavior.hyperparameters, buffer_size=buffer_size,
                             minibatch_size=min(240, buffer_size), num_epochs=1)
    network = dataclasses.replace(behavior.network_settings, hidden_units=32)
    behavior = dataclasses.replace(behavior, hyperparameters=hp, network_settings=network,
                                   max_steps=max_steps, summary_freq=1000,
                                   checkpoint_interval=checkpoint_interval, time_horizon=64)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))


def small_group_config(config: Path, build: Path, base_port: int, mode: str, *, agents: int,
                       max_steps: int, time_horizon: int, self_play: dict | None = None,
                       **behavior) -> RunConfig:
    """Unity's POCA example ``config`` (one behavior) on ``build`` scaled down: one build of
    ``agents`` agents, one actor, buffer 256, minibatch 128, one epoch, 16 hidden units, a
    summary every 400 steps; ``self_play``: changes to its self-play section; ``behavior``:
    further fields of the behavior."""
    cfg = apply_overrides(load_config(config), env=str(build), base_port=base_port, num_envs=1,
                          num_actors=1, mode=mode, seed=2, no_graphics=True, timeout_wait=30,
                          env_args=("--standin-agents", str(agents)))
    [(_, b)] = cfg.behaviors.items()
    if self_play is not None:
        behavior["self_play"] = dataclasses.replace(b.self_play, **self_play)
    return replace_behavior(
        cfg, hyperparameters=dataclasses.replace(b.hyperparameters, buffer_size=256,
                                                 minibatch_size=128, num_epochs=1),
        network_settings=dataclasses.replace(b.network_settings, hidden_units=16),
        max_steps=max_steps, summary_freq=400, time_horizon=time_horizon, **behavior)


def replace_behavior(cfg: RunConfig, **changes) -> RunConfig:
    """``cfg`` with fields of its one behavior replaced."""
    [(name, b)] = cfg.behaviors.items()
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: dataclasses.replace(b, **changes)}))


def scalars(run_dir: Path, behavior: str) -> dict[str, list[float]]:
    """The TensorBoard scalars a run wrote for ``behavior``: tag -> values, in order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / behavior))
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def live_descendants(pid: int | None = None) -> list[psutil.Process]:
    """Live descendants of ``pid`` (default: this process), without multiprocessing's resource
    tracker (it lives as long as its parent and exits with it)."""
    out = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and not any(
                    "resource_tracker" in part for part in proc.cmdline()):
                out.append(proc)
        except psutil.NoSuchProcess:
            continue
    return out


def checkpoint_entry(run_dir: Path, behavior: str = "3DBall") -> dict:
    """The latest checkpoint's entry of ``behavior`` (short name)."""
    from unity_rl.checkpoint import CheckpointManager

    state = CheckpointManager(run_dir).load()
    [entry] = [e for name, e in state["behaviors"].items() if name.split("?", 1)[0] == behavior]
    return entry


def assert_gone(pids, timeout: float = 15.0) -> None:
    """The processes ``pids`` exit within ``timeout`` seconds (zombies count as gone)."""
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []


class RandomKiller:
    """A thread that SIGKILLs one of ``backend``'s actors ``kills`` times, each after a random
    pause, waiting for the backend to re-create it before the next kill."""

    def __init__(self, backend, rng, kills: int, pause: tuple[float, float],
                 restart_timeout: float = 60.0):
        import threading

        self.backend, self.rng, self.kills, self.pause = backend, rng, kills, pause
        self.restart_timeout = restart_timeout
        self.killed: list[int] = []
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True, name="killer")

    def start(self) -> "RandomKiller":
        self.thread.start()
        return self

    def alive(self) -> bool:
        return self.thread.is_alive()

    def _run(self) -> None:
        import os
        import signal
        import time

        try:
            for i in range(self.kills):
                time.sleep(self.rng.uniform(*self.pause))
                pids = self.backend.actor_pids()
                pid = pids[self.rng.randrange(len(pids))]
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
                wait_until(lambda: self.backend.restarts >= i + 1,  # noqa: B023 - called now
                           timeout=self.restart_timeout, what=f"restart {i + 1}")
        except BaseException as err:  # noqa: BLE001 - reported by the test's main thread
            self.errors.append(repr(err))
