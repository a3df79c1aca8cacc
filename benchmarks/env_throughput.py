"""Agent-steps/s of the stock mlagents-envs loop vs UnityVecEnv on the same stand-in build.

(a) stock: ``benchmarks/stock_loop.py`` in a venv of its own with mlagents-envs 1.1.0 as its
    authors pinned it (protobuf 3.20.3, pure-Python parsing; ``benchmarks/stock_venv.sh``
    makes it): one ``UnityEnvironment`` per build, stepped one after the other with random
    actions (get_steps -> set_actions -> step), as a hand-written mlagents-envs loop does;
(b) UnityVecEnv (this venv: protobuf upb + unity_rl's step codec) over the same number of
    builds, random actions;
(c) the stand-in's ceiling: one build driven by a no-op client that answers every message at
    once (``standin_throughput.run_raw``), agent-steps/s counted from its messages.
Agent-steps = agent decisions received. (a) and (b) alternate ``--repeats`` times per build
count; the table shows medians and the ratios b/a and b/c (c: one build).

    .venv/bin/python benchmarks/env_throughput.py [--seconds 8] [--builds 1 2 4]
        [--stock-python PATH] [--build 3DBall]

``--build`` picks another stand-in (e.g. Basic: one agent per build, so per-message costs
dominate); the ceiling (c) is measured for 3DBall only. Results go to
``benchmarks/results/env_throughput.json`` (3DBall) or ``env_throughput_<build>.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import google.protobuf  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402

from unity_rl import UnityVecEnv  # noqa: E402
from unity_rl.envs.ports import find_free_port_block  # noqa: E402

BUILDS = REPO / "unity_builds"
# The canned zero actions of the ceiling's no-op client: 12 agents, 2 continuous actions.
CEILING_BEHAVIORS = {"3DBall?team=0": (12, 2, 0)}


def stock_loop(python: str, env: str, num_builds: int, seconds: float, base_port: int) -> dict:
    out = subprocess.run(
        [python, str(REPO / "benchmarks" / "stock_loop.py"), env, str(num_builds),
         str(seconds), str(base_port)],
        capture_output=True, text=True, timeout=seconds + 120, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"stock loop failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def vec_env_loop(env_path: str, num_builds: int, seconds: float, base_port: int) -> float:
    with UnityVecEnv(env_path, num_builds=num_builds, base_port=base_port, seed=0) as env:
        env.reset()
        env.action_space.seed(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            env.step(env.action_space.sample())
            steps += env.num_envs
        return steps / (time.perf_counter() - start)


def ceiling(seconds: float) -> float:
    from standin_throughput import run_raw

    stats = run_raw("3DBall", [], CEILING_BEHAVIORS, seconds, count_decisions=True)
    return stats["agent_steps"] / stats["wall_s"]


def _port(n: int) -> int:
    return find_free_port_block(n, 31000 + (os.getpid() * 13 + int(time.time())) % 5000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="timed seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per case")
    parser.add_argument("--builds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--stock-python", default=None,
                        help="python of the stock venv (default: made by stock_venv.sh)")
    parser.add_argument("--build", default="3DBall", help="stand-in under unity_builds/")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    env_path = str(BUILDS / args.build)
    suffix = "" if args.build == "3DBall" else f"_{args.build}"
    output = args.output or str(REPO / f"benchmarks/results/env_throughput{suffix}.json")
    stock_python = args.stock_python or subprocess.run(
        ["bash", str(REPO / "benchmarks" / "stock_venv.sh")], capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1]
    stock_info: dict = {}
    ceilings = []
    rows = []
    for n in args.builds:
        raw, vec = [], []
        for _ in range(args.repeats):
            result = stock_loop(stock_python, env_path, n, args.seconds, _port(n))
            raw.append(result.pop("agent_steps_per_s"))
            stock_info = result
            vec.append(vec_env_loop(env_path, n, args.seconds, _port(n)))
            if n == 1 and args.build == "3DBall":
                ceilings.append(ceiling(args.seconds))
        rows.append({"builds": n, "raw_agent_steps_per_s": statistics.median(raw),
                     "vec_env_agent_steps_per_s": statistics.median(vec),
                     "ratio": statistics.median(vec) / statistics.median(raw),
                     "raw_runs": raw, "vec_env_runs": vec})
    ceiling_rate = statistics.median(ceilings) if ceilings else None
    for r in rows:
        if r["builds"] == 1 and ceiling_rate:
            r["fraction_of_ceiling"] = r["vec_env_agent_steps_per_s"] / ceiling_rate
    print(f"stock loop: protobuf {stock_info.get('protobuf')} ({stock_info.get('protobuf_backend')})"
          f"; UnityVecEnv: protobuf {google.protobuf.__version__} ({api_implementation.Type()})")
    if ceiling_rate:
        print(f"stand-in ceiling (no-op client, 1 build): {ceiling_rate:.0f} agent-steps/s "
              f"(runs: {', '.join(f'{c:.0f}' for c in ceilings)})")
    print(f"{'builds':>6} {'stock mlagents (a)':>19} {'UnityVecEnv (b)':>16} {'b/a':>6} "
          f"{'b/ceiling':>10}")
    for r in rows:
        frac = r.get("fraction_of_ceiling")
        print(f"{r['builds']:>6} {r['raw_agent_steps_per_s']:>19.0f} "
              f"{r['vec_env_agent_steps_per_s']:>16.0f} {r['ratio']:>6.2f} "
              f"{'' if frac is None else f'{frac:.2f}':>10}")
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "env_throughput", "build": args.build, "seconds": args.seconds,
        "repeats": args.repeats,
        "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "stock": stock_info,
        "vec_env": {"protobuf": google.protobuf.__version__,
                    "protobuf_backend": api_implementation.Type()},
        "ceiling_agent_steps_per_s": ceiling_rate, "ceiling_runs": ceilings,
        "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
