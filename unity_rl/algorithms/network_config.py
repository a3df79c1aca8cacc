"""``NetworkConfig``: ML-Agents' ``network_settings`` as a torch-free frozen dataclass (the config
loads it without importing torch; ``unity_rl.algorithms.nets`` builds the networks it describes)."""
from __future__ import annotations

from dataclasses import dataclass


VIS_ENCODE_TYPES = ("simple", "nature_cnn", "resnet", "match3", "fully_connected")
"""ML-Agents' ``vis_encode_type`` values (``unity_rl.algorithms.encoders.VISUAL_ENCODERS``)."""


@dataclass(frozen=True)
class NetworkConfig:
    """Network shape and input normalisation (ML-Agents' ``network_settings``)."""

    normalize: bool = False
    """Normalise vector (rank-1) observations with running mean and variance; images never."""
    hidden_units: int = 128
    """Width of each hidden layer."""
    num_layers: int = 2
    """Number of hidden layers in each trunk (actor and critic have their own)."""
    vis_encode_type: str = "simple"
    """Encoder of each rank-3 (image) observation: one of ``VIS_ENCODE_TYPES``."""

    def __post_init__(self) -> None:
        for name in ("hidden_units", "num_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"network.{name} must be an int >= 1, got {value!r}")
        if self.vis_encode_type not in VIS_ENCODE_TYPES:
            raise ValueError(f"network.vis_encode_type must be one of {', '.join(VIS_ENCODE_TYPES)}, "
                             f"got {self.vis_encode_type!r}")
