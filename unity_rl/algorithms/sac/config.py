"""SAC's hyperparameters (``SACConfig``, torch-free): ML-Agents 1.1.0's ``SACSettings`` key for
key, with its defaults and meaning, on the off-policy seam's ``ReplayConfig``.

ML-Agents' rules kept as they are (``mlagents/trainers/trainer/off_policy_trainer.py``):

- ``buffer_init_steps``: no update before that many agent-steps; the *policy* acts meanwhile
  (ML-Agents' docs say random actions; its code does not), so ``RANDOM_WARMUP`` is False.
- ``steps_per_update``: after ``buffer_init_steps``, one update per ``steps_per_update``
  agent-steps, counted as ML-Agents counts them (``updates_owed``), and none before the replay
  holds ``batch_size`` rows.
- ``reward_signal_steps_per_update`` defaults to ``steps_per_update``.
- ``learning_rate_schedule`` defaults to ``constant`` (PPO's is linear).

The discounts and strengths are the behavior's ``reward_signals``, one Q/V head per signal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from unity_rl.algorithms.offpolicy.config import ReplayConfig

Schedule = Literal["linear", "constant"]


@dataclass(frozen=True)
class SACConfig(ReplayConfig):
    """SAC hyperparameters (network sizes, normalisation and memory come from network_settings)."""

    TRAINER_TYPE = "sac"
    RANDOM_WARMUP = False

    batch_size: int = 128
    """Transitions per gradient update (YAML: batch_size)."""
    buffer_size: int = 50_000
    """Replay capacity in agent-steps (YAML: buffer_size)."""
    warmup_steps: int = 0
    """Agent-steps collected (by the policy) before the first update (YAML: buffer_init_steps)."""
    steps_per_update: float = 1.0
    """Agent-steps per gradient update once updates start (YAML: steps_per_update)."""
    tau: float = 0.005
    """Polyak factor of the target value network: V' ← τV + (1 − τ)V' after each update."""
    init_entcoef: float = 1.0
    """Initial entropy coefficient α of every action part (YAML: init_entcoef)."""
    reward_signal_steps_per_update: float | None = None
    """Agent-steps per reward-signal update (None: steps_per_update, as ML-Agents)."""
    learning_rate: float = 3e-4
    """Adam step size of the policy, value and entropy optimisers (YAML: learning_rate)."""
    lr_schedule: Schedule = "constant"
    """'constant' (SAC's default) or 'linear' to 1e-10 at max_steps (YAML: learning_rate_schedule)."""
    max_steps: int = 500_000
    """Agent-steps of the whole run (the linear schedule's end; YAML: max_steps)."""
    replay_ratio: float = 1.0
    """Derived: 1 / steps_per_update (not a YAML key for SAC)."""
    interrupted_next_obs: Literal["final", "own"] = "own"
    """ML-Agents' SAC bootstraps an interrupted (max-step) episode from the last step's *own*
    observation ('own'); ``unity_rl.fix_quirks: [sac_interrupted_bootstrap]``: from the final one."""
    deterministic_squash: bool = False
    """ONNX ``deterministic_continuous_actions``: False is ML-Agents' un-squashed μ; True tanh(μ)
    (``unity_rl.fix_quirks: [sac_deterministic_squash]``)."""
    hybrid_entropy_sign: Literal["mlagents", "fixed"] = "mlagents"
    """Hybrid actions: ML-Agents *adds* α·log π of the continuous part to the V target;
    'fixed' subtracts it (``unity_rl.fix_quirks: [sac_hybrid_entropy_sign]``)."""
    padded_value_loss: Literal["mlagents", "masked"] = "mlagents"
    """With memory: ML-Agents' Q1, Q2 and V losses average over the rows that pad sequences too
    (its ``mse_loss`` is already a scalar when ``masked_mean`` sees it); 'masked' leaves them out,
    as the policy and entropy losses do (``unity_rl.fix_quirks: [sac_padded_value_loss]``)."""

    def __post_init__(self) -> None:
        check = self.check
        check(isinstance(self.steps_per_update, (int, float)) and self.steps_per_update > 0,
              "steps_per_update", "> 0")
        object.__setattr__(self, "steps_per_update", float(self.steps_per_update))
        object.__setattr__(self, "replay_ratio", 1.0 / self.steps_per_update)
        if self.reward_signal_steps_per_update is None:
            object.__setattr__(self, "reward_signal_steps_per_update", self.steps_per_update)
        super().__post_init__()
        check(0.0 < self.tau <= 1.0, "tau", "in (0, 1]")
        check(self.init_entcoef > 0, "init_entcoef", "> 0")
        check(self.reward_signal_steps_per_update > 0, "reward_signal_steps_per_update", "> 0")
        check(self.learning_rate > 0, "learning_rate", "> 0")
        check(self.lr_schedule in ("linear", "constant"), "lr_schedule", "'linear' or 'constant'")
        check(isinstance(self.max_steps, int) and self.max_steps >= 1, "max_steps", "an int >= 1")
        check(not self.prioritized, "prioritized", "false (ML-Agents' SAC samples uniformly)")
        check(self.hybrid_entropy_sign in ("mlagents", "fixed"), "hybrid_entropy_sign",
              "'mlagents' or 'fixed'")
        check(isinstance(self.deterministic_squash, bool), "deterministic_squash", "a bool")
        check(self.padded_value_loss in ("mlagents", "masked"), "padded_value_loss",
              "'mlagents' or 'masked'")

    def min_replay_rows(self) -> int:
        """ML-Agents' ``_is_ready_update``: the buffer holds at least ``batch_size`` rows."""
        return self.batch_size

    def updates_owed(self, agent_steps: int, updates_done: int) -> int:
        """ML-Agents' loop ``while (step − buffer_init_steps) / update_steps > steps_per_update``
        with ``update_steps`` starting at 1: after s steps it has done ⌈(s − init) / spu⌉ − 1
        updates (none before ``buffer_init_steps``)."""
        if agent_steps < self.warmup_steps:
            return 0
        due = math.ceil((agent_steps - self.warmup_steps) / self.steps_per_update) - 1
        return max(0, due - updates_done)

    def learning_rate_at(self, agent_steps: int) -> float:
        """ML-Agents' ``DecayedValue``: linear from learning_rate to 1e-10 at max_steps, or constant."""
        if self.lr_schedule == "constant":
            return self.learning_rate
        frac = min(1.0, agent_steps / self.max_steps)
        return self.learning_rate + (1e-10 - self.learning_rate) * frac


SAC_KEYS: dict[str, str] = {
    "batch_size": "batch_size",
    "buffer_size": "buffer_size",
    "buffer_init_steps": "warmup_steps",
    "steps_per_update": "steps_per_update",
    "tau": "tau",
    "init_entcoef": "init_entcoef",
    "reward_signal_steps_per_update": "reward_signal_steps_per_update",
    "save_replay_buffer": "save_replay_buffer",
    "learning_rate": "learning_rate",
    "learning_rate_schedule": "lr_schedule",
}
"""YAML key under behaviors.<name>.hyperparameters (trainer_type sac) -> SACConfig field."""

QUIRK_FIXES: dict[str, tuple[str, object]] = {
    "sac_interrupted_bootstrap": ("interrupted_next_obs", "final"),
    "sac_deterministic_squash": ("deterministic_squash", True),
    "sac_hybrid_entropy_sign": ("hybrid_entropy_sign", "fixed"),
    "sac_padded_value_loss": ("padded_value_loss", "masked"),
}
"""``unity_rl.fix_quirks`` entry -> (SACConfig field, its value): ML-Agents' SAC quirks
(TRAINERS.md §10) that a run may fix; without the entry SAC does what ML-Agents does."""

SEGMENT_STEPS = 256
"""Most agent-steps per actor segment unless ``unity_rl.segment_steps`` says otherwise."""


def default_segment_steps(hp: SACConfig, num_actors: int, time_horizon: int = SEGMENT_STEPS) -> int:
    """min(256, time_horizon) / num_actors (rounded up): the learner sees new data at least as
    often as ML-Agents' SAC, which updates whenever a trajectory (≤ time_horizon steps) arrives.
    Short horizons (Basic: 10) thus sync every few steps; long ones every 256."""
    del hp
    return max(1, -(-min(SEGMENT_STEPS, int(time_horizon) or SEGMENT_STEPS) // num_actors))
