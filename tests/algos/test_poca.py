"""POCALearner and POCACritic on hand-made data: masking of absent members, the member count,
checkpoints, and the actor shipped to PPO's acting policy and export."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.poca.config import POCAConfig
from unity_rl.algorithms.poca.learner import POCALearner
from unity_rl.algorithms.ppo.acting import PPOPolicy
from unity_rl.experience import StepExtras, Trajectory

SPEC = SimpleNamespace(continuous_size=0, discrete_branches=(3,))
NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=1)


def learner(seed: int = 0) -> POCALearner:
    return POCALearner([(4,)], SPEC, POCAConfig(buffer_size=32, minibatch_size=16), NET,
                       seed=seed)


def trajectories(rng, n=4, length=8, mates=2, obs=4, branches=(3,)):
    out = []
    for _ in range(n):
        group_obs = rng.normal(size=(length, mates, obs)).astype(np.float32)
        group_obs[length // 2:, -1] = np.nan  # a member leaves half way
        out.append(Trajectory(
            obs=rng.normal(size=(length, obs)).astype(np.float32),
            actions=rng.integers(0, 2, (length, len(branches))),
            logprobs=np.full((length, len(branches)), -1.1, np.float32),
            values=np.zeros(length, np.float32), rewards=np.zeros(length, np.float32),
            last_obs=rng.normal(size=obs).astype(np.float32), terminated=True,
            extras=StepExtras(group_obs=group_obs,
                              group_actions=rng.integers(0, 2, (length, mates, len(branches))
                                                         ).astype(np.float32),
                              groupmate_rewards=np.zeros(length, np.float32),
                              group_rewards=rng.normal(size=length).astype(np.float32),
                              group_dones=np.zeros((length, mates), bool)),
            next_group_obs=rng.normal(size=(1, obs)).astype(np.float32), group_continues=True))
    return out


def test_absent_members_are_masked_out_and_counted():
    critic = learner().critic
    rng = np.random.default_rng(0)
    own = torch.as_tensor(rng.normal(size=(5, 4)), dtype=torch.float32)
    mate = torch.as_tensor(rng.normal(size=(5, 1, 4)), dtype=torch.float32)
    critic.max_agents.fill_(3.0)
    with torch.no_grad():
        alone_with_one = critic.value(own, mate)
        padded = critic.value(own, torch.cat([mate, torch.full((5, 2, 4), float("nan"))], 1))
        with_two = critic.value(own, torch.cat([mate, mate + 1], 1))
        actions = torch.zeros(5, 1, 1)
        b1 = critic.baseline(own, mate, actions)
        b_pad = critic.baseline(own, torch.cat([mate, torch.full((5, 1, 4), float("nan"))], 1),
                                torch.zeros(5, 2, 1))
    torch.testing.assert_close(padded, alone_with_one)
    torch.testing.assert_close(b_pad, b1)
    assert not torch.allclose(with_two, alone_with_one)
    assert torch.isfinite(padded).all() and torch.isfinite(b_pad).all()


def test_update_checkpoint_round_trip_and_actor_for_acting_and_export():
    rng = np.random.default_rng(1)
    a = learner(seed=3)
    metrics = a.update(trajectories(rng))
    assert np.isfinite(metrics["Losses/Baseline Loss"]) and metrics["Losses/Baseline Loss"] > 0
    assert float(a.critic.max_agents) == 3.0  # self + two mates at the first steps
    b = learner(seed=4)
    b.load_state_dict(a.state_dict())
    for m_a, m_b in ((a.model, b.model), (a.critic, b.critic)):
        for (k, v), (_, w) in zip(m_a.state_dict().items(), m_b.state_dict().items()):
            torch.testing.assert_close(v, w, msg=k)
    data = trajectories(np.random.default_rng(2))
    torch.manual_seed(0)
    ma = a.update(data)
    mb = b.update(data)
    assert ma == mb  # same state, same shuffling RNG: the same update
    policy = PPOPolicy([(4,)], SPEC, NET, seed=0)
    policy.load_weights(a.weights())
    obs = rng.normal(size=(6, 4)).astype(np.float32)
    actions, logprobs, _ = policy.act(obs, np.ones((6, 3), bool))
    assert actions.shape == (6, 1) and np.isfinite(logprobs).all()
    module = a.export_module()
    out = module(torch.as_tensor(obs), torch.ones(6, 3))
    assert out is not None


def test_host_trains_the_learner_and_reports_group_returns():
    """The host's call into the learner (PPO's host contract) and the group metric; fast-tier
    guard for what the slow end-to-end tests exercise."""
    from unity_rl.algorithms.poca.host import POCAHost
    from unity_rl.experience import Segment

    trajs = trajectories(np.random.default_rng(5))
    host = POCAHost(learner(), buffer_steps=32, drop_lag=None)
    steps = sum(len(t.rewards) for t in trajs)
    host.accept(Segment(trajs, 0, 0, steps, [0.0], [8], group_returns=[1.0, 0.0]))
    assert host.ready()
    metrics = host.train(sync=True)
    assert metrics["Environment/Group Cumulative Reward"] == 0.5
    assert np.isfinite(metrics["Losses/Baseline Loss"]) and host.version == 1


def test_memory_pads_sequences_carries_both_critic_memories_and_ships_a_recurrent_actor():
    """``network_settings.memory`` (weight for weight in test_poca_mlagents_reference.py): odd
    trajectory lengths padded to whole sequences and masked out, a learned signal on the padded
    rows, the value and baseline memories carried from trajectory to trajectory (not
    checkpointed), and the recurrent actor for PPO's acting policy and export."""
    from unity_rl.algorithms.network_config import MemoryConfig
    from unity_rl.algorithms.reward_signals.config import CuriosityConfig, RewardSignalConfig

    net = NetworkConfig(hidden_units=16, num_layers=1,
                        memory=MemoryConfig(sequence_length=4, memory_size=8))
    signals = (RewardSignalConfig("extrinsic"),
               CuriosityConfig("curiosity", network_settings=NetworkConfig(hidden_units=8)))
    make = lambda seed: POCALearner([(4,)], SPEC, POCAConfig(buffer_size=32, minibatch_size=16),  # noqa: E731
                                    net, seed=seed, reward_signals=signals)
    a = make(3)
    assert a.sequence_length == 4 and a.critic.memory_size == 8
    rng = np.random.default_rng(1)
    data = [t._replace(extras=t.extras._replace(memories=rng.normal(size=(7, 8)).astype(
        np.float32))) for t in trajectories(rng, n=3, length=7)]
    batch = a.prepare(data)
    assert len(batch.obs) == 3 * 8 and int(batch.loss_mask.sum()) == 3 * 7
    assert batch.memories.shape == batch.value_memories.shape == (3 * 2, 8)
    assert not batch.loss_mask[7] and torch.isnan(batch.mates_obs[7]).all()  # a padded row
    assert torch.equal(batch.value_memories[0], torch.zeros(8))  # the first from zeros
    assert not torch.equal(batch.value_memories[2], torch.zeros(8))  # then carried across
    assert not torch.equal(batch.value_memories[1], batch.baseline_memories[1])
    metrics = a.optimise(batch)
    assert np.isfinite(metrics["Losses/Baseline Loss"]) and "Losses/Curiosity Forward Loss" in metrics
    assert a.value_memory is not None and a.baseline_memory is not None

    b = make(4)
    b.load_state_dict(a.state_dict())
    assert b.value_memory is None  # as ML-Agents, the carry is not part of checkpoints
    policy = PPOPolicy([(4,)], SPEC, net, seed=0, shared_critic=True)
    policy.load_weights(a.weights())
    obs = rng.normal(size=(2, 4)).astype(np.float32)
    actions, logprobs, _ = policy.act(obs, np.ones((2, 3), bool), agent_keys=["x", "y"])
    assert actions.shape == (2, 1) and np.isfinite(logprobs).all()
    assert set(policy.memories) == {"x", "y"}
    out = a.export_module()(torch.as_tensor(obs), torch.ones(2, 3), torch.zeros(2, 1, 8))
    assert out[-1].shape == (2, 1, 8)  # recurrent_out, ML-Agents' recurrent ONNX contract


