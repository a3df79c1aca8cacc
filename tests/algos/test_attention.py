"""``unity_rl.algorithms.attention`` and the buffer-sensor path of ``ObservationEncoder`` equal
ML-Agents 1.1.0's modules: state dicts saved from ML-Agents load unchanged, and the outputs match.

``mlagents_reference/attention.npz`` was written by ``make_attention_reference.py`` with
ML-Agents' own ``EntityEmbedding``, ``ResidualSelfAttention``, ``LinearEncoder`` and
``ObservationEncoder`` (vector 4, buffer (6, 5), vector 3).
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.attention import (EntityEmbedding, LinearEncoder, ResidualSelfAttention,
                                           attention_gain, get_zero_entities_mask)
from unity_rl.algorithms.encoders import ObservationEncoder

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference" / "attention.npz"


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    with np.load(REFERENCE) as npz:
        return {k: npz[k] for k in npz.files}


def _state(ref: dict, prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: torch.from_numpy(v) for k, v in ref.items() if k.startswith(prefix)}


def test_mlagents_state_dicts_load_and_outputs_match(ref):
    emb = EntityEmbedding(5, 6, 16)
    emb.add_self_embedding(16)
    x_self_encoder = LinearEncoder(4, 1, 16, attention_gain(16))
    rsa = ResidualSelfAttention(16, 6)
    for name, module in (("embedding", emb), ("x_self_encoder", x_self_encoder), ("rsa", rsa)):
        module.load_state_dict(_state(ref, f"modules/{name}/"))  # strict: same names and shapes
    entities = torch.from_numpy(ref["modules/entities"])
    with torch.no_grad():
        x_self = x_self_encoder(torch.from_numpy(ref["modules/x_flat"]))
        masks = get_zero_entities_mask([entities])
        embedded = emb(x_self, entities)
        pooled = rsa(embedded, masks)
    np.testing.assert_array_equal(masks[0].numpy(), ref["modules/mask"])
    assert ref["modules/mask"][0, 0] == 1.0, "the tiny row counts as padding"
    assert ref["modules/mask"][2].all() and not ref["modules/mask"][1].any()
    np.testing.assert_allclose(x_self.numpy(), ref["modules/x_self"], atol=1e-6)
    np.testing.assert_allclose(embedded.numpy(), ref["modules/embedded"], atol=1e-6)
    np.testing.assert_allclose(pooled.numpy(), ref["modules/pooled"], atol=1e-5)


def test_padding_rows_do_not_change_the_pooled_vector():
    torch.manual_seed(0)
    emb, rsa = EntityEmbedding(3, 5, 8), ResidualSelfAttention(8, 5, num_heads=2)
    ent = torch.randn(1, 5, 3)
    ent[:, 3:] = 0.0
    other = ent.clone()
    other[:, 3:] = 1e-3  # still padding (Σ x² < 0.01)
    with torch.no_grad():
        a = rsa(emb(None, ent), get_zero_entities_mask([ent]))
        b = rsa(emb(None, other), get_zero_entities_mask([other]))
        moved = ent.clone()
        moved[:, 2] = 0.5  # a real entity changes it
        c = rsa(emb(None, moved), get_zero_entities_mask([moved]))
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
    assert np.abs(a.numpy() - c.numpy()).max() > 1e-3


def test_missing_max_is_refused():
    with pytest.raises(ValueError, match="maximum number of entities"):
        EntityEmbedding(3, None, 8)


def test_observation_encoder_matches_mlagents(ref, monkeypatch):
    monkeypatch.setattr(ObservationEncoder, "ATTENTION_EMBEDDING_SIZE", 16)  # as the reference
    cfg = SimpleNamespace(hidden_units=32, vis_encode_type="simple")
    encoder = ObservationEncoder([(4,), (6, 5), (3,)], cfg)
    params = list(encoder.parameters())
    assert len(params) == sum(k.startswith("encoder/param") for k in ref)
    with torch.no_grad():
        for k, param in enumerate(params):  # ML-Agents' registration order
            param.copy_(torch.from_numpy(ref[f"encoder/param{k}"]))
    obs = [ref[f"encoder/obs{i}"] for i in range(3)]
    flat = torch.from_numpy(np.concatenate([o.reshape(len(o), -1) for o in obs], axis=1))
    with torch.no_grad():
        encoded = encoder(flat)
    assert encoder.output_size == 4 + 3 + 16 == encoded.shape[1]
    np.testing.assert_allclose(encoded.numpy(), ref["encoder/encoded"], atol=1e-5)


def test_buffer_only_and_goal_buffer():
    cfg = SimpleNamespace(hidden_units=32, vis_encode_type="simple")
    alone = ObservationEncoder([(6, 5)], cfg)
    assert alone.x_self_encoder is None and alone.output_size == 128
    out = alone(torch.randn(2, 30))
    assert out.shape == (2, 128) and torch.isfinite(out).all()
    with pytest.raises(ValueError, match="goal signal"):
        ObservationEncoder([(4,), (6, 5)], cfg, goal_indices=(1,))


def _encoder_outputs_and_grads(encoder: ObservationEncoder, flat: torch.Tensor):
    encoder.zero_grad()
    out = encoder(flat)
    (out * torch.linspace(-1, 1, out.shape[1])).sum().backward()
    return out.detach().clone(), [p.grad.clone() for p in encoder.parameters()]


@pytest.mark.parametrize("filled", [(3, 0, 1, 2), (0, 0, 0, 0), (6, 6, 6, 6), (1, 0, 0, 0)])
def test_fast_path_equals_mlagents_ops(monkeypatch, filled):
    """Off export the attention runs fewer tensor passes and drops padding columns (attention.py
    module doc); outputs and gradients equal those of ML-Agents' ops (the export path)."""
    import unity_rl.algorithms.attention as attention
    import unity_rl.algorithms.encoders as encoders
    torch.manual_seed(1)
    cfg = SimpleNamespace(hidden_units=32, vis_encode_type="simple")
    encoder = ObservationEncoder([(4,), (6, 5), (3,)], cfg)
    ent = torch.randn(len(filled), 6, 5)
    for row, k in enumerate(filled):
        ent[row, k:] = 0.0
    flat = torch.cat([torch.randn(len(filled), 4), ent.reshape(len(filled), -1),
                      torch.randn(len(filled), 3)], dim=1)
    fast, fast_grads = _encoder_outputs_and_grads(encoder, flat)
    for module in (attention, encoders):
        monkeypatch.setattr(module, "exporting", lambda: True)
    exact, exact_grads = _encoder_outputs_and_grads(encoder, flat)
    np.testing.assert_allclose(fast.numpy(), exact.numpy(), atol=1e-5)
    for a, b in zip(fast_grads, exact_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    assert float(fast[:, -encoder.ATTENTION_EMBEDDING_SIZE:].abs().sum()) > 0 or not any(filled)


def test_trim_padding_keeps_every_column_a_row_uses():
    from unity_rl.algorithms.attention import trim_padding
    ent = torch.zeros(3, 6, 2)
    ent[0, 0] = 1.0
    ent[2, 3] = 1.0  # a real entity after a padding row still counts
    kept, mask = trim_padding(ent, get_zero_entities_mask([ent])[0])
    assert kept.shape == (3, 4, 2) and mask.shape == (3, 4)
    empty, _ = trim_padding(torch.zeros(2, 6, 2), torch.ones(2, 6))
    assert empty.shape == (2, 1, 2)
