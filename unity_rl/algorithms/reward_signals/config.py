"""``RewardSignalConfig``: one ``reward_signals.<name>`` entry (ML-Agents' ``RewardSignalSettings``),
torch-free so that the config loads without torch."""
from __future__ import annotations

from dataclasses import dataclass, field

from unity_rl.algorithms.network_config import NetworkConfig


@dataclass(frozen=True)
class RewardSignalConfig:
    """One reward signal of a behavior, as ``reward_signals: {<name>: {gamma, strength, ...}}``."""

    name: str
    """The signal: a key of ``reward_signals.registry.REWARD_SIGNALS`` ('extrinsic', ...); also
    the name of its value head and of its metrics."""
    gamma: float = 0.99
    """Discount γ of this signal's returns (its value head and GAE)."""
    strength: float = 1.0
    """Multiplier of the signal's reward before GAE."""
    network_settings: NetworkConfig = field(default_factory=NetworkConfig)
    """The signal's own network (learned rewards only; ML-Agents reads it but extrinsic uses none)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"reward_signal.gamma must be in [0, 1], got {self.gamma!r}")
        if not self.strength > 0:
            raise ValueError(f"reward_signal.strength must be > 0, got {self.strength!r}")


EXTRINSIC_ONLY = (RewardSignalConfig("extrinsic"),)
"""ML-Agents' default ``reward_signals``: the extrinsic reward, gamma 0.99, strength 1."""
