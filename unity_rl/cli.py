"""The ``unity-rl`` command, in mlagents-learn's habits.

    unity-rl train [CONFIG.yaml] --env PATH [--run-id ID] [--resume | --force] ...
    unity-rl evaluate --run-id ID [--episodes N]      (or --checkpoint PATH)
    unity-rl export --run-id ID [--output PATH]
    unity-rl record-demo --run-id ID --output Demos/Expert.demo [--episodes N]
    unity-rl random --env PATH [--num-envs N] [--steps N]

Thin on purpose: parse the flags, load the YAML and apply the flags over it (flags win; a flag
not given leaves the YAML's value), prepare the run folder, call into the package.

Errors a user can fix (a bad config key, a wrong --env path, a taken port, an existing run
folder, no checkpoint to resume) print one line ``unity-rl: error: ...`` on stderr and exit 1,
without a traceback. Ctrl-C and SIGTERM stop the same way: the trainer writes a final checkpoint
and closes every build; the command then exits 130 (Ctrl-C) or 143 (SIGTERM).

Size (over ~400 lines on purpose): the flag definitions of four commands in mlagents-learn's
habits plus their thin handlers; the work lives in trainer, evaluate and export.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from unity_rl.config.dump import CONFIG_FILE
from unity_rl.errors import UserError
from unity_rl.interrupts import exit_status, sigterm_raises

DEFAULT_CONFIG = "configs/ppo/3dball.yaml"
DEFAULT_ENV = "unity_builds/3DBall"
RUN_MARKERS = (CONFIG_FILE, "checkpoints")
"""What makes a folder a unity-rl run folder (and safe for --force to wipe)."""



class CliError(UserError):
    """A problem the user can fix; printed as one line, exit code 1."""


# ----------------------------------------------------------------------------------------------
# Locating the bundled config and stand-in build
# ----------------------------------------------------------------------------------------------

def repo_root() -> Path:
    """The checkout this package runs from (its parent folder)."""
    return Path(__file__).resolve().parent.parent


def _bases() -> list[Path]:
    return list(dict.fromkeys([repo_root(), Path.cwd()]))


def default_config_path() -> Path:
    """configs/ppo/3dball.yaml next to the package, else in the current folder."""
    for base in _bases():
        candidate = base / DEFAULT_CONFIG
        if candidate.is_file():
            return candidate
    raise CliError(f"No CONFIG given and the default '{DEFAULT_CONFIG}' was not found (looked in "
                   f"{', '.join(str(b) for b in _bases())}). Pass a trainer config YAML.")


def default_env_path() -> str:
    """The bundled 3DBall stand-in build, next to the package or in the current folder."""
    from unity_rl.envs.launcher import BuildLaunchError, resolve_env_path

    for base in _bases():
        try:
            return resolve_env_path(str(base / DEFAULT_ENV))
        except BuildLaunchError:
            continue
    raise CliError(f"No --env given and the bundled stand-in '{DEFAULT_ENV}' was not found "
                   f"(looked in {', '.join(str(b) for b in _bases())}). Pass --env with the "
                   f"path to your Unity build.")


# ----------------------------------------------------------------------------------------------
# Flags
# ----------------------------------------------------------------------------------------------

def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, max_help_position=38, width=120)


def _add_policy_source(p: argparse.ArgumentParser, verb: str) -> None:
    """--run-id | --checkpoint (one required) and --results-dir, for evaluate and export."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-id", metavar="ID", help=f"{verb} the latest checkpoint of this run")
    source.add_argument("--checkpoint", metavar="PATH", help=f"{verb} this checkpoint file")
    p.add_argument("--results-dir", metavar="DIR", default="results",
                   help="folder that holds run folders (default results)")


