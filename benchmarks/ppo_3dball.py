"""PPO on the 3DBall stand-in, sync vs async: time to a mean return, throughput, memory.

Two parts, each training run in a fresh process (so memory and CPU are measured per run):

1. **Learning**: for each mode, train with ``configs/ppo/3dball.yaml`` (plus any overrides given
   here) until the mean return of the last 100 episodes reaches ``--target`` (default 95) or
   ``--max-steps``. Reported: agent-steps and wall time to the target, agent-steps/s, the first
   update whose finished episodes averaged >= target (when the *policy* got there; the 100-episode
   mean trails it, see below), peak memory of the whole process tree (trainer, actors, builds),
   and where the CPU time went (trainer/learner process, actors, builds) with the learner's own
   split between updating and waiting for experience.
2. **Throughput with a slow build** (``--slow-factor``, default 3): 2 actors x 1 build, actor 0's
   build slowed with ``--standin-step-delay`` so that one of its steps takes ``slow-factor`` times
   as long as a normal one (calibrated first on one unslowed build); a fixed budget of
   ``--throughput-steps`` agent-steps per mode; reported: agent-steps/s and the async/sync ratio.

A bound worth knowing when reading the learning numbers: an episode's return is at most
0.1 x its decisions (1000 decisions, return 100, at 3DBall's MaxStep), so a 100-episode mean of
95 needs at least 95,000 agent-steps *inside those 100 episodes* on top of the steps spent
learning: "mean >= 95 within 100k agent-steps" cannot be met by any learner on this metric.

    .venv/bin/python benchmarks/ppo_3dball.py [--modes sync async] [--skip-throughput]
        [--num-envs 2] [--num-actors 2] [--target 95] [--max-steps 400000]
        [--buffer-size N --batch-size N --learning-rate X --num-epoch N --segment-steps N ...]

Writes ``benchmarks/results/ppo_3dball.json`` (and prints a table).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

CONFIG = REPO / "configs" / "ppo" / "3dball.yaml"
ENV = REPO / "unity_builds" / "3DBall.x86_64"
RESULTS = REPO / "benchmarks" / "results"

HYPERPARAMETER_FLAGS = {
    # flag -> (where, YAML key / field)
    "buffer_size": ("ppo", "buffer_size"),
    "batch_size": ("ppo", "minibatch_size"),
    "learning_rate": ("ppo", "learning_rate"),
    "learning_rate_schedule": ("ppo", "lr_schedule"),
    "num_epoch": ("ppo", "num_epochs"),
    "beta": ("ppo", "ent_coef"),
    "epsilon": ("ppo", "clip_coef"),
    "lambd": ("ppo", "gae_lambda"),
    "time_horizon": ("behavior", "time_horizon"),
    "hidden_units": ("network", "hidden_units"),
}


# ----------------------------------------------------------------------------------------------
# One training run (runs in a child process)
# ----------------------------------------------------------------------------------------------

def make_config(params: dict):
    from unity_rl.config import FrozenMap, apply_overrides, load_config
    from unity_rl.envs.ports import find_free_port_block

    cfg = load_config(CONFIG)
    port = find_free_port_block(params["num_envs"], start=params["port_start"])
    overrides = dict(env=str(ENV), num_envs=params["num_envs"], base_port=port,
                     mode=params["mode"], num_actors=params["num_actors"], seed=params["seed"],
                     no_graphics=True, time_scale=20.0)
    for key in ("segment_steps", "max_policy_lag", "torch_threads"):
        if params.get(key) is not None:
            overrides[key] = params[key]
    cfg = apply_overrides(cfg, **overrides)
    [(name, behavior)] = list(cfg.behaviors.items())
    ppo_changes, behavior_changes, network_changes = {}, {"max_steps": params["max_steps"]}, {}
    for flag, (where, field) in HYPERPARAMETER_FLAGS.items():
        value = params.get(flag)
        if value is None:
            continue
        {"ppo": ppo_changes, "behavior": behavior_changes, "network": network_changes}[where][field] = value
    hp = dataclasses.replace(behavior.hyperparameters, **ppo_changes)
    network = dataclasses.replace(behavior.network_settings, **network_changes)
    behavior = dataclasses.replace(behavior, hyperparameters=hp, network_settings=network,
                                   **behavior_changes)
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))


def learner_time_split(run_dir: Path, target: float | None) -> dict:
    """Seconds the learner spent updating vs waiting for segments (from TensorBoard)."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return {}
    folders = [p for p in run_dir.iterdir() if p.is_dir() and any(p.glob("events.out.*"))]
    if not folders:
        return {}
    events = EventAccumulator(str(folders[0]), size_guidance={"scalars": 0})
    events.Reload()
    out = {}
    for tag, key in (("Runtime/Update Seconds", "update_s"), ("Runtime/Wait Seconds", "wait_s")):
        if tag in events.Tags()["scalars"]:
            out[key] = round(sum(e.value for e in events.Scalars(tag)), 2)
    lags = ([e.value for e in events.Scalars("Policy/Lag")]
            if "Policy/Lag" in events.Tags()["scalars"] else [])
    lags = [v for v in lags if math.isfinite(v)]
    if lags:
        out["policy_lag_mean"] = round(sum(lags) / len(lags), 3)
    if "Policy/Lag Max" in events.Tags()["scalars"]:
        maxes = [e.value for e in events.Scalars("Policy/Lag Max") if math.isfinite(e.value)]
        out["policy_lag_max"] = max(maxes) if maxes else None
    if "Policy/Dropped Segments" in events.Tags()["scalars"]:
        out["dropped_segments"] = int(sum(e.value for e in events.Scalars("Policy/Dropped Segments")))
    if target is not None and "Environment/Cumulative Reward" in events.Tags()["scalars"]:
        out["first_update_mean_ge_target_steps"] = next(
            (e.step for e in events.Scalars("Environment/Cumulative Reward") if e.value >= target),
            None)
    return out


