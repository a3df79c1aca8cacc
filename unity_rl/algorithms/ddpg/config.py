"""DDPG's hyperparameters (``DDPGConfig``, torch-free: the config loads it).

The replay, warm-up, replay-ratio and PER fields come from ``offpolicy.config.ReplayConfig``;
YAML keys under ``hyperparameters`` are the field names (``unity_rl.algorithms.ddpg.SPEC``)."""
from __future__ import annotations

from dataclasses import dataclass

from unity_rl.algorithms.offpolicy.config import ReplayConfig


@dataclass(frozen=True)
class DDPGConfig(ReplayConfig):
    """DDPG hyperparameters (network size and input normalisation come from the network config)."""

    TRAINER_TYPE = "ddpg"

    gamma: float = 0.99
    """Discount factor γ of the TD target (filled from reward_signals.extrinsic.gamma)."""
    tau: float = 0.005
    """Polyak factor: θ' ← τθ + (1 − τ)θ' after each actor update (paper: 0.001)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor μ (paper: 1e-4)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critic Q (paper: 1e-3)."""
    critic_weight_decay: float = 0.0
    """L2 weight decay of the critic's Adam optimiser (paper: 1e-2; 0 disables)."""
    exploration_noise: str = "gaussian"
    """Behaviour noise added to μ(s): 'gaussian' (independent) or 'ou' (Ornstein–Uhlenbeck, per agent)."""
    noise_sigma: float = 0.1
    """Standard deviation of the exploration noise, as a fraction of the action half-range."""
    ou_theta: float = 0.15
    """Mean-reversion rate θ of the Ornstein–Uhlenbeck process (paper: 0.15, σ 0.2)."""
    policy_delay: int = 1
    """Critic updates per actor-and-target update (1 is DDPG; TD3 uses 2)."""
    max_grad_norm: float = 0.0
    """Clips each network's gradient norm to this value; 0 disables clipping."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check = self.check
        check(0.0 <= self.gamma <= 1.0, "gamma", "in [0, 1]")
        check(0.0 < self.tau <= 1.0, "tau", "in (0, 1]")
        check(self.actor_lr > 0, "actor_lr", "> 0")
        check(self.critic_lr > 0, "critic_lr", "> 0")
        check(self.critic_weight_decay >= 0, "critic_weight_decay", ">= 0")
        check(self.exploration_noise in ("gaussian", "ou"), "exploration_noise",
              "'gaussian' or 'ou'")
        check(self.noise_sigma >= 0, "noise_sigma", ">= 0")
        check(self.ou_theta > 0, "ou_theta", "> 0")
        check(isinstance(self.policy_delay, int) and self.policy_delay >= 1,
              "policy_delay", "an int >= 1")
        check(self.max_grad_norm >= 0, "max_grad_norm", ">= 0")


def updates_owed(agent_steps: int, updates_done: int, cfg: ReplayConfig) -> int:
    """``cfg.updates_owed(agent_steps, updates_done)`` (the replay-ratio rule)."""
    return cfg.updates_owed(agent_steps, updates_done)
