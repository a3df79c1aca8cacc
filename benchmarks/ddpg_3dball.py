"""DDPG on the 3DBall stand-in, sync vs async (Ape-X): agent-steps and wall time to a
mean return.

For each mode, one training run in a fresh process with ``configs/ddpg/3dball.yaml`` (plus any
overrides given here) until the mean return of the last 100 episodes reaches ``--target``
(default 95) or ``--max-steps``. Reported per mode:

- ``last100``: agent-steps and wall seconds when the mean of the last 100 finished episodes first
  reached the target (where the run stops);
- ``summary_window``: the first of ML-Agents' summary lines (``summary_freq`` agent-steps, the
  mean reward of the episodes finished in that window, as ``mlagents-learn`` prints it) at or
  above the target: it tells when the *policy* got there;
- throughput, gradient updates, the achieved replay ratio, policy lag (versions and gradient
  updates), and the learner's split between updating and waiting.

A bound worth knowing: with MaxStep 5000 and a decision period of 5, a successful episode is 1000
decisions (return 100), so 100 successful episodes alone are 100k agent-steps: the last-100 mean
can reach 95 only ~100k agent-steps after the policy has learnt.

    .venv/bin/python benchmarks/ddpg_3dball.py [--modes sync async] [--num-envs 2]
        [--num-actors 2] [--target 95] [--max-steps 300000] [--seed 1] [--prioritized]
        [--replay-ratio X --batch-size N --hidden-units N --warmup-steps N ...]

Writes ``benchmarks/results/ddpg_3dball.json`` (and prints a table).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CONFIG = REPO / "configs" / "ddpg" / "3dball.yaml"
ENV = REPO / "unity_builds" / "3DBall.x86_64"
RESULTS = REPO / "benchmarks" / "results"
SUMMARY = re.compile(r"\[INFO\] \S+\. Step: (\d+)\. Time Elapsed: ([\d.]+) s\. "
                     r"Mean Reward: (-?[\d.]+)\.")
HYPERPARAMETERS = ("replay_ratio", "batch_size", "buffer_size", "warmup_steps", "actor_lr",
                   "critic_lr", "tau", "noise_sigma", "prioritized")
"""DDPGConfig fields that have a flag here."""


# ----------------------------------------------------------------------------------------------
# One training run (child process)
# ----------------------------------------------------------------------------------------------

def make_config(params: dict):
    from unity_rl.config import FrozenMap, apply_overrides, load_config
    from unity_rl.envs.ports import find_free_port_block

    cfg = load_config(CONFIG)
    port = find_free_port_block(params["num_envs"], start=params["port_start"])
    cfg = apply_overrides(cfg, env=str(ENV), num_envs=params["num_envs"], base_port=port,
                          mode=params["mode"], num_actors=params["num_actors"],
                          seed=params["seed"], no_graphics=True, time_scale=20.0)
    [(name, behavior)] = list(cfg.behaviors.items())
    hp = dataclasses.replace(behavior.hyperparameters, **{
        k: params[k] for k in HYPERPARAMETERS if params.get(k) is not None})
    network = behavior.network_settings
    if params.get("hidden_units"):
        network = dataclasses.replace(network, hidden_units=params["hidden_units"])
    behavior = dataclasses.replace(behavior, hyperparameters=hp, network_settings=network,
                                   max_steps=params["max_steps"],
                                   checkpoint_interval=10 * params["max_steps"])
    return dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))


def tensorboard_totals(run_dir: Path) -> dict:
    """Learner time split, lag and replay figures from the run's TensorBoard events."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return {}
    folders = [p for p in run_dir.iterdir() if p.is_dir() and any(p.glob("events.out.*"))]
    if not folders:
        return {}
    events = EventAccumulator(str(folders[0]), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])

    def values(tag: str) -> list[float]:
        return ([e.value for e in events.Scalars(tag) if math.isfinite(e.value)]
                if tag in tags else [])

    out: dict = {}
    for tag, key in (("Runtime/Update Seconds", "update_s"), ("Runtime/Wait Seconds", "wait_s")):
        out[key] = round(sum(values(tag)), 1)
    for tag, key in (("Policy/Lag", "policy_lag_versions_mean"),
                     ("Policy/Lag Updates", "policy_lag_updates_mean")):
        v = values(tag)
        out[key] = round(sum(v) / len(v), 2) if v else None
    lag_max = values("Policy/Lag Max")
    out["policy_lag_versions_max"] = max(lag_max) if lag_max else None
    for tag, key in (("Runtime/Replay Ratio", "achieved_replay_ratio"),
                     ("Runtime/Replay Size", "replay_size"),
                     ("Runtime/Update Backlog", "final_update_backlog")):
        v = values(tag)
        out[key] = round(v[-1], 4) if v else None
    return out