def _add_build_flags(p: argparse.ArgumentParser,
                     env_default: str = "the bundled 3DBall stand-in") -> None:
    """One flag per launch setting (--env, --num-envs, --base-port, --time-scale, ...), shared by
    train, evaluate and random: generated from ``LaunchSettings`` (names, help, defaults)."""
    from unity_rl.envs.settings import add_launch_arguments

    add_launch_arguments(p, env_default)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unity-rl", formatter_class=_formatter,
        description="Train, evaluate and export policies for Unity ML-Agents builds.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    train = sub.add_parser(
        "train", formatter_class=_formatter, help="train a policy (as mlagents-learn)",
        description="Train a policy on a Unity build. Flags override the config file; results "
                    "go to RESULTS_DIR/RUN_ID (TensorBoard events, progress.csv, checkpoints, "
                    "the final .onnx).")
    train.add_argument("config", nargs="?", metavar="CONFIG.yaml",
                       help=f"trainer config in ML-Agents' YAML format (default {DEFAULT_CONFIG}; "
                            f"with --resume, the run's own {CONFIG_FILE})")
    _add_build_flags(train)
    train.add_argument("--run-id", metavar="ID", help="name of the run folder under --results-dir (default ppo)")
    group = train.add_mutually_exclusive_group()
    group.add_argument("--resume", action="store_true", default=None,
                       help="continue the run from its latest checkpoint (model, optimiser, steps, RNG)")
    group.add_argument("--force", action="store_true", default=None,
                       help="delete an existing run folder of the same --run-id and start afresh")
    train.add_argument("--results-dir", metavar="DIR", help="folder that holds run folders (default results)")
    train.add_argument("--max-steps", type=int, metavar="N", help="agent-steps to train for (overrides max_steps)")
    train.add_argument("--initialize-from", metavar="RUN_ID",
                       help="start from the latest checkpoint of that run (under --results-dir), "
                            "with fresh step counts")
    train.add_argument("--inference", action="store_true", default=None,
                       help="run the policies of --resume / --initialize-from without training")
    train.add_argument("--behavior", metavar="NAME",
                       help="train only this behavior (default: every behavior of the build, "
                            "each with its config section); the others' agents get zero actions")
    train.add_argument("--mode", choices=("sync", "async"),
                       help="sync: learner waits for every actor; async: actors never wait (default sync)")
    train.add_argument("--num-actors", type=int, metavar="K",
                       help="actor processes; the --num-envs builds are split over them (default 1)")
    train.add_argument("--backend", choices=("local", "ray"), help="where actors run: local processes or Ray (default local)")
    train.add_argument("--ray-address", metavar="ADDR",
                       help="address of an existing Ray cluster (with --backend ray; default "
                            "$RAY_ADDRESS, else a local Ray is started)")
    train.add_argument("--max-actor-restarts", type=int, metavar="N",
                       help="re-creations of a dead or hung actor allowed per actor, -1 unlimited "
                            "(default: the builds' restart quota)")
    train.add_argument("--num-cpus-per-actor", type=float, metavar="N",
                       help="with --backend ray: CPUs each actor reserves (default 1)")
    train.add_argument("--torch-device", metavar="D", help="learner device: cpu, cuda, cuda:N or mps (default: cuda if available)")
    train.add_argument("--debug", action="store_true", default=None, help="verbose logging")
    train.set_defaults(handler=cmd_train)

    evaluate = sub.add_parser(
        "evaluate", formatter_class=_formatter, help="run a trained policy deterministically",
        description="Run a trained policy deterministically on a build and print its mean return. "
                    "The builds start with the run's configuration.yaml (its env_settings and "
                    "engine_settings); the launch flags given override it.")
    _add_policy_source(evaluate, "evaluate")
    evaluate.add_argument("--episodes", type=int, default=10, metavar="N",
                          help="finished episodes to average over (default 10)")
    _add_build_flags(evaluate, env_default="the run's build, else the bundled 3DBall stand-in")
    evaluate.add_argument("--behavior", metavar="NAME",
                          help="behavior to control (needed when the run trained several)")
    evaluate.set_defaults(handler=cmd_evaluate)

    record = sub.add_parser(
        "record-demo", formatter_class=_formatter,
        help="play a trained policy and record a Unity .demo file",
        description="Play a trained policy deterministically on a build and record the first "
                    "agent's episodes as a Unity demonstration (.demo), as Unity's Demonstration "
                    "Recorder does, for behavioral_cloning and GAIL's demo_path. Stand-in scenes "
                    "can also record their built-in heuristic: python -m unity_rl.standin.record.")
    _add_policy_source(record, "play")
    record.add_argument("--output", required=True, metavar="PATH", help=".demo file to write")
    record.add_argument("--episodes", type=int, default=10, metavar="N",
                        help="episodes of the first agent to record (default 10)")
    record.add_argument("--name", metavar="NAME",
                        help="demonstration name in the file (Unity's: at most 16 characters; "
                             "default: the file name)")
    _add_build_flags(record, env_default="the run's build, else the bundled 3DBall stand-in")
    record.add_argument("--behavior", metavar="NAME",
                        help="behavior to play (needed when the run trained several)")
    record.set_defaults(handler=cmd_record_demo)

    export = sub.add_parser(
        "export", formatter_class=_formatter, help="write the ONNX model of a run for Unity",
        description="Export the latest checkpoint of a run as an ONNX model for Unity's inference.")
    _add_policy_source(export, "export")
    export.add_argument("--output", metavar="PATH", help="ONNX file to write (default RUN_DIR/<behavior>.onnx)")
    export.add_argument("--behavior", metavar="NAME",
                        help="behavior to export (default: every behavior of the checkpoint)")
    export.set_defaults(handler=cmd_export)

    rand = sub.add_parser(
        "random", formatter_class=_formatter, help="drive a build with random actions (smoke test)",
        description="Drive a build with random actions through UnityVecEnv and print agent-steps/s "
                    "and episode returns.")
    _add_build_flags(rand)
    rand.add_argument("--steps", type=int, default=5000, metavar="N", help="agent-steps to run (default 5000)")
    rand.add_argument("--behavior", metavar="NAME", help="behavior to drive (default: the only one)")
    rand.set_defaults(handler=cmd_random)
    return parser