def one_run(params: dict) -> dict:
    import logging

    from unity_rl.metrics import read_progress
    from unity_rl.training.trainer import train

    logging.basicConfig(level=logging.WARNING)
    cfg = make_config(params)
    run_dir = Path(params["run_dir"])
    t0 = time.perf_counter()
    result = train(cfg, run_dir, resume=False, console=params.get("console", False),
                   target_return=params.get("target"),
                   actor_env_args=params.get("actor_env_args"))
    process_wall = time.perf_counter() - t0
    rows = read_progress(run_dir / "3DBall" / "progress.csv")
    target = params.get("target")
    reached = (next((r for r in rows if r["mean_return"] >= target), None)
               if target is not None else None)
    split = learner_time_split(run_dir, target)
    return {
        "agent_steps": result.agent_steps,
        "train_wall_seconds": round(result.wall_seconds, 2),
        "process_wall_seconds": round(process_wall, 2),
        "agent_steps_per_second": round(result.agent_steps / result.wall_seconds, 1),
        "mean_return_last100": round(result.mean_return, 2),
        "episodes": result.episodes,
        "updates": result.policy_version,
        "reached_target": reached is not None,
        "steps_to_target": int(reached["agent_steps"]) if reached else None,
        "wall_seconds_to_target": reached["wall_seconds"] if reached else None,
        "learner_split": split,
    }


# ----------------------------------------------------------------------------------------------
# The parent: launch a run, watch its process tree
# ----------------------------------------------------------------------------------------------

def role_of(proc: psutil.Process, root_pid: int) -> str:
    if proc.pid == root_pid:
        return "trainer"
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "other"
    if "unity_rl.standin" in cmd:
        return "builds"
    if "resource_tracker" in cmd:
        return "other"
    if "multiprocessing" in cmd or "spawn_main" in cmd:
        return "actors"
    return "other"


