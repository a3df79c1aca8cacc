"""``BehavioralCloningConfig``: the ``behavioral_cloning:`` section of a behavior (ML-Agents'
``BehavioralCloningSettings``), torch-free so that the config loads without torch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_NUM_EPOCH = 3
"""ML-Agents' BC epochs when ``num_epoch`` is not set: 3, hard-coded (``torch_optimizer.py``
passes ``default_num_epoch=3``; its docs say the trainer's ``num_epoch``)."""

BC_KEYS = {k: k for k in ("demo_path", "steps", "strength", "samples_per_update", "num_epoch",
                           "batch_size")}
"""YAML key under ``behavioral_cloning`` -> field (ML-Agents' names, one for one)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class BehavioralCloningConfig:
    """``behavioral_cloning``: clone a demonstration's actions beside the RL update."""

    demo_path: str
    """A ``.demo`` file or a directory of them (relative paths: from the working directory)."""
    steps: int = 0
    """Agent-steps over which BC's learning rate decays linearly to ~0, after which BC stops
    (0: constant learning rate, BC for the whole run)."""
    strength: float = 1.0
    """BC's learning rate is the policy's ``learning_rate`` times this."""
    samples_per_update: int = 0
    """Most demo steps per epoch of a BC update (0: the whole demonstration)."""
    num_epoch: int | None = None
    """Passes over the demo samples per BC update (None: 3, ML-Agents' hard-coded default)."""
    batch_size: int | None = None
    """Demo steps per BC gradient step (None: the trainer's ``batch_size``)."""

    def __post_init__(self) -> None:
        def check(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise ValueError(f"behavioral_cloning.{name} must be {what}, "
                                 f"got {getattr(self, name)!r}")

        check(isinstance(self.demo_path, str) and bool(self.demo_path), "demo_path",
              "the path of a .demo file or of a directory of them")
        check(_is_int(self.steps) and self.steps >= 0, "steps", "an int >= 0")
        check(isinstance(self.strength, (int, float)) and self.strength >= 0, "strength", ">= 0")
        check(_is_int(self.samples_per_update) and self.samples_per_update >= 0,
              "samples_per_update", "an int >= 0")
        check(self.num_epoch is None or (_is_int(self.num_epoch) and self.num_epoch >= 1),
              "num_epoch", "null or an int >= 1")
        check(self.batch_size is None or (_is_int(self.batch_size) and self.batch_size >= 1),
              "batch_size", "null or an int >= 1")
