"""Writes ``attention.npz``: ML-Agents 1.1.0's attention modules and an ``ObservationEncoder``
with a buffer sensor, their weights, inputs and outputs.

Run with the Python of an mlagents-learn venv, from the repository root::

    DIR/venv/bin/python tests/algos/mlagents_reference/make_attention_reference.py

``modules/*``: an ``EntityEmbedding`` (entity size 5, max 6, embedding 16) with a self embedding
of 16, a ``LinearEncoder`` x_self encoder and a ``ResidualSelfAttention`` (16, max 6, 4 heads),
their state dicts (ML-Agents' names), and the outputs for entities with padding rows (rows of
zeros, and one row of tiny values below the 0.01 threshold). ``encoder/*``: ML-Agents'
``ObservationEncoder`` for [vector 4, buffer (6, 5), vector 3] (its attention width shrunk to 16,
the class attribute ``ATTENTION_EMBEDDING_SIZE``, to keep the file small), its parameters in
registration order and its output. ``test_attention.py`` loads both into
``unity_rl.algorithms.attention`` / ``encoders.ObservationEncoder`` and compares.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from mlagents.trainers.settings import EncoderType
from mlagents.trainers.torch_entities.attention import (EntityEmbedding, ResidualSelfAttention,
                                                        get_zero_entities_mask)
from mlagents.trainers.torch_entities.layers import Initialization, LinearEncoder
from mlagents.trainers.torch_entities.networks import ObservationEncoder
from mlagents_envs.base_env import DimensionProperty, ObservationSpec, ObservationType

HERE = Path(__file__).resolve().parent
EMB, MAX, SIZE, BATCH = 16, 6, 5, 7


def entities(rng: np.random.Generator, n: int) -> np.ndarray:
    """[n, MAX, SIZE] normal rows; row k >= filled[i] of sample i is zero (padding), and sample 0
    has one row of tiny values (sum of squares < 0.01, so it counts as padding too)."""
    x = rng.normal(size=(n, MAX, SIZE)).astype(np.float32)
    filled = rng.integers(0, MAX + 1, n)
    filled[1] = MAX
    filled[2] = 0
    for i, f in enumerate(filled):
        x[i, f:] = 0.0
    x[0, 0] = 0.01
    return x


def main() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    out: dict[str, np.ndarray] = {}
    # modules
    emb = EntityEmbedding(SIZE, MAX, EMB)
    emb.add_self_embedding(EMB)
    x_self_encoder = LinearEncoder(4, 1, EMB, kernel_init=Initialization.Normal,
                                   kernel_gain=(0.125 / EMB) ** 0.5)
    rsa = ResidualSelfAttention(EMB, MAX)
    x_flat = rng.normal(size=(BATCH, 4)).astype(np.float32)
    ent = entities(rng, BATCH)
    with torch.no_grad():
        x_self = x_self_encoder(torch.from_numpy(x_flat))
        masks = get_zero_entities_mask([torch.from_numpy(ent)])
        embedded = emb(x_self, torch.from_numpy(ent))
        pooled = rsa(embedded, masks)
    for name, module in (("embedding", emb), ("x_self_encoder", x_self_encoder), ("rsa", rsa)):
        for key, value in module.state_dict().items():
            out[f"modules/{name}/{key}"] = value.numpy()
    out.update({"modules/x_flat": x_flat, "modules/entities": ent, "modules/mask": masks[0].numpy(),
                "modules/x_self": x_self.numpy(), "modules/embedded": embedded.numpy(),
                "modules/pooled": pooled.numpy()})
    # the observation encoder: vector 4, buffer (MAX, SIZE), vector 3
    ObservationEncoder.ATTENTION_EMBEDDING_SIZE = EMB
    none, var = (DimensionProperty.NONE,), (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)
    specs = [ObservationSpec((4,), none, ObservationType.DEFAULT, "a"),
             ObservationSpec((MAX, SIZE), var, ObservationType.DEFAULT, "b"),
             ObservationSpec((3,), none, ObservationType.DEFAULT, "c")]
    encoder = ObservationEncoder(specs, 32, EncoderType.SIMPLE, normalize=False)
    obs = [rng.normal(size=(BATCH, 4)).astype(np.float32), entities(rng, BATCH),
           rng.normal(size=(BATCH, 3)).astype(np.float32)]
    with torch.no_grad():
        encoded = encoder([torch.from_numpy(o) for o in obs])
    for k, (name, param) in enumerate(encoder.named_parameters()):
        out[f"encoder/param{k}"] = param.detach().numpy()
    out.update({f"encoder/obs{i}": o for i, o in enumerate(obs)})
    out["encoder/encoded"] = encoded.numpy()
    path = HERE / "attention.npz"
    np.savez_compressed(path, **out)
    print("wrote", path, "encoder params:", [n for n, _ in encoder.named_parameters()])


if __name__ == "__main__":
    main()
