"""Small network builders shared by the learners (ML-Agents' layer initialisations, its LSTM
layer and how a memory [h | c] runs through it)."""
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


def optimised_parameter_count(*optimizers: torch.optim.Optimizer) -> int:
    """Elements of every parameter these optimisers step (what one update optimises; the
    trainer sizes a learner's threads by it)."""
    return sum(p.numel() for opt in optimizers for group in opt.param_groups
               for p in group["params"])


def set_torch_threads(num_threads: int) -> None:
    """Pins torch's intra-op threads (a small machine is slower with more threads than cores)."""
    torch.set_num_threads(max(1, num_threads))


def lstm_layer(input_size: int, hidden_size: int, forget_bias: float = 1.0) -> nn.LSTM:
    """ML-Agents' ``lstm_layer`` (``torch_entities/layers.py``): one batch-first LSTM layer, each
    of the four gate blocks of every weight Xavier-uniform, biases zero, then ``forget_bias``
    added to the forget-gate block (gate 1) of both bias vectors."""
    lstm = nn.LSTM(input_size, hidden_size, 1, batch_first=True)
    for name, param in lstm.named_parameters():
        block = param.shape[0] // 4
        for idx in range(4):
            part = param.data[idx * block:(idx + 1) * block]
            if "weight" in name:
                nn.init.xavier_uniform_(part)
            else:
                part.zero_()
                if idx == 1:
                    part.add_(forget_bias)
    return lstm


def run_lstm(lstm: nn.LSTM, hidden: torch.Tensor, memory: torch.Tensor | None,
             sequence_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``hidden`` [n·L, h] (n sequences of L rows, one after the other) through ``lstm`` from
    ``memory`` [n, 2·half] ([h | c] per sequence; None: zeros): (outputs [n·L, half], memories
    after each sequence [n, 2·half]) — ML-Agents' ``NetworkBody.forward`` and ``LSTM.forward``.

    One step (``sequence_length`` 1: acting) goes through the LSTM's cell function with the same
    weights: the same numbers at about a quarter of ``nn.LSTM``'s per-call cost on CPU (measured
    43 vs 158 µs for one agent, hidden 64), which is most of what memory adds to an actor's step.
    ONNX export keeps ``nn.LSTM`` (the ``LSTM`` operator Unity's runtime reads)."""
    half = lstm.hidden_size
    if memory is None:
        memory = hidden.new_zeros(hidden.shape[0] // sequence_length, 2 * half)
    if sequence_length == 1 and not torch.onnx.is_in_onnx_export():
        h_n, c_n = torch.lstm_cell(hidden, (memory[:, :half], memory[:, half:]),
                                    lstm.weight_ih_l0, lstm.weight_hh_l0,
                                    lstm.bias_ih_l0, lstm.bias_hh_l0)
        return h_n, torch.cat([h_n, c_n], dim=-1)
    seq = hidden.reshape(-1, sequence_length, hidden.shape[-1])
    h0 = memory[:, :half].unsqueeze(0).contiguous()
    c0 = memory[:, half:].unsqueeze(0).contiguous()
    out, (h_n, c_n) = lstm(seq, (h0, c0))
    return out.reshape(-1, half), torch.cat([h_n[0], c_n[0]], dim=-1)
