"""Camera minibatches go channels-last once per minibatch, however many networks read them
(``unity_rl.algorithms.image_layout``), with the same values as before."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.algos.test_ppo_hybrid_visual import FAST, _colour_images, _one_step
from unity_rl.algorithms import image_layout
from unity_rl.algorithms.image_layout import channels_last, converted_once
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner, PPOPolicy
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.learner import SACLearner
from unity_rl.experience import TransitionBatch

NET = NetworkConfig(hidden_units=16, num_layers=1, vis_encode_type="simple")
DISCRETE = SimpleNamespace(continuous_size=0, discrete_branches=(3,))


@pytest.fixture
def conversions(monkeypatch):
    count = []
    convert = image_layout._convert

    def counted(images, *args):
        count.append(tuple(images.shape))
        return convert(images, *args)

    monkeypatch.setattr(image_layout, "_convert", counted)
    return count


def test_within_the_scope_a_batch_is_converted_once(conversions):
    flat = torch.rand(4, 3 * 20 * 20)
    with converted_once():
        a = channels_last(flat[:, :1200].reshape(4, 3, 20, 20))
        b = channels_last(flat[:, :1200].reshape(4, 3, 20, 20))  # another view, same batch
        other = channels_last(torch.rand(4, 3, 20, 20))
    assert a is b and other is not a and len(conversions) == 2
    assert a.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(a, flat.reshape(4, 3, 20, 20))


def test_outside_the_scope_without_gradients_or_after_a_write_it_converts_afresh(conversions):
    images = torch.rand(4, 3, 20, 20)
    assert channels_last(images) is not channels_last(images)  # no scope: no reuse
    with torch.no_grad():
        assert channels_last(images) is images  # acting: left as it is
    with converted_once():
        first = channels_last(images)
        images.mul_(0.5)  # written in place: its version moved on
        second = channels_last(images)
    assert first is not second and torch.equal(second, images)
    assert len(conversions) == 4


def test_ppo_converts_each_minibatch_once_for_actor_and_critic(conversions):
    learner = PPOLearner([(3, 20, 20)], DISCRETE, PPOConfig(**FAST), NET, seed=0)
    policy = PPOPolicy([(3, 20, 20)], DISCRETE, NET, seed=0)
    policy.load_weights(learner.weights())
    rng = np.random.default_rng(0)
    obs, colours = _colour_images(rng, 256)
    actions, logprobs, values = policy.act(obs)
    rewards = (actions[:, 0] == colours).astype(np.float32)
    learner.update(_one_step(obs, actions, logprobs, values, rewards))
    minibatches = FAST["num_epochs"] * 256 // FAST["minibatch_size"]
    assert len(conversions) == minibatches  # was 2 per minibatch: actor and critic each


def test_sac_converts_its_minibatch_once_for_its_four_networks(conversions):
    rng = np.random.default_rng(5)
    n = 16
    obs = rng.uniform(0, 1, (n, 3 * 36 * 36)).astype(np.float32)
    batch = TransitionBatch(obs, rng.integers(0, 3, (n, 1)).astype(np.float32),
                            rng.normal(size=n).astype(np.float32), obs,
                            np.zeros(n, np.float32), np.ones((n, 3), np.uint8))
    learner = SACLearner([(3, 36, 36)], DISCRETE, SACConfig(batch_size=n), NET, seed=0)
    learner.update(batch)
    assert len(conversions) == 1  # policy, V, Q1 (twice) and Q2 read one copy


def test_batches_of_one_image_shape_and_different_rows_get_their_own_buffers():
    """POCA converts its own cameras (B rows) and its mates' (B x M rows) in one minibatch: the
    second must not be written over the first while the graph still needs it (the zoo's
    poca/PushBlockCollab.yaml failed its backward pass that way)."""
    from unity_rl.algorithms.image_layout import MinibatchWorkspace

    workspace = MinibatchWorkspace()
    conv = torch.nn.Conv2d(3, 2, 3)
    mates, own = torch.rand(12, 3, 8, 8), torch.rand(4, 3, 8, 8)
    with converted_once(workspace):
        a = channels_last(mates)
        b = channels_last(own)
        loss = conv(a).sum() + conv(b).sum()
    assert torch.equal(a, mates) and torch.equal(b, own)
    loss.backward()  # raised "modified by an inplace operation" when both shared one buffer