class TreeMonitor(threading.Thread):
    """Samples the RSS (and PSS) sum and per-process CPU times of a process tree."""

    def __init__(self, pid: int, interval: float = 0.25):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_rss = 0
        self.peak_pss = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        tick = 0
        while not self._halt.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root] + root.children(recursive=True)
            except psutil.NoSuchProcess:
                return
            rss = pss = 0
            for proc in procs:
                try:
                    with proc.oneshot():
                        rss += proc.memory_info().rss
                        times = proc.cpu_times()
                        known = self.cpu.get(proc.pid, ("other", 0.0))[0]
                        role = known if known != "other" else role_of(proc, self.pid)
                        self.cpu[proc.pid] = (role, times.user + times.system)
                    if tick % 4 == 0:
                        pss += proc.memory_full_info().pss
                except psutil.Error:
                    continue
            self.peak_rss = max(self.peak_rss, rss)
            if tick % 4 == 0:
                self.peak_pss = max(self.peak_pss, pss)
            tick += 1
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def cpu_by_role(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for role, seconds in self.cpu.values():
            out[role] = round(out.get(role, 0.0) + seconds, 1)
        return out


def launch(params: dict, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="ppo3dball_") as tmp:
        params = dict(params, run_dir=str(Path(tmp) / "run"))
        out_path = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--_one-run", json.dumps(params), str(out_path)]
        load_before = os.getloadavg()[0]
        busy_before = _machine_busy_seconds()
        child = subprocess.Popen(cmd, cwd=REPO)
        monitor = TreeMonitor(child.pid)
        monitor.start()
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.terminate()  # SIGTERM: the trainer stops cleanly and saves
            code = child.wait(60)
        finally:
            monitor.stop()
        busy = _machine_busy_seconds() - busy_before
        if code != 0 or not out_path.exists():
            return {"error": f"run exited with code {code}"}
        result = json.loads(out_path.read_text())
    result["loadavg_1min_before"] = round(load_before, 2)
    # CPU time other processes of the machine took meanwhile (0 on a quiet machine)
    result["cpu_seconds_outside_run"] = round(max(0.0, busy - sum(monitor.cpu_by_role().values())), 1)
    result["peak_rss_mb"] = round(monitor.peak_rss / 2**20)
    result["peak_pss_mb"] = round(monitor.peak_pss / 2**20)
    result["cpu_seconds"] = monitor.cpu_by_role()
    return result


def _machine_busy_seconds() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def calibrate_step_seconds(port_start: int) -> float:
    """Seconds per stream step of one unslowed build (random actions), its protocol included."""
    import numpy as np

    from unity_rl.envs.agent_stream import AgentStream
    from unity_rl.envs.ports import find_free_port_block

    port = find_free_port_block(1, start=port_start)
    with AgentStream(str(ENV), num_builds=1, base_port=port, seed=0) as stream:
        result = stream.reset()
        rng = np.random.default_rng(0)
        for phase in ("warm-up", "measure"):
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < (1.0 if phase == "warm-up" else 3.0):
                n = len(result.decisions.keys)
                result = stream.step(rng.uniform(-1, 1, (n, 2)).astype(np.float32))
                steps += 1
        return (time.perf_counter() - t0) / steps


# ----------------------------------------------------------------------------------------------

def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--_one-run":
        result = one_run(json.loads(sys.argv[2]))
        Path(sys.argv[3]).write_text(json.dumps(result))
        return

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", nargs="+", default=["sync", "async"], choices=["sync", "async"])
    ap.add_argument("--num-envs", type=int, default=2)
    ap.add_argument("--num-actors", type=int, default=2)
    ap.add_argument("--target", type=float, default=95.0)
    ap.add_argument("--max-steps", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--segment-steps", type=int)
    ap.add_argument("--max-policy-lag", type=int)
    ap.add_argument("--torch-threads", type=int)
    for flag in HYPERPARAMETER_FLAGS:
        kind = str if flag == "learning_rate_schedule" else (
            float if flag in ("learning_rate", "beta", "epsilon", "lambd") else int)
        ap.add_argument("--" + flag.replace("_", "-"), type=kind)
    ap.add_argument("--skip-learning", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--slow-factor", type=float, default=3.0)
    ap.add_argument("--throughput-steps", type=int, default=40_000)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--console", action="store_true", help="show the trainer's live progress")
    ap.add_argument("--out", type=Path, default=RESULTS / "ppo_3dball.json")
    args = ap.parse_args()

    base = {"num_envs": args.num_envs, "num_actors": args.num_actors, "seed": args.seed,
            "segment_steps": args.segment_steps, "max_policy_lag": args.max_policy_lag,
            "torch_threads": args.torch_threads, "console": args.console,
            "port_start": 21000 + (os.getpid() % 2000) * 10}
    for flag in HYPERPARAMETER_FLAGS:
        base[flag] = getattr(args, flag)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "settings": {k: v for k, v in base.items() if v is not None and k != "port_start"},
        "learning": {}, "throughput_slow_build": {},
    }

    if not args.skip_learning:
        for mode in args.modes:
            params = dict(base, mode=mode, max_steps=args.max_steps, target=args.target)
            print(f"[learning] {mode}: training to mean return >= {args.target} ...", flush=True)
            report["learning"][mode] = launch(params, args.timeout)
            print(json.dumps(report["learning"][mode], indent=1), flush=True)

    if not args.skip_throughput:
        step_s = calibrate_step_seconds(base["port_start"] + 500)
        # a decision step is 5 academy steps; the delay is per academy step
        delay = (args.slow_factor - 1.0) * step_s / 5.0
        slow = {"normal_step_ms": round(step_s * 1e3, 2), "standin_step_delay_s": round(delay, 5),
                "slow_factor": args.slow_factor}
        for mode in ("sync", "async"):
            params = dict(base, mode=mode, num_envs=2, num_actors=2,
                          max_steps=args.throughput_steps, target=None,
                          actor_env_args=[["--standin-step-delay", f"{delay:.5f}"], []])
            print(f"[throughput] {mode}, actor 0's build slowed {args.slow_factor}x ...",
                  flush=True)
            slow[mode] = launch(params, args.timeout)
        if "error" not in slow["sync"] and "error" not in slow["async"]:
            slow["async_over_sync"] = round(slow["async"]["agent_steps_per_second"]
                                            / slow["sync"]["agent_steps_per_second"], 2)
        report["throughput_slow_build"] = slow

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print_table(report)
    print(f"\nwritten: {args.out}")


def print_table(report: dict) -> None:
    print("\nPPO 3DBall stand-in")
    head = (f"{'part':<22}{'mode':<7}{'steps':>9}{'to target':>11}{'wall s':>9}"
            f"{'to tgt s':>10}{'steps/s':>9}{'return':>8}{'RSS MB':>8}{'PSS MB':>8}")
    print(head)
    rows = [("learning", m, r) for m, r in report["learning"].items()]
    slow = report.get("throughput_slow_build") or {}
    rows += [("slow build (x%g)" % slow.get("slow_factor", 0), m, slow[m])
             for m in ("sync", "async") if m in slow]
    for part, mode, r in rows:
        if "error" in r:
            print(f"{part:<22}{mode:<7} {r['error']}")
            continue
        fmt = lambda v: "-" if v is None else f"{v:,}"  # noqa: E731
        print(f"{part:<22}{mode:<7}{r['agent_steps']:>9,}{fmt(r['steps_to_target']):>11}"
              f"{r['train_wall_seconds']:>9.1f}{fmt(r['wall_seconds_to_target']):>10}"
              f"{r['agent_steps_per_second']:>9.0f}{r['mean_return_last100']:>8.1f}"
              f"{r['peak_rss_mb']:>8}{r['peak_pss_mb']:>8}")
    if "async_over_sync" in slow:
        print(f"async / sync agent-steps/s with one build slowed: {slow['async_over_sync']}x")


if __name__ == "__main__":
    main()
