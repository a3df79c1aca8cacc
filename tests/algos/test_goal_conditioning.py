"""Goal conditioning (``goal_conditioning_type``) and ``shared_critic`` in the networks.

ML-Agents' own numbers are checked in ``test_mlagents_reference.py`` (cases "goal" and
"shared_critic") and ``test_conditioning.py``; these tests pin the structure: which bodies are
``ConditionalEncoder``s, what the goal encoding is, and how the goal indices and the shared
critic travel with weights and checkpoints."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from unity_rl.algorithms.conditioning import ConditionalEncoder, ConditionalMLP, HyperNetwork
from unity_rl.algorithms.encoders import ObservationEncoder
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.acting import PPOPolicy, ppo_policy
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.experience import Trajectory

DISCRETE = SimpleNamespace(continuous_size=0, discrete_branches=(5,))
SHAPES = [(6,), (2,)]  # a vector and a 2-float goal signal (obs 1)


def _trajectories(rng, n=4, length=8, obs_dim=8):
    return [Trajectory(obs=rng.normal(size=(length, obs_dim)).astype(np.float32),
                       actions=rng.integers(0, 5, (length, 1)),
                       logprobs=np.full((length, 1), np.log(0.2), np.float32),
                       values=np.zeros(length, np.float32),
                       rewards=rng.normal(size=length).astype(np.float32),
                       last_obs=rng.normal(size=obs_dim).astype(np.float32), terminated=False)
            for _ in range(n)]


def test_hyper_makes_every_body_a_conditional_encoder_over_the_whole_encoding():
    net = NetworkConfig(hidden_units=16, num_layers=2)
    model = PPOLearner(SHAPES, DISCRETE, PPOConfig(), net, seed=0, goal_indices=(1,)).model
    actor = model.actor_head
    assert isinstance(model.critic, ConditionalEncoder) and isinstance(actor, ConditionalMLP)
    for body in (model.critic, actor.body):
        first, hyper = body.layers[0], body.layers[2]
        # the goal is also part of the ordinary encoding: 6 + 2 inputs; only the last layer is hyper
        assert isinstance(first, nn.Linear) and first.in_features == 8
        assert isinstance(hyper, HyperNetwork) and hyper.hypernet[0].in_features == 2
    assert actor.out.out_features == 5


def test_none_and_no_goal_observation_keep_the_plain_mlp():
    for net, goals in ((NetworkConfig(hidden_units=16, goal_conditioning_type="none"), (1,)),
                       (NetworkConfig(hidden_units=16), ())):
        model = PPOLearner(SHAPES, DISCRETE, PPOConfig(), net, seed=0, goal_indices=goals).model
        assert not model.goal_conditioned
        assert not any(isinstance(m, ConditionalEncoder) for m in model.modules())
        assert model.goal_indices == goals  # recorded either way: the weights say what the spec had


def test_goal_encoding_is_the_normalised_vector_or_the_image_encoding():
    net = NetworkConfig(hidden_units=16, vis_encode_type="match3")
    encoder = ObservationEncoder([(6,), (3, 8, 8), (2,)], net, goal_indices=(1, 2))
    assert encoder.goal_size == 16 + 2
    flat = torch.randn(4, 6 + 3 * 8 * 8 + 2)
    with torch.no_grad():
        encoding, goal = encoder.encode(flat)
    np.testing.assert_array_equal(goal[:, 16:].numpy(), flat[:, -2:].numpy())
    np.testing.assert_array_equal(goal[:, :16].numpy(), encoding[:, 6:22].numpy())
    assert ObservationEncoder([(6,), (2,)], net).encode(flat[:, :8])[1] is None


def test_policy_copies_follow_the_goal_indices_of_the_weights():
    net = NetworkConfig(hidden_units=16, num_layers=1)
    learner = PPOLearner(SHAPES, DISCRETE, PPOConfig(), net, seed=0, goal_indices=(1,))
    obs = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
    expected = learner.export_module()(torch.from_numpy(obs))
    # an actor's copy, told the goal indices by its BehaviorSpec, and one that is not (export)
    for policy in (ppo_policy(SHAPES, DISCRETE, 1, network_cfg=net, goal_indices=(1,)),
                   PPOPolicy(SHAPES, DISCRETE, net)):
        policy.load_weights(learner.weights())
        assert policy.model.goal_conditioned
        actions, _, values = policy.act(obs, deterministic=True)
        np.testing.assert_array_equal(actions, expected.numpy())
        assert np.isnan(values).all()   # actors spend no critic pass: the learner computes values
        policy.load_weights(learner.weights(include_critic=True))  # a saved policy's whole network
        with torch.no_grad():           # then the copy's critic is the learner's
            np.testing.assert_allclose(policy.model.get_value(torch.from_numpy(obs))[:, 0].numpy(),
                                       learner.model.get_value(torch.from_numpy(obs))[:, 0]
                                       .numpy(), atol=1e-6)


def test_a_checkpoint_refuses_another_structure():
    net = NetworkConfig(hidden_units=16)
    state = PPOLearner(SHAPES, DISCRETE, PPOConfig(), net, seed=0, goal_indices=(1,)).state_dict()
    with pytest.raises(ValueError, match="goal_indices"):
        PPOLearner(SHAPES, DISCRETE, PPOConfig(), net, seed=0).load_state_dict(state)
    with pytest.raises(ValueError, match="shared_critic"):
        PPOLearner(SHAPES, DISCRETE, PPOConfig(shared_critic=True), net, seed=0,
                   goal_indices=(1,)).load_state_dict(state)


@pytest.mark.parametrize("goals", [(), (1,)])
def test_shared_critic_has_no_critic_and_value_gradients_reach_the_actor_body(goals):
    net = NetworkConfig(hidden_units=16, num_layers=2)
    learner = PPOLearner(SHAPES, DISCRETE, PPOConfig(shared_critic=True), net, seed=0,
                         goal_indices=goals)
    model = learner.model
    assert not hasattr(model, "critic") and not hasattr(model, "critic_encoder")
    assert {id(p) for p in learner.optimizer.param_groups[0]["params"]} == \
        {id(p) for p in model.parameters()}  # one Adam over the actor and its value heads
    model.zero_grad()
    model.get_value(torch.randn(7, 8)).sum().backward()
    body = model.actor_head.body if goals else model.actor_head[:-1]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in body.parameters())
    assert model.actor_head[-1].weight.grad is None if not goals else model.actor_head.out.weight.grad is None
    metrics = learner.update(_trajectories(np.random.default_rng(1)))
    assert np.isfinite(metrics["Losses/Value Loss"])
    policy = ppo_policy(SHAPES, DISCRETE, 0, network_cfg=net)  # weights bring shared_critic
    policy.load_weights(learner.weights())
    assert policy.model.shared_critic
    obs = torch.randn(3, 8)
    with torch.no_grad():  # the exported module is the actor alone, as without shared_critic
        assert torch.equal(learner.export_module()(obs), policy.export_module()(obs))


def test_ddpg_actor_and_critic_are_goal_conditioned():
    from unity_rl.algorithms.ddpg.learner import DDPGConfig, DDPGLearner
    from unity_rl.experience import TransitionBatch

    spec = SimpleNamespace(continuous_size=2, discrete_branches=())
    learner = DDPGLearner(SHAPES, spec, DDPGConfig(batch_size=8), 16, 1, False, seed=0,
                          goal_indices=(1,))
    for net in (learner.actor.net, learner.critic.net):
        assert isinstance(net, ConditionalMLP) and isinstance(net.body.layers[0], HyperNetwork)
    assert learner.critic.net.body.layers[0].input_size == 8 + 2  # encoding and action
    plain = DDPGLearner(SHAPES, spec, DDPGConfig(), 16, 1, False, seed=0, goal_indices=(1,),
                        goal_conditioning_type="none")
    assert not any(isinstance(m, ConditionalEncoder) for m in plain.actor.modules())
    rng = np.random.default_rng(0)
    batch = TransitionBatch(obs=rng.normal(size=(8, 8)).astype(np.float32),
                            actions=rng.uniform(-1, 1, (8, 2)).astype(np.float32),
                            rewards=rng.normal(size=8).astype(np.float32),
                            next_obs=rng.normal(size=(8, 8)).astype(np.float32),
                            terminated=np.zeros(8, np.float32))
    learner.update(batch)
    policy = learner.make_policy(seed=0)
    np.testing.assert_allclose(policy.act(batch.obs, noise=False),
                               learner.export_module()(torch.from_numpy(batch.obs)).detach().numpy(),
                               atol=1e-6)
