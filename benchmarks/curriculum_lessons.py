"""Do lessons advance at the same agent-steps under unity-rl as under mlagents-learn? Unity's
``ppo/WallJump_curriculum.yaml`` (progress-based lessons of ``big_wall_height`` and
``small_wall_height``, on behaviors BigWallJump and SmallWallJump) with only ``max_steps`` cut
(``--max-steps``, both behaviors; the thresholds 0.1, 0.3, 0.5 are fractions of it), one build,
each tool one after the other on the WallJump stand-in.

The stand-in logs every environment parameter it receives and, after each batch of them, its
own counts (``environment parameters received at: academy step N; decisions sent: <behavior>
n, ...``): the same measuring stick for both tools. For each parameter change the table shows
the decisions the stand-in had sent to the lesson's behavior when the new value arrived, beside
threshold x max_steps (where ML-Agents' ``need_increment`` first allows it; its
``min_lesson_length`` of 100 episodes, counted afresh after every change of any lesson, binds
later than that at small ``--max-steps``). Writes ``benchmarks/results/curriculum_lessons.json``.

    .venv/bin/python benchmarks/curriculum_lessons.py [--max-steps 30000] [--seed 1]
        [--mlagents-venv .mlagents_learn/venv] [--configs-dir ../shared/mlagents_learn/configs]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_mlagents_learn as race  # noqa: E402  (make_config, command, stop_group)

REPO = race.REPO
CONFIG = "ppo/WallJump_curriculum.yaml"
PARAMETER = re.compile(r"environment parameter: (\w+) (.*)")
RECEIVED = re.compile(r"environment parameters received at: academy step (\d+); "
                      r"decisions sent: (.*)")


def lesson_changes(log: str) -> list[dict]:
    """Each parameter's value changes in a stand-in log, with the build's counts when it came:
    [{"parameter", "value", "academy_step", "decisions": {behavior: n}}] (the first value of
    each parameter included)."""
    current: dict[str, str] = {}
    pending: list[tuple[str, str]] = []
    changes = []
    for line in log.splitlines():
        m = PARAMETER.search(line)
        if m:
            pending.append((m.group(1), m.group(2)))
            continue
        m = RECEIVED.search(line)
        if m and pending:
            decisions = {}
            if m.group(2) != "none":
                for part in m.group(2).split(", "):
                    name, n = part.rsplit(" ", 1)
                    decisions[name.split("?")[0]] = int(n)
            for name, value in pending:
                if current.get(name) != value:
                    current[name] = value
                    changes.append({"parameter": name, "value": value,
                                    "academy_step": int(m.group(1)), "decisions": decisions})
            pending = []
    return changes


def thresholds(config: Path) -> dict[str, list[tuple[str, float]]]:
    """parameter -> [(behavior, threshold)] of its lessons' progress criteria, in order."""
    import yaml
    doc = yaml.safe_load(config.read_text())
    out = {}
    for name, spec in doc["environment_parameters"].items():
        out[name] = [(lesson["completion_criteria"]["behavior"],
                      float(lesson["completion_criteria"]["threshold"]))
                     for lesson in spec["curriculum"] if "completion_criteria" in lesson]
    return out


def run_tool(tool: str, args, config: Path, port: int, tmp: Path) -> dict:
    run_id = f"lessons_{tool}"
    results = tmp / tool.replace("-", "_")
    cmd = race.command(tool, args, config, REPO / "unity_builds" / "WallJump", port, run_id,
                       results, args.seed)
    print(f"{tool}: {' '.join(cmd)}", flush=True)
    t0 = time.time()
    with open(tmp / f"{run_id}.out", "w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            race.stop_group(proc)
    logs = sorted((results / run_id).rglob("Player-0.log"))
    if not logs:
        raise SystemExit(f"{tool}: no build log under {results / run_id}; see {fh.name}")
    return {"tool": tool, "exit_code": proc.returncode, "seconds": round(time.time() - t0, 1),
            "changes": lesson_changes(logs[0].read_text(errors="replace"))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-steps", type=int, default=30_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--base-port", type=int, default=17300)
    ap.add_argument("--mlagents-venv", type=Path, default=REPO / ".mlagents_learn" / "venv")
    ap.add_argument("--configs-dir", type=Path,
                    default=REPO.parent / "shared" / "mlagents_learn" / "configs")
    ap.add_argument("--tools", nargs="+", default=list(race.TOOLS), choices=list(race.TOOLS))
    ap.add_argument("--out", type=Path,
                    default=REPO / "benchmarks" / "results" / "curriculum_lessons.json")
    args = ap.parse_args(argv)
    args.num_envs, args.unity_rl_args = 1, ""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        config, _ = race.make_config(args.configs_dir, (CONFIG,), args.max_steps, Path(tmp))
        expected = thresholds(config)
        for i, tool in enumerate(args.tools):
            runs.append(run_tool(tool, args, config, args.base_port + 10 * i, Path(tmp)))
    rows = []
    for name, lessons in expected.items():
        per_tool = {r["tool"]: [c for c in r["changes"] if c["parameter"] == name][1:]
                    for r in runs}
        for k, (behavior, threshold) in enumerate(lessons):
            row = {"parameter": name, "lesson": k + 1, "behavior": behavior,
                   "threshold_steps": threshold * args.max_steps}
            for tool, changes in per_tool.items():
                row[tool] = changes[k]["decisions"].get(behavior) if k < len(changes) else None
                row[f"{tool} value"] = changes[k]["value"] if k < len(changes) else None
            rows.append(row)
    print(f"\n{'parameter':<18} {'lesson':>6} {'threshold x max_steps':>22} "
          + " ".join(f"{t + ' (decisions)':>28}" for t in args.tools))
    for row in rows:
        print(f"{row['parameter']:<18} {row['lesson']:>6} {row['threshold_steps']:>22,.0f} "
              + " ".join(f"{row[t] if row[t] is not None else '-':>28}" for t in args.tools))
    print("(a lesson also waits for min_lesson_length episodes of its behavior since the last "
          "change of any lesson; '-': not reached before the run ended)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(race.without_machine_paths(json.dumps({
        "config": f"{CONFIG} (Unity's; max_steps {args.max_steps})", "seed": args.seed,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "lessons": rows, "runs": runs}, indent=2)))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
