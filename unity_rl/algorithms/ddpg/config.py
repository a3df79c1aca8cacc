"""DDPG's hyperparameters (``DDPGConfig``, torch-free: the config loads it) and its replay-ratio rule.

YAML keys under ``hyperparameters`` are the field names (``unity_rl.algorithms.ddpg.SPEC``)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DDPGConfig:
    """DDPG hyperparameters (network size and input normalisation come from the network config)."""

    gamma: float = 0.99
    """Discount factor γ of the TD target r + γ(1 − terminated)·Q'(s', μ'(s'))."""
    tau: float = 0.005
    """Polyak factor: θ' ← τθ + (1 − τ)θ' after each actor update (paper: 0.001)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor μ (paper: 1e-4)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critic Q (paper: 1e-3)."""
    critic_weight_decay: float = 0.0
    """L2 weight decay of the critic's Adam optimiser (paper: 1e-2; 0 disables)."""
    batch_size: int = 256
    """Transitions per gradient update (paper: 64)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions (agent-steps)."""
    warmup_steps: int = 10_000
    """Agent-steps of uniform random actions before the actor acts and updates start."""
    exploration_noise: str = "gaussian"
    """Behaviour noise added to μ(s): 'gaussian' (independent) or 'ou' (Ornstein–Uhlenbeck, per agent)."""
    noise_sigma: float = 0.1
    """Standard deviation of the exploration noise, as a fraction of the action half-range."""
    ou_theta: float = 0.15
    """Mean-reversion rate θ of the Ornstein–Uhlenbeck process (paper: 0.15, σ 0.2)."""
    replay_ratio: float = 1.0
    """Gradient updates per collected agent-step once warm-up is over."""
    policy_delay: int = 1
    """Critic updates per actor-and-target update (1 is DDPG; TD3 uses 2)."""
    prioritized: bool = False
    """Prioritised experience replay (Schaul et al. 2015) instead of uniform sampling."""
    per_alpha: float = 0.6
    """Priority exponent α: P(i) ∝ p_i^α (0 is uniform)."""
    per_beta: float = 0.4
    """Initial importance-sampling exponent β of the weights (N·P(i))^−β, annealed linearly to
    1 (full correction) at the behavior's max_steps (Schaul et al. 2016)."""
    per_eps: float = 1e-6
    """Added to |TD error| so that every stored transition keeps a non-zero priority."""
    max_grad_norm: float = 0.0
    """Clips each network's gradient norm to this value; 0 disables clipping."""
    save_replay_buffer: bool = False
    """Keep the replay buffer in checkpoints, so --resume continues with it (ML-Agents' key;
    off by default as there: a resumed run refills an empty buffer)."""

    def __post_init__(self) -> None:
        def check(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise ValueError(f"ddpg.{name} must be {what}, got {getattr(self, name)!r}")

        check(0.0 <= self.gamma <= 1.0, "gamma", "in [0, 1]")
        check(0.0 < self.tau <= 1.0, "tau", "in (0, 1]")
        check(self.actor_lr > 0, "actor_lr", "> 0")
        check(self.critic_lr > 0, "critic_lr", "> 0")
        check(self.critic_weight_decay >= 0, "critic_weight_decay", ">= 0")
        check(isinstance(self.batch_size, int) and self.batch_size >= 1, "batch_size", "an int >= 1")
        check(isinstance(self.buffer_size, int) and self.buffer_size >= self.batch_size,
              "buffer_size", "an int >= batch_size")
        check(isinstance(self.warmup_steps, int) and self.warmup_steps >= 0,
              "warmup_steps", "an int >= 0")
        check(self.exploration_noise in ("gaussian", "ou"), "exploration_noise",
              "'gaussian' or 'ou'")
        check(self.noise_sigma >= 0, "noise_sigma", ">= 0")
        check(self.ou_theta > 0, "ou_theta", "> 0")
        check(self.replay_ratio > 0, "replay_ratio", "> 0")
        check(isinstance(self.policy_delay, int) and self.policy_delay >= 1,
              "policy_delay", "an int >= 1")
        check(isinstance(self.prioritized, bool), "prioritized", "a bool")
        check(0.0 <= self.per_alpha <= 1.0, "per_alpha", "in [0, 1]")
        check(0.0 <= self.per_beta <= 1.0, "per_beta", "in [0, 1]")
        check(self.per_eps > 0, "per_eps", "> 0")
        check(self.max_grad_norm >= 0, "max_grad_norm", ">= 0")
        check(isinstance(self.save_replay_buffer, bool), "save_replay_buffer", "a bool")


def updates_owed(agent_steps: int, updates_done: int, cfg: DDPGConfig) -> int:
    """Gradient updates due after ``agent_steps`` collected agent-steps (warm-up, replay_ratio)."""
    if agent_steps < cfg.warmup_steps:
        return 0
    return max(0, int((agent_steps - cfg.warmup_steps) * cfg.replay_ratio) - updates_done)
