"""Goal conditioning equals ML-Agents 1.1.0's: its own ``ConditionalEncoder`` state dicts load
into ours and give the same outputs (``mlagents_reference/conditioning.npz`` was written by
``make_conditioning_reference.py`` in an mlagents-learn venv)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from unity_rl.algorithms import conditioning
from unity_rl.algorithms.conditioning import ConditionalEncoder, HyperNetwork, few_rows_linear

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference" / "conditioning.npz"


@pytest.mark.parametrize("num_layers", [1, 2])
def test_conditional_encoder_matches_mlagents(num_layers):
    prefix = f"layers{num_layers}/"
    with np.load(REFERENCE) as npz:
        ref = {k[len(prefix):]: npz[k] for k in npz.files if k.startswith(prefix)}
    state = {k[len("state/"):]: torch.from_numpy(v) for k, v in ref.items() if k.startswith("state/")}
    ours = ConditionalEncoder(input_size=7, goal_size=3, hidden_size=16, num_layers=num_layers)
    ours.load_state_dict(state)  # strict: the same parameter names and shapes as ML-Agents'
    with torch.no_grad():
        y = ours(torch.from_numpy(ref["x"]), torch.from_numpy(ref["goal"]))
    np.testing.assert_allclose(y.numpy(), ref["y"], rtol=1e-5, atol=1e-6)
    with torch.no_grad():  # the goal matters: another goal, other activations
        other = ours(torch.from_numpy(ref["x"]), torch.from_numpy(np.roll(ref["goal"], 1, axis=1)))
    assert not torch.allclose(y, other)


def test_hypernetwork_init_as_mlagents():
    """Zero layer bias; the generating layer starts U(±sqrt(1/(h·in))) with zero bias."""
    torch.manual_seed(0)
    layer = HyperNetwork(input_size=50, output_size=8, hyper_input_size=4, layer_size=32, num_layers=2)
    assert torch.count_nonzero(layer.bias) == 0
    last = layer.hypernet[-1]
    assert last.weight.abs().max() <= (1.0 / (32 * 50)) ** 0.5
    assert torch.count_nonzero(last.bias) == 0
    assert layer(torch.randn(6, 50), torch.randn(6, 4)).shape == (6, 8)


def test_repeated_goals_give_the_plain_layers_values_and_gradients():
    """Few distinct goals: the generating layer runs once per distinct goal; the outputs and every
    parameter's gradient equal the plain per-row computation."""
    torch.manual_seed(1)
    layer = HyperNetwork(input_size=12, output_size=8, hyper_input_size=2, layer_size=64, num_layers=2)
    x = torch.randn(10, 12)
    goal = torch.eye(2)[torch.tensor([0, 1, 1, 0, 0, 1, 0, 0, 1, 1])]

    def plain(x, goal):
        weights = layer.hypernet(goal).view(-1, 12, 8)
        return torch.bmm(x.unsqueeze(1), weights).squeeze(1) + layer.bias

    expected = plain(x, goal)
    (expected ** 2).sum().backward()
    expected_grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    rows_generated = []
    hook = layer.hypernet[0].register_forward_hook(lambda m, i, o: rows_generated.append(len(o)))
    got = layer(x, goal)
    hook.remove()
    assert rows_generated == [2]            # once per distinct goal, not per row
    (got ** 2).sum().backward()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    for g, e in zip((p.grad for p in layer.parameters()), expected_grads):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5 * float(e.abs().max()))
    # distinct goals in every row: the plain path, once per row
    distinct = torch.randn(10, 2)
    expected = plain(x, distinct)
    hook = layer.hypernet[0].register_forward_hook(lambda m, i, o: rows_generated.append(len(o)))
    torch.testing.assert_close(layer(x, distinct), expected)
    hook.remove()
    assert rows_generated == [2, 10]


@pytest.mark.parametrize("block_bytes", [2 ** 21, 8 * 7 * 5])  # one block; 5 rows, the last short
def test_few_rows_linear_is_the_linear_layer_forward_and_backward(monkeypatch, block_bytes):
    """The generating layer's few-rows path gives nn.Linear's values and gradients (float64
    gradcheck), whether W's rows fit one backward block or many with a short last one."""
    monkeypatch.setattr(conditioning, "GRADIENT_BLOCK_BYTES", block_bytes)
    torch.manual_seed(0)
    layer = torch.nn.Linear(7, 53).double()
    x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(few_rows_linear(x, layer), layer(x))
    assert torch.autograd.gradcheck(
        lambda x, w, b: conditioning._FewRowsLinear.apply(x, w, b),
        (x, layer.weight, layer.bias))
    # only the parameters need gradients (the input is data): dx is not computed
    frozen = torch.randn(3, 7, dtype=torch.float64)
    few_rows_linear(frozen, layer).sum().backward()
    torch.testing.assert_close(layer.weight.grad, torch.ones(53, 1, dtype=torch.float64) @ frozen.sum(0, keepdim=True))
    torch.testing.assert_close(layer.bias.grad, torch.full((53,), 3.0, dtype=torch.float64))
