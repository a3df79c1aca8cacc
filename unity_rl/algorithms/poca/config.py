"""POCA's hyperparameters (``POCAConfig``): exactly ML-Agents 1.1.0's ``POCASettings``
(``poca/optimizer_torch.py``), PPO's keys and defaults without ``shared_critic`` (POCA's critic
is the centralised one; a file that sets ``shared_critic`` gets the strict "unknown key" error,
as mlagents-learn refuses it). Torch-free. The discounts and strengths are the behavior's
``reward_signals``. The key-default rule (``fill_defaults``) and the segment size
(``default_segment_steps``) are PPO's, re-exported here for the spec."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from unity_rl.algorithms.ppo.config import PPO_KEYS, OnPolicyConfig
# ML-Agents' POCASettings follow PPO's: beta and epsilon schedules follow learning_rate_schedule
# unless given; one buffer per round across the actors (buffer_size / num_actors, rounded up).
from unity_rl.algorithms.ppo.config import default_segment_steps, fill_defaults  # noqa: F401


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