def _version() -> str:
    from unity_rl import __version__
    return f"unity-rl {__version__}"


# ----------------------------------------------------------------------------------------------
# train
# ----------------------------------------------------------------------------------------------

def run_dir_state(run_dir: Path) -> tuple[bool, bool]:
    """(has a run in it: config or checkpoint, has a loadable checkpoint)."""
    from unity_rl.checkpoint import CheckpointManager

    has_checkpoint = CheckpointManager(run_dir).latest() is not None
    has_run = has_checkpoint or (run_dir / CONFIG_FILE).is_file()
    return has_run, has_checkpoint


def prepare_run_dir(run_dir: Path, *, resume: bool, force: bool) -> None:
    """Applies mlagents-learn's rules for an existing run folder; raises CliError."""
    has_run, has_checkpoint = run_dir_state(run_dir)
    run_id = run_dir.name
    if resume:
        if not has_checkpoint:
            raise CliError(f"Cannot --resume run '{run_id}': there is no checkpoint in "
                           f"'{run_dir / 'checkpoints'}'. Start it without --resume (add --force "
                           f"to overwrite what is in '{run_dir}').")
        return
    if has_run and not force:
        raise CliError(f"Run '{run_id}' already exists in '{run_dir}'. Pass --resume to continue "
                       f"it, or --force to overwrite it (or choose another --run-id).")
    if force and run_dir.exists():
        entries = list(run_dir.iterdir()) if run_dir.is_dir() else [run_dir]
        if entries and not any((run_dir / m).exists() for m in RUN_MARKERS):
            raise CliError(f"--force would delete '{run_dir}', which does not look like a unity-rl "
                           f"run folder (no {', '.join(RUN_MARKERS)}). Remove it yourself or pick "
                           f"another --run-id/--results-dir.")
        shutil.rmtree(run_dir)


def _train_overrides(args: argparse.Namespace, env_path: str | None) -> dict[str, Any]:
    """The flags given, as apply_overrides' keywords (None = not given): every launch setting
    (``launch_arguments``) and train's own flags."""
    from unity_rl.envs.settings import launch_arguments

    values = {
        **launch_arguments(args), "env_path": env_path,
        "run_id": args.run_id, "results_dir": args.results_dir,
        "torch_device": args.torch_device, "debug": args.debug,
        "mode": args.mode, "num_actors": args.num_actors, "backend": args.backend,
        "ray_address": args.ray_address, "num_cpus_per_actor": args.num_cpus_per_actor,
        "max_actor_restarts": args.max_actor_restarts,
        "max_steps": args.max_steps, "behavior": args.behavior,
        "initialize_from": args.initialize_from, "inference": args.inference,
    }
    if args.resume:
        values.update(resume=True, force=False)
    elif args.force:
        values.update(force=True, resume=False)
    return values


