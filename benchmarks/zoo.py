"""Unity's example zoo: every example config of mlagents-learn, unchanged, against its stand-in.

For each of Unity's 39 example trainer configs under ``--configs-dir`` (``ppo/``, ``sac/``,
``poca/``, ``imitation/``), in three stages:

1. **loads**: ``unity_rl.config.load_config`` on Unity's file as it is; a refusal is recorded
   verbatim (the ``ConfigError`` message names the file, section and key);
2. **runs**: when it loads and ``unity_builds/<Scene>.x86_64`` exists, ``unity-rl train`` on a
   temporary copy whose ``max_steps`` (and ``summary_freq``) alone are cut to one update's worth
   (PPO: ``buffer_size``; others: twice ``batch_size`` after ``buffer_init_steps``), with
   ``--num-envs 1`` (imitation: ``demo_path`` pointed at ``unity_builds/Demos/``); it counts as run through an update when the process exits 0 and the run
   wrote a ``Losses/`` scalar (written after an update only) for every behavior;
3. **learns** (``--learn``): for scenes with a target in ``TARGETS``, mlagents-learn and
   unity-rl one after the other to the target with Unity's config unchanged, through
   ``vs_mlagents_learn.one_run`` (agent-steps and wall seconds to the first summary window at or
   above the target, medians over ``--seeds``, ``--stop-at-target``; PNG curves beside).

Prints a table; writes ``benchmarks/results/zoo.json`` (``--out``); ``docs/zoo.md`` quotes it.

    .venv/bin/python benchmarks/zoo.py [--only ppo/3DBall.yaml ...] [--no-run]
        [--learn [--seeds 3] [--stop-at-target] [--mlagents-venv .mlagents_learn/venv]]
        [--configs-dir ../shared/mlagents_learn/configs] [--timeout 600]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_mlagents_learn as race  # noqa: E402  (the shared runner: one_run, summarize, plot)

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
LOSSES = "Losses/"

SCENE_OF_BEHAVIOR = {
    "3DBall": "3DBall", "3DBallHard": "3DBallHard", "Visual3DBall": "Visual3DBall",
    "Basic": "Basic", "Crawler": "Crawler", "Walker": "Walker", "Worm": "Worm",
    "GridFoodCollector": "GridFoodCollector", "VisualFoodCollector": "VisualFoodCollector",
    "GridWorld": "GridWorld", "PushBlock": "PushBlock",
    "SmallWallJump": "WallJump", "BigWallJump": "WallJump",
    "Match3SimpleHeuristic": "Match3", "Match3SmartHeuristic": "Match3",
    "Hallway": "Hallway", "Pyramids": "Pyramids", "Sorter": "Sorter",
    "DungeonEscape": "DungeonEscape", "PushBlockCollab": "PushBlockCollab",
    "SoccerTwos": "SoccerTwos", "Striker": "StrikersVsGoalie", "Goalie": "StrikersVsGoalie",
}
"""Behavior name in Unity's configs -> the scene (and stand-in build) it belongs to."""

TARGETS: dict[str, dict[str, float]] = {
    "ppo/3DBall.yaml": {"3DBall": 95.0},
    "ppo/Basic.yaml": {"Basic": 0.9},
    "ppo/GridWorld.yaml": {"GridWorld": 0.8},
    "sac/3DBall.yaml": {"3DBall": 95.0},
    "sac/Basic.yaml": {"Basic": 0.9},
    "ppo/Hallway.yaml": {"Hallway": 0.9},
    # mlagents-learn: 180k agent-steps, 1944 s at load 13-18 (pyramids_curiosity_mlagents_learn_seed1.json)
    "ppo/Pyramids.yaml": {"Pyramids": 1.75},
    # survey (zoo_survey.json, seed 1, 300 s per tool): mlagents-learn 95.7 at 120k in 198 s
    "ppo/3DBallHard.yaml": {"3DBallHard": 95.0},
    # mlagents-learn 4.73 in its first window (60k agent-steps, 183 s)
    "ppo/PushBlock.yaml": {"PushBlock": 4.5},
    # mlagents-learn 51.3 at 150k (its fifth window, 300 s)
    "ppo/Worm.yaml": {"Worm": 50.0},
}
"""Config -> behavior -> mean return of a summary window that counts as solved. A target is set
only where mlagents-learn with Unity's config reaches it within a few minutes here (the figure it
came from is in docs/zoo.md)."""


