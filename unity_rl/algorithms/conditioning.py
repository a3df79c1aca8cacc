"""Goal conditioning (``network_settings.goal_conditioning_type: hyper``), as ML-Agents 1.1.0.

A build may send observations of type GOAL_SIGNAL (GridWorld's target colour). With
``goal_conditioning_type: hyper`` (ML-Agents' default) the *last* hidden layer of a network body
is a ``HyperNetwork``: its weight matrix is generated from the goal, W = h(goal) reshaped to
[in, out], y = x·W + b (Ha et al. 2016, arXiv:1609.09106). The goal is also part of the ordinary
concatenated encoding; with ``none`` it is only that. Layer structure, names and initialisation
mirror ``mlagents/trainers/torch_entities/conditioning.py`` (``ConditionalEncoder``,
``HyperNetwork``), so a state dict of ML-Agents' modules loads into these
(``tests/algos/test_conditioning.py`` checks the outputs against ML-Agents' own modules).

Goals are usually a few values repeated (GridWorld's is a one-hot of 2), so outside ONNX export a
``HyperNetwork`` generates one weight matrix per *distinct* goal of a batch, not one per row,
when that costs at most half as much: the same values up to float rounding. On Unity's
GridWorld config this cut a PPO update from 1.07 s to 0.72 s on one core (stop 32; the generating
layer is 128 -> 130·128, 2.1M weights per network). With so few rows the generating layer is
bound by memory, not arithmetic: ``few_rows_linear`` computes it as W·xᵀ and its backward passes
over W in blocks (the same values up to float rounding; ``benchmarks/goal_update.py``).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from unity_rl.algorithms.attention import exporting
from unity_rl.algorithms.encoders import Swish
from unity_rl.algorithms.network_config import GOAL_CONDITIONING_TYPES  # noqa: F401 (re-export)
from unity_rl.algorithms.nets import mlagents_init


class LayerNorm(nn.Module):
    """Layer normalisation without gain and bias, eps 1e-5 (ML-Agents' ``LayerNorm``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5)


GRADIENT_BLOCK_BYTES = 2 ** 21
"""Bytes of the weight matrix ``few_rows_linear``'s backward handles per block (2 MiB: the block
of W it reads for the input gradient is still in cache when its gradient block is written)."""


class _FewRowsLinear(torch.autograd.Function):
    """y = x·Wᵀ + b for a few rows x [G, h] and a very wide W [P, h] (P ≫ G).

    ``F.linear`` runs this as a G-row matmul whose kernels stream W from memory at a fraction of
    the machine's bandwidth; as W·xᵀ (P rows of G outputs) it streams W faster. The backward
    writes dW = dyᵀ·x and accumulates dx = dy·W block by block of W's rows, so each block of W is
    read and its gradient written while in cache (one pass, not two separate matmuls each
    streaming the whole matrix). db = Σ dy. GridWorld's shape (G 2, h 128, P 16,640), W not in
    cache, one thread (stop 34): forward 2.4 → 1.4 ms, backward 5.8 → 4.0 ms; a whole update
    6–18% faster (``benchmarks/goal_update.py``, "nn.Linear")."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return torch.addmm(bias.unsqueeze(1), weight, x.t()).t().contiguous()

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        x, weight = ctx.saved_tensors
        need_x, need_weight, need_bias = ctx.needs_input_grad
        grad_x = torch.zeros_like(x) if need_x else None
        grad_weight = torch.empty_like(weight) if need_weight else None
        grad_by_row = grad_y.t()
        rows = max(1, GRADIENT_BLOCK_BYTES // (weight.shape[1] * weight.element_size()))
        for start in range(0, weight.shape[0], rows):
            block = slice(start, start + rows)
            if grad_weight is not None:
                torch.mm(grad_by_row[block], x, out=grad_weight[block])
            if grad_x is not None:
                grad_x.addmm_(grad_y[:, block], weight[block])
        return grad_x, grad_weight, grad_y.sum(0) if need_bias else None


def few_rows_linear(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """``layer(x)`` for a few rows through a very wide layer (``_FewRowsLinear``)."""
    return _FewRowsLinear.apply(x, layer.weight, layer.bias)


class HyperNetwork(nn.Module):
    """One fully connected layer in -> out whose weights a goal-fed MLP generates.

    hypernet = [Linear(goal -> h) + Swish] x num_layers, LayerNorm, Linear(h -> in·out) with
    weights drawn U(±sqrt(1 / (h·in))) and zero bias; the layer's bias is a separate parameter
    initialised to zero (the hypernetwork does not generate it)."""

    def __init__(self, input_size: int, output_size: int, hyper_input_size: int,
                 layer_size: int, num_layers: int):
        super().__init__()
        self.input_size, self.output_size = input_size, output_size
        layers: list[nn.Module] = []
        last = hyper_input_size
        for _ in range(num_layers):
            layers += [mlagents_init(nn.Linear(last, layer_size)), Swish()]
            last = layer_size
        flat_output = mlagents_init(nn.Linear(layer_size, input_size * output_size), 0.1)
        bound = math.sqrt(1.0 / (layer_size * input_size))
        with torch.no_grad():
            flat_output.weight.uniform_(-bound, bound)
        self.hypernet = nn.Sequential(*layers, LayerNorm(), flat_output)
        self.bias = nn.Parameter(torch.zeros(output_size))

    def forward(self, x: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        if not exporting():
            distinct, row_of = torch.unique(goal, dim=0, return_inverse=True)
            if self._grouping_pays(len(distinct), len(goal)):
                return self._forward_per_distinct_goal(x, distinct, row_of)
        weights = self.hypernet(goal).view(-1, self.input_size, self.output_size)
        return torch.bmm(x.unsqueeze(1), weights).squeeze(1) + self.bias

    def _grouping_pays(self, distinct: int, rows: int) -> bool:
        """Whether generating one matrix per distinct goal and passing every row through each
        (cost ∝ distinct · (h + rows)) costs at most half of one matrix per row (∝ rows · h)."""
        layer_size = self.hypernet[-1].in_features
        return 0 < distinct and 2 * distinct * (layer_size + rows) <= rows * layer_size

    def _forward_per_distinct_goal(self, x: torch.Tensor, distinct: torch.Tensor,
                                   row_of: torch.Tensor) -> torch.Tensor:
        """Goals are often few values repeated (GridWorld's is a one-hot of 2). Then the
        generating layer (h -> in·out, most of the layer's cost, forward and backward) runs once
        per distinct goal, every row goes through each generated matrix in one matmul, and keeps
        its own goal's output: the plain layer's values up to float rounding, at a fraction of its
        cost. While exporting, the plain graph, as ML-Agents'."""
        count = len(distinct)
        generating = self.hypernet[-1]
        weights = few_rows_linear(self.hypernet[:-1](distinct), generating).view(
            count, self.input_size, self.output_size)
        side_by_side = weights.transpose(0, 1).reshape(self.input_size, count * self.output_size)
        every_goal = (x @ side_by_side).view(-1, count, self.output_size)
        own = row_of.view(-1, 1, 1).expand(-1, 1, self.output_size)
        return every_goal.gather(1, own).squeeze(1) + self.bias


class ConditionalEncoder(nn.Module):
    """A network body of ``num_layers`` Swish layers whose last ``num_conditional_layers`` are
    ``HyperNetwork`` layers fed by the goal (ML-Agents uses 1): ``forward(x, goal) -> [n, hidden]``."""

    def __init__(self, input_size: int, goal_size: int, hidden_size: int, num_layers: int,
                 num_conditional_layers: int = 1):
        super().__init__()
        layers: list[nn.Module] = []
        last = input_size
        for i in range(num_layers):
            if num_layers - i <= num_conditional_layers:
                layers.append(HyperNetwork(last, hidden_size, goal_size, hidden_size, 2))
            else:
                layers.append(mlagents_init(nn.Linear(last, hidden_size)))
            layers.append(Swish())
            last = hidden_size
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, goal) if isinstance(layer, HyperNetwork) else layer(x)
        return x


class ConditionalMLP(nn.Module):
    """A goal-conditioned trunk with an output layer: ``out(body(x, goal))`` (``body`` a
    ``ConditionalEncoder``, ``out`` a Linear or None for the body alone); the goal-conditioned
    counterpart of ``nets.mlp``. ``hidden(x, goal)`` is the body's encoding."""

    def __init__(self, body: ConditionalEncoder, out: nn.Module | None):
        super().__init__()
        self.body = body
        self.out = out

    def hidden(self, x: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        return self.body(x, goal)

    def forward(self, x: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        h = self.body(x, goal)
        return h if self.out is None else self.out(h)