def resolve_train_config(args: argparse.Namespace):
    """Loads the YAML and applies the flags; returns (cfg, run_dir, resume)."""
    from unity_rl import config as config_mod

    config_path = args.config
    if config_path is None and args.resume:
        candidate = Path(args.results_dir or "results") / (args.run_id or "ppo") / CONFIG_FILE
        if candidate.is_file():
            config_path = str(candidate)
    cfg = config_mod.load_config(config_path or default_config_path())

    env_path = args.env_path
    if env_path is not None:
        from unity_rl.envs.launcher import resolve_env_path
        env_path = resolve_env_path(env_path)  # BuildLaunchError names what is wrong
    values = _train_overrides(args, env_path)
    cfg = apply_cli_overrides(cfg, values)
    if cfg.env_settings.env_path is None:
        cfg = config_mod.apply_overrides(cfg, env=default_env_path())
    else:
        from unity_rl.envs.launcher import resolve_env_path
        resolve_env_path(cfg.env_settings.env_path)  # a YAML env_path must exist too
    run_dir = Path(cfg.checkpoint_settings.results_dir) / cfg.checkpoint_settings.run_id
    return cfg, run_dir, bool(cfg.checkpoint_settings.resume)


def apply_cli_overrides(cfg, values: dict[str, Any]):
    """config.apply_overrides for the flags given (every flag has a config keyword)."""
    from unity_rl import config as config_mod

    return config_mod.apply_overrides(cfg, **values)


def _check_ports(cfg) -> None:
    """Fails early, naming the owner, when a port the builds need is taken."""
    from unity_rl.envs.ports import check_port_free

    env = cfg.env_settings
    for i in range(env.num_envs):  # build i of the run listens on base_port + i
        check_port_free(env.base_port + i, build=i)


def write_run_config(cfg, run_dir: Path) -> Path:
    """Writes the resolved config as RUN_DIR/configuration.yaml (atomically), without the
    one-off resume/force flags so that the file can be reused as it is."""
    from unity_rl.checkpoint import atomic_write
    from unity_rl.config import config_to_yaml

    clean = dataclasses.replace(cfg, checkpoint_settings=dataclasses.replace(
        cfg.checkpoint_settings, resume=False, force=False, inference=False))
    text = config_to_yaml(clean).encode("utf-8")
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CONFIG_FILE
    atomic_write(path, lambda f: f.write(text))
    return path


def _check_layout(cfg) -> None:
    """The trainer's own checks of the config (behaviors, builds per actor), up front, so
    that they read as one-line errors before anything starts."""
    from unity_rl.training.wiring import split_builds, training_sections

    try:
        training_sections(cfg)
        split_builds(cfg.env_settings.num_envs, cfg.unity_rl.num_actors)
    except ValueError as err:
        raise CliError(str(err)) from None


def _check_initialize_from(cfg) -> None:
    """--initialize-from names a run with a checkpoint (checked before anything is written)."""
    from unity_rl.checkpoint import CheckpointManager

    ck = cfg.checkpoint_settings
    if ck.initialize_from is None:
        return
    source = Path(ck.results_dir) / ck.initialize_from
    if CheckpointManager(source).latest() is None:
        raise CliError(f"--initialize-from {ck.initialize_from}: there is no checkpoint in "
                       f"'{source / 'checkpoints'}'. Check the run id and --results-dir.")


def cmd_train(args: argparse.Namespace) -> int:
    cfg, run_dir, resume = resolve_train_config(args)
    _setup_logging(cfg.debug)
    _check_layout(cfg)
    _check_initialize_from(cfg)
    _check_ports(cfg)  # before --force wipes anything
    prepare_run_dir(run_dir, resume=resume, force=bool(cfg.checkpoint_settings.force))
    config_path = write_run_config(cfg, run_dir)
    from unity_rl.checkpoint import CheckpointManager
    from unity_rl.training.trainer import train

    try:
        result = train(cfg, run_dir, resume=resume)
    except BaseException:
        if not resume and CheckpointManager(run_dir).latest() is None:
            config_path.unlink(missing_ok=True)  # nothing trained: a retry needs no --force
        raise
    _print_train_result(result, run_dir)
    return exit_status(result.interrupted) if result.interrupted else 0


