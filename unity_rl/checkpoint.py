"""Checkpoints of a run, written so that a kill at any moment never corrupts the run directory.

Contract:
- ``<run_dir>/checkpoints/step-<N>.pt`` holds the state saved at agent-step N. A checkpoint file
  only ever appears under that name complete: it is written to a hidden temporary file in the
  same folder (``.step-<N>.pt.<random>.tmp``), flushed and fsynced, renamed over the final name
  with ``os.replace`` (atomic on POSIX), and then the folder itself is fsynced so the rename
  survives a power cut.
- there is no "latest" pointer file: the folder is the only source of truth. ``latest()``
  scans it and returns the newest *readable* step file (a file that fails the cheap zip check,
  e.g. truncated or copied in by hand, is skipped with a warning). One rename per save means
  there is no second file that a kill could leave stale. A ``latest.json`` left by older
  versions is ignored. Temporary files never match the step-file pattern and are never taken
  for checkpoints; leftovers of a killed writer are removed by the next ``save``.
- the newest ``keep`` checkpoints are kept (``keep <= 0`` keeps all), as ML-Agents'
  ``keep_checkpoints``.
- ``load`` uses ``torch.load(weights_only=False)`` because a state holds numpy arrays and RNG
  states: load only checkpoints you trust (as with any pickle).

One writer per run directory (the trainer); readers (``evaluate``, ``export``) may run at the
same time and always see a complete file.
"""
from __future__ import annotations

import logging
import os
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch

from unity_rl.errors import UserError

logger = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoints"
_STEP_FILE = re.compile(r"^step-(\d+)\.pt$")


class CheckpointError(UserError, RuntimeError):
    """No usable checkpoint where one was expected; the message says where and what to do."""


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_current_umask()
"""Mode of the files written here: what ``open()`` would give (mkstemp alone gives 0600)."""


def _fsync_dir(folder: Path) -> None:
    """Makes a rename inside ``folder`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, write) -> None:
    """Calls ``write(binary_file)`` on a temp file next to ``path``, then renames it to ``path``.

    The temp file is flushed and fsynced before ``os.replace``; the folder is fsynced after.
    On any error the temp file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def is_readable_checkpoint(path: Path) -> bool:
    """Cheap completeness check: torch's zip format ends with a central directory, so a
    truncated file fails to open. Does not read the tensors."""
    try:
        with zipfile.ZipFile(path) as archive:
            return len(archive.namelist()) > 0
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


class CheckpointManager:
    """Saves, prunes, finds and loads the checkpoints of one run directory."""

    def __init__(self, run_dir: str | os.PathLike, keep: int = 5):
        self.run_dir = Path(run_dir)
        self.dir = self.run_dir / CHECKPOINT_DIR
        self.keep = int(keep)

    # -- writing ----------------------------------------------------------------------------
    def save(self, state: dict[str, Any], step: int) -> Path:
        """Writes ``state`` as ``checkpoints/step-<step>.pt`` atomically; returns its path."""
        step = int(step)
        if step < 0:
            raise ValueError(f"checkpoint step must be >= 0, got {step}")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temps()
        path = self.dir / f"step-{step}.pt"
        atomic_write(path, lambda f: torch.save(state, f))
        self._prune(protect=path)
        return path

    def _remove_stale_temps(self) -> None:
        """Removes temp files a killed writer left behind (one writer per run dir)."""
        for tmp in self.dir.glob(".*.tmp"):
            try:
                tmp.unlink()
            except OSError:
                pass

    def _prune(self, protect: Path) -> None:
        if self.keep <= 0:
            return
        files = self.checkpoints()
        for _, path in files[:-self.keep]:
            if path != protect:
                try:
                    path.unlink()
                except OSError:
                    pass

    # -- reading ----------------------------------------------------------------------------
    def checkpoints(self) -> list[tuple[int, Path]]:
        """(step, path) of every file named like a checkpoint, oldest first (unchecked)."""
        if not self.dir.is_dir():
            return []
        found = []
        for path in self.dir.iterdir():
            match = _STEP_FILE.match(path.name)
            if match and path.is_file():
                found.append((int(match.group(1)), path))
        return sorted(found)

    def latest(self) -> Path | None:
        """The newest readable checkpoint (highest step), or None when there is none.

        Scans the folder: step files are tried newest first and the first that passes
        ``is_readable_checkpoint`` wins; each unreadable one is skipped with a warning.
        Temporary files never match the step-file pattern.
        """
        for _, path in reversed(self.checkpoints()):
            if is_readable_checkpoint(path):
                return path
            logger.warning("checkpoint '%s' is incomplete or corrupt: skipped", path)
        return None

    def latest_step(self) -> int | None:
        """Agent-step of ``latest()``, or None."""
        path = self.latest()
        return None if path is None else int(_STEP_FILE.match(path.name).group(1))

    def has_checkpoint(self) -> bool:
        return self.latest() is not None

    def load(self, path: str | os.PathLike | None = None) -> dict[str, Any]:
        """Loads ``path`` (default: ``latest()``) onto the CPU; raises CheckpointError."""
        if path is None:
            path = self.latest()
            if path is None:
                raise CheckpointError(f"No checkpoint in '{self.dir}'.")
        return load_checkpoint(path)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Loads one checkpoint file onto the CPU; raises CheckpointError saying what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"Checkpoint '{path}' does not exist.")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # a truncated or foreign file: say which one
        raise CheckpointError(f"Checkpoint '{path}' cannot be read: {err}") from err
    if not isinstance(state, dict):
        raise CheckpointError(f"Checkpoint '{path}' does not hold a state dict.")
    return state
