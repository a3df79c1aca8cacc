"""Does a shipped demonstration help? Unity's ``imitation/PushBlock.yaml`` (extrinsic + GAIL 0.01
+ behavioral cloning, from ``unity_builds/Demos/ExpertPushBlock.demo``) against the same file
without its ``gail`` signal and ``behavioral_cloning`` section (extrinsic alone), on the
PushBlock stand-in: agent-steps to the first summary window whose mean return reaches the
target, medians over seeds (``vs_mlagents_learn.one_run``: one run at a time,
``--stop-at-target``).

The only other change to Unity's file, in both variants: ``summary_freq`` is cut to
``--summary-freq`` (Unity's 60000 would measure in steps of 60000), a measurement setting, and
with ``--max-steps`` the budget (and with it the learning-rate schedule) of both.

Read the first-window numbers with care: a window's mean return is over the episodes that
ended in it, and early in a PushBlock run only quick successes end (a failure lasts 1000
decisions), so one lucky episode can put the first windows at the target. Without
``--stop-at-target`` the runs go to ``max_steps`` and ``steps_stays_at_target`` (the first
window after which every window is at the target) is the robust number.
``--tools mlagents-learn unity-rl`` races mlagents-learn too on the same two files (its venv:
``--mlagents-venv``; it reads our demo).

    .venv/bin/python benchmarks/imitation_demo.py [--seeds 3] [--target 4.0] [--stop-at-target]

Prints a table; writes ``benchmarks/results/imitation_pushblock.json`` (``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_mlagents_learn as race  # noqa: E402
from zoo import DEMOS, local_demos_text  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
UNITY_CONFIG = "imitation/PushBlock.yaml"


def variants(text: str, summary_freq: int, max_steps: int | None = None) -> dict[str, str]:
    """{"with demo": Unity's file with local demos, "without demo": no gail, no BC}; both with
    ``summary_freq`` (and ``max_steps``) cut (module doc). Text edits: every other line stays
    Unity's."""
    text = text.replace("summary_freq: 60000", f"summary_freq: {summary_freq}")
    if max_steps is not None:
        text = text.replace("max_steps: 100000", f"max_steps: {max_steps}")
    with_demo = local_demos_text(text)
    lines, out, skip = text.splitlines(), [], None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if skip is not None and (indent > skip or not line.strip()):
            continue
        skip = None
        if line.strip() in ("gail:", "behavioral_cloning:"):
            skip = indent
            continue
        out.append(line)
    return {"with demo": with_demo, "without demo": "\n".join(out) + "\n"}


def window_counts(runs: list[dict], target: float) -> dict:
    """Per variant and tool: summary windows with finished episodes, and those at the target, per
    run (the plain picture behind the biased first-window numbers, module doc)."""
    out: dict = {}
    for run in runs:
        curve = run["behaviors"]["PushBlock"]["curve"]
        out.setdefault(run["scene"], {}).setdefault(run["tool"], []).append(
            {"seed": run["seed"], "windows": len(curve),
             "windows_at_target": sum(v >= target for _, v, _ in curve),
             "last_window": curve[-1][:2] if curve else None})
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs-dir", type=Path,  # Unity's files; the tests keep a copy
                    default=REPO / "tests" / "fixtures" / "mlagents_configs")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", type=float, default=4.0)
    ap.add_argument("--summary-freq", type=int, default=4096)
    ap.add_argument("--max-steps", type=int, help="cut Unity's max_steps (100000) in both")
    ap.add_argument("--num-envs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--stop-at-target", action="store_true")
    ap.add_argument("--tools", nargs="+", default=["unity-rl"], choices=race.TOOLS)
    ap.add_argument("--variants", nargs="+", default=["with demo", "without demo"],
                    choices=["with demo", "without demo"])
    ap.add_argument("--mlagents-venv", type=Path, default=REPO / ".mlagents_learn" / "venv")
    ap.add_argument("--unity-rl-args", default="")
    ap.add_argument("--base-port", type=int, default=18300)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" /
                    "imitation_pushblock.json")
    args = ap.parse_args(argv)
    text = (args.configs_dir / UNITY_CONFIG).read_text()
    runs, port = [], args.base_port
    with tempfile.TemporaryDirectory(prefix="imitation_") as tmp_name:
        tmp = Path(tmp_name)
        for label, config_text in variants(text, args.summary_freq, args.max_steps).items():
            if label not in args.variants:
                continue
            config = tmp / f"PushBlock_{label.replace(' ', '_')}.yaml"
            config.write_text(config_text)
            scene = race.Scene("PushBlock", (UNITY_CONFIG,), {"PushBlock": args.target})
            for i in range(args.seeds):
                for tool in args.tools:
                    run = race.one_run(tool, f"PushBlock {label}", scene, args, config,
                                       args.seed + i, port, tmp)
                    runs.append(run)
                    port += args.num_envs + 10
                    partial = {"runs": runs, "summary": race.summarize(runs)}
                    args.out.parent.mkdir(parents=True, exist_ok=True)
                    args.out.write_text(race.without_machine_paths(
                        json.dumps(partial, indent=1, default=str), (tmp_name, "<tmp>"),
                        (str(DEMOS), "<repo>/unity_builds/Demos"),
                        (str(args.mlagents_venv), "<mlagents-venv>")))
    summary = race.summarize(runs)
    race.print_table(summary, [])
    report = {"measured": __doc__, "config": UNITY_CONFIG, "target": args.target,
              "machine": {"cpus": os.cpu_count(), "loadavg": os.getloadavg()},
              "summary": summary, "windows": window_counts(runs, args.target), "runs": runs}
    args.out.write_text(race.without_machine_paths(
        json.dumps(report, indent=1, default=str), (str(DEMOS), "<repo>/unity_builds/Demos"),
        (str(args.mlagents_venv), "<mlagents-venv>")))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
