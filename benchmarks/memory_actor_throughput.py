"""Actor throughput with and without memory: the issue-19 target "throughput of a memory policy's
actors within 70% of the same network without memory", measured on the actors alone.

For each trainer type (Unity's ``ppo/Hallway.yaml`` and ``sac/Hallway.yaml``, LSTM memory of 128
over sequences of 64) and each variant (the config as it is, and the same network with
``memory: null``), one actor is built in this process as a run builds it
(``training.wiring.actor_specs``, the algorithm's own plan and acting policy, its weights from a
freshly built learner host) over ``--builds`` Hallway stand-in builds, and collects segments for
``--seconds`` seconds after one warm-up collection, with one torch thread as every actor process
has. No learner trains meanwhile: what is timed
is stepping the builds, acting (with memory: the LSTM step and the per-agent memories) and
finishing the segments (SAC with memory: the critic memories, sequence by sequence). The
variants alternate (which goes first alternates too: the machine's load drifts), ``--repeats``
times; the table gives the median agent-steps/s of each and
the ratio memory / memoryless. Writes ``benchmarks/results/memory_actor_throughput.json``.

    .venv/bin/python benchmarks/memory_actor_throughput.py [--seconds 20] [--repeats 3]
        [--builds 1] [--algos ppo sac]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from unity_rl.algorithms.nets import set_torch_threads  # noqa: E402
from unity_rl.config import FrozenMap, apply_overrides, load_config  # noqa: E402
from unity_rl.envs.ports import find_free_port_block  # noqa: E402
from unity_rl.runtime.actor import Actor  # noqa: E402
from unity_rl.runtime.algorithm import HostContext  # noqa: E402
from unity_rl.runtime.messages import BehaviorInfo, BehaviorWeights, PolicyWeights  # noqa: E402
from unity_rl.training.wiring import actor_specs, make_algorithm  # noqa: E402

CONFIGS = REPO / "tests" / "fixtures" / "mlagents_configs"
TARGET = 0.70
"""The issue's target: memory actors at >= 70% of the memoryless ones' agent-steps/s."""


def measure(algo: str, memory: bool, args, port: int, log_dir: Path) -> dict:
    cfg = apply_overrides(load_config(CONFIGS / algo / "Hallway.yaml"),
                          env=str(REPO / "unity_builds" / "Hallway.x86_64"), num_envs=args.builds,
                          num_actors=1, base_port=port, seed=1, no_graphics=True)
    [(name, behavior)] = list(cfg.behaviors.items())
    if not memory:
        behavior = dataclasses.replace(
            behavior, network_settings=dataclasses.replace(behavior.network_settings, memory=None))
    cfg = dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))
    algorithm = make_algorithm(cfg, name, behavior)
    [spec] = actor_specs(cfg, {name: algorithm}, None, log_dir, seed=1)
    actor = Actor(spec)
    try:
        info = actor.start()
        [(full, spec_info)] = list(info.behaviors.items())
        host = algorithm.make_host(BehaviorInfo(full, spec_info.obs_shapes, spec_info.action_spec,
                                                spec_info.num_agents),
                                   HostContext("cpu", 1, 1, "sync", 0))
        actor.set_weights(PolicyWeights(0, {full: BehaviorWeights(0, host.weights())}))
        actor.collect()  # warm-up: builds reset, first trajectories
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            rollout = actor.collect()
            steps += sum(s.agent_steps for s in rollout.segments.values())
        seconds = time.perf_counter() - t0
    finally:
        actor.close()
        if hasattr(algorithm, "close"):
            algorithm.close()
    return {"algo": algo, "memory": memory, "agent_steps": steps, "seconds": seconds,
            "steps_per_second": steps / seconds}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--builds", type=int, default=1)
    ap.add_argument("--algos", nargs="+", default=["ppo", "sac"], choices=["ppo", "sac"])
    ap.add_argument("--base-port", type=int, default=18300)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" /
                    "memory_actor_throughput.json")
    args = ap.parse_args(argv)
    set_torch_threads(1)  # as every actor process runs (ActorSpec.torch_threads)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for algo in args.algos:
                for memory in ((True, False) if repeat % 2 == 0 else (False, True)):
                    port = find_free_port_block(args.builds, start=args.base_port + 10 * len(runs))
                    run = measure(algo, memory, args, port, Path(tmp) / f"{algo}{memory}{repeat}")
                    run["repeat"] = repeat
                    runs.append(run)
                    print(f"  {algo} memory={memory!s:5} repeat {repeat}: "
                          f"{run['steps_per_second']:8.1f} agent-steps/s", flush=True)
    summary = {}
    print(f"\n{'config':18} {'memory':>10} {'memoryless':>11} {'ratio':>7}  target >= {TARGET}")
    for algo in args.algos:
        med = {m: statistics.median(r["steps_per_second"] for r in runs
                                    if r["algo"] == algo and r["memory"] == m) for m in (True, False)}
        ratio = med[True] / med[False]
        summary[algo] = {"memory_steps_per_second": med[True],
                         "memoryless_steps_per_second": med[False], "ratio": ratio,
                         "meets_target": ratio >= TARGET}
        print(f"{algo + '/Hallway.yaml':18} {med[True]:10.1f} {med[False]:11.1f} {ratio:7.2f}  "
              f"{'met' if ratio >= TARGET else 'NOT met'}")
    out = {"measured": __doc__, "command": "python benchmarks/memory_actor_throughput.py " +
           " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "loadavg": os.getloadavg()},
           "settings": {"seconds": args.seconds, "repeats": args.repeats, "builds": args.builds},
           "target_ratio": TARGET, "summary": summary, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
