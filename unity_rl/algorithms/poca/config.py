"""POCA's hyperparameters (``POCAConfig``): exactly ML-Agents 1.1.0's ``POCASettings``
(``poca/optimizer_torch.py``), PPO's keys and defaults without ``shared_critic`` (POCA's critic
is the centralised one; a file that sets ``shared_critic`` gets the strict "unknown key" error,
as mlagents-learn refuses it). Torch-free. The discounts and strengths are the behavior's
``reward_signals``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unity_rl.algorithms.ppo.config import PPO_KEYS, Schedule
from unity_rl.algorithms.ppo.config import default_segment_steps as _ppo_segment_steps
from unity_rl.algorithms.ppo.config import fill_defaults as _ppo_fill_defaults


@dataclass(frozen=True)
class POCAConfig:
    """MA-POCA hyperparameters, named as PPOConfig's (YAML keys are ML-Agents', ``POCA_KEYS``)."""

    learning_rate: float = 3e-4
    """Adam step size α at step 0 (YAML: learning_rate)."""
    lr_schedule: Schedule = "linear"
    """'linear': α decays to 1e-10 at max_steps; 'constant' (YAML: learning_rate_schedule)."""
    buffer_size: int = 10240
    """Agent-steps collected per update (YAML: buffer_size)."""
    minibatch_size: int = 1024
    """Agent-steps per gradient step (YAML: batch_size)."""
    num_epochs: int = 3
    """Passes over the buffer per update (YAML: num_epoch)."""
    gae_lambda: float = 0.95
    """λ of the TD(λ) returns (YAML: lambd; POCA's returns are λ-returns, not GAE)."""
    clip_coef: float = 0.2
    """Clip range ε of the probability ratio and of the baseline change (YAML: epsilon)."""
    clip_coef_schedule: Schedule = "linear"
    """'linear': ε decays to 0.1 at max_steps; 'constant' (YAML: epsilon_schedule)."""
    ent_coef: float = 5e-3
    """Entropy bonus coefficient β (YAML: beta)."""
    ent_coef_schedule: Schedule = "linear"
    """'linear': β decays to 1e-5 at max_steps; 'constant' (YAML: beta_schedule)."""
    max_steps: int = 500_000
    """Agent-steps of the whole run; the linear schedules reach their floor here (YAML: max_steps)."""

    def __post_init__(self) -> None:
        def check(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise ValueError(f"poca.{name} must be {what}, got {getattr(self, name)!r}")

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        check(self.learning_rate > 0, "learning_rate", "> 0")
        for name in ("lr_schedule", "clip_coef_schedule", "ent_coef_schedule"):
            check(getattr(self, name) in ("linear", "constant"), name, "'linear' or 'constant'")
        check(is_int(self.minibatch_size) and self.minibatch_size >= 1, "minibatch_size", "an int >= 1")
        check(is_int(self.buffer_size) and self.buffer_size >= self.minibatch_size,
              "buffer_size", "an int >= batch_size")
        check(is_int(self.num_epochs) and self.num_epochs >= 1, "num_epochs", "an int >= 1")
        check(0.0 <= self.gae_lambda <= 1.0, "gae_lambda", "in [0, 1]")
        check(0.0 < self.clip_coef < 1.0, "clip_coef", "in (0, 1)")
        check(self.ent_coef >= 0, "ent_coef", ">= 0")
        check(is_int(self.max_steps) and self.max_steps >= 1, "max_steps", "an int >= 1")


POCA_KEYS: dict[str, str] = {k: v for k, v in PPO_KEYS.items() if k != "shared_critic"}
"""YAML key under behaviors.<name>.hyperparameters (trainer_type poca) -> POCAConfig field."""


def fill_defaults(raw: dict) -> dict:
    """As PPO (ML-Agents' POCASettings): beta and epsilon schedules follow
    learning_rate_schedule unless given."""
    return _ppo_fill_defaults(raw)


def default_segment_steps(hp: POCAConfig, num_actors: int, time_horizon: int = 0) -> int:
    """One buffer per round across the actors: buffer_size / num_actors, rounded up."""
    return _ppo_segment_steps(hp, num_actors, time_horizon)
