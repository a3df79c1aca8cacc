"""Small network builders and the network configuration shared by the learners."""
from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import torch
from torch import nn


class Swish(nn.Module):
    """x·σ(x) (Ramachandran et al. 2017, arXiv:1710.05941), as ML-Agents' ``Swish``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights, constant bias (the PPO implementation-details default)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlagents_init(layer: nn.Linear, gain: float | torch.Tensor = 1.0,
                  xavier_uniform: bool = False) -> nn.Linear:
    """ML-Agents 1.1.0's ``linear_layer`` (``torch_entities/layers.py``): Kaiming-He normal with
    ``nonlinearity="linear"`` (std 1/sqrt(fan_in)) or Xavier-Glorot uniform (its default, used by
    the value heads), times ``gain`` (a scalar, or one gain per output row), zero bias."""
    with torch.no_grad():
        if xavier_uniform:
            nn.init.xavier_uniform_(layer.weight)
        else:
            nn.init.kaiming_normal_(layer.weight, nonlinearity="linear")
        gain = torch.as_tensor(gain, dtype=layer.weight.dtype)
        layer.weight.mul_(gain.reshape(-1, 1) if gain.ndim else gain)
        nn.init.zeros_(layer.bias)
    return layer


def mlp(in_dim: int, hidden: int, num_layers: int, out_dim: int, out_std: float,
        activation: type[nn.Module] = nn.Tanh, init: str = "orthogonal",
        out_gain: float | torch.Tensor | None = None) -> nn.Sequential:
    """in_dim -> num_layers x hidden (activation) -> out_dim.

    ``init="orthogonal"``: orthogonal weights (gain sqrt 2, output layer ``out_std``), zero bias
    (CleanRL's PPO).  ``init="mlagents"``: ML-Agents' ``LinearEncoder`` hidden layers (Kaiming
    normal, gain 1) and an output layer of Kaiming normal times ``out_gain`` (a scalar or one
    gain per output), or Xavier uniform when ``out_gain`` is None (ML-Agents' ``ValueHeads``).
    """
    if init not in ("orthogonal", "mlagents"):
        raise ValueError(f"init must be 'orthogonal' or 'mlagents', got {init!r}")
    layers: list[nn.Module] = []
    last = in_dim
    for _ in range(num_layers):
        linear = nn.Linear(last, hidden)
        layers += [layer_init(linear) if init == "orthogonal" else mlagents_init(linear),
                   activation()]
        last = hidden
    out = nn.Linear(last, out_dim)
    if init == "orthogonal":
        layers.append(layer_init(out, std=out_std))
    else:
        layers.append(mlagents_init(out, 1.0 if out_gain is None else out_gain,
                                    xavier_uniform=out_gain is None))
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
