"""Where a training run starts from: its seed, its own latest checkpoint (``--resume``),
another run's learners (``--initialize-from``, or the run's own for ``--inference``) and the
lessons of its curricula.

A training checkpoint is one dict of ``CHECKPOINT_FORMAT`` (written by
``TrainingSession.save_checkpoint``): ``behaviors`` (name -> the ``BehaviorRun`` entry),
``agent_steps``, ``seed``, ``rng``, ``curriculum`` and, with self-play, ``self_play``. A file of
another format, or a missing or unreadable one, is a ``CheckpointError`` that says what to do.
"""
from __future__ import annotations

import logging
import random
from pathlib import Path

from unity_rl.checkpoint import CheckpointError, CheckpointManager
from unity_rl.config import RunConfig
from unity_rl.training.curriculum import Curricula

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 2
"""Version of the checkpoint layout written by ``TrainingSession.save_checkpoint`` (2: one entry
per behavior under ``behaviors``)."""


def resolve_seed(cfg: RunConfig) -> int:
    """``env_settings.seed``, or a random one where it is negative."""
    seed = cfg.env_settings.seed
    return seed if seed >= 0 else random.SystemRandom().randrange(2**31)


def initial_state(cfg: RunConfig, state: dict | None) -> dict | None:
    """The checkpoint whose learners start the run: initialize_from's latest, or (inference
    after --resume) the run's own."""
    ck = cfg.checkpoint_settings
    if ck.initialize_from is not None:
        source = CheckpointManager(Path(ck.results_dir) / ck.initialize_from)
        if source.latest() is None:
            raise CheckpointError(f"--initialize-from {ck.initialize_from}: no checkpoint in "
                                  f"'{source.run_dir}'")
        return load_state(source)
    return state if ck.inference else None


def restore_curricula(cfg: RunConfig, seed: int, state: dict | None) -> Curricula:
    """The run's lessons: lesson 0 everywhere, or those of the checkpoint (``--resume``)."""
    curricula = Curricula(cfg.environment_parameters, seed)
    if state is not None and "curriculum" in state:
        try:
            curricula.load_state_dict(state["curriculum"])
        except ValueError as err:
            raise CheckpointError(str(err)) from None
    for name in curricula.lessons:
        if len(curricula.lessons[name]) > 1:
            logger.info("curriculum: %s", curricula.describe(name))
    return curricula


def load_state(checkpoints: CheckpointManager) -> dict:
    """The latest checkpoint of ``checkpoints``, refused unless of ``CHECKPOINT_FORMAT``."""
    state = checkpoints.load()
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{checkpoints.latest()}: not a unity_rl training checkpoint of "
                              f"format {CHECKPOINT_FORMAT} (format {state.get('format')!r}); "
                              f"start a new run (--force) or use the unity_rl version that "
                              f"wrote it")
    return state
