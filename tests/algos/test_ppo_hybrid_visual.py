"""PPO with hybrid actions (Gaussian + masked categoricals) and with image observations."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.distributions import split_hybrid
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner, PPOPolicy
from unity_rl.experience import Trajectory

HYBRID = SimpleNamespace(continuous_size=2, discrete_branches=(3, 2))
FAST = dict(learning_rate=3e-3, lr_schedule="constant", buffer_size=256, minibatch_size=64,
            num_epochs=4, ent_coef=1e-3, ent_coef_schedule="constant", max_steps=10**6)


def _one_step(obs, actions, logprobs, values, rewards, masks=None) -> list[Trajectory]:
    return [Trajectory(obs[i:i + 1], actions[i:i + 1], logprobs[i:i + 1], values[i:i + 1],
                       rewards[i:i + 1], obs[i], True,
                       None if masks is None else masks[i:i + 1]) for i in range(len(obs))]


def test_hybrid_act_shapes_masks_and_log_probs():
    learner = PPOLearner(5, HYBRID, PPOConfig(), NetworkConfig(hidden_units=16), seed=0)
    policy = PPOPolicy(5, HYBRID, NetworkConfig(hidden_units=16), seed=1)
    policy.load_weights(learner.weights())
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(400, 5)).astype(np.float32)
    masks = np.ones((400, 5), bool)
    masks[:, 0] = False           # branch 0: action 0 never allowed
    masks[:200, 4] = False        # branch 1: only action 0 for the first half
    actions, logprobs, values = policy.act(obs, masks)
    assert actions.dtype == np.float32 and actions.shape == (400, 4)
    # one log-prob column per continuous dimension, then per branch (ML-Agents' ActionLogProbs)
    assert logprobs.shape == (400, 4) and values.shape == (400,)
    continuous, discrete = split_hybrid(actions, 2)
    np.testing.assert_array_equal(discrete, actions[:, 2:])  # indices stored exactly as floats
    assert set(discrete[:, 0]) == {1, 2} and (discrete[:200, 1] == 0).all()
    assert set(discrete[200:, 1]) == {0, 1}
    assert np.abs(continuous).max() > 1.0 or continuous.std() > 0.5  # unclipped N(≈0, 1) samples
    # log π = Gaussian (σ = 1 at init) + categorical log-probs under the mask
    with torch.no_grad():
        x = torch.from_numpy(obs)
        out = policy.model.actor_head(policy.model.actor_encoder(x))
        gauss = torch.distributions.Normal(out[:, :2], 1.0).log_prob(torch.from_numpy(continuous))
        logits = out[:, 2:].masked_fill(~torch.from_numpy(masks), -1e8)
        cat = torch.cat([torch.log_softmax(b, -1).gather(1, torch.from_numpy(discrete[:, i:i + 1]))
                         for i, b in enumerate(logits.split([3, 2], 1))], 1)
    np.testing.assert_allclose(logprobs, torch.cat([gauss, cat], 1).numpy(), rtol=1e-4, atol=1e-4)
    # deterministic: the mode (means, most likely allowed index)
    det, _, _ = policy.act(obs, masks, deterministic=True)
    np.testing.assert_allclose(det[:, :2], out[:, :2].numpy(), atol=1e-6)
    assert (det[:, 2] != 0).all() and (det[:200, 3] == 0).all()


def test_hybrid_entropy_follows_ml_agents():
    """Mean over continuous dimensions of the Gaussian entropy + each branch's entropy."""
    model = PPOLearner(3, HYBRID, PPOConfig(), NetworkConfig(hidden_units=8), seed=0).model
    with torch.no_grad():
        model.actor_logstd.fill_(0.5)
        dist = model.distribution(torch.zeros(1, 3))
        gaussian = 0.5 * np.log(2 * np.pi * np.e) + 0.5
        probs = [lp.exp() for lp in dist.categorical.log_probs]
        branches = sum(-(p * p.log()).sum().item() for p in probs)
        assert dist.entropy().item() == pytest.approx(gaussian + branches, rel=1e-5)


@pytest.mark.slow
def test_hybrid_ppo_learns_a_bandit_with_a_continuous_target_and_a_discrete_choice():
    """Reward −|e₀ − 0.5| − |e₁ + 0.3| + [branch 0 picks 2] + [branch 1 picks 0], e = what the
    environment gets of the continuous sample (clamp(a, −3, 3) / 3)."""
    net = NetworkConfig(hidden_units=32, num_layers=1)
    # σ starts at e^-1: less of the clipping bias that a wide Gaussian has around 0.5
    learner = PPOLearner(3, HYBRID, PPOConfig(**FAST), net, seed=0)
    with torch.no_grad():
        learner.model.actor_logstd.fill_(-1.0)
    policy = PPOPolicy(3, HYBRID, net, seed=0)
    rng = np.random.default_rng(0)
    first = None
    for _ in range(12):
        policy.load_weights(learner.weights())
        obs = rng.normal(size=(256, 3)).astype(np.float32)
        actions, logprobs, values = policy.act(obs)
        c, d = split_hybrid(policy.env_actions(actions), 2)
        rewards = (-np.abs(c[:, 0] - 0.5) - np.abs(c[:, 1] + 0.3)
                   + (d[:, 0] == 2) + (d[:, 1] == 0)).astype(np.float32)
        first = rewards.mean() if first is None else first
        metrics = learner.update(_one_step(obs, actions, logprobs, values, rewards))
        assert all(np.isfinite(v) for v in metrics.values())
    policy.load_weights(learner.weights())
    det, _, _ = policy.act(rng.normal(size=(64, 3)).astype(np.float32), deterministic=True)
    det = policy.env_actions(det)
    assert (det[:, 2] == 2).all() and (det[:, 3] == 0).all()
    np.testing.assert_allclose(det[:, 0].mean(), 0.5, atol=0.15)
    np.testing.assert_allclose(det[:, 1].mean(), -0.3, atol=0.15)
    assert rewards.mean() > first + 0.5


def _colour_images(rng, n):
    """[n, 3, 20, 20] images in [0, 1] whose bright channel is the colour (0, 1 or 2)."""
    colours = rng.integers(0, 3, n)
    images = rng.uniform(0.0, 0.2, (n, 3, 20, 20)).astype(np.float32)
    images[np.arange(n), colours] = rng.uniform(0.6, 1.0, (n, 20, 20))
    return images.reshape(n, -1), colours


@pytest.mark.slow
def test_simple_encoder_ppo_learns_to_name_the_colour_of_an_image():
    """Discrete action = the image's colour: chance is 1/3 without looking at the pixels."""
    net = NetworkConfig(hidden_units=32, num_layers=1, vis_encode_type="simple")
    spec = SimpleNamespace(continuous_size=0, discrete_branches=(3,))
    shapes = [(3, 20, 20)]
    learner = PPOLearner(shapes, spec, PPOConfig(**FAST), net, seed=0)
    assert learner.model.actor_encoder.encoders  # a CNN, not an MLP over 1,200 pixels
    policy = PPOPolicy(shapes, spec, net, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(8):
        policy.load_weights(learner.weights())
        obs, colours = _colour_images(rng, 256)
        actions, logprobs, values = policy.act(obs)
        rewards = (actions[:, 0] == colours).astype(np.float32)
        learner.update(_one_step(obs, actions, logprobs, values, rewards))
    policy.load_weights(learner.weights())
    obs, colours = _colour_images(rng, 300)
    det, _, _ = policy.act(obs, deterministic=True)
    assert (det[:, 0] == colours).mean() > 0.9  # vs 1/3 for any policy blind to the image
