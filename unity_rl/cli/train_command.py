"""``unity-rl train``: the YAML with the flags applied over it (flags win; a flag not given
leaves the YAML's value), checked up front (behaviors, builds per actor, --initialize-from,
free ports) so that a mistake reads as one line before anything starts or is deleted, then the
run folder prepared (``run_folder``) and the trainer called. Prints a closing line per behavior
and for the run; returns the exit status (130/143 when interrupted).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from unity_rl.cli.bundled import default_config_path, default_env_path
from unity_rl.cli.console import setup_logging
from unity_rl.cli.run_folder import prepare_run_dir, write_run_config
from unity_rl.config.dump import CONFIG_FILE
from unity_rl.errors import CliError
from unity_rl.interrupts import exit_status


def _train_overrides(args: argparse.Namespace, env_path: str | None) -> dict[str, Any]:
    """The flags given, as apply_overrides' keywords (None = not given): every launch setting
    (``launch_arguments``) and train's own flags."""
    from unity_rl.envs.settings import launch_arguments

    values = {
        **launch_arguments(args), "env_path": env_path,
        "run_id": args.run_id, "results_dir": args.results_dir,
        "torch_device": args.torch_device, "torch_threads": args.torch_threads,
        "debug": args.debug,
        "mode": args.mode, "num_actors": args.num_actors, "backend": args.backend,
        "max_update_backlog": args.max_update_backlog, "lag_correction": args.lag_correction,
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


def _check_layout(cfg) -> None:
    """The trainer's own checks of the config (behaviors, builds per actor), up front, so
    that they read as one-line errors before anything starts."""
    from unity_rl.training.wiring import split_builds, training_sections

    try:
        training_sections(cfg)
        split_builds(cfg.env_settings.num_envs, cfg.num_actors)
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
    setup_logging(cfg.debug)
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
