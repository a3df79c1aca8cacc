"""Does async SAC keep ML-Agents' update-to-data ratio? Unity's ``sac/3DBall.yaml`` in
``--mode async``, with the actors paused while the learner owes more than
``unity_rl.max_update_backlog`` updates (the default, 20; and 200) and without that bound (null: Ape-X,
actors never wait), alternating, each run ``--steps`` agent-steps.

For each run: agent-steps, gradient updates done, the updates ML-Agents' schedule owes for those
agent-steps (``SACConfig.updates_owed``: ``steps_per_update`` agent-steps per update), their
ratio (issue 18's target: within 10% of the schedule, i.e. >= 0.9), agent-steps/s and the final
mean return. Updates and steps come from the run's last checkpoint (the learner's own counts).
Writes ``benchmarks/results/sac_async_ratio.json``.

    .venv/bin/python benchmarks/sac_async_ratio.py [--steps 30000] [--repeats 2]
        [--num-envs 2] [--num-actors 1] [--backlog 20 200 null]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from unity_rl.config import apply_overrides, load_config  # noqa: E402
from unity_rl.training.trainer import train  # noqa: E402

CONFIG = REPO / "tests" / "fixtures" / "mlagents_configs" / "sac" / "3DBall.yaml"


def run(backlog: int | None, args, port: int, tmp: Path) -> dict:
    cfg = apply_overrides(load_config(CONFIG), env=str(REPO / "unity_builds" / "3DBall.x86_64"),
                          num_envs=args.num_envs, base_port=port, seed=args.seed,
                          no_graphics=True, max_steps=args.steps)
    rl = dataclasses.replace(cfg.unity_rl, mode="async", num_actors=args.num_actors,
                             max_update_backlog=backlog)
    cfg = dataclasses.replace(cfg, unity_rl=rl)
    run_dir = tmp / f"backlog_{backlog}_{port}"
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    result = train(cfg, run_dir, resume=False, console=False)
    seconds = time.perf_counter() - t0
    last = sorted((run_dir / "checkpoints").glob("step-*.pt"),
                  key=lambda p: int(p.stem.split("-")[1]))[-1]
    state = torch.load(last, weights_only=False)
    [(name, behavior)] = list(state["behaviors"].items())
    learner = behavior["learner"]
    sac_cfg = next(iter(cfg.behaviors.values())).hyperparameters
    owed = sac_cfg.updates_owed(int(learner["agent_steps"]), 0)
    return {"max_update_backlog": "null" if backlog is None else backlog,
            "agent_steps": int(learner["agent_steps"]), "updates": int(learner["updates"]),
            "updates_owed_by_schedule": int(owed),
            "realised_fraction": learner["updates"] / owed if owed else float("nan"),
            "agent_steps_per_s": result.agent_steps / seconds, "seconds": seconds,
            "final_mean_return": result.mean_return, "load_before": load}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--num-envs", type=int, default=2)
    ap.add_argument("--num-actors", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backlog", nargs="+", default=["20", "200", "null"],
                    help="unity_rl.max_update_backlog values to alternate ('null': unbounded)")
    ap.add_argument("--base-port", type=int, default=17800)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sac_async_ratio.json")
    args = ap.parse_args(argv)
    variants = [None if n == "null" else int(n) for n in args.backlog]
    rows = []
    port = args.base_port
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for backlog in variants:
                rows.append(run(backlog, args, port, Path(tmp)))
                port += args.num_envs + 2
                r = rows[-1]
                print(f"backlog {r['max_update_backlog']!s:>5}: {r['agent_steps']:>7} agent-steps, "
                      f"{r['updates']:>6} updates of {r['updates_owed_by_schedule']:>6} owed "
                      f"({r['realised_fraction']:.2f}), {r['agent_steps_per_s']:,.0f} agent-steps/s, "
                      f"mean return {r['final_mean_return']:.2f} (load {r['load_before']:.1f})",
                      flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps({
                    "config": "sac/3DBall.yaml (Unity's, unchanged but mode async)",
                    "command": "benchmarks/sac_async_ratio.py " + " ".join(sys.argv[1:]),
                    "steps": args.steps, "num_envs": args.num_envs, "num_actors": args.num_actors,
                    "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                "torch": torch.__version__},
                    "runs": rows}, indent=2))
    print(f"{'backlog':>7} | realised fraction of the schedule (target >= 0.9) | agent-steps/s")
    for backlog in variants:
        label = "null" if backlog is None else backlog
        mine = [r for r in rows if r["max_update_backlog"] == label]
        print(f"{label!s:>7} | " + ", ".join(f"{r['realised_fraction']:.2f}" for r in mine)
              + " | " + ", ".join(f"{r['agent_steps_per_s']:,.0f}" for r in mine))


if __name__ == "__main__":
    main()
