"""A training run's folder, by mlagents-learn's rules: what makes a folder a run
(``RUN_MARKERS``), what --resume and --force do with one that exists (``prepare_run_dir``), and
the resolved config written into it (``write_run_config``). Every refusal is a ``CliError`` that
says which flag to pass.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from unity_rl.config.dump import CONFIG_FILE
from unity_rl.errors import CliError

RUN_MARKERS = (CONFIG_FILE, "checkpoints")
"""What makes a folder a unity-rl run folder (and safe for --force to wipe)."""


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
