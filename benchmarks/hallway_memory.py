"""Memory or not on the Hallway stand-in: Unity's ``ppo/Hallway.yaml`` (or, ``--algo sac``,
``sac/Hallway.yaml``) as it is (LSTM memory) against the same config with ``memory: null``, same
seed, same budget.

The stand-in shows the cue only at an episode's first decisions (``unity_rl/standin/scenes/
hallway.py``): a memoryless policy can average at most 0.442 per episode, one that remembers the
cue 0.99. Prints the summary windows of both runs (mean return of the episodes that ended in
each) and the first window >= ``--target``; writes ``benchmarks/results/hallway_memory.json``
(``hallway_memory_sac.json`` with ``--algo sac``). ``--variants memory`` runs the memory config
alone; ``--stop-at-target`` ends a run once its last 100 episodes average ``--target``.

    .venv/bin/python benchmarks/hallway_memory.py [--algo ppo|sac] [--steps 80000] [--seed 1]
        [--num-envs 2] [--variants memory memoryless] [--stop-at-target]
        [--config tests/fixtures/mlagents_configs/<algo>/Hallway.yaml]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from unity_rl.config import FrozenMap, apply_overrides, load_config  # noqa: E402
from unity_rl.metrics import read_progress  # noqa: E402
from unity_rl.training.trainer import train  # noqa: E402

MEMORYLESS_CEILING = 0.442
"""Best mean return a policy without memory can reach on the stand-in (its tests show it)."""


def run(config: Path, memory: bool, args, port: int, tmp: Path) -> dict:
    cfg = apply_overrides(load_config(config), env=str(REPO / "unity_builds" / "Hallway.x86_64"),
                          num_envs=args.num_envs, base_port=port, seed=args.seed,
                          no_graphics=True, max_steps=args.steps)
    [(name, behavior)] = list(cfg.behaviors.items())
    if not memory:
        behavior = dataclasses.replace(
            behavior, network_settings=dataclasses.replace(behavior.network_settings, memory=None))
    cfg = dataclasses.replace(cfg, behaviors=FrozenMap({name: behavior}))
    t0 = time.perf_counter()
    result = train(cfg, tmp / ("memory" if memory else "memoryless"), resume=False, console=False,
                   target_return=args.target if args.stop_at_target else None)
    rows = read_progress(tmp / ("memory" if memory else "memoryless") / name / "progress.csv")
    windows = [(int(r["agent_steps"]), r["mean_return"]) for r in rows
               if r["mean_return"] == r["mean_return"]]
    first = next((s for s, m in windows if m >= args.target), None)
    return {"memory": memory, "agent_steps": result.agent_steps, "seconds": time.perf_counter() - t0,
            "final_mean_return": result.mean_return, "first_window_at_target": first,
            "windows": windows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=["ppo", "sac"], default="ppo")
    ap.add_argument("--config", type=Path, default=None,
                    help="default: tests/fixtures/mlagents_configs/<algo>/Hallway.yaml (Unity's)")
    ap.add_argument("--variants", nargs="+", choices=["memory", "memoryless"],
                    default=["memory", "memoryless"])
    ap.add_argument("--stop-at-target", action="store_true")
    ap.add_argument("--steps", type=int, default=80_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--num-envs", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("--base-port", type=int, default=17600)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.config is None:
        args.config = REPO / "tests" / "fixtures" / "mlagents_configs" / args.algo / "Hallway.yaml"
    if args.out is None:
        suffix = "" if args.algo == "ppo" else "_" + args.algo
        args.out = REPO / "benchmarks" / "results" / f"hallway_memory{suffix}.json"
    if not args.config.is_file():
        sys.exit(f"{args.config} not found: pass --config path/to/ppo/Hallway.yaml (Unity's file)")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [run(args.config, variant == "memory", args, args.base_port + 10 * i, Path(tmp))
                for i, variant in enumerate(args.variants)]
    print(f"\n{'network':<12}{'first window >= ' + str(args.target):>24}{'final mean':>12}{'s':>8}")
    for r in runs:
        first = r["first_window_at_target"]
        print(f"{'memory' if r['memory'] else 'memoryless':<12}{first if first else 'never':>24}"
              f"{r['final_mean_return']:>12.3f}{r['seconds']:>8.0f}")
    print(f"(a memoryless policy can reach at most {MEMORYLESS_CEILING})")
    args.out.write_text(json.dumps({"machine": platform.platform(), "algo": args.algo,
                                    "config": str(args.config.relative_to(REPO)
                                                  if args.config.is_relative_to(REPO) else args.config),
                                    "command": "python benchmarks/hallway_memory.py " +
                                    " ".join(argv if argv is not None else sys.argv[1:]),
                                    "seed": args.seed,
                                    "steps": args.steps, "num_envs": args.num_envs,
                                    "target": args.target, "runs": runs}, indent=1))
    print(f"written: {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}")


if __name__ == "__main__":
    main()
