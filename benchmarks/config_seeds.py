"""Several configs of one scene under unity-rl, many seeds each: which config learns sooner and
stays learned (issue 17 item 5: the shipped 3DBall config against Unity's own).

For each ``--scenes`` row of ``vs_mlagents_learn.SCENES`` and each of ``--seeds`` seeds, one
``unity-rl train`` run to the config's ``max_steps`` (no ``--stop-at-target``: the second figure
needs the whole run), through ``vs_mlagents_learn.one_run``. Per run, from the TensorBoard scalar
``Environment/Cumulative Reward`` (one window per ``summary_freq`` agent-steps):

- **first window >= target**: the agent-step of the first window at or above the target;
- **stays >= target from**: the agent-step of the first window after which every window is at or
  above the target (None: the last window is below it).

Per config: median and range of both over the seeds. These are agent-step figures, independent
of the machine's speed, so ``--parallel N`` may run N trainings at once (distinct ports); wall
seconds are then not comparable and are not reported. Prints a table and writes JSON
(``--out``, default ``benchmarks/results/config_seeds.json``), updated after every run.

    .venv/bin/python benchmarks/config_seeds.py --scenes 3DBall 3DBallShipped --seeds 5 \
        [--parallel 1] [--num-envs 2] [--configs-dir ../shared/mlagents_learn/configs]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_mlagents_learn as race  # noqa: E402  (one_run, make_config, SCENES)

REPO = race.REPO


def spread(values: list) -> dict:
    """Median and [min, max] of the values that are not None, and how many were None."""
    got = [v for v in values if v is not None]
    return {"median": statistics.median(got) if got else None,
            "range": [min(got), max(got)] if got else None,
            "missing": len(values) - len(got)}


def summarize(runs: list[dict]) -> dict:
    """scene -> behavior -> {first: spread, stays: spread, per_seed: [...]}."""
    out: dict = {}
    for run in runs:
        for behavior, m in run["behaviors"].items():
            cell = out.setdefault(run["scene"], {}).setdefault(behavior, {"_f": [], "_s": [], "per_seed": []})
            cell["_f"].append(m["steps_to_target"])
            cell["_s"].append(m["steps_stays_at_target"])
            cell["per_seed"].append({"seed": run["seed"], "first": m["steps_to_target"],
                                     "stays": m["steps_stays_at_target"],
                                     "last_step": m.get("last_step")})
    for behaviors in out.values():
        for cell in behaviors.values():
            cell["first"] = spread(cell.pop("_f"))
            cell["stays"] = spread(cell.pop("_s"))
            cell["per_seed"].sort(key=lambda r: r["seed"])
    return out


def print_table(summary: dict) -> None:
    k = lambda v: "-" if v is None else f"{v / 1000:.0f}k"  # noqa: E731
    rng = lambda r: "-" if r is None else f"{k(r[0])}-{k(r[1])}"  # noqa: E731
    print(f"\n{'config/behavior':<26}{'first >= target':>24}{'stays >= target from':>30}")
    for scene, behaviors in summary.items():
        for b, c in behaviors.items():
            f, s = c["first"], c["stays"]
            print(f"{scene + '/' + b:<26}{k(f['median']):>8} ({rng(f['range'])}, {f['missing']} never)"
                  f"{k(s['median']):>12} ({rng(s['range'])}, {s['missing']} never)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", nargs="*", default=["3DBall", "3DBallShipped"], choices=list(race.SCENES))
    ap.add_argument("--configs", nargs="*", default=[], metavar="NAME=FILE",
                    help="more rows: a config FILE (under --configs-dir, or configs/... of this repo) "
                         "on the 3DBall stand-in, target 95, named NAME")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1, help="seed of the first run; run i: seed + i")
    ap.add_argument("--num-envs", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=1, help="trainings at once (agent-step figures only)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    ap.add_argument("--configs-dir", type=Path, default=REPO.parent / "shared" / "mlagents_learn" / "configs")
    ap.add_argument("--base-port", type=int, default=17400)
    ap.add_argument("--unity-rl-args", default="", help="extra flags for unity-rl train")
    ap.add_argument("--out", type=Path, default=race.RESULTS / "config_seeds.json")
    args = ap.parse_args(argv)
    args.stop_at_target, args.max_steps = False, None  # one_run reads these
    tmp = Path(tempfile.mkdtemp(prefix="config_seeds_"))
    jobs = []
    rows = {name: race.SCENES[name] for name in args.scenes}
    for spec in args.configs:
        name, _, file = spec.partition("=")
        rows[name] = race.Scene("3DBall", (file,), {"3DBall": 95.0}, tools=("unity-rl",))
    for scene_name, scene in rows.items():
        config, _ = race.make_config(args.configs_dir, scene.configs, None, tmp)
        for i in range(args.seeds):
            jobs.append((scene_name, scene, config, args.seed + i))
    runs: list[dict] = []
    t0 = time.time()

    def write() -> None:
        doc = {"command": " ".join(["benchmarks/config_seeds.py", *(argv or sys.argv[1:])]),
               "machine": {"platform": platform.platform(), "python": platform.python_version()},
               "note": "agent-step figures; runs may have run in parallel, so no wall times",
               "elapsed_s": round(time.time() - t0, 1), "summary": summarize(runs),
               "runs": [{k: v for k, v in r.items() if k != "command"} for r in runs]}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(race.without_machine_paths(json.dumps(doc, indent=1)))

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = [pool.submit(race.one_run, "unity-rl", name, scene, args, config, seed,
                               args.base_port + 20 * j, tmp)
                   for j, (name, scene, config, seed) in enumerate(jobs)]
        for fut in concurrent.futures.as_completed(futures):
            runs.append(fut.result())
            write()
    write()
    print_table(summarize(runs))
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
