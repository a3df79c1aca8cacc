"""``unity-rl evaluate``, ``export`` and ``record-demo``: the commands that take a trained
policy, from the latest checkpoint of ``--run-id`` (under ``--results-dir``) or a
``--checkpoint`` file. Evaluate and record-demo play it deterministically on the run's build
(or ``--env``), launched with the run's own settings; export writes its ONNX for Unity.
A missing run, checkpoint or wrong flag is a ``CliError``.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Sequence

from unity_rl.cli.bundled import default_env_path
from unity_rl.config.dump import CONFIG_FILE
from unity_rl.errors import CliError


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
    from unity_rl.envs.behavior import short_name
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
        print(f"[INFO] Exported {short_name(behavior)} from {checkpoint} to {path}", flush=True)
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
    from unity_rl.envs.behavior import short_name
    from unity_rl.evaluate import record_policy_demo

    if not args.output.endswith(".demo"):
        raise CliError(f"--output must name a .demo file (ML-Agents reads no other), got "
                       f"'{args.output}'")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    checkpoint, policy, env = _policy_env(args)
    try:
        recorder = record_policy_demo(env, policy.module, args.episodes)
        name = short_name(env.behavior_name)
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
    from unity_rl.envs.behavior import short_name
    from unity_rl.evaluate import evaluate_policy

    checkpoint, policy, env = _policy_env(args)
    try:
        played = evaluate_policy(env, policy.module, args.episodes)
    finally:
        env.close()
    name = short_name(env.behavior_name)
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


def _std(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
