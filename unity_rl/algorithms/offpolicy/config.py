"""The hyperparameters every off-policy trainer type shares (``ReplayConfig``, torch-free) and
the replay-ratio rule the host follows.

A trainer type's config (``DDPGConfig``, later SAC's) subclasses ``ReplayConfig`` and adds its
own fields; YAML keys are the field names. ``__post_init__`` validates these fields and names the
trainer type (``TRAINER_TYPE``) in its errors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from unity_rl.algorithms.hyperparameter_checks import NamedChecks


@dataclass(frozen=True)
class ReplayConfig(NamedChecks):
    """Replay, warm-up, replay ratio and prioritised replay (read by ``OffPolicyHost``)."""

    TRAINER_TYPE: ClassVar[str] = "off-policy"
    """Prefix of validation errors ('ddpg.batch_size must be ...')."""
    RANDOM_WARMUP: ClassVar[bool] = True
    """True: uniform random actions during ``warmup_steps`` (DDPG); False: the policy acts from
    the first step and ``warmup_steps`` only delays the updates (ML-Agents' SAC
    ``buffer_init_steps``)."""

    batch_size: int = 256
    """Transitions per gradient update."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions (agent-steps)."""
    warmup_steps: int = 10_000
    """Agent-steps of uniform random actions before the policy acts and updates start."""
    replay_ratio: float = 1.0
    """Gradient updates per collected agent-step once warm-up is over."""
    prioritized: bool = False
    """Prioritised experience replay (Schaul et al. 2015) instead of uniform sampling."""
    per_alpha: float = 0.6
    """Priority exponent α: P(i) ∝ p_i^α (0 is uniform)."""
    per_beta: float = 0.4
    """Initial importance-sampling exponent β of the weights (N·P(i))^−β, annealed linearly to
    1 (full correction) at the behavior's max_steps (Schaul et al. 2016)."""
    per_eps: float = 1e-6
    """Added to |TD error| so that every stored transition keeps a non-zero priority."""
    interrupted_next_obs: str = "final"
    """Next observation of the last row of an interrupted (max-step) trajectory: 'final' (the
    observation Unity sent with the interruption) or 'own' (the row's own, ML-Agents' SAC)."""
    save_replay_buffer: bool = False
    """Keep the replay buffer in checkpoints, so --resume continues with it (ML-Agents' key;
    off by default as there: a resumed run refills an empty buffer)."""

    def __post_init__(self) -> None:
        check = self.check
        check(isinstance(self.batch_size, int) and self.batch_size >= 1,
              "batch_size", "an int >= 1")
        check(isinstance(self.buffer_size, int) and self.buffer_size >= self.batch_size,
              "buffer_size", "an int >= batch_size")
        check(isinstance(self.warmup_steps, int) and self.warmup_steps >= 0,
              "warmup_steps", "an int >= 0")
        check(self.replay_ratio > 0, "replay_ratio", "> 0")
        check(isinstance(self.prioritized, bool), "prioritized", "a bool")
        check(0.0 <= self.per_alpha <= 1.0, "per_alpha", "in [0, 1]")
        check(0.0 <= self.per_beta <= 1.0, "per_beta", "in [0, 1]")
        check(self.per_eps > 0, "per_eps", "> 0")
        check(isinstance(self.save_replay_buffer, bool), "save_replay_buffer", "a bool")
        check(self.interrupted_next_obs in ("final", "own"), "interrupted_next_obs",
              "'final' or 'own'")

    def min_replay_rows(self) -> int:
        """Rows the replay must hold before the first update (1: any)."""
        return 1

    def updates_owed(self, agent_steps: int, updates_done: int) -> int:
        """Gradient updates due after ``agent_steps`` collected agent-steps: none during
        warm-up, then ``replay_ratio`` per agent-step beyond it, less those done."""
        if agent_steps < self.warmup_steps:
            return 0
        return max(0, int((agent_steps - self.warmup_steps) * self.replay_ratio) - updates_done)
