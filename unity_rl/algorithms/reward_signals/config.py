"""Settings of one ``reward_signals.<name>`` entry (ML-Agents' ``RewardSignalSettings`` and its
per-signal subclasses), torch-free so that the config loads without torch.

A signal with keys of its own has a settings class here (a ``RewardSignalConfig`` subclass,
one docstring line per field) and one line in ``SIGNAL_SETTINGS``; its YAML keys are its field
names (``unity_rl.config.parse_behavior`` reads them strictly)."""
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
    """The signal's own network (learned rewards only; ML-Agents reads it but extrinsic uses none;
    its ``memory`` is dropped, as ML-Agents does)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"reward_signal.gamma must be in [0, 1], got {self.gamma!r}")
        if not self.strength > 0:
            raise ValueError(f"reward_signal.strength must be > 0, got {self.strength!r}")


@dataclass(frozen=True)
class LearnedSignalConfig(RewardSignalConfig):
    """A signal with a network and an optimiser of its own (ML-Agents' Curiosity/RND/GAIL
    settings' common keys)."""

    learning_rate: float = 3e-4
    """Adam step size of the signal's own optimiser (constant: ML-Agents never decays it)."""
    encoding_size: int | None = None
    """Deprecated (ML-Agents): without ``network_settings`` it becomes
    ``network_settings.hidden_units``; with them it is ignored."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.learning_rate > 0:
            raise ValueError(f"reward_signal.learning_rate must be > 0, got {self.learning_rate!r}")
        if self.encoding_size is not None and not (isinstance(self.encoding_size, int)
                                                   and self.encoding_size >= 1):
            raise ValueError(f"reward_signal.encoding_size must be an int >= 1, "
                             f"got {self.encoding_size!r}")


@dataclass(frozen=True)
class CuriosityConfig(LearnedSignalConfig):
    """``reward_signals.curiosity`` (ML-Agents' ``CuriositySettings``)."""

    learning_rate: float = 3e-4
    """Adam step size of the forward and inverse models and their encoder."""


@dataclass(frozen=True)
class RNDConfig(LearnedSignalConfig):
    """``reward_signals.rnd`` (ML-Agents' ``RNDSettings``)."""

    learning_rate: float = 1e-4
    """Adam step size of the predictor (ML-Agents' code default 1e-4; its docs say 3e-4)."""


@dataclass(frozen=True)
class GAILConfig(LearnedSignalConfig):
    """``reward_signals.gail`` (ML-Agents' ``GAILSettings``)."""

    demo_path: str = ""
    """The expert demonstration: a ``.demo`` file or a directory of them (required)."""
    learning_rate: float = 3e-4
    """Adam step size of the discriminator."""
    use_actions: bool = False
    """The discriminator also sees the action (flattened, one-hot branches) and the done flag."""
    use_vail: bool = False
    """Variational Information Bottleneck (Peng et al. 2018): a stochastic 128-d code with a KL
    constraint whose β adapts."""
    demo_pairing: str = field(default="mlagents", metadata={"yaml": False})
    """Not a YAML key: ``unity_rl.demo_pairing``, copied here when the run's config is built."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.demo_path, str) and self.demo_path):
            raise ValueError("reward_signal.demo_path must be the path of a .demo file or of a "
                             f"directory of them, got {self.demo_path!r}")
        if self.demo_pairing not in ("mlagents", "aligned"):
            raise ValueError(f"reward_signal.demo_pairing must be 'mlagents' or 'aligned', "
                             f"got {self.demo_pairing!r}")


def yaml_fields(cls: type) -> list:
    """The dataclass fields of a signal's settings that are YAML keys (all but those marked
    ``metadata={"yaml": False}``, which the run's config fills)."""
    import dataclasses

    return [f for f in dataclasses.fields(cls) if f.metadata.get("yaml", True)]


SIGNAL_SETTINGS: dict[str, type] = {
    "curiosity": CuriosityConfig,
    "rnd": RNDConfig,
    "gail": GAILConfig,
}
"""Signal name -> its settings class (a signal not listed has only ``RewardSignalConfig``'s keys)."""


def settings_class(name: str) -> type:
    """The settings class of the signal ``name``."""
    return SIGNAL_SETTINGS.get(name, RewardSignalConfig)


EXTRINSIC_ONLY = (RewardSignalConfig("extrinsic"),)
"""ML-Agents' default ``reward_signals``: the extrinsic reward, gamma 0.99, strength 1."""
