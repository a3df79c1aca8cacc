"""What the Ray backend costs next to the local one, on the same cores.

Two parts, side by side in one invocation:

1. **Training**: the same short PPO run on the 3DBall stand-in (``configs/ppo/3dball.yaml``,
   ``--num-envs`` builds over ``--num-actors`` actors, ``--max-steps`` agent-steps), sync and
   async, once with ``backend: local`` and once with ``backend: ray`` (a local Ray instance that
   the run starts and shuts down: what ``unity-rl train --backend ray`` does without an
   address). Each run is its own process, so Ray's start, memory and CPU are counted per run.
   Reported: start-up seconds (until every actor's builds are up), training seconds, agent-steps/s
   over the whole loop and in steady state (from the first update on), peak memory (PSS and RSS)
   of the whole process tree (trainer, Ray's daemons and workers, actors, builds) and the Ray /
   local ratio of steady agent-steps/s.
2. **Transport only**: the sync wiring over in-process fake streams (no builds, a learner that
   only bumps its version) with the 2x128 network's real weights: milliseconds per round
   (broadcast weights to K actors, K small segments back), local processes vs Ray.

    .venv/bin/python benchmarks/backend_overhead.py [--modes sync async] [--max-steps 20480]
        [--num-envs 2] [--num-actors 2] [--rounds 200] [--skip-transport]

Writes ``benchmarks/results/backend_overhead.json`` and prints a table. The machine is shared
with whatever else runs: ``cpu_seconds_outside_run`` says how much CPU other processes took
during each run (0 on a quiet machine).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

CONFIG = REPO / "configs" / "ppo" / "3dball.yaml"
ENV = REPO / "unity_builds" / "3DBall.x86_64"
RESULTS = REPO / "benchmarks" / "results"


# ----------------------------------------------------------------------------------------------
# Children: one training run, or the transport measurement of one backend
# ----------------------------------------------------------------------------------------------

def training_run(params: dict) -> dict:
    import logging

    from unity_rl.config import FrozenMap, apply_overrides, load_config
    from unity_rl.envs.ports import find_free_port_block
    from unity_rl.metrics import read_progress
    from unity_rl.training.trainer import train

    logging.basicConfig(level=logging.WARNING)
    cfg = load_config(CONFIG)
    port = find_free_port_block(params["num_envs"], start=params["port_start"])
    cfg = apply_overrides(cfg, env=str(ENV), num_envs=params["num_envs"], base_port=port,
                          mode=params["mode"], num_actors=params["num_actors"],
                          seed=params["seed"], no_graphics=True, time_scale=20.0,
                          backend=params["backend"])
    [(name, behavior)] = list(cfg.behaviors.items())
    behavior = dataclasses.replace(behavior, max_steps=params["max_steps"])
    cfg = dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))
    run_dir = Path(params["run_dir"])
    t0 = time.perf_counter()
    result = train(cfg, run_dir, resume=False, console=False)
    process_wall = time.perf_counter() - t0
    rows = read_progress(run_dir / "3DBall" / "progress.csv")
    steady = None
    if len(rows) >= 3:
        first, last = rows[0], rows[-1]
        steady = (last["agent_steps"] - first["agent_steps"]) / (
            last["wall_seconds"] - first["wall_seconds"])
    return {
        "agent_steps": result.agent_steps,
        "updates": result.policy_version,
        "startup_seconds": round(process_wall - result.wall_seconds, 2),
        "train_seconds": round(result.wall_seconds, 2),
        "agent_steps_per_second": round(result.agent_steps / result.wall_seconds, 1),
        "steady_agent_steps_per_second": round(steady, 1) if steady else None,
        "policy_lag_mean": round(sum(r["policy_lag"] for r in rows) / len(rows), 3),
        "mean_return_last100": round(result.mean_return, 2),
    }


class _VersionOnlyLearner:
    """Updates nothing: bumps its version and hands out the same (real-sized) weights."""

    def __init__(self, weights: dict):
        self.version = 0
        self.agent_steps_collected = 0  # what PPOHost reads to drive the schedules
        self._weights = weights

    def weights(self) -> dict:
        return self._weights

    def update(self, trajectories, collected_steps: int | None = None,
               episode_length: float | None = None) -> dict:
        self.version += 1
        return {}


def transport_run(params: dict) -> dict:
    from tests.runtime.fakes import BEHAVIOR, FakeStream
    from unity_rl.algorithms.network_config import NetworkConfig
    from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
    from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
    from unity_rl.runtime.algorithm import BehaviorPlan
    from unity_rl.training.wiring import make_backend
    from unity_rl.algorithms.ppo.host import PPOHost
    from unity_rl.algorithms.ppo.acting import ppo_policy
    from unity_rl.runtime.runners import SyncRunner

    net = NetworkConfig(normalize=True, hidden_units=128, num_layers=2)
    plan = BehaviorPlan(functools.partial(ppo_policy, network_cfg=net), params["segment_steps"],
                        64, cut_at_segment_end=True)
    specs = [ActorSpec(actor_id=k, stream=StreamSettings("fake"), plans=(("Fake", plan),),
                       wait_for_new_weights=True, seed=k,
                       stream_factory=functools.partial(FakeStream, num_agents=12, obs_dim=8,
                                                        seed=k, build=k))
             for k in range(params["num_actors"])]
    t0 = time.perf_counter()
    with make_backend(params["backend"], specs) as backend:
        infos = backend.start()
        startup = time.perf_counter() - t0
        fake = infos[0].behaviors[BEHAVIOR]
        weights = PPOLearner(fake.obs_shapes, fake.action_spec,
                             PPOConfig(buffer_size=1024, minibatch_size=64), net,
                             seed=0).weights()
        host = PPOHost(_VersionOnlyLearner(weights), buffer_steps=1, drop_lag=None)
        runner = SyncRunner(backend, {BEHAVIOR: host})
        runner.start()
        for _ in range(10):  # warm-up
            runner.next_update()
        t1 = time.perf_counter()
        for _ in range(params["rounds"]):
            runner.next_update()
        per_round = (time.perf_counter() - t1) / params["rounds"]
    return {"startup_seconds": round(startup, 2), "ms_per_round": round(per_round * 1e3, 2),
            "rounds": params["rounds"], "segment_steps": params["segment_steps"],
            "weights_kb": round(_nbytes(weights) / 1024, 1)}


def _nbytes(tree) -> int:
    if isinstance(tree, dict):
        return sum(_nbytes(v) for v in tree.values())
    return int(getattr(tree, "nbytes", 0))


# ----------------------------------------------------------------------------------------------
# The parent: launch a child, watch its process tree
# ----------------------------------------------------------------------------------------------

class TreeMonitor(threading.Thread):
    """Peak RSS/PSS sum and CPU seconds of a process tree (Ray's daemons are in the tree of the
    driver that started them)."""

    def __init__(self, pid: int, interval: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_rss = self.peak_pss = 0
        self.cpu: dict[int, float] = {}
        self._halt = threading.Event()

    def run(self) -> None:
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
                        info = proc.memory_full_info()
                        times = proc.cpu_times()
                    rss += info.rss
                    pss += getattr(info, "pss", info.rss)
                    self.cpu[proc.pid] = times.user + times.system
                except psutil.Error:
                    continue
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _busy_seconds() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def launch(kind: str, params: dict, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="backend_overhead_") as tmp:
        params = dict(params, run_dir=str(Path(tmp) / "run"))
        out_path = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--_child", kind, json.dumps(params), str(out_path)]
        busy_before = _busy_seconds()
        child = subprocess.Popen(cmd, cwd=REPO)
        monitor = TreeMonitor(child.pid)
        monitor.start()
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.terminate()
            code = child.wait(60)
        finally:
            monitor.stop()
        busy = _busy_seconds() - busy_before
        if code != 0 or not out_path.exists():
            return {"error": f"exited with code {code}"}
        result = json.loads(out_path.read_text())
    own = sum(monitor.cpu.values())
    result["peak_pss_mb"] = round(monitor.peak_pss / 2**20)
    result["peak_rss_mb"] = round(monitor.peak_rss / 2**20)
    result["cpu_seconds"] = round(own, 1)
    result["cpu_seconds_outside_run"] = round(max(0.0, busy - own), 1)
    return result


def _median_run(runs: list[dict]) -> dict:
    """The run with the median steady agent-steps/s, plus every run's figures."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return runs[0]
    good.sort(key=lambda r: r.get("steady_agent_steps_per_second") or 0.0)
    out = dict(good[(len(good) - 1) // 2])
    if len(runs) > 1:
        out["all_runs"] = runs
    return out


def _ratio(ray_value, local_value):
    if not ray_value or not local_value:
        return None
    return round(ray_value / local_value, 3)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--_child":
        run = {"training": training_run, "transport": transport_run}[sys.argv[2]]
        Path(sys.argv[4]).write_text(json.dumps(run(json.loads(sys.argv[3]))))
        return

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", nargs="+", default=["sync", "async"], choices=["sync", "async"])
    ap.add_argument("--num-envs", type=int, default=2)
    ap.add_argument("--num-actors", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=20_480)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=200, help="transport: measured sync rounds")
    ap.add_argument("--segment-steps", type=int, default=12,
                    help="transport: agent-steps per segment (12: one step of 12 agents)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="training runs per mode and backend (interleaved; medians reported)")
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--skip-transport", action="store_true")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--out", type=Path, default=RESULTS / "backend_overhead.json")
    args = ap.parse_args()

    try:
        import ray  # noqa: F401
    except ImportError:
        sys.exit("ray is not installed: pip install 'unity-rl[ray]'")
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "ray": ray.__version__},
        "settings": {"config": str(CONFIG.relative_to(REPO)), "num_envs": args.num_envs,
                     "num_actors": args.num_actors, "max_steps": args.max_steps,
                     "seed": args.seed, "repeats": args.repeats,
                     "transport_segment_steps": args.segment_steps},
        "training": {}, "transport": {},
    }
    base = {"num_envs": args.num_envs, "num_actors": args.num_actors, "seed": args.seed,
            "max_steps": args.max_steps, "port_start": 22000 + (os.getpid() % 2000) * 10}
    backends = ("local", "ray")
    if not args.skip_training:
        for mode in args.modes:
            runs: dict[str, list] = {b: [] for b in backends}
            for i in range(args.repeats):
                for backend in backends:  # interleaved: both see the same machine load
                    print(f"training: {mode} / {backend} ({i + 1}/{args.repeats}) ...",
                          flush=True)
                    runs[backend].append(launch("training", dict(base, mode=mode,
                                                                 backend=backend),
                                                args.timeout))
            row = {b: _median_run(runs[b]) for b in backends}
            row["ray_over_local_steady_steps_per_s"] = _ratio(
                row["ray"].get("steady_agent_steps_per_second"),
                row["local"].get("steady_agent_steps_per_second"))
            report["training"][mode] = row
    if not args.skip_transport:
        for backend in backends:
            print(f"transport: {backend} ...", flush=True)
            report["transport"][backend] = launch(
                "transport", {"backend": backend, "num_actors": args.num_actors,
                              "rounds": args.rounds, "segment_steps": args.segment_steps},
                args.timeout)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    print(f"\nwritten: {args.out}")