def _print_train_result(result: Any, run_dir: Path) -> None:
    """A closing line per behavior and one for the run: where things are, how far it got."""
    for name, part in sorted(result.behaviors.items()):
        line = f"[INFO] {name}: {part.agent_steps} agent-steps, {part.episodes} episodes"
        if math.isfinite(part.mean_return):
            line += f", mean return (last 100 episodes) {part.mean_return:.3f}"
        if part.policy_path is not None:
            line += f", policy {part.policy_path}"
        print(line + ".", flush=True)
    status = "Interrupted" if result.interrupted else "Finished"
    parts = [f"{status} after {result.agent_steps} agent-steps in {result.wall_seconds:.1f} s",
             f"run folder {run_dir}"]
    print("[INFO] " + ". ".join(parts) + ".", flush=True)
    if result.interrupted:
        print(f"[INFO] Continue with: unity-rl train --resume --run-id {run_dir.name} "
              f"--results-dir {run_dir.parent}", flush=True)


# ----------------------------------------------------------------------------------------------
# evaluate / export
# ----------------------------------------------------------------------------------------------

def _checkpoint_source(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """(checkpoint file, run folder or None) from --run-id/--results-dir or --checkpoint."""
    from unity_rl.checkpoint import CheckpointManager

    if args.checkpoint:
        path = Path(args.checkpoint)
        if not path.is_file():
            raise CliError(f"Checkpoint '{path}' does not exist.")
        if path.parent.name == "checkpoints":
            return path, path.parent.parent
        return path, path.parent if (path.parent / CONFIG_FILE).is_file() else None
    run_dir = Path(args.results_dir) / args.run_id
    if not run_dir.is_dir():
        raise CliError(f"No run '{args.run_id}' in '{args.results_dir}' (no folder '{run_dir}'). "
                       f"Check --run-id and --results-dir.")
    latest = CheckpointManager(run_dir).latest()
    if latest is None:
        raise CliError(f"Run '{args.run_id}' has no checkpoint yet (looked in "
                       f"'{run_dir / 'checkpoints'}').")
    return latest, run_dir


def cmd_export(args: argparse.Namespace) -> int:
    from unity_rl.export import checkpoint_behaviors, export_checkpoint
    from unity_rl.training.behavior_run import output_names

    checkpoint, run_dir = _checkpoint_source(args)
    output = Path(args.output) if args.output else None
    behaviors = [args.behavior] if args.behavior else checkpoint_behaviors(checkpoint)
    if output is not None and len(behaviors) > 1:
        raise CliError(f"'{checkpoint}' holds several behaviors {behaviors}: pick one with "
                       f"--behavior to write --output")
    names = output_names(behaviors)
    folder = run_dir if run_dir is not None else checkpoint.parent
    for behavior in behaviors:
        target = output if output is not None else folder / f"{names[behavior]}.onnx"
        path = export_checkpoint(checkpoint, target, run_dir=run_dir, behavior=behavior)
        print(f"[INFO] Exported {_short(behavior)} from {checkpoint} to {path}", flush=True)
    return 0


def _policy_env(args: argparse.Namespace):
    """(checkpoint, policy, env) of evaluate and record-demo: the run's latest checkpoint (or
    --checkpoint) on the run's build (or --env), launched with the run's settings."""
    from unity_rl.envs.launcher import resolve_env_path
    from unity_rl.evaluate import open_vec_env, run_config
    from unity_rl.export import load_policy

    if args.episodes < 1:
        raise CliError(f"--episodes must be >= 1, got {args.episodes}")
    checkpoint, run_dir = _checkpoint_source(args)
    policy = load_policy(checkpoint, run_dir=run_dir, behavior=args.behavior)
    run_cfg = run_config(run_dir)
    env_path = args.env_path or (run_cfg.env_settings.env_path if run_cfg else None) or default_env_path()
    env_path = resolve_env_path(env_path)
    env = open_vec_env(args, env_path, run_cfg, behavior=args.behavior or policy.behavior_name)
    return checkpoint, policy, env


def cmd_record_demo(args: argparse.Namespace) -> int:
    from unity_rl.evaluate import record_policy_demo

    if not args.output.endswith(".demo"):
        raise CliError(f"--output must name a .demo file (ML-Agents reads no other), got "
                       f"'{args.output}'")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    checkpoint, policy, env = _policy_env(args)
    try:
        recorder = record_policy_demo(env, policy.module, args.episodes)
        name = _short(env.behavior_name)
        meta = recorder.write(args.output, env.spec_, name=args.name or Path(args.output).stem[:16],
                              behavior_name=name)
    finally:
        env.close()
    returns = [float(e.rewards.sum()) for e in recorder.episodes]
    print(f"[INFO] Recorded {len(returns)} episodes of {name} ({meta.number_steps} records, "
          f"mean return {sum(returns) / len(returns):.3f}) from {checkpoint} to {args.output}",
          flush=True)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from unity_rl.evaluate import evaluate_policy

    checkpoint, policy, env = _policy_env(args)
    try:
        played = evaluate_policy(env, policy.module, args.episodes)
    finally:
        env.close()
    name = _short(env.behavior_name)
    for i, (ret, length) in enumerate(played, 1):
        print(f"[INFO] {name} episode {i}: return {ret:.3f}, length {length} decisions",
              flush=True)
    returns = [ret for ret, _ in played]
    mean, std = float(sum(returns) / len(returns)), _std(returns)
    mean_length = sum(length for _, length in played) / len(played)
    print(f"[INFO] {name}: mean return {mean:.3f} (std {std:.3f}), mean length "
          f"{mean_length:.1f} decisions over {len(returns)} episodes, deterministic policy "
          f"from {checkpoint}.", flush=True)
    return 0


def _short(behavior_name: str) -> str:
    return behavior_name.split("?", 1)[0]


def _std(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


# ----------------------------------------------------------------------------------------------
# random
# ----------------------------------------------------------------------------------------------

def cmd_random(args: argparse.Namespace) -> int:
    from unity_rl.envs.launcher import resolve_env_path
    from unity_rl.evaluate import finished_episodes, open_vec_env

    env_path = resolve_env_path(args.env_path) if args.env_path else default_env_path()
    env = open_vec_env(args, env_path, None, behavior=args.behavior)
    try:
        env.action_space.seed(env.builds.seed)  # the builds' seed (0 for --seed -1)
        env.reset()
        returns: list[float] = []
        agent_steps = 0
        start = time.perf_counter()
        while agent_steps < args.steps:
            _, _, _, _, infos = env.step(env.action_space.sample())
            agent_steps += env.num_envs
            returns.extend(ret for _, ret in finished_episodes(infos))
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    print(f"[INFO] {_short(env.behavior_name)}: {agent_steps} agent-steps in {elapsed:.2f} s = "
          f"{agent_steps / elapsed:,.0f} agent-steps/s ({env.num_envs} agents).", flush=True)
    if returns:
        print(f"[INFO] {len(returns)} episodes: mean return {sum(returns) / len(returns):.3f}, "
              f"min {min(returns):.3f}, max {max(returns):.3f}.", flush=True)
    else:
        print("[INFO] No episode finished.", flush=True)
    return 0


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------

class _ConsoleHandler(logging.StreamHandler):
    """Log lines on stderr; on a terminal, first erases the live progress line that
    MetricsWriter redraws on stdout, so that the two never share a line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if sys.stdout.isatty():
                sys.stdout.write("\r\033[K")
                sys.stdout.flush()
        except (OSError, ValueError, AttributeError):
            pass
        super().emit(record)


def _setup_logging(debug: bool) -> None:
    handler = _ConsoleHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, handlers=[handler])


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with sigterm_raises():
            return int(args.handler(args) or 0)
    except KeyboardInterrupt as stop:
        print("unity-rl: interrupted.", file=sys.stderr, flush=True)
        return exit_status(stop)
    except UserError as err:
        print(f"unity-rl: error: {err}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
