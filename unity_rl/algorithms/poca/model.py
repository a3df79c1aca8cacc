"""POCA's centralised critic: ML-Agents 1.1.0's ``MultiAgentNetworkBody`` + ``ValueHeads``
(``torch_entities/networks.py``, ``poca/optimizer_torch.py`` ``POCAValueNetwork``).

Contract: ``POCACritic(obs_shapes, action_spec, network_cfg, value_heads)`` takes the agent's
own rows ``self_obs`` [B, obs_dim] and its groupmates' ``mates_obs`` [B, M, obs_dim] (vector
columns normalised as the actor's; a member absent at a step is a row of NaN, M may be 0), and

- ``value(self_obs, mates_obs)`` -> V_k of the group state [B, K]: every member's observation
  (self first) through the shared ``observation_encoder`` and ``obs_encoder`` (EntityEmbedding,
  Linear + Swish), ``self_attn`` (ResidualSelfAttention, 4 heads, absent members masked, masked
  mean-pool), ``linear_encoder`` (``num_layers`` × Linear + Swish, Kaiming-normal × √(0.125/h)),
  then the normalised member count n' = 2·n/n_max − 1 appended and one ``Linear(h + 1, 1)`` per
  reward signal;
- ``baseline(self_obs, mates_obs, mates_actions)`` -> the counterfactual baseline Q_k(s, a_−i)
  [B, K]: the agent's own observation without its action (``obs_encoder``), each groupmate's
  encoded observation with its flattened action (continuous values, one-hot branches) through
  ``obs_action_encoder``; the same attention, encoder and heads. ``mates_actions`` are action rows
  [B, M, C + B] (continuous values, then branch indices as floats).

Memory (``network_settings.memory``): ``MultiAgentNetworkBody`` with ``use_lstm``: the encoding
goes through one LSTM (``lstm.lstm``, hidden ``memory_size // 2``, ML-Agents' ``lstm_layer``
initialisation) before the member count is appended, and the heads read ``memory_size // 2 + 1``
columns. Value and baseline share that LSTM but not their memories: ``value_forward`` /
``baseline_forward`` take rows [n·L, ...] in n sequences of L and the memories [n, memory_size]
the sequences start from (None: zeros), and return the memories after each sequence.
``value_encoding`` / ``baseline_encoding`` (rows independent) and ``heads`` (the LSTM and the
heads) split a pass in two, for evaluating a trajectory sequence by sequence.

Absent members are found as ML-Agents finds them: the first value of the first observation is
NaN; their rows are zeroed before encoding. ``max_agents`` (ML-Agents' ``_current_max_agents``)
is the largest member count seen so far, raised by any forward pass and saved with the weights.
Parameter names are ML-Agents' (``network_body.`` prefix dropped): ``obs_encoder.self_ent_encoder
.seq_layers.0.*``, ``self_attn.fc_q.*``, ``linear_encoder.seq_layers.<2i>.*``,
``value_heads.<signal>.*``, ``lstm.lstm.*``; a state dict of ML-Agents' critic maps on one to one.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from unity_rl.algorithms.attention import EntityEmbedding, ResidualSelfAttention, attention_gain
from unity_rl.algorithms.encoders import ObservationEncoder, ObsShapesLike
from unity_rl.algorithms.nets import Swish, lstm_layer, mlagents_init, run_lstm
from unity_rl.algorithms.ppo.model import ActionSpecLike, action_layout


class GroupSelfAttention(ResidualSelfAttention):
    """``ResidualSelfAttention`` over as many entities as the input holds (ML-Agents' POCA critic
    builds it with ``entity_num_max_elements=None``: the group size varies from batch to batch).
    The same parameters and ops; only the entity count comes from the input."""

    def __init__(self, embedding_size: int, num_heads: int = 4):
        super().__init__(embedding_size, 1, num_heads)

    def forward(self, inp: torch.Tensor, key_masks: Sequence[torch.Tensor]) -> torch.Tensor:
        mask = torch.cat(list(key_masks), dim=1)
        inp = self.embedding_norm(inp)
        query, key, value = self.fc_q(inp), self.fc_k(inp), self.fc_v(inp)
        num_ent = inp.shape[1]
        output, _ = self.attention(query, key, value, num_ent, num_ent, mask)
        output = self.residual_norm(self.fc_out(output) + inp)
        numerator = torch.sum(output * (1 - mask).reshape(-1, num_ent, 1), dim=1)
        denominator = torch.sum(1 - mask, dim=1, keepdim=True) + self.EPSILON
        return numerator / denominator


class KaimingLinearEncoder(nn.Module):
    """ML-Agents' ``layers.LinearEncoder`` (Kaiming-He normal × ``kernel_gain``, zero bias,
    Swish after every layer), its layers under ``seq_layers``."""

    def __init__(self, input_size: int, num_layers: int, hidden_size: int, kernel_gain: float):
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(num_layers):
            layers += [mlagents_init(nn.Linear(input_size if i == 0 else hidden_size, hidden_size),
                                     kernel_gain), Swish()]
        self.seq_layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.seq_layers(x)


class MemoryLSTM(nn.Module):
    """ML-Agents' ``layers.LSTM``: its ``nn.LSTM`` (``lstm_layer``) under ``lstm``, memories
    [h | c] of ``memory_size``."""

    def __init__(self, input_size: int, memory_size: int):
        super().__init__()
        self.lstm = lstm_layer(input_size, memory_size // 2)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None, sequence_length: int):
        return run_lstm(self.lstm, x, memory, sequence_length)


class POCACritic(nn.Module):
    """The centralised value and counterfactual baseline of one behavior's groups (module doc)."""

    def __init__(self, obs_shapes: ObsShapesLike, action_spec: ActionSpecLike, network,
                 value_heads: Sequence[str] = ("extrinsic",)):
        super().__init__()
        h = network.hidden_units
        self.memory_size = network.memory_size
        """Size of the value (and of the baseline) memory [h | c]; 0: no LSTM."""
        self.continuous_size, self.discrete_branches = action_layout(action_spec)
        self.observation_encoder = ObservationEncoder(obs_shapes, network)
        enc = self.observation_encoder.output_size
        self.obs_dim = self.observation_encoder.layout.obs_dim
        # entity_num_max_elements: unused without a self embedding (ML-Agents passes None)
        self.obs_encoder = EntityEmbedding(enc, 1, h)
        self.obs_action_encoder = EntityEmbedding(
            enc + self.continuous_size + sum(self.discrete_branches), 1, h)
        self.self_attn = GroupSelfAttention(h)
        self.linear_encoder = KaimingLinearEncoder(h, network.num_layers, h, attention_gain(h))
        if self.memory_size:
            self.lstm = MemoryLSTM(h, self.memory_size)
        self.register_buffer("max_agents", torch.tensor(1.0))
        encoding = self.memory_size // 2 if self.memory_size else h
        self.value_heads = nn.ModuleDict({
            name: mlagents_init(nn.Linear(encoding + 1, 1), xavier_uniform=True)
            for name in value_heads})

    @property
    def value_head_names(self) -> list[str]:
        return list(self.value_heads)

    def value(self, self_obs: torch.Tensor, mates_obs: torch.Tensor,
              memory: torch.Tensor | None = None, sequence_length: int = 1) -> torch.Tensor:
        """V_k(s_group): [B, K] (``critic_pass``)."""
        return self.value_forward(self_obs, mates_obs, memory, sequence_length)[0]

    def baseline(self, self_obs: torch.Tensor, mates_obs: torch.Tensor,
                 mates_actions: torch.Tensor, memory: torch.Tensor | None = None,
                 sequence_length: int = 1) -> torch.Tensor:
        """Q_k(s, a_−i): [B, K] (``baseline``: the agent's action marginalised)."""
        return self.baseline_forward(self_obs, mates_obs, mates_actions, memory,
                                     sequence_length)[0]

    def value_forward(self, self_obs, mates_obs, memory=None, sequence_length: int = 1):
        """(``value``, the value memories after each sequence; None without memory)."""
        return self.heads(*self.value_encoding(self_obs, mates_obs), memory, sequence_length)

    def baseline_forward(self, self_obs, mates_obs, mates_actions, memory=None,
                         sequence_length: int = 1):
        """(``baseline``, the baseline memories after each sequence; None without memory)."""
        return self.heads(*self.baseline_encoding(self_obs, mates_obs, mates_actions), memory,
                          sequence_length)

    def value_encoding(self, self_obs: torch.Tensor, mates_obs: torch.Tensor):
        """(the group state's encoding before the LSTM [B, h], n' [B, 1]); rows independent."""
        return self._body(torch.cat([self_obs.unsqueeze(1), mates_obs], dim=1), None, None)

    def baseline_encoding(self, self_obs: torch.Tensor, mates_obs: torch.Tensor,
                          mates_actions: torch.Tensor):
        """As ``value_encoding``, the agent's action marginalised."""
        return self._body(self_obs.unsqueeze(1), mates_obs, mates_actions)

    def heads(self, encoding: torch.Tensor, num_agents: torch.Tensor,
              memory: torch.Tensor | None = None, sequence_length: int = 1):
        """An encoding through the LSTM (memory) and the heads: ([B, K], memories after)."""
        memory_out = None
        if self.memory_size:
            encoding, memory_out = self.lstm(encoding, memory, sequence_length)
        encoding = torch.cat([encoding, num_agents], dim=1)
        return torch.cat([head(encoding) for head in self.value_heads.values()], dim=-1), memory_out

    def flat_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Action rows [..., C + B] -> [..., C + sum(branches)]: continuous values, then a
        one-hot per branch (ML-Agents' ``AgentAction.to_flat``)."""
        c = self.continuous_size
        parts = [actions[..., :c]]
        for i, size in enumerate(self.discrete_branches):
            index = actions[..., c + i].long()
            parts.append(nn.functional.one_hot(index, size).to(actions.dtype))
        return torch.cat(parts, dim=-1)

    def _encode_entities(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(encoded observations [B, N, enc], absence mask [B, N]: 1.0 where the first value is
        NaN), the absent rows zeroed first (``_get_masks_from_nans``, ``_copy_and_remove_nans``)."""
        b, n, d = obs.shape
        mask = torch.isnan(obs[:, :, 0]).float()
        clean = obs.masked_fill(mask.bool().unsqueeze(-1), 0.0)
        encoded = self.observation_encoder(clean.reshape(b * n, d))
        return encoded.reshape(b, n, -1), mask

    def _body(self, obs_only: torch.Tensor, obs: torch.Tensor | None,
              actions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``MultiAgentNetworkBody.forward`` up to its LSTM: entities with actions first, then
        those without; (encoding, normalised member count)."""
        inputs, masks = [], []
        if obs is not None and obs.shape[1] > 0:
            encoded, mask = self._encode_entities(obs)
            inputs.append(self.obs_action_encoder(
                None, torch.cat([encoded, self.flat_actions(actions)], dim=2)))
            masks.append(mask)
        encoded, mask = self._encode_entities(obs_only)
        inputs.append(self.obs_encoder(None, encoded))
        masks.append(mask)
        encoded_state = self.self_attn(torch.cat(inputs, dim=1), masks)
        num_agents = torch.sum(1 - torch.cat(masks, dim=1), dim=1, keepdim=True)
        with torch.no_grad():
            most = torch.max(num_agents)
            if most > self.max_agents:
                self.max_agents.copy_(most)
        num_agents = num_agents * 2.0 / self.max_agents - 1
        return self.linear_encoder(encoded_state), num_agents