def print_table(report: dict) -> None:
    if report["training"]:
        s = report["settings"]
        print(f"\nPPO 3DBall stand-in, {s['num_envs']} builds / {s['num_actors']} actors, "
              f"{s['max_steps']} agent-steps, {report['machine']['cpus']} CPUs")
        head = (f"{'mode':6} {'backend':8} {'start s':>8} {'train s':>8} {'steps/s':>8} "
                f"{'steady/s':>9} {'ray/local':>9} {'PSS MB':>7} {'RSS MB':>7} {'CPU s':>6} "
                f"{'others':>7}")
        print(head)
        print("-" * len(head))
        for mode, row in report["training"].items():
            for backend in ("local", "ray"):
                r = row[backend]
                if "error" in r:
                    print(f"{mode:6} {backend:8} {r['error']}")
                    continue
                ratio = row["ray_over_local_steady_steps_per_s"] if backend == "ray" else None
                print(f"{mode:6} {backend:8} {r['startup_seconds']:8.1f} "
                      f"{r['train_seconds']:8.1f} {r['agent_steps_per_second']:8.0f} "
                      f"{(r['steady_agent_steps_per_second'] or float('nan')):9.0f} "
                      f"{(ratio if ratio is not None else float('nan')):9.2f} "
                      f"{r['peak_pss_mb']:7d} {r['peak_rss_mb']:7d} {r['cpu_seconds']:6.1f} "
                      f"{r['cpu_seconds_outside_run']:7.1f}")
    if report["transport"]:
        print("\nTransport only (sync wiring, fake streams, real 2x128 weights):")
        for backend, r in report["transport"].items():
            if "error" in r:
                print(f"  {backend:6} {r['error']}")
                continue
            print(f"  {backend:6} {r['ms_per_round']:7.2f} ms/round "
                  f"({r['segment_steps']} steps x actors, weights {r['weights_kb']} KB), "
                  f"start {r['startup_seconds']:.1f} s, PSS {r['peak_pss_mb']} MB")


if __name__ == "__main__":
    main()
