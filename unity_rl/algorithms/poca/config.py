"""POCA's hyperparameters (``POCAConfig``): exactly ML-Agents 1.1.0's ``POCASettings``
(``poca/optimizer_torch.py``), PPO's keys and defaults without ``shared_critic`` (POCA's critic
is the centralised one; a file that sets ``shared_critic`` gets the strict "unknown key" error,
as mlagents-learn refuses it). Torch-free. The discounts and strengths are the behavior's
``reward_signals``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from unity_rl.algorithms.ppo.config import PPO_KEYS, OnPolicyConfig
from unity_rl.algorithms.ppo.config import default_segment_steps as _ppo_segment_steps
from unity_rl.algorithms.ppo.config import fill_defaults as _ppo_fill_defaults


@dataclass(frozen=True)
class POCAConfig(OnPolicyConfig):
    """MA-POCA hyperparameters: PPO's shared ones (``OnPolicyConfig``), named as PPOConfig's
    (YAML keys are ML-Agents', ``POCA_KEYS``); two mean something else in POCA."""

    TRAINER_TYPE: ClassVar[str] = "poca"

    gae_lambda: float = 0.95
    """λ of the TD(λ) returns (YAML: lambd; POCA's returns are λ-returns, not GAE)."""
    clip_coef: float = 0.2
    """Clip range ε of the probability ratio and of the baseline change (YAML: epsilon)."""


POCA_KEYS: dict[str, str] = {k: v for k, v in PPO_KEYS.items() if k != "shared_critic"}
"""YAML key under behaviors.<name>.hyperparameters (trainer_type poca) -> POCAConfig field."""


def fill_defaults(raw: dict) -> dict:
    """As PPO (ML-Agents' POCASettings): beta and epsilon schedules follow
    learning_rate_schedule unless given."""
    return _ppo_fill_defaults(raw)


def default_segment_steps(hp: POCAConfig, num_actors: int, time_horizon: int = 0) -> int:
    """One buffer per round across the actors: buffer_size / num_actors, rounded up."""
    return _ppo_segment_steps(hp, num_actors, time_horizon)
