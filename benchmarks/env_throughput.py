"""Agent-steps/s of a raw mlagents-envs loop vs UnityVecEnv on the same stand-in build.

(a) raw: one ``UnityEnvironment`` per build, stepped one after the other with random actions
    (get_steps -> set_actions -> step), as a hand-written mlagents-envs loop does;
(b) UnityVecEnv over the same number of builds with random actions.
Agent-steps = agent decisions received. Both run side by side in one invocation, for 1, 2 and 4
builds, alternating (a) and (b) ``--repeats`` times; the table shows medians and the ratio b/a.

    .venv/bin/python benchmarks/env_throughput.py [--seconds 8] [--builds 1 2 4]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mlagents_envs.environment import UnityEnvironment  # noqa: E402
from mlagents_envs.side_channel.engine_configuration_channel import (  # noqa: E402
    EngineConfigurationChannel,
)

from unity_rl import UnityVecEnv  # noqa: E402
from unity_rl.envs.ports import find_free_port_block  # noqa: E402

ENV = str(REPO / "unity_builds" / "3DBall")


def raw_loop(num_builds: int, seconds: float, base_port: int) -> float:
    envs = []
    try:
        for i in range(num_builds):
            engine = EngineConfigurationChannel()
            engine.set_configuration_parameters(time_scale=20.0)
            envs.append(UnityEnvironment(ENV, worker_id=i, base_port=base_port, seed=i,
                                         no_graphics=True, side_channels=[engine]))
        for env in envs:
            env.reset()
        name = next(iter(envs[0].behavior_specs))
        spec = envs[0].behavior_specs[name]
        rng = np.random.default_rng(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for env in envs:
                decisions, _ = env.get_steps(name)
                n = len(decisions)
                steps += n
                action = spec.action_spec.empty_action(n)
                action.add_continuous(rng.uniform(-1, 1, (n, spec.action_spec.continuous_size))
                                      .astype(np.float32))
                env.set_actions(name, action)
                env.step()
        return steps / (time.perf_counter() - start)
    finally:
        for env in envs:
            env.close()


def vec_env_loop(num_builds: int, seconds: float, base_port: int) -> float:
    with UnityVecEnv(ENV, num_builds=num_builds, base_port=base_port, seed=0) as env:
        env.reset()
        env.action_space.seed(0)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            env.step(env.action_space.sample())
            steps += env.num_envs
        return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="timed seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per case")
    parser.add_argument("--builds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--output", default=str(REPO / "benchmarks/results/env_throughput.json"))
    args = parser.parse_args()
    rows = []
    for n in args.builds:
        raw, vec = [], []
        for _ in range(args.repeats):
            raw.append(raw_loop(n, args.seconds, find_free_port_block(n, 31000 + os.getpid() % 5000)))
            vec.append(vec_env_loop(n, args.seconds, find_free_port_block(n, 31000 + os.getpid() % 5000)))
        rows.append({"builds": n, "raw_agent_steps_per_s": statistics.median(raw),
                     "vec_env_agent_steps_per_s": statistics.median(vec),
                     "ratio": statistics.median(vec) / statistics.median(raw),
                     "raw_runs": raw, "vec_env_runs": vec})
    print(f"{'builds':>6} {'raw mlagents (a)':>18} {'UnityVecEnv (b)':>16} {'b/a':>6}")
    for r in rows:
        print(f"{r['builds']:>6} {r['raw_agent_steps_per_s']:>18.0f} "
              f"{r['vec_env_agent_steps_per_s']:>16.0f} {r['ratio']:>6.2f}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "env_throughput", "seconds": args.seconds,
                               "repeats": args.repeats, "cpu_count": os.cpu_count(),
                               "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
