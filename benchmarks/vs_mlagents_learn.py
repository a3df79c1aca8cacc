"""unity-rl vs mlagents-learn 1.1.0: the same stand-in build, the same Unity example config.

For each scene of ``SCENES`` whose stand-in build exists, and each of ``--seeds`` seeds
(``--seed`` + i), the two trainers run one after the other (never at once; the order alternates
per seed), each as its own process group with a fresh ``--results-dir`` in a temp folder, its own
``--base-port``, the same ``--num-envs`` and Unity's own example config from ``--configs-dir``
(unchanged; with ``--max-steps`` a temporary copy with only ``max_steps`` changed, which the
output says). mlagents-learn runs from its own venv (``--mlagents-venv``; never imported here).

Measured per run and behavior, from the run's TensorBoard scalar ``Environment/Cumulative Reward``
(mean return of the episodes finished in one summary window; read wherever the events are,
``<run>/<Behavior>/`` or ``<run>/``; cooperative scenes: ``Environment/Group Cumulative Reward``,
the scene's ``tag``):

- **agent-steps to target**: the step of the first window whose mean >= the scene's target
  (3DBall 95, Basic 0.9). Both write one window per ``summary_freq`` agent-steps, labelled
  with the multiple of ``summary_freq`` (unity-rl closes a window when the first data past that
  multiple arrives at the learner, before the update on it; mlagents-learn when its trainer
  processes the trajectory that passes it).
- **wall s to target**: that event's ``wall_time`` minus the moment the process was started
  (``Popen``), so build start-up and imports count.
- **agent-steps/s**: step of the last window / seconds from process start to it.

Stops at the config's ``max_steps`` or, with ``--stop-at-target``, as soon as every behavior's
target window has been written (the process group gets SIGTERM, then SIGKILL). Prints a table of
medians (runs that never reached the target are left out of the medians and counted), writes
``benchmarks/results/vs_mlagents_learn.json`` (after every run, ``"partial": true`` until the
last) and, when matplotlib is in this venv, one PNG per
scene with both tools' curves against agent-steps and against wall seconds.

    .venv/bin/python benchmarks/vs_mlagents_learn.py [--scenes Basic 3DBall] [--seeds 3]
        [--seed 1] [--num-envs 2] [--max-steps N] [--stop-at-target] [--timeout 1800]
        [--mlagents-venv .mlagents_learn/venv] [--configs-dir ../shared/mlagents_learn/configs]
        [--base-port 17100] [--unity-rl-args "--mode async --num-actors 2"] [--out FILE]
        [--env-args "--standin-pyramid-pushes=10"]   # stand-in options, both tools
    .venv/bin/python benchmarks/vs_mlagents_learn.py --png-from RESULT.json [...]  # PNGs only
        [--tools mlagents-learn unity-rl]   # one tool alone: e.g. one long run at a time
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
TAG = "Environment/Cumulative Reward"
GROUP_TAG = "Environment/Group Cumulative Reward"
TOOLS = ("mlagents-learn", "unity-rl")


@dataclasses.dataclass(frozen=True)
class Scene:
    build: str                  # under unity_builds/, without .x86_64
    configs: tuple[str, ...]    # files in --configs-dir (or configs/... of this repo); merged
    targets: dict               # behavior -> mean return that counts as solved
    env_args: tuple[str, ...] = ()  # stand-in options for the build (both tools: --env-args)
    tools: tuple[str, ...] = TOOLS  # which tools run it (a config of ours: unity-rl alone)
    tag: str = TAG  # the scalar the target is on (cooperative scenes: the group's)


# Add a row when a stand-in exists; rows whose build is missing are skipped with a message.
SCENES = {
    "3DBall": Scene("3DBall", ("3DBall.yaml",), {"3DBall": 95.0}),
    "Basic": Scene("Basic", ("Basic.yaml",), {"Basic": 0.9}),
    # provisional target (GridWorld: +1 goal, -1 wrong square, -0.01 a step): check on the stand-in.
    # The tinted variant (3x40x40 camera only, 3x3, the target shown by the floor tint): the scene
    # all results/vs_mlagents_learn_gridworld_* and docs/behaviors.md were measured on.
    "GridWorld": Scene("GridWorld", ("GridWorld.yaml",), {"GridWorld": 0.8},
                       ("--standin-gridworld-tinted",)),
    "TwoBehaviors": Scene("TwoBehaviors", ("3DBall.yaml", "Basic.yaml"),
                          {"3DBall": 95.0, "Basic": 0.9}),
    # Unity's GridWorld as the default stand-in sends it: camera + GOAL_SIGNAL, 5x5, every step.
    "GridWorldGoal": Scene("GridWorld", ("GridWorld.yaml",), {"GridWorld": 0.8}),
    "Hallway": Scene("Hallway", ("ppo/Hallway.yaml",), {"Hallway": 0.9}),
    # Unity's Sorter_curriculum (num_tiles lessons, progress-based); buffer sensor (20, 23).
    # SorterBlind: the same with every buffer row zero (padding): what dropping it costs
    "Sorter": Scene("Sorter", ("ppo/Sorter_curriculum.yaml",), {"Sorter": 1.2}),
    "SorterBlind": Scene("Sorter", ("ppo/Sorter_curriculum.yaml",), {"Sorter": 1.2},
                         ("--standin-blind",), tools=("unity-rl",)),
    # configs/ppo/sorter_quick.yaml (lesson 0, smaller buffer), with and without the tiles
    "SorterQuick": Scene("Sorter", ("configs/ppo/sorter_quick.yaml",), {"Sorter": 1.2},
                         tools=("unity-rl",)),
    "SorterQuickBlind": Scene("Sorter", ("configs/ppo/sorter_quick.yaml",), {"Sorter": 1.2},
                              ("--standin-blind",), tools=("unity-rl",)),
    # Unity's SAC configs (configs_dir/sac/...), unchanged
    "3DBallSAC": Scene("3DBall", ("sac/3DBall.yaml",), {"3DBall": 95.0}),
    "BasicSAC": Scene("Basic", ("sac/Basic.yaml",), {"Basic": 0.9}),
    "GridWorldSAC": Scene("GridWorld", ("sac/GridWorld.yaml",), {"GridWorld": 0.8}),
    # Unity's Pyramids configs (curiosity, RND), unchanged; the extrinsic-only baseline: Unity's
    # config without its curiosity signal (configs/ppo/pyramids_extrinsic.yaml)
    "Pyramids": Scene("Pyramids", ("ppo/Pyramids.yaml",), {"Pyramids": 1.75}),
    "PyramidsRND": Scene("Pyramids", ("ppo/PyramidsRND.yaml",), {"Pyramids": 1.75}),
    "PyramidsExtrinsic": Scene("Pyramids", ("configs/ppo/pyramids_extrinsic.yaml",),
                               {"Pyramids": 1.75}, tools=("unity-rl",)),
    "HallwaySAC": Scene("Hallway", ("sac/Hallway.yaml",), {"Hallway": 0.9}),
    # the project's shipped 3DBall config (a path under the repository), unity-rl only
    "3DBallShipped": Scene("3DBall", ("configs/ppo/3dball.yaml",), {"3DBall": 95.0},
                           tools=("unity-rl",)),
    # The zoo's other PPO scenes, Unity's configs unchanged. Targets set from a survey
    # (results/zoo_survey.json: both tools, seed 1, 300 s each) where mlagents-learn got within
    # minutes here (3DBallHard 95 at 120k in 198 s, PushBlock 4.73 in its first window, 60k in
    # 183 s; Worm 51 at 150k in 300 s); the others are provisional (docs/zoo.md).
    "3DBallHard": Scene("3DBallHard", ("ppo/3DBallHard.yaml",), {"3DBallHard": 95.0}),
    "Visual3DBall": Scene("Visual3DBall", ("ppo/Visual3DBall.yaml",), {"Visual3DBall": 95.0}),
    "PushBlock": Scene("PushBlock", ("ppo/PushBlock.yaml",), {"PushBlock": 4.5}),
    "WallJump": Scene("WallJump", ("ppo/WallJump.yaml",),
                      {"SmallWallJump": 0.5, "BigWallJump": 0.5}),
    "Worm": Scene("Worm", ("ppo/Worm.yaml",), {"Worm": 50.0}),
    "Crawler": Scene("Crawler", ("ppo/Crawler.yaml",), {"Crawler": 500.0}),
    "Walker": Scene("Walker", ("ppo/Walker.yaml",), {"Walker": 500.0}),
    "GridFoodCollector": Scene("GridFoodCollector", ("ppo/FoodCollector.yaml",),
                               {"GridFoodCollector": 20.0}),
    # Unity's POCA configs (configs_dir/poca/...), unchanged; the target on the group's return
    "DungeonEscape": Scene("DungeonEscape", ("poca/DungeonEscape.yaml",), {"DungeonEscape": 0.8},
                           tag=GROUP_TAG),
    "PushBlockCollab": Scene("PushBlockCollab", ("poca/PushBlockCollab.yaml",),
                             {"PushBlockCollab": 6.0}, tag=GROUP_TAG),
}


# -- parsing helpers (unit-tested) --------------------------------------------------------------

def make_config(configs_dir: Path, names, max_steps: int | None, tmp: Path) -> tuple[Path, bool]:
    """The config file to hand both tools, and whether it differs from Unity's file.

    One file and no override: Unity's file itself. Otherwise a temporary copy whose
    ``behaviors`` are merged from the files and whose ``max_steps`` alone is changed."""
    paths = [REPO / n if n.startswith("configs/") else Path(configs_dir) / n for n in names]
    if len(paths) == 1 and max_steps is None:
        return paths[0], False
    merged: dict = {}
    for p in paths:
        doc = yaml.safe_load(p.read_text())
        for key, value in doc.items():
            if key == "behaviors":
                merged.setdefault("behaviors", {}).update(value)
            else:
                merged.setdefault(key, value)
    if max_steps is not None:
        for behavior in merged["behaviors"].values():
            behavior["max_steps"] = int(max_steps)
    out = Path(tmp) / ("_".join(p.stem for p in paths) + f"_{max_steps or 'orig'}.yaml")
    out.write_text(yaml.safe_dump(merged, sort_keys=False))
    return out, True


def read_curves(run_dir: Path, tag: str = TAG) -> dict[str, list[tuple[int, float, float]]]:
    """Behavior -> [(step, value, wall_time)] of ``tag``, from every event folder under run_dir.

    A folder's behavior is its name relative to run_dir without Unity's ``?team=..`` suffix;
    events directly in run_dir are named ``""`` (unity-rl's single-behavior layout)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = Path(run_dir)
    folders = sorted({f.parent for f in run_dir.rglob("events.out.tfevents*")})
    curves: dict[str, list] = {}
    for folder in folders:
        acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        acc.Reload()
        if tag not in acc.Tags().get("scalars", []):
            continue
        name = "" if folder == run_dir else folder.relative_to(run_dir).as_posix().split("?")[0]
        points = [(int(e.step), float(e.value), float(e.wall_time)) for e in acc.Scalars(tag)]
        curves.setdefault(name, []).extend(points)
    return {k: sorted(v) for k, v in curves.items()}


def match_behaviors(curves: dict, targets: dict) -> dict[str, list]:
    """Curves keyed by the target's behavior name ("" maps to the only target)."""
    out = {}
    for name, points in curves.items():
        if name in targets:
            out[name] = points
        elif name.split("/")[-1] in targets:
            out[name.split("/")[-1]] = points
        elif name == "" and len(targets) == 1:
            out[next(iter(targets))] = points
    return out


def first_at_target(points, target: float, t_start: float) -> dict | None:
    """Step and wall seconds (from t_start) of the first point whose value >= target."""
    for step, value, wall in points:
        if value >= target:
            return {"steps": step, "wall_s": round(wall - t_start, 2), "value": value}
    return None


def stays_at_target(points, target: float) -> int | None:
    """Step of the first window after which every window (it included) is >= target; None when
    the last window is below it."""
    stays = None
    for step, value, _ in points:
        if value < target:
            stays = None
        elif stays is None:
            stays = step
    return stays


def run_metrics(points, target: float, t_start: float) -> dict:
    hit = first_at_target(points, target, t_start)
    out = {"target": target, "reached": hit is not None,
           "steps_to_target": hit and hit["steps"], "wall_s_to_target": hit and hit["wall_s"],
           "steps_stays_at_target": stays_at_target(points, target),
           "windows": len(points), "curve": [[s, round(v, 4), round(w - t_start, 2)]
                                             for s, v, w in points]}
    if points and points[-1][2] > t_start:
        last_step, _, last_wall = points[-1]
        out["last_step"] = last_step
        out["agent_steps_per_s"] = round(last_step / (last_wall - t_start), 1)
    return out


def without_machine_paths(text: str, *pairs: tuple[str, str]) -> str:
    """``text`` with this machine's paths replaced by names (committed results name no machine):
    the given (path, name) pairs first, then the repository, its parent and the interpreter."""
    for path, name in (*pairs, (sys.executable, "python"), (str(REPO), "<repo>"),
                       (str(REPO.parent), "<repo>/..")):
        text = text.replace(path, name)
    return text


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(runs: list[dict]) -> dict:
    """scene -> behavior -> tool -> medians; plus unity-rl / mlagents-learn ratios."""
    out: dict = {}
    for run in runs:
        for behavior, m in run.get("behaviors", {}).items():
            cell = out.setdefault(run["scene"], {}).setdefault(behavior, {}).setdefault(
                run["tool"], {"runs": 0, "reached": 0, "_s": [], "_w": [], "_r": [], "_k": []})
            cell["runs"] += 1
            cell["reached"] += int(m["reached"])
            cell["_s"].append(m["steps_to_target"])
            cell["_w"].append(m["wall_s_to_target"])
            cell["_r"].append(m.get("agent_steps_per_s"))
            cell["_k"].append(m.get("steps_stays_at_target"))
    for behaviors in out.values():
        for tools in behaviors.values():
            for cell in tools.values():
                cell["median_steps_to_target"] = median(cell.pop("_s"))
                cell["median_wall_s_to_target"] = median(cell.pop("_w"))
                cell["median_agent_steps_per_s"] = median(cell.pop("_r"))
                stays = cell.pop("_k")
                cell["median_steps_stays_at_target"] = median(stays)
                cell["range_steps_stays_at_target"] = (
                    [min(v for v in stays if v is not None), max(v for v in stays if v is not None)]
                    if any(v is not None for v in stays) else None)
            ours, theirs = tools.get("unity-rl"), tools.get("mlagents-learn")
            if ours and theirs:
                tools["ratio_unity_rl_over_mlagents_learn"] = {
                    k: (round(ours[k] / theirs[k], 3) if ours[k] and theirs[k] else None)
                    for k in ("median_steps_to_target", "median_wall_s_to_target",
                              "median_agent_steps_per_s")}
    return out


# -- running ------------------------------------------------------------------------------------

def command(tool: str, args, config: Path, build: Path, port: int, run_id: str, results: Path,
            seed: int, env_args: tuple[str, ...] = ()) -> list[str]:
    common = [str(config), "--env", str(build), "--num-envs", str(args.num_envs),
              "--base-port", str(port), "--no-graphics", "--run-id", run_id,
              "--results-dir", str(results), "--force", "--seed", str(seed)]
    last = ["--env-args", *env_args] if env_args else []  # both tools: the rest of the line
    if tool == "mlagents-learn":
        return [str(Path(args.mlagents_venv) / "bin" / "mlagents-learn")] + common + last
    # `unity-rl train` of THIS checkout: `python -m unity_rl` from the repo root (the venv's
    # unity-rl script may point at another checkout's editable install)
    return ([sys.executable, "-m", "unity_rl", "train"] + common
            + shlex.split(args.unity_rl_args) + last)


def env_args_of(scene: Scene, args) -> tuple[str, ...]:
    """The scene's stand-in options, then ``--env-args``'s: what both tools give the build."""
    return tuple(scene.env_args) + tuple(shlex.split(args.env_args))


def stop_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # leader gone: make sure no build of its group stays behind
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return


def one_run(tool, scene_name, scene, args, config, seed, port, tmp: Path) -> dict:
    run_id = f"{scene_name}_{tool}_{seed}"
    results = tmp / tool.replace("-", "_")
    cmd = command(tool, args, config, REPO / "unity_builds" / scene.build, port, run_id,
                  results, seed, env_args_of(scene, args))
    log = tmp / f"{run_id}.log"
    print(f"[{scene_name}] {tool} seed {seed}: {shlex.join(cmd)}", flush=True)
    t_start = time.time()
    with open(log, "w") as fh:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        stopped = None
        while proc.poll() is None:
            time.sleep(2.0)
            if time.time() - t_start > args.timeout:
                stopped = "timeout"
            elif args.stop_at_target:
                curves = match_behaviors(read_curves(results / run_id, scene.tag), scene.targets)
                if all(first_at_target(curves.get(b, []), t, 0) for b, t in scene.targets.items()):
                    stopped = "target"
            if stopped:
                stop_group(proc)
        stop_group(proc)
    curves = match_behaviors(read_curves(results / run_id, scene.tag), scene.targets)
    out = {"scene": scene_name, "tool": tool, "seed": seed, "command": cmd,
           "exit_code": proc.returncode, "stopped": stopped or "max_steps or exit",
           "process_s": round(time.time() - t_start, 1),
           "behaviors": {b: run_metrics(curves.get(b, []), t, t_start)
                         for b, t in scene.targets.items()}}
    if proc.returncode not in (0, None) and stopped is None:
        out["log_tail"] = log.read_text()[-1500:]
        print(f"  exited with code {proc.returncode}; log tail:\n{out['log_tail']}", flush=True)
    for b, m in out["behaviors"].items():
        print(f"  {b}: {m['windows']} windows, to target: {m['steps_to_target']} steps, "
              f"{m['wall_s_to_target']} s; {m.get('agent_steps_per_s')} agent-steps/s", flush=True)
    return out


def plot(scene_name: str, runs: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    behaviors = sorted({b for r in runs for b in r["behaviors"]})
    fig, axes = plt.subplots(len(behaviors), 2, figsize=(11, 3.6 * len(behaviors)), squeeze=False)
    colors = {"mlagents-learn": "tab:blue", "unity-rl": "tab:orange"}
    for row, b in zip(axes, behaviors):
        for r in runs:
            curve = r["behaviors"][b]["curve"]
            if not curve:
                continue
            steps, values, walls = zip(*curve)
            label = f"{r['tool']} seed {r['seed']}"
            style = dict(color=colors[r["tool"]], alpha=0.8, marker="o", markersize=3)
            row[0].plot(steps, values, label=label, **style)
            row[1].plot(walls, values, label=label, **style)
        for ax, xlabel in zip(row, ("agent-steps", "wall seconds from process start")):
            ax.axhline(runs[0]["behaviors"][b]["target"], color="grey", ls=":")
            ax.set(xlabel=xlabel, ylabel="mean return per summary window", title=f"{b}")
        row[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def print_table(summary: dict, notes: list[str]) -> None:
    head = (f"{'scene/behavior':<22}{'tool':<16}{'reached':>8}{'steps to tgt':>13}"
            f"{'wall s':>8}{'steps/s':>9}")
    print("\n" + head)
    fmt = lambda v: "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"  # noqa: E731
    for scene, behaviors in summary.items():
        for b, tools in behaviors.items():
            for tool in TOOLS:
                c = tools.get(tool)
                if c:
                    print(f"{scene + '/' + b:<22}{tool:<16}{c['reached']:>4}/{c['runs']:<3}"
                          f"{fmt(c['median_steps_to_target']):>13}"
                          f"{fmt(c['median_wall_s_to_target']):>8}"
                          f"{fmt(c['median_agent_steps_per_s']):>9}")
            ratio = tools.get("ratio_unity_rl_over_mlagents_learn")
            if ratio:
                r = [ratio[k] for k in ("median_steps_to_target", "median_wall_s_to_target",
                                        "median_agent_steps_per_s")]
                print(f"{'':<22}{'ratio ours/theirs':<24}"
                      + "".join(f"{'-' if v is None else v:>{w}}" for v, w in zip(r, (13, 8, 9))))
    for note in notes:
        print("note:", note)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", nargs="+", default=["3DBall", "Basic"], choices=list(SCENES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="seed of the first run; run i: seed + i")
    ap.add_argument("--num-envs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, help="override max_steps (temporary config copy)")
    ap.add_argument("--stop-at-target", action="store_true")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--mlagents-venv", type=Path, default=REPO / ".mlagents_learn" / "venv")
    ap.add_argument("--configs-dir", type=Path,
                    default=REPO.parent / "shared" / "mlagents_learn" / "configs")
    ap.add_argument("--base-port", type=int, default=17100)
    ap.add_argument("--unity-rl-args", default="", help="extra flags for unity-rl train")
    ap.add_argument("--env-args", default="",
                    help="stand-in options for the build, given to both tools "
                         "(e.g. \"--standin-pyramid-pushes=10\")")
    ap.add_argument("--tools", nargs="+", choices=list(TOOLS), default=list(TOOLS),
                    help="run only these tools (default both)")
    ap.add_argument("--out", type=Path, default=RESULTS / "vs_mlagents_learn.json")
    ap.add_argument("--png-from", type=Path, nargs="+", metavar="RESULT_JSON",
                    help="only draw the PNGs of earlier results (beside each file); runs nothing")
    args = ap.parse_args(argv)
    if args.png_from:
        pngs_from(args.png_from)
        return

    exe = Path(args.mlagents_venv) / "bin" / "mlagents-learn"
    if "mlagents-learn" in args.tools and not exe.exists():
        install = args.configs_dir.resolve().parent / "install.sh"
        sys.exit(f"mlagents-learn not found at {exe}. Make it (about a minute) with:\n"
                 f"    bash {install} {Path(args.mlagents_venv).parent}\n"
                 f"or point --mlagents-venv at an existing one.")
    notes = ["wall s = event wall_time - process start (Popen): build start-up included",
             "agent-steps/s = step of the last summary window / seconds from process start",
             "windows: both tools write one per summary_freq (unity-rl when the first data past it "
             "arrives, before its update)"]
    if args.seeds == 1:
        notes.append("1 seed per tool: the 'medians' are single runs")
    if args.max_steps is not None:
        notes.append(f"max_steps changed to {args.max_steps} in a temporary copy of each config")
    runs, port = [], args.base_port
    with tempfile.TemporaryDirectory(prefix="vs_mlal_") as tmp_name:
        tmp = Path(tmp_name)
        for scene_name in args.scenes:
            scene = SCENES[scene_name]
            if not (REPO / "unity_builds" / f"{scene.build}.x86_64").exists():
                print(f"[{scene_name}] skipped: unity_builds/{scene.build}.x86_64 does not exist")
                continue
            config, changed = make_config(args.configs_dir, scene.configs, args.max_steps, tmp)
            if changed:
                print(f"[{scene_name}] config: {config} (from {', '.join(scene.configs)}; "
                      f"only max_steps changed / behaviors merged)")
            for i in range(args.seeds):
                tools = tuple(t for t in scene.tools if t in args.tools)
                order = tools if i % 2 == 0 else tools[::-1]
                for tool in order:
                    runs.append(one_run(tool, scene_name, scene, args, config, args.seed + i,
                                        port, tmp))
                    port += args.num_envs + 10
                    write_report(args, runs, notes, tmp_name, partial=True)
    summary = write_report(args, runs, notes, tmp_name, partial=False)
    print_table(summary, notes)
    print(f"written: {args.out}")
    write_pngs(args.out, runs)


def write_report(args, runs: list[dict], notes: list[str], tmp_name: str, partial: bool) -> dict:
    """Writes ``args.out`` with the runs so far (after every run, so that a race stopped half
    way keeps what it measured: ``"partial": true`` until the last run); returns the summary."""
    summary = summarize(runs)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "loadavg": os.getloadavg()},
        "settings": {"scenes": args.scenes, "tools": args.tools, "seeds": args.seeds,
                     "first_seed": args.seed,
                     "num_envs": args.num_envs, "max_steps_override": args.max_steps,
                     "stop_at_target": args.stop_at_target, "unity_rl_args": args.unity_rl_args,
                     "configs_dir": str(args.configs_dir),
                     "targets": {s: SCENES[s].targets for s in args.scenes},
                     "configs": {s: SCENES[s].configs for s in args.scenes},
                     "env_args": {s: list(env_args_of(SCENES[s], args)) for s in args.scenes}},
        "measured": __doc__, "notes": notes, "partial": partial, "summary": summary, "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(without_machine_paths(json.dumps(report, indent=1), (tmp_name, "<tmp>"),
                                              (str(args.configs_dir.resolve()), "<configs>")))
    return summary


def write_pngs(result: Path, runs: list[dict]) -> None:
    """One PNG per scene beside ``result`` (``<stem>_<scene>.png``), when matplotlib is here."""
    if importlib.util.find_spec("matplotlib") is None:
        print("matplotlib is not installed in this venv: no PNG (nothing was installed; "
              "pip install matplotlib, then --png-from the JSON)")
        return
    for scene_name in sorted({r["scene"] for r in runs}):
        png = result.with_name(f"{result.stem}_{scene_name}.png")
        plot(scene_name, [r for r in runs if r["scene"] == scene_name], png)
        print(f"written: {png}")


def pngs_from(results: list[Path]) -> None:
    """``--png-from``: the PNGs of results written earlier (their runs keep every curve)."""
    for result in results:
        try:
            runs = json.loads(result.read_text())["runs"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"{result}: not a vs_mlagents_learn.py result ({e})")
        write_pngs(result, runs)


if __name__ == "__main__":
    main()
