"""benchmarks/goal_update.py: GridWorld-shaped PPO updates with the hyper layer grouped or per row."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import goal_update  # noqa: E402

from unity_rl.algorithms.conditioning import HyperNetwork  # noqa: E402


def rows_generated(variant: str) -> tuple[list[int], list[int]]:
    """Rows through the hypernetwork's first layer, and through its generating layer's forward
    as an ``nn.Linear`` (``few_rows_linear`` does not call it)."""
    layer = HyperNetwork(input_size=6, output_size=4, hyper_input_size=2, layer_size=64, num_layers=1)
    seen, linear = [], []
    layer.hypernet[0].register_forward_hook(lambda m, i, o: seen.append(len(o)))
    layer.hypernet[-1].register_forward_hook(lambda m, i, o: linear.append(len(o)))
    with goal_update.hyper_layers(variant):
        layer(torch.randn(32, 6), torch.eye(2)[torch.arange(32) % 2])
    return seen, linear


def test_the_variants_are_the_grouped_and_the_plain_layer_and_nothing_leaks():
    assert rows_generated("per distinct goal") == ([2], [])
    assert rows_generated("per distinct goal, nn.Linear") == ([2], [2])
    assert rows_generated("per row") == ([32], [32])
    assert rows_generated("per distinct goal") == ([2], [])   # the patch ended with its variant


def test_each_repeat_times_one_update():
    before = torch.get_num_threads()
    try:
        seconds = goal_update.time_update("per distinct goal", repeats=1)
        assert torch.get_num_threads() == 1
        goal_update.time_update("per distinct goal", repeats=1, threads=2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert len(seconds) == 1 and seconds[0] > 0
