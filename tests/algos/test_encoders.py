"""Visual encoders and the flat-row splitter: shapes, minimum sizes, vector-only normalisation."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from unity_rl.algorithms.encoders import (MIN_RESOLUTION, FoldedNormalizer,
                                     ObservationEncoder, ObservationLayout, ResNetBlock,
                                     concat_inputs, visual_encoder)
from unity_rl.algorithms.network_config import VIS_ENCODE_TYPES, VISUAL_ENCODERS, NetworkConfig

CONVS = {"simple": 2, "nature_cnn": 3, "match3": 2, "fully_connected": 0, "resnet": 3 + 3 * 2 * 2}


def _count(module: nn.Module, kind: type) -> int:
    return sum(isinstance(m, kind) for m in module.modules())


def test_the_five_ml_agents_encoders_are_known_everywhere():
    assert set(VISUAL_ENCODERS) == set(VIS_ENCODE_TYPES) == set(MIN_RESOLUTION)
    assert MIN_RESOLUTION == {"simple": 20, "nature_cnn": 36, "resnet": 15, "match3": 5,
                              "fully_connected": 1}


@pytest.mark.parametrize("name", VIS_ENCODE_TYPES)
def test_encoder_output_shape_at_minimum_and_larger_sizes(name):
    torch.manual_seed(0)
    for h, w in [(MIN_RESOLUTION[name],) * 2, (MIN_RESOLUTION[name] + 11, MIN_RESOLUTION[name] + 4)]:
        encoder = visual_encoder(name, (3, h, w), h_size=24)
        out = encoder(torch.rand(5, 3, h, w))
        assert out.shape == (5, 24)
        assert torch.isfinite(out).all() and out.abs().sum() > 0
    assert _count(encoder, nn.Conv2d) == CONVS[name]
    assert _count(encoder, nn.Linear) == 1
    if name == "resnet":
        assert _count(encoder, ResNetBlock) == 6 and _count(encoder, nn.MaxPool2d) == 3


@pytest.mark.parametrize("name", [n for n in VIS_ENCODE_TYPES if n != "fully_connected"])
def test_image_below_minimum_names_observation_size_and_encoder(name):
    m = MIN_RESOLUTION[name]
    with pytest.raises(ValueError) as err:
        ObservationEncoder([(6,), (3, m - 1, m + 3)],
                           NetworkConfig(hidden_units=8, vis_encode_type=name))
    message = str(err.value)
    assert "observation 1" in message and f"{m - 1}x{m + 3}" in message
    assert repr(name) in message and f"{m}x{m} minimum" in message


def test_dense_layer_is_kaiming_times_1_41_with_zero_bias():
    torch.manual_seed(0)
    dense = visual_encoder("fully_connected", (4, 30, 30), 256).dense[0]
    assert torch.equal(dense.bias, torch.zeros(256))
    # Kaiming normal (linear gain) has std 1/sqrt(fan_in); times 1.41
    assert dense.weight.std().item() == pytest.approx(1.41 / np.sqrt(4 * 30 * 30), rel=0.05)


def test_observation_encoder_splits_the_flat_row_like_encoding_each_part():
    torch.manual_seed(0)
    shapes = [(4,), (3, 20, 20), (2,), (1, 6, 7)]
    net = NetworkConfig(hidden_units=10, vis_encode_type="match3")
    encoder = ObservationEncoder(shapes, net)
    assert encoder.output_size == 4 + 10 + 2 + 10
    parts = [torch.randn(3, 4), torch.rand(3, 3, 20, 20), torch.randn(3, 2), torch.rand(3, 1, 6, 7)]
    flat = torch.cat([p.reshape(3, -1) for p in parts], dim=1)
    expected = torch.cat([parts[0], encoder.encoders["1"](parts[1]), parts[2],
                          encoder.encoders["3"](parts[3])], dim=1)
    torch.testing.assert_close(encoder(flat), expected)
    # the split really depends on the layout: swapping the images changes the result
    swapped = torch.cat([parts[0].reshape(3, -1), torch.roll(parts[1], 1, 0).reshape(3, -1),
                         parts[2], parts[3].reshape(3, -1)], dim=1)
    assert not torch.allclose(encoder(swapped)[:, 4:14], expected[:, 4:14])


def test_vector_only_encoder_is_parameter_free_identity():
    encoder = ObservationEncoder([(5,), (3,)], NetworkConfig())
    assert encoder.output_size == 8 and not list(encoder.parameters())
    x = torch.randn(2, 8)
    assert encoder(x) is x


def test_other_ranks_are_refused_by_name():
    # rank 2 (a buffer sensor) is encoded with attention: tests/algos/test_attention.py
    assert ObservationEncoder([(4,), (20, 6)], NetworkConfig()).output_size == 4 + 128
    with pytest.raises(ValueError, match="observation 0 .*rank"):
        ObservationEncoder([(1, 2, 3, 4)], NetworkConfig())
    with pytest.raises(ValueError, match="vis_encode_type must be one of.*'bogus'"):
        NetworkConfig(vis_encode_type="bogus")


def test_normaliser_touches_vector_columns_only():
    layout = ObservationLayout([(2,), (1, 2, 2), (3,)])
    assert layout.obs_dim == 9 and layout.vector_columns.tolist() == [0, 1, 6, 7, 8]
    normalizer = layout.make_normalizer(True)
    rng = np.random.default_rng(0)
    rows = rng.normal(10.0, 4.0, (500, 9)).astype(np.float32)
    layout.update(normalizer, rows)
    assert normalizer.mean.shape == (5,)
    # ML-Agents' Normalizer: one pseudo-observation (0) before the rows, so Σx / (n + 1)
    np.testing.assert_allclose(normalizer.mean, rows[:, [0, 1, 6, 7, 8]].sum(0) / 501, rtol=1e-5)
    out = layout.normalize(normalizer, rows)
    np.testing.assert_array_equal(out[:, 2:6], rows[:, 2:6])  # image columns untouched
    vec = out[:, [0, 1, 6, 7, 8]]
    assert np.abs(vec.mean(0)).max() < 0.05 and np.abs(vec.std(0) - 1).max() < 0.05
    assert layout.normalize(None, rows) is not rows  # a copy even without normalisation
    # the folded (export) normaliser computes the same thing in torch
    folded = FoldedNormalizer(layout, normalizer)
    np.testing.assert_allclose(folded(torch.from_numpy(rows)).numpy(), out, rtol=1e-5, atol=1e-5)


def test_concat_inputs_accepts_separate_observations_or_the_flat_row():
    image, vector, masks = torch.rand(2, 1, 2, 2), torch.randn(2, 3), torch.ones(2, 4)
    flat, rest = concat_inputs([image, vector, masks], obs_dim=7)
    torch.testing.assert_close(flat, torch.cat([image.reshape(2, -1), vector], 1))
    assert len(rest) == 1 and rest[0] is masks
    flat2, rest2 = concat_inputs([flat], obs_dim=7)
    assert torch.equal(flat2, flat) and rest2 == []
    with pytest.raises(ValueError, match="cover 5 of the 6"):
        concat_inputs([image, torch.randn(2, 1)], obs_dim=6)
    with pytest.raises(ValueError, match="7 values, the network expects 5"):
        concat_inputs([image, vector], obs_dim=5)


@pytest.mark.parametrize("make", ["ppo", "ddpg"])
def test_learners_leave_torch_global_state_alone_and_seed_their_init(make):
    from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner
    from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner

    spec = SimpleNamespace(continuous_size=2, discrete_branches=())

    def build(seed):
        if make == "ppo":
            return PPOLearner([(3, 20, 20), (4,)], spec, PPOConfig(), NetworkConfig(hidden_units=8),
                              num_threads=1, seed=seed).model
        return DDPGLearner([(3, 20, 20), (4,)], spec, DDPGConfig(), 8, 1, False,
                           num_threads=1, seed=seed).actor

    threads, rng_state = torch.get_num_threads(), torch.get_rng_state()
    a, b, c = build(7), build(7), build(8)
    assert torch.get_num_threads() == threads
    assert torch.equal(torch.get_rng_state(), rng_state)
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