def test_gail_trains_beside_the_extrinsic_signal():
    """GAIL through the same seam as curiosity and RND (their reference: test_poca_mlagents_reference)."""
    from pathlib import Path

    from unity_rl.algorithms.reward_signals.config import GAILConfig, RewardSignalConfig

    demo = Path(__file__).resolve().parent / "mlagents_reference" / "gail_discrete.demo"
    spec = SimpleNamespace(continuous_size=0, discrete_branches=(3, 2))
    poca = POCALearner([(6,)], spec, POCAConfig(buffer_size=32, minibatch_size=16),
                       NetworkConfig(hidden_units=16, num_layers=1), seed=0,
                       reward_signals=(RewardSignalConfig("extrinsic"),
                                       GAILConfig("gail", demo_path=str(demo), strength=0.1,
                                                  network_settings=NetworkConfig(hidden_units=8))))
    gail = poca.reward_signals[1]
    before = {k: v.clone() for k, v in gail.modules.state_dict().items()}
    metrics = poca.update(trajectories(np.random.default_rng(0), obs=6, branches=(3, 2)))
    assert {"Losses/GAIL Loss", "Policy/Gail Value Estimate", "Policy/Gail Baseline Estimate"} \
        <= set(metrics)
    assert any(not torch.equal(v, gail.modules.state_dict()[k]) for k, v in before.items())
    assert poca.critic.value_head_names == ["extrinsic", "gail"]


