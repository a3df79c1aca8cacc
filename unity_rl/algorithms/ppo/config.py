"""PPO's hyperparameters (``PPOConfig``): exactly ML-Agents 1.1.0's ``PPOSettings``, and the YAML
keys (``PPO_KEYS``) with ML-Agents' meaning. The discounts and reward strengths are the behavior's
``reward_signals`` (``RewardSignalConfig``), not hyperparameters.

The project-only keys (``vf_coef``, ``max_grad_norm``, ``adam_eps``, ``clip_value_loss``,
``normalize_advantage``, ``advantage_normalization``, ``minibatch_remainder``, ``policy_ratio``,
``gaussian_entropy``, ``schedule_steps``, ``activation``, ``weight_init``, ``action_clip``,
``target_kl``, ``log_std_init``) are gone (docs/ppo.md): no shipped config or benchmark set
one, and none measured better than ML-Agents' fixed choice (docs/ppo.md); a file that still sets
one gets the strict "unknown key" error."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from unity_rl.algorithms.hyperparameter_checks import NamedChecks, is_int

Schedule = Literal["linear", "constant"]


@dataclass(frozen=True)
class OnPolicyConfig(NamedChecks):
    """The hyperparameters ML-Agents' PPOSettings and POCASettings share, named as in the paper /
    CleanRL (YAML keys are ML-Agents', ``PPO_KEYS``); ``TRAINER_TYPE`` names errors."""

    TRAINER_TYPE: ClassVar[str] = "ppo"

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
    """GAE λ (YAML: lambd)."""
    clip_coef: float = 0.2
    """Clip range ε of the probability ratio, and of the value change (YAML: epsilon)."""
    clip_coef_schedule: Schedule = "linear"
    """'linear': ε decays to 0.1 at max_steps; 'constant' (YAML: epsilon_schedule)."""
    ent_coef: float = 5e-3
    """Entropy bonus coefficient β (YAML: beta)."""
    ent_coef_schedule: Schedule = "linear"
    """'linear': β decays to 1e-5 at max_steps; 'constant' (YAML: beta_schedule)."""
    max_steps: int = 500_000
    """Agent-steps of the whole run; the linear schedules reach their floor here (YAML: max_steps)."""

    def __post_init__(self) -> None:
        check = self.check
        check(self.learning_rate > 0, "learning_rate", "> 0")
        for name in ("lr_schedule", "clip_coef_schedule", "ent_coef_schedule"):
            check(getattr(self, name) in ("linear", "constant"), name, "'linear' or 'constant'")
        check(is_int(self.minibatch_size) and self.minibatch_size >= 1, "minibatch_size",
              "an int >= 1")
        check(is_int(self.buffer_size) and self.buffer_size >= self.minibatch_size,
              "buffer_size", "an int >= batch_size")
        check(is_int(self.num_epochs) and self.num_epochs >= 1, "num_epochs", "an int >= 1")
        check(0.0 <= self.gae_lambda <= 1.0, "gae_lambda", "in [0, 1]")
        check(0.0 < self.clip_coef < 1.0, "clip_coef", "in (0, 1)")
        check(self.ent_coef >= 0, "ent_coef", ">= 0")
        check(is_int(self.max_steps) and self.max_steps >= 1, "max_steps", "an int >= 1")


@dataclass(frozen=True)
class PPOConfig(OnPolicyConfig):
    """PPO hyperparameters: the shared ones and ``shared_critic``."""

    shared_critic: bool = False
    """Value heads on the actor's trunk, one Adam over the actor (ML-Agents' SharedActorCritic)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check(isinstance(self.shared_critic, bool), "shared_critic", "true or false")


PPO_KEYS: dict[str, str] = {
    "batch_size": "minibatch_size",
    "buffer_size": "buffer_size",
    "learning_rate": "learning_rate",
    "learning_rate_schedule": "lr_schedule",
    "beta": "ent_coef",
    "beta_schedule": "ent_coef_schedule",
    "epsilon": "clip_coef",
    "epsilon_schedule": "clip_coef_schedule",
    "lambd": "gae_lambda",
    "num_epoch": "num_epochs",
    "shared_critic": "shared_critic",
}
"""YAML key under behaviors.<name>.hyperparameters (trainer_type ppo) -> PPOConfig field."""

OFF_VALUES: dict[str, tuple] = {}
"""ML-Agents PPO keys not implemented here, accepted with the value that means "off" (none)."""


def fill_defaults(raw: dict) -> dict:
    """ML-Agents: beta and epsilon schedules follow learning_rate_schedule unless given."""
    raw = dict(raw)
    for key in ("beta_schedule", "epsilon_schedule"):
        if key not in raw and "learning_rate_schedule" in raw:
            raw[key] = raw["learning_rate_schedule"]
    return raw


def default_segment_steps(hp: PPOConfig, num_actors: int, time_horizon: int = 0) -> int:
    """One buffer per round across the actors: buffer_size / num_actors, rounded up."""
    return -(-hp.buffer_size // num_actors)
