"""Attention over variable-length observations (buffer sensors): ML-Agents 1.1.0's
``torch_entities/attention.py``, module for module.

Contract (what the observation encoder and POCA's centralised critic rely on):

- ``get_zero_entities_mask(entities)``: for each tensor [b, n_i, size_i] a float mask [b, n_i],
  1.0 where the entity is padding (Σ x² < 0.01 over its raw features), 0.0 otherwise; computed
  without gradient. A genuine all-zero entity therefore counts as padding (as in ML-Agents).
- ``EntityEmbedding(entity_size, entity_num_max_elements, embedding_size)``: entities
  [b, max, entity_size] -> [b, max, embedding_size] through one Linear + Swish
  (``self_ent_encoder``). After ``add_self_embedding(self_size)`` each entity is first
  concatenated after a copy of ``x_self`` [b, self_size] (``[x_self, entity]``), so the layer is
  Linear(self_size + entity_size -> embedding_size). ``entity_num_max_elements`` must be known
  (this project always knows it from the BehaviorSpec; None is refused).
- ``ResidualSelfAttention(embedding_size, entity_num_max_elements, num_heads=4)``:
  ``forward(inp [b, max, emb], key_masks: list of [b, n_i] summing to max)`` -> [b, emb]:
  x̂ = LayerNorm(inp) (no affine, eps 1e-5); Q, K, V = Linear(x̂); ``MultiHeadAttention`` with
  logits q·k/√emb (the *full* embedding size), masked keys (1−m)·logit + m·(−1e6); out =
  LayerNorm(fc_out(att) + x̂); masked mean over entities Σ out·(1−m) / (Σ(1−m) + 1e-7).
- ``MultiHeadAttention(embedding_size, num_heads)``: parameter-free; (query, key, value, n_q,
  n_k, key_mask) -> (output [b, n_q, emb], attention [b, heads, n_q, n_k]).
- ``LinearEncoder(input_size, num_layers, hidden_size, kernel_gain)``: ML-Agents' ``LinearEncoder``
  with ``Initialization.Normal`` (N(0, 1) × gain, zero bias) and Swish after every layer.
- ``ATTENTION_EMBEDDING_SIZE = 128``: ML-Agents' fixed attention width (``ObservationEncoder``),
  independent of ``hidden_units``; ``attention_gain(size)`` = √(0.125/size), the T-Fixup gain
  every layer here is initialised with.

Names, structure and initialisation are ML-Agents' own, so a state dict of ML-Agents'
``EntityEmbedding`` / ``ResidualSelfAttention`` / ``LinearEncoder`` loads here unchanged
(``self_ent_encoder.seq_layers.0.weight``, ``fc_q.weight``, ...). Two paths compute the same
function:

- **exporting** (``torch.onnx`` tracing, ``exporting()``): ML-Agents' ops in ML-Agents' order
  (including its ``key - 1 + 1`` that keeps Sentis from fusing two permutes, and the fixed
  ``entity_num_max_elements``), so the exported ONNX graph is the one Unity's Sentis runs;
- **otherwise** (acting, training): the same mathematics with fewer tensor passes, which on
  Sorter's sizes (batch 512 × 20 entities × 128) is where an update's time goes: the entity
  layer splits ``W·[x_self, e] + b`` into ``W_self·x_self`` (once per row, not per entity) plus
  ``W_ent·e + b``; the layer norms are ``F.layer_norm`` (the same biased variance and 1e-5);
  masked logits are ``masked_fill`` with −1e6 (what ``(1−m)·logit + m·(−1e6)`` gives); the
  entity count comes from the input, so a caller may pass fewer entities than the maximum.
  Outputs and gradients equal the export path's to float rounding (tests/algos/test_attention.py).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from unity_rl.algorithms.nets import Swish

ATTENTION_EMBEDDING_SIZE = 128
"""ML-Agents' ``ObservationEncoder.ATTENTION_EMBEDDING_SIZE``: the attention width."""


def exporting() -> bool:
    """True while ``torch.onnx`` traces a module (or TorchScript traces it): the modules here
    then run ML-Agents' exact ops (module doc)."""
    return torch.onnx.is_in_onnx_export() or torch.jit.is_tracing()


def attention_gain(embedding_size: int) -> float:
    """√(0.125 / embedding_size): the T-Fixup gain of ML-Agents' attention layers."""
    return (0.125 / embedding_size) ** 0.5