def zoo_configs(configs_dir: Path) -> list[str]:
    """Unity's example configs, as paths relative to ``configs_dir`` (sorted, stable)."""
    return sorted(p.relative_to(configs_dir).as_posix()
                  for sub in ("ppo", "sac", "poca", "imitation")
                  for p in (configs_dir / sub).glob("*.yaml"))


def scene_of(doc: dict) -> str | None:
    """The scene a config trains (all its behaviors must map to the same one)."""
    scenes = {SCENE_OF_BEHAVIOR.get(name) for name in (doc.get("behaviors") or {})}
    return scenes.pop() if len(scenes) == 1 else None


def load_stage(path: Path) -> dict:
    """{'loads': True} or {'loads': False, 'refusal': the error message, verbatim}."""
    from unity_rl.config import ConfigError, load_config

    try:
        load_config(path)
    except ConfigError as err:
        return {"loads": False, "refusal": str(err)}
    return {"loads": True}


DEMOS = REPO / "unity_builds" / "Demos"
"""The stand-ins' demonstrations, with the file names of Unity's (``ExpertPushBlock.demo``...)."""


def local_demo(path: str, demos: Path = DEMOS) -> str:
    """``path`` (a ``demo_path``), or the file of the same name in ``demos`` if there is one:
    Unity's configs name the demos of its project
    (``Project/Assets/ML-Agents/Examples/<Scene>/Demos/Expert<Scene>.demo``); the stand-ins' are
    in ``unity_builds/Demos/`` under the same names."""
    return str(demos / Path(path).name) if (demos / Path(path).name).exists() else path


def with_local_demos(doc: dict, demos: Path = DEMOS) -> dict:
    """A copy of a loaded config whose ``demo_path``s (GAIL's, behavioral cloning's) are
    ``local_demo``'s."""
    doc = yaml.safe_load(yaml.safe_dump(doc))
    sections = [*(doc.get("behaviors") or {}).values(), doc.get("default_settings") or {}]
    for behavior in sections:
        holders = [*((behavior.get("reward_signals") or {}).values()),
                   behavior.get("behavioral_cloning") or {}]
        for holder in holders:
            if isinstance(holder, dict) and holder.get("demo_path"):
                holder["demo_path"] = local_demo(holder["demo_path"], demos)
    return doc


def local_demos_text(text: str, demos: Path = DEMOS) -> str:
    """A config file's text with every ``demo_path: ...`` value ``local_demo``'s, every other
    byte as it was (Unity's file unchanged but for its demos)."""
    return re.sub(r"(demo_path:[ \t]*)(\S+)",
                  lambda m: m.group(1) + local_demo(m.group(2).strip("'\""), demos), text)


