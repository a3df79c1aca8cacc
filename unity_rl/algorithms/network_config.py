"""``NetworkConfig``: ML-Agents' ``network_settings`` as a torch-free frozen dataclass (the config
loads it without importing torch; ``unity_rl.algorithms.nets`` builds the networks it describes)."""
from __future__ import annotations

from dataclasses import dataclass


_ENCODERS = "unity_rl.algorithms.encoders"
VISUAL_ENCODERS: dict[str, tuple[str, int]] = {
    "simple": (f"{_ENCODERS}:SimpleVisualEncoder", 20),
    "nature_cnn": (f"{_ENCODERS}:NatureVisualEncoder", 36),
    "resnet": (f"{_ENCODERS}:ResNetVisualEncoder", 15),
    "match3": (f"{_ENCODERS}:SmallVisualEncoder", 5),
    "fully_connected": (f"{_ENCODERS}:FullyConnectedVisualEncoder", 1),
}
"""The visual-encoder registry: ``vis_encode_type`` -> (``"module:Class"`` of its encoder, built as
``Class(height, width, channels, h_size)`` and mapping NCHW floats to [n, h_size]; the smallest
height and width it accepts, ML-Agents' ``MIN_RESOLUTION_FOR_ENCODER``). Adding an encoder is
its module plus one line here; the class is imported only when a network uses it."""

VIS_ENCODE_TYPES = tuple(VISUAL_ENCODERS)
"""The accepted ``vis_encode_type`` values (ML-Agents' five, plus any registered above)."""
GOAL_CONDITIONING_TYPES = ("hyper", "none")
"""ML-Agents' ``goal_conditioning_type`` values (``unity_rl.algorithms.conditioning``)."""


@dataclass(frozen=True)
class MemoryConfig:
    """An LSTM after the network body (ML-Agents' ``network_settings.memory``, its
    ``MemorySettings``): actor and critic each run one LSTM of hidden size ``memory_size // 2``
    whose state vector is [h | c]; training replays ``sequence_length`` steps at a time."""

    sequence_length: int = 64
    """Steps per training sequence (each starts from the memory stored when its first action was
    taken); at most the trainer's ``batch_size``."""
    memory_size: int = 128
    """Size of the memory vector [h | c] (even; the LSTM's hidden size is half of it)."""

    def __post_init__(self) -> None:
        for name in ("sequence_length", "memory_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"memory.{name} must be an int >= 1, got {value!r}")
        if self.memory_size % 2:
            raise ValueError(f"memory.memory_size must be even (it holds h and c halves), "
                             f"got {self.memory_size!r}")


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
    goal_conditioning_type: str = "hyper"
    """'hyper': with GOAL_SIGNAL observations, each body's last layer is a goal-fed HyperNetwork;
    'none': goal observations are plain observations (ML-Agents' default: 'hyper')."""
    memory: MemoryConfig | None = None
    """An LSTM after each body (``MemoryConfig``); None: no memory (ML-Agents' default)."""

    def __post_init__(self) -> None:
        for name in ("hidden_units", "num_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"network.{name} must be an int >= 1, got {value!r}")
        if self.vis_encode_type not in VIS_ENCODE_TYPES:
            raise ValueError(f"network.vis_encode_type must be one of {', '.join(VIS_ENCODE_TYPES)}, "
                             f"got {self.vis_encode_type!r}")
        if self.memory is not None and not isinstance(self.memory, MemoryConfig):
            raise ValueError(f"network.memory must be a MemoryConfig or None, got {self.memory!r}")
        if self.goal_conditioning_type not in GOAL_CONDITIONING_TYPES:
            raise ValueError(f"network.goal_conditioning_type must be one of "
                             f"{', '.join(GOAL_CONDITIONING_TYPES)}, got {self.goal_conditioning_type!r}")

    @property
    def memory_size(self) -> int:
        """Size of the memory vector [h | c]; 0 without memory."""
        return self.memory.memory_size if self.memory is not None else 0

    @property
    def sequence_length(self) -> int:
        """Steps per training sequence; 1 without memory (ML-Agents' ``policy.sequence_length``)."""
        return self.memory.sequence_length if self.memory is not None else 1

    def conditioning_goals(self, goal_indices) -> tuple[int, ...]:
        """The goal observations a network body is conditioned on: ``goal_indices`` with 'hyper',
        none with 'none' (then goals are only part of the ordinary encoding)."""
        return tuple(int(i) for i in goal_indices) if self.goal_conditioning_type == "hyper" else ()


def network_config_from_meta(meta) -> NetworkConfig:
    """A ``NetworkConfig`` from its ``dataclasses.asdict`` form (checkpoint metadata)."""
    fields = dict(meta)
    if fields.get("memory") is not None and not isinstance(fields["memory"], MemoryConfig):
        fields["memory"] = MemoryConfig(**dict(fields["memory"]))
    return NetworkConfig(**fields)