def one_run(params: dict) -> dict:
    import logging

    from unity_rl.checkpoint import CheckpointManager
    from unity_rl.training.trainer import train

    logging.basicConfig(level=logging.WARNING)
    cfg = make_config(params)
    run_dir = Path(params["run_dir"])
    t0 = time.perf_counter()
    result = train(cfg, run_dir, resume=False, console=True, target_return=params["target"])
    process_wall = time.perf_counter() - t0
    [entry] = CheckpointManager(run_dir).load()["behaviors"].values()
    learner = entry["learner"]
    reached = result.episodes >= 100 and result.mean_return >= params["target"]
    return {
        "reached_target": bool(reached),
        "agent_steps": result.agent_steps,
        "train_wall_seconds": round(result.wall_seconds, 1),
        "process_wall_seconds": round(process_wall, 1),
        "agent_steps_per_second": round(result.agent_steps / result.wall_seconds, 1),
        "mean_return_last100": round(result.mean_return, 2),
        "episodes": result.episodes,
        "gradient_updates": int(learner["updates"]),
        "weight_versions": int(learner["version"]),
        **tensorboard_totals(run_dir),
    }


def child_main(params_json: str) -> None:
    out = one_run(json.loads(params_json))
    print("RESULT " + json.dumps(out), flush=True)


# ----------------------------------------------------------------------------------------------
# The parent: one child per mode, summary windows parsed from its console
# ----------------------------------------------------------------------------------------------

def run_mode(params: dict, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--child", json.dumps(params)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        return {"error": f"timed out after {timeout:.0f} s", **summary_windows(out, params)}
    result = next((json.loads(line[7:]) for line in proc.stdout.splitlines()
                   if line.startswith("RESULT ")), None)
    if result is None:
        return {"error": f"exit code {proc.returncode}: {proc.stderr[-2000:]}"}
    result["wall_seconds_with_startup"] = round(time.perf_counter() - t0, 1)
    result.update(summary_windows(proc.stdout, params))
    return result


def summary_windows(stdout: str, params: dict) -> dict:
    """The ML-Agents summary lines of a run, and the first one at or above the target."""
    windows = [(int(m[1]), float(m[2]), float(m[3])) for m in SUMMARY.finditer(stdout)]
    first = next(((s, t, r) for s, t, r in windows if r >= params["target"]), None)
    return {
        "summary_window": None if first is None else {
            "agent_steps": first[0], "wall_seconds": first[1], "mean_reward": first[2]},
        "summary_lines": [{"agent_steps": s, "wall_seconds": t, "mean_reward": r}
                          for s, t, r in windows],
    }


def fmt(value, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--modes", nargs="+", default=["sync", "async"], choices=["sync", "async"])
    p.add_argument("--num-envs", type=int, default=2)
    p.add_argument("--num-actors", type=int, default=2)
    p.add_argument("--target", type=float, default=95.0)
    p.add_argument("--max-steps", type=int, default=300_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per mode")
    p.add_argument("--prioritized", action="store_true", default=None)
    p.add_argument("--hidden-units", type=int)
    for name in HYPERPARAMETERS:
        if name != "prioritized":
            p.add_argument("--" + name.replace("_", "-"),
                           type=int if name in ("batch_size", "buffer_size", "warmup_steps")
                           else float)
    p.add_argument("--output", default=str(RESULTS / "ddpg_3dball.json"))
    args = p.parse_args(argv)
    if args.child is not None:
        child_main(args.child)
        return 0

    import tempfile

    overrides = {k: getattr(args, k) for k in HYPERPARAMETERS + ("hidden_units",)
                 if getattr(args, k) is not None}
    report = {
        "benchmark": "ddpg_3dball",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "settings": {"config": str(CONFIG.relative_to(REPO)), "num_envs": args.num_envs,
                     "num_actors": args.num_actors, "target": args.target,
                     "max_steps": args.max_steps, "seed": args.seed, "overrides": overrides},
        "modes": {},
    }
    with tempfile.TemporaryDirectory(prefix="ddpg_bench_") as tmp:
        for i, mode in enumerate(args.modes):
            params = dict(mode=mode, num_envs=args.num_envs, num_actors=args.num_actors,
                          seed=args.seed, target=args.target, max_steps=args.max_steps,
                          run_dir=str(Path(tmp) / mode), port_start=23000 + 100 * i,
                          **overrides)
            print(f"--- {mode}: training until the last-100 mean return >= {args.target} "
                  f"(at most {args.max_steps:,} agent-steps)", flush=True)
            report["modes"][mode] = run_mode(params, args.timeout)
            print(json.dumps({k: v for k, v in report["modes"][mode].items()
                              if k != "summary_lines"}), flush=True)

    print(f"\n{'mode':6} {'last100>=T steps':>16} {'wall s':>7} {'window>=T steps':>15} "
          f"{'wall s':>7} {'steps/s':>8} {'updates':>8} {'ratio':>6} {'lag v/upd':>10}")
    for mode, r in report["modes"].items():
        if "error" in r and "agent_steps" not in r:
            print(f"{mode:6} error: {r['error'][:200]}")
            continue
        w = r.get("summary_window") or {}
        hit = r.get("reached_target")
        print(f"{mode:6} {fmt(r['agent_steps'] if hit else None, ','):>16} "
              f"{fmt(r['train_wall_seconds'] if hit else None):>7} "
              f"{fmt(w.get('agent_steps'), ','):>15} {fmt(w.get('wall_seconds')):>7} "
              f"{fmt(r.get('agent_steps_per_second')):>8} {fmt(r.get('gradient_updates')):>8} "
              f"{fmt(r.get('achieved_replay_ratio')):>6} "
              f"{fmt(r.get('policy_lag_versions_mean'))}/{fmt(r.get('policy_lag_updates_mean'))}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