def test_seed_draws_actor_then_signals_then_critic_as_mlagents_learn():
    """One seeded stream in mlagents-learn's order (policy, ``create_reward_signals``, then
    ``POCAValueNetwork``): the same networks as drawing them one after the other by hand; the
    signal's weights are not what a separate seed would give."""
    from unity_rl.algorithms.nets import seeded_init
    from unity_rl.algorithms.poca.model import POCACritic
    from unity_rl.algorithms.ppo.model import ActorCritic
    from unity_rl.algorithms.reward_signals.registry import make_reward_signals
    from unity_rl.algorithms.reward_signals.config import CuriosityConfig, RewardSignalConfig

    signals = (RewardSignalConfig("extrinsic"),
               CuriosityConfig("curiosity", network_settings=NetworkConfig(hidden_units=8)))
    ours = POCALearner([(4,)], SPEC, POCAConfig(buffer_size=32, minibatch_size=16), NET,
                       seed=5, reward_signals=signals)
    heads = ["extrinsic", "curiosity"]
    with seeded_init(5):
        actor = ActorCritic([(4,)], SPEC, NET, value_heads=heads, shared_critic=True)
        signal = make_reward_signals(signals, [(4,)], SPEC, "cpu")[1]
        critic = POCACritic([(4,)], SPEC, NET, value_heads=heads)
    for mine, drawn in ((ours.model, actor), (ours.reward_signals[1].modules, signal.modules),
                        (ours.critic, critic)):
        for (name, a), b in zip(mine.state_dict().items(), drawn.state_dict().values()):
            assert torch.equal(a, b), name
    with seeded_init(6):
        apart = make_reward_signals(signals, [(4,)], SPEC, "cpu")[1]
    assert not all(torch.equal(a, b) for a, b in zip(
        ours.reward_signals[1].modules.state_dict().values(), apart.modules.state_dict().values()))


def test_a_camera_update_with_mates_runs_its_backward_pass():
    """Own and mates' cameras share an image shape but not their rows; each minibatch converts
    both channels-last in kept buffers (``image_layout``), and the update must still train (the
    zoo's ``poca/PushBlockCollab.yaml``, a grid sensor, once failed its backward pass here)."""
    shape = (3, 20, 20)
    net = NetworkConfig(hidden_units=16, num_layers=1, vis_encode_type="simple")
    poca = POCALearner([shape], SPEC, POCAConfig(buffer_size=32, minibatch_size=16), net, seed=0)
    before = [p.detach().clone() for p in poca.critic.parameters()]
    metrics = poca.update(trajectories(np.random.default_rng(3), obs=int(np.prod(shape))))
    assert np.isfinite(metrics["Losses/Baseline Loss"])
    assert any(not torch.equal(b, p) for b, p in zip(before, poca.critic.parameters()))


def test_lagged_rows_train_with_the_decoupled_objective():
    """``lags`` (async) as PPO's (``test_ppo_lag.py``): all 0 is the plain update; lagged rows
    whose stored log-probs are the current policy's train as on-policy rows; with another
    behaviour the update differs; with memory the lagged rows are the padded batch's."""
    plain_net = NetworkConfig(hidden_units=16, num_layers=1)
    make = lambda: POCALearner([(4,)], SPEC, POCAConfig(buffer_size=32, minibatch_size=16),  # noqa: E731
                               plain_net, seed=0)
    data = trajectories(np.random.default_rng(2))
    probe = make()
    batch = probe.prepare(data)
    with torch.no_grad():
        current = probe.model.distribution(batch.obs, batch.masks, None, 1).log_prob(batch.actions)
    own = [t._replace(logprobs=current[i * 8:(i + 1) * 8].numpy()) for i, t in enumerate(data)]

    def params_after(rows, lags):
        poca = make()
        poca.update(rows, lags=lags)
        return [p.detach().clone() for p in poca.model.parameters()]

    plain = params_after(data, None)
    assert all(torch.equal(a, b) for a, b in zip(plain, params_after(data, [0, 0, 0, 0])))
    assert not all(torch.equal(a, b) for a, b in zip(plain, params_after(data, [1, 0, 2, 1])))
    for a, b in zip(params_after(own, None), params_after(own, [1, 1, 1, 1])):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)

    from unity_rl.algorithms.network_config import MemoryConfig
    recurrent = POCALearner([(4,)], SPEC, POCAConfig(buffer_size=32, minibatch_size=16),
                            NetworkConfig(hidden_units=16, num_layers=1,
                                          memory=MemoryConfig(sequence_length=4, memory_size=8)),
                            seed=0)
    rng = np.random.default_rng(1)
    rows = [t._replace(extras=t.extras._replace(memories=rng.normal(size=(7, 8)).astype(
        np.float32))) for t in trajectories(rng, n=3, length=7)]
    batch = recurrent.prepare(rows, lags=[0, 1, 0])
    assert batch.stale.tolist() == [False] * 8 + [True] * 7 + [False] * 9
    assert np.isfinite(recurrent.optimise(batch)["Losses/Policy Loss"])