def one_update_copy(doc: dict, tmp: Path, name: str) -> Path:
    """A copy of Unity's config where only max_steps and summary_freq are cut to one update
    (and ``demo_path`` points at the stand-ins' demos, ``with_local_demos``)."""
    doc = with_local_demos(doc)
    defaults = doc.get("default_settings") or {}
    # default_settings serves the build's behaviors that the file does not list (Match3)
    for behavior in [*doc["behaviors"].values(), *([defaults] if defaults else [])]:
        hp = {**(defaults.get("hyperparameters") or {}), **(behavior.get("hyperparameters") or {})}
        trainer = behavior.get("trainer_type", defaults.get("trainer_type", "ppo"))
        if trainer in ("ppo", "poca"):
            steps = int(float(hp.get("buffer_size", 10240)))
        else:
            steps = int(float(hp.get("buffer_init_steps", 0))) + 2 * int(float(hp.get("batch_size", 128)))
        behavior["max_steps"] = steps + 1
        behavior["summary_freq"] = steps
    out = tmp / name.replace("/", "_")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def run_stage(config: Path, scene: str, port: int, tmp: Path, timeout: float,
              extra: tuple[str, ...] = ()) -> dict:
    """``unity-rl train`` through one update; exit code, seconds and whether losses were written."""
    run_id = config.stem
    results = tmp / "results"
    cmd = [sys.executable, "-m", "unity_rl", "train", str(config),
           "--env", str(REPO / "unity_builds" / f"{scene}.x86_64"), "--num-envs", "1",
           "--base-port", str(port), "--no-graphics", "--run-id", run_id,
           "--results-dir", str(results), "--force", "--seed", "1", *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
        code, tail = proc.returncode, (proc.stdout + proc.stderr)[-1200:]
    except subprocess.TimeoutExpired as err:
        code, tail = None, f"timed out after {timeout:.0f} s: {(err.stdout or b'')[-600:]!r}"
    updated = sorted(updated_behaviors(results / run_id))
    out = {"command": shlex.join(cmd), "exit_code": code, "seconds": round(time.time() - t0, 1),
           "behaviors_updated": updated}
    if code != 0:
        out["log_tail"] = tail
    return out


def updated_behaviors(run_dir: Path) -> set[str]:
    """Behaviors whose TensorBoard folder holds a ``Losses/`` scalar (an update happened)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    names = set()
    for folder in sorted({f.parent for f in Path(run_dir).rglob("events.out.tfevents*")}):
        acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        acc.Reload()
        if any(tag.startswith(LOSSES) for tag in acc.Tags().get("scalars", [])):
            names.add(folder.relative_to(run_dir).as_posix().split("?")[0] or "(run)")
    return names


def learn_stage(name: str, scene: str, args, configs_dir: Path, port: int, tmp: Path) -> list:
    """mlagents-learn and unity-rl to the target, seeds alternating the order (vs_mlagents_learn)."""
    # POCA configs: the target is on the group's return (the individual reward is 0 there)
    tag = race.GROUP_TAG if name.startswith("poca/") else race.TAG
    spec = race.Scene(scene, (name,), TARGETS[name], tag=tag)
    config = configs_dir / name
    if "demo_path" in config.read_text():  # imitation: Unity's file with the stand-ins' demos
        config = tmp / f"demos_{name.replace('/', '_')}"
        config.write_text(local_demos_text((configs_dir / name).read_text()))
    runs = []
    for i in range(args.seeds):
        for tool in (race.TOOLS if i % 2 == 0 else race.TOOLS[::-1]):
            runs.append(race.one_run(tool, Path(name).stem, spec, args, config,
                                     args.seed + i, port, tmp))
            port += args.num_envs + 10
    return runs


def print_table(rows: list[dict]) -> None:
    print(f"\n{'config':<34}{'scene':<20}{'loads':<7}{'update':<8}{'s':>6}  refusal / note")
    for r in rows:
        run = r.get("run") or {}
        update = "-" if not run else ("yes" if run["exit_code"] == 0 and run["behaviors_updated"]
                                      else "NO")
        note = r.get("refusal") or r.get("note") or ""
        print(f"{r['config']:<34}{r['scene'] or '?':<20}{'yes' if r['loads'] else 'no':<7}"
              f"{update:<8}{run.get('seconds', ''):>6}  {note[:160]}")
    loads = sum(r["loads"] for r in rows)
    ran = sum(1 for r in rows if (r.get("run") or {}).get("exit_code") == 0
              and r["run"]["behaviors_updated"])
    print(f"\n{loads} of {len(rows)} configs load; {ran} ran through an update on a stand-in")


def markdown_table(rows: list[dict]) -> str:
    """The rows as docs/zoo.md's table (``python benchmarks/zoo.py --markdown-from zoo.json``)."""
    out = ["| config | stand-in | loads | one update | s | refusal (verbatim, shortened) |",
           "|---|---|---|---|---:|---|"]
    for r in rows:
        run = r.get("run") or {}
        update = "-" if not run else ("yes" if run["exit_code"] == 0 and run["behaviors_updated"]
                                      else "NO")
        note = (r.get("refusal") or r.get("note") or "").split(": section ", 1)[-1]
        note = ("section " + note if r.get("refusal") else note).replace("|", "/")
        note = note if len(note) <= 150 else note[:147] + "..."
        out.append(f"| `{r['config']}` | {r['scene'] or '?'} | {'yes' if r['loads'] else 'no'} "
                   f"| {update} | {run.get('seconds', '')} | {note} |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs-dir", type=Path,
                    default=REPO.parent / "shared" / "mlagents_learn" / "configs")
    ap.add_argument("--only", nargs="+", help="configs (relative to --configs-dir) to check")
    ap.add_argument("--no-run", action="store_true", help="stage 1 only (loading)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--base-port", type=int, default=17500)
    ap.add_argument("--learn", action="store_true", help="stage 3 for configs with a target")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--num-envs", type=int, default=2, help="builds per learning run")
    ap.add_argument("--stop-at-target", action="store_true")
    ap.add_argument("--mlagents-venv", type=Path, default=REPO / ".mlagents_learn" / "venv")
    ap.add_argument("--unity-rl-args", default="")
    ap.add_argument("--out", type=Path, default=RESULTS / "zoo.json")
    ap.add_argument("--markdown-from", type=Path,
                    help="print the docs/zoo.md table of a results JSON and stop")
    args = ap.parse_args(argv)
    if args.markdown_from is not None:
        print(markdown_table(json.loads(args.markdown_from.read_text())["rows"]))
        return
    configs_dir = args.configs_dir.resolve()
    if not (configs_dir / "ppo").is_dir():
        sys.exit(f"{configs_dir} holds no ppo/ folder of Unity's example configs: point "
                 f"--configs-dir at ../shared/mlagents_learn/configs (or a copy of it)")
    names = args.only or zoo_configs(configs_dir)
    rows, learn_runs, port = [], [], args.base_port
    with tempfile.TemporaryDirectory(prefix="zoo_") as tmp_name:
        tmp = Path(tmp_name)
        for name in names:
            doc = yaml.safe_load((configs_dir / name).read_text())
            scene = scene_of(doc)
            row = {"config": name, "scene": scene, **load_stage(configs_dir / name)}
            build = REPO / "unity_builds" / f"{scene}.x86_64"
            if not build.exists():
                row["note"] = f"no stand-in unity_builds/{scene}.x86_64"
            elif row["loads"] and not args.no_run:
                print(f"[{name}] one update on {build.name} ...", flush=True)
                row["run"] = run_stage(one_update_copy(doc, tmp, name), scene, port, tmp,
                                       args.timeout, tuple(shlex.split(args.unity_rl_args)))
                port += 10
            rows.append(row)
            if args.learn and row["loads"] and name in TARGETS and build.exists():
                learn_runs += learn_stage(name, scene, args, configs_dir, port, tmp)
                port += 100
    print_table(rows)
    report = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "loadavg": os.getloadavg()},
              "measured": __doc__, "configs_dir": "../shared/mlagents_learn/configs",
              "rows": rows}
    if learn_runs:
        report["learn"] = {"targets": TARGETS, "summary": race.summarize(learn_runs),
                           "runs": learn_runs}
        race.print_table(report["learn"]["summary"], [])
    text = race.without_machine_paths(json.dumps(report, indent=1, default=str),
                                      (str(configs_dir), "<configs>"), (tmp_name, "<tmp>"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
