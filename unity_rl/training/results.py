"""What ``train`` returns: ``TrainResult`` for the run and a ``BehaviorResult`` per behavior
(steps, episodes, mean return of the last 100 episodes, the final policy files, and whether and
how the run was interrupted)."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class BehaviorResult(NamedTuple):
    """How one behavior of a run ended."""

    agent_steps: int
    """Its agent-steps over the whole run."""
    mean_return: float
    """Mean return of its last 100 episodes (NaN if none ended)."""
    episodes: int
    """Its episodes finished over the whole run."""
    policy_version: int
    """Its learner version (updates, or DDPG publications) of the final weights."""
    policy_path: Path | None
    """Its final policy as ONNX for Unity (None if export failed)."""
    torch_policy_path: Path | None
    """Its final policy weights for ``evaluate`` (torch file)."""


class TrainResult(NamedTuple):
    """What a finished (or interrupted) run reports. The per-behavior fields at the top level
    are those of the first behavior (by name): the only one in a one-behavior run."""

    agent_steps: int
    """Agent-steps collected over the whole run, all behaviors together."""
    wall_seconds: float
    """Wall time of the whole run (earlier sessions included)."""
    mean_return: float
    episodes: int
    policy_version: int
    policy_path: Path | None
    torch_policy_path: Path | None
    checkpoint_path: Path | None
    """The last checkpoint written."""
    interrupted: KeyboardInterrupt | None
    """The interrupt that ended the run before every max_steps (``interrupts.Terminated`` for
    SIGTERM), or None; truthy when interrupted."""
    behaviors: dict[str, BehaviorResult] = {}
    """Behavior (output name) -> its result."""