def normal_linear(input_size: int, output_size: int, kernel_gain: float) -> nn.Linear:
    """ML-Agents' ``linear_layer(kernel_init=Initialization.Normal, kernel_gain=g)``: weights
    N(0, 1) × g, zero bias."""
    layer = nn.Linear(input_size, output_size)
    with torch.no_grad():
        nn.init.normal_(layer.weight)
        layer.weight.mul_(kernel_gain)
        nn.init.zeros_(layer.bias)
    return layer


class LinearEncoder(nn.Module):
    """ML-Agents' ``LinearEncoder`` with Normal initialisation: ``num_layers`` × (Linear, Swish)
    as ``seq_layers`` (its state-dict names)."""

    def __init__(self, input_size: int, num_layers: int, hidden_size: int, kernel_gain: float):
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(num_layers):
            layers += [normal_linear(input_size if i == 0 else hidden_size, hidden_size,
                                     kernel_gain), Swish()]
        self.seq_layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.seq_layers(x)


class LayerNorm(nn.Module):
    """(x − mean) / √(var + 1e-5) over the last axis, no affine parameters (ML-Agents')."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not exporting():
            return F.layer_norm(x, x.shape[-1:], eps=1e-5)
        mean = torch.mean(x, dim=-1, keepdim=True)
        var = torch.mean((x - mean) ** 2, dim=-1, keepdim=True)
        return (x - mean) / (torch.sqrt(var + 1e-5))


def trim_padding(entities: torch.Tensor, mask: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(entities [b, k, size], mask [b, k]): the first k entities, k = 1 + the last index that is
    not padding in any row of the batch (at least 1). The entities cut off are padding in every
    row: masked as keys and left out of the mean-pool, so the pooled vector is the same (off
    export only; a buffer sensor's padding rows come after its entities)."""
    real = (mask < 0.5).any(dim=0)
    k = int(real.nonzero().max()) + 1 if bool(real.any()) else 1
    return entities[:, :k], mask[:, :k]


