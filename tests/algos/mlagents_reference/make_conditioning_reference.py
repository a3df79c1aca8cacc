"""Writes ``conditioning.npz``: ML-Agents 1.1.0's own ``ConditionalEncoder`` on fixed inputs.

Run with the Python of an mlagents-learn venv, from the repository root::

    bash ../shared/mlagents_learn/install.sh DIR
    DIR/venv/bin/python tests/algos/mlagents_reference/make_conditioning_reference.py

Two cases (``num_layers`` 1, GridWorld's, and 2): the module's state dict (ML-Agents' parameter
names), a batch of inputs and goals, and its outputs. ``test_conditioning.py`` loads the state
dict into ``unity_rl.algorithms.conditioning.ConditionalEncoder`` and compares the outputs.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from mlagents.trainers.torch_entities.conditioning import ConditionalEncoder

OUT = Path(__file__).resolve().parent / "conditioning.npz"


def main() -> None:
    arrays = {}
    for num_layers in (1, 2):
        torch.manual_seed(num_layers)
        module = ConditionalEncoder(input_size=7, goal_size=3, hidden_size=16,
                                    num_layers=num_layers, num_conditional_layers=1)
        x, goal = torch.randn(5, 7), torch.eye(3)[torch.tensor([0, 1, 2, 1, 0])]
        with torch.no_grad():
            y = module(x, goal)
        prefix = f"layers{num_layers}"
        arrays[f"{prefix}/x"], arrays[f"{prefix}/goal"], arrays[f"{prefix}/y"] = (
            x.numpy(), goal.numpy(), y.numpy())
        for name, tensor in module.state_dict().items():
            arrays[f"{prefix}/state/{name}"] = tensor.numpy()
    np.savez_compressed(OUT, **arrays)
    print(f"written: {OUT}")


if __name__ == "__main__":
    main()
