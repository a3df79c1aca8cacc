"""Seeing vs blind on the Sorter stand-in: a table from ``vs_mlagents_learn.py`` result files.

Each file holds one or more unity-rl runs of ``SorterQuick`` (the policy sees the tiles through
the buffer sensor) or ``SorterQuickBlind`` (``--standin-blind``: every buffer row zero), as
written by, for example::

    .venv/bin/python benchmarks/vs_mlagents_learn.py --scenes SorterQuick --seeds 1 --seed 1 \\
        --num-envs 1 --stop-at-target --tools unity-rl --max-steps 500000 \\
        --out benchmarks/results/sorter_quick_500k_SorterQuick_s1.json

This prints, per run, the agent-steps and wall seconds to the target (a summary window's mean
return >= 1.2), the agent-steps/s, and the mean of the summary windows in 100k-step bands
(a window's mean is noisy: it averages the few dozen episodes that ended in it); then per scene
the median over seeds; "last 50k" is the mean of the windows in the run's last 50k agent-steps
(a run stopped at the target ends there). At ``num_tiles`` 2 a policy that cannot see the tiles earns at most
0.75 an episode in expectation (the wrong tile first in half the two-tile episodes); one that
sees them, about 1.5 (``tests/standin/test_sorter.py::test_seeing_the_tiles_is_worth_it``).

    .venv/bin/python benchmarks/sorter_seeing_vs_blind.py FILE.json ... [--out SUMMARY.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

BANDS = [(0, 100_000), (100_001, 200_000), (200_001, 300_000), (300_001, 400_000),
         (400_001, 500_000)]


def summarise(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        for run in json.loads(path.read_text())["runs"]:
            b = run["behaviors"]["Sorter"]
            curve = b["curve"]
            bands = {}
            for lo, hi in BANDS:
                values = [v for step, v, _ in curve if lo <= step <= hi]
                bands[f"{lo // 1000}k-{hi // 1000}k"] = (round(statistics.mean(values), 3)
                                                       if values else None)
            last = [v for step, v, _ in curve if step > b["last_step"] - 50_000]
            rows.append({"file": path.name, "scene": run["scene"], "seed": run["seed"],
                         "reached": b["reached"], "steps_to_target": b["steps_to_target"],
                         "wall_s_to_target": b["wall_s_to_target"],
                         "last_step": b["last_step"], "agent_steps_per_s": b["agent_steps_per_s"],
                         "last_50k_mean": round(statistics.mean(last), 3) if last else None,
                         "band_means": bands})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = sorted(summarise(args.files), key=lambda r: (r["scene"], r["seed"]))
    bands = list(rows[0]["band_means"]) if rows else []
    print(f"{'scene':<18}{'seed':>5}{'to target':>11}{'wall s':>8}{'steps/s':>9}{'last':>9}"
          f"{'last 50k':>9}" + "".join(f"{b:>13}" for b in bands))
    for r in rows:
        to = f"{r['steps_to_target']:,}" if r["reached"] else "-"
        wall = f"{r['wall_s_to_target']:.0f}" if r["reached"] else "-"
        means = "".join(f"{'-' if v is None else f'{v:.2f}':>13}" for v in r["band_means"].values())
        print(f"{r['scene']:<18}{r['seed']:>5}{to:>11}{wall:>8}{r['agent_steps_per_s']:>9.0f}"
              f"{r['last_step'] // 1000:>8}k{r['last_50k_mean']:>9.2f}" + means)
    medians = {}
    for scene in sorted({r["scene"] for r in rows}):
        runs = [r for r in rows if r["scene"] == scene]
        reached = [r for r in runs if r["reached"]]
        medians[scene] = {
            "runs": len(runs), "reached": len(reached),
            "median_steps_to_target": (statistics.median(r["steps_to_target"] for r in reached)
                                       if reached else None),
            "median_wall_s_to_target": (statistics.median(r["wall_s_to_target"] for r in reached)
                                        if reached else None)}
        print(f"{scene}: reached {len(reached)}/{len(runs)}, median agent-steps to target "
              f"{medians[scene]['median_steps_to_target']}, median wall s "
              f"{medians[scene]['median_wall_s_to_target']}")
    if args.out:
        args.out.write_text(json.dumps({"runs": rows, "medians": medians}, indent=1) + "\n")


if __name__ == "__main__":
    main()