def get_zero_entities_mask(entities: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One float mask [b, n_i] per entity tensor [b, n_i, size_i]: 1.0 where Σ x² < 0.01 (a
    padding row), 0.0 otherwise (ML-Agents' ``get_zero_entities_mask``)."""
    with torch.no_grad():
        return [(torch.sum(ent ** 2, dim=2) < 0.01).float() for ent in entities]


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over ``num_heads`` heads, written with the ops Sentis runs
    (ML-Agents' ``MultiHeadAttention``; no parameters)."""

    NEG_INF = -1e6

    def __init__(self, embedding_size: int, num_heads: int):
        super().__init__()
        self.n_heads = num_heads
        self.head_size: int = embedding_size // num_heads
        self.embedding_size: int = self.head_size * num_heads

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, n_q: int,
                n_k: int, key_mask: Optional[torch.Tensor] = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        b = -1
        if not exporting():
            return self._fast(query, key, value, n_q, n_k, key_mask)
        query = query.reshape(b, n_q, self.n_heads, self.head_size)
        key = key.reshape(b, n_k, self.n_heads, self.head_size)
        value = value.reshape(b, n_k, self.n_heads, self.head_size)
        query = query.permute([0, 2, 1, 3])  # (b, h, n_q, emb / h)
        key = key.permute([0, 2, 1, 3])  # (b, h, n_k, emb / h)
        key = key - 1  # ML-Agents' guard: keeps ONNX from fusing the two permutes (Sentis)
        key = key + 1
        key = key.permute([0, 1, 3, 2])  # (b, h, emb / h, n_k)
        qk = torch.matmul(query, key)  # (b, h, n_q, n_k)
        if key_mask is None:
            qk = qk / (self.embedding_size ** 0.5)
        else:
            key_mask = key_mask.reshape(b, 1, 1, n_k)
            qk = (1 - key_mask) * qk / (self.embedding_size ** 0.5) + key_mask * self.NEG_INF
        att = torch.softmax(qk, dim=3)
        value = value.permute([0, 2, 1, 3])  # (b, h, n_k, emb / h)
        value_attention = torch.matmul(att, value)  # (b, h, n_q, emb / h)
        value_attention = value_attention.permute([0, 2, 1, 3])
        return value_attention.reshape(b, n_q, self.embedding_size), att

    def _fast(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, n_q: int,
              n_k: int, key_mask: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``forward`` off export: the same logits, mask and softmax, fewer tensor passes."""
        h, d = self.n_heads, self.head_size
        query = query.reshape(-1, n_q, h, d).transpose(1, 2)  # (b, h, n_q, d)
        key = key.reshape(-1, n_k, h, d).transpose(1, 2)
        value = value.reshape(-1, n_k, h, d).transpose(1, 2)
        qk = torch.matmul(query, key.transpose(2, 3)) / (self.embedding_size ** 0.5)
        if key_mask is not None:
            qk = qk.masked_fill(key_mask.reshape(-1, 1, 1, n_k) > 0.5, self.NEG_INF)
        att = torch.softmax(qk, dim=3)
        out = torch.matmul(att, value).transpose(1, 2).reshape(-1, n_q, self.embedding_size)
        return out, att


class EntityEmbedding(nn.Module):
    """Embeds each entity (optionally after the agent's own encoding ``x_self``) before
    ``ResidualSelfAttention`` (ML-Agents' ``EntityEmbedding``, after arXiv:1909.07528)."""

    def __init__(self, entity_size: int, entity_num_max_elements: Optional[int],
                 embedding_size: int):
        super().__init__()
        if entity_num_max_elements is None or entity_num_max_elements < 1:
            raise ValueError(f"EntityEmbedding needs the maximum number of entities (the buffer "
                             f"sensor's first dimension), got {entity_num_max_elements!r}")
        self.self_size: int = 0
        self.entity_size: int = int(entity_size)
        self.entity_num_max_elements: int = int(entity_num_max_elements)
        self.embedding_size = int(embedding_size)
        self.self_ent_encoder = LinearEncoder(self.entity_size, 1, self.embedding_size,
                                              attention_gain(self.embedding_size))

    def add_self_embedding(self, size: int) -> None:
        """Entities become ``[x_self, entity]`` with ``x_self`` of ``size`` (new layer)."""
        self.self_size = int(size)
        self.self_ent_encoder = LinearEncoder(self.self_size + self.entity_size, 1,
                                              self.embedding_size,
                                              attention_gain(self.embedding_size))

    def forward(self, x_self: Optional[torch.Tensor], entities: torch.Tensor) -> torch.Tensor:
        if not exporting():  # W·[x_self, e] + b = W_self·x_self + W_ent·e + b (module doc)
            if self.self_size == 0:
                return self.self_ent_encoder(entities)
            linear, swish = self.self_ent_encoder.seq_layers
            s = self.self_size
            own = F.linear(x_self.reshape(-1, s), linear.weight[:, :s])
            return swish(F.linear(entities, linear.weight[:, s:], linear.bias) + own[:, None, :])
        num_entities = self.entity_num_max_elements
        if self.self_size > 0:
            expanded_self = x_self.reshape(-1, 1, self.self_size)
            expanded_self = torch.cat([expanded_self] * num_entities, dim=1)
            entities = torch.cat([expanded_self, entities], dim=2)
        return self.self_ent_encoder(entities)


class ResidualSelfAttention(nn.Module):
    """Residual multi-head self-attention over entity embeddings, then a masked mean-pool
    (ML-Agents' ``ResidualSelfAttention``)."""

    EPSILON = 1e-7

    def __init__(self, embedding_size: int, entity_num_max_elements: Optional[int] = None,
                 num_heads: int = 4):
        super().__init__()
        if entity_num_max_elements is None or entity_num_max_elements < 1:
            raise ValueError(f"ResidualSelfAttention needs the total maximum number of entities, "
                             f"got {entity_num_max_elements!r}")
        self.max_num_ent: int = int(entity_num_max_elements)
        self.attention = MultiHeadAttention(embedding_size=embedding_size, num_heads=num_heads)
        gain = attention_gain(embedding_size)
        self.fc_q = normal_linear(embedding_size, embedding_size, gain)
        self.fc_k = normal_linear(embedding_size, embedding_size, gain)
        self.fc_v = normal_linear(embedding_size, embedding_size, gain)
        self.fc_out = normal_linear(embedding_size, embedding_size, gain)
        self.embedding_norm = LayerNorm()
        self.residual_norm = LayerNorm()

    def forward(self, inp: torch.Tensor, key_masks: Sequence[torch.Tensor]) -> torch.Tensor:
        mask = torch.cat(list(key_masks), dim=1)
        inp = self.embedding_norm(inp)
        query = self.fc_q(inp)
        key = self.fc_k(inp)
        value = self.fc_v(inp)
        num_ent = self.max_num_ent if exporting() else mask.shape[1]
        output, _ = self.attention(query, key, value, num_ent, num_ent, mask)
        output = self.fc_out(output) + inp
        output = self.residual_norm(output)
        numerator = torch.sum(output * (1 - mask).reshape(-1, num_ent, 1), dim=1)
        denominator = torch.sum(1 - mask, dim=1, keepdim=True) + self.EPSILON
        return numerator / denominator
