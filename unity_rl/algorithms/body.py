"""``Body``: ML-Agents 1.1.0's ``NetworkBody`` (``torch_entities/networks.py``) for the networks
that take flat rows: ``ObservationEncoder`` → [action concatenated] → ``LinearEncoder``
(``num_layers`` × [Linear(h) + Swish], Kaiming-normal) or, with goals under 'hyper', its
``ConditionalEncoder`` → [one-layer LSTM of ``memory_size // 2``]. SAC's π, V, Q1 and Q2 and the
learned reward signals' networks (curiosity, RND, GAIL) are built on it.

Contract: ``forward(x, actions=None, memory=None, sequence_length=1)`` -> [n, output_size];
``run`` also returns the memories after each sequence (None without an LSTM). With memory, rows
come sequence after sequence and ``memory`` [n_sequences, memory_size] ([h | c]) is what each
starts from (None: zeros).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from unity_rl.algorithms.conditioning import ConditionalEncoder
from unity_rl.algorithms.encoders import ObservationEncoder, ObsShapesLike, Swish
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.nets import lstm_layer, mlagents_init, run_lstm


class Body(nn.Module):
    """Encoder + ``LinearEncoder`` / ``ConditionalEncoder`` [+ LSTM]; ``forward(x, actions=None)``
    -> [n, output_size] (``actions`` concatenated to the encoding first, as ML-Agents'
    ``NetworkBody``); ``run`` also returns the memories after each sequence (None without an
    LSTM)."""

    def __init__(self, obs_shapes: ObsShapesLike, network: NetworkConfig, action_size: int = 0,
                 goal_indices: Sequence[int] = ()):
        super().__init__()
        goals = network.conditioning_goals(goal_indices)
        self.encoder = ObservationEncoder(obs_shapes, network, goals)
        in_size = self.encoder.output_size + action_size
        hidden = network.hidden_units
        if goals:
            self.layers = ConditionalEncoder(in_size, self.encoder.goal_size, hidden,
                                             network.num_layers)
        else:
            layers: list[nn.Module] = []
            for i in range(network.num_layers):
                layers += [mlagents_init(nn.Linear(in_size if i == 0 else hidden, hidden)), Swish()]
            self.layers = nn.Sequential(*layers)
        self.conditioned = bool(goals)
        self.memory_size = network.memory_size
        """Size of the memory [h | c] (0: no LSTM)."""
        self.output_size = self.memory_size // 2 if self.memory_size else hidden
        """Width of what the heads read."""
        if self.memory_size:
            self.lstm = lstm_layer(hidden, self.memory_size // 2)

    def run(self, x: torch.Tensor, actions: torch.Tensor | None = None,
            memory: torch.Tensor | None = None, sequence_length: int = 1,
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(encoding [n·L, output_size], memories after each sequence [n, memory_size] or None)."""
        encoding, goal = self.encoder.encode(x)
        if actions is not None:
            encoding = torch.cat([encoding, actions], dim=1)
        h = self.layers(encoding, goal) if self.conditioned else self.layers(encoding)
        if not self.memory_size:
            return h, None
        return run_lstm(self.lstm, h, memory, sequence_length)

    def forward(self, x: torch.Tensor, actions: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, sequence_length: int = 1) -> torch.Tensor:
        return self.run(x, actions, memory, sequence_length)[0]
