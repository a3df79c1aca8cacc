"""Small network builders and the network configuration shared by the learners."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch
from torch import nn


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights, constant bias (the PPO implementation-details default)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(in_dim: int, hidden: int, num_layers: int, out_dim: int, out_std: float,
        activation: type[nn.Module] = nn.Tanh) -> nn.Sequential:
    """in_dim -> num_layers x hidden (activation) -> out_dim, orthogonally initialised."""
    layers: list[nn.Module] = []
    last = in_dim
    for _ in range(num_layers):
        layers += [layer_init(nn.Linear(last, hidden)), activation()]
        last = hidden
    layers.append(layer_init(nn.Linear(last, out_dim), std=out_std))
    return nn.Sequential(*layers)


@contextlib.contextmanager
def seeded_init(seed: int | None) -> Iterator[None]:
    """Inside: torch's CPU RNG seeded with ``seed``; after: the global RNG as it was before.

    Networks built inside are seed-reproducible without ``torch.manual_seed`` touching the
    process's RNG (with ``seed`` None nothing is forked: the global RNG draws as usual).
    """
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def set_torch_threads(num_threads: int) -> None:
    """Pins torch's intra-op threads (a small machine is slower with more threads than cores)."""
    torch.set_num_threads(max(1, num_threads))


VIS_ENCODE_TYPES = ("simple", "nature_cnn", "resnet", "match3", "fully_connected")
"""ML-Agents' ``vis_encode_type`` values (``unity_rl.algos.encoders.VISUAL_ENCODERS``)."""


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
