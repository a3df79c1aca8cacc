"""Decoupled PPO for lagged rows (``ppo/proximal.py``): the loss on known numbers, the lagged-row
mask, an update with no lagged row is the plain one, lagged rows whose behaviour is the current
policy train as on-policy ones, and the trust region is centred on the current policy; the host
hands each trajectory's lag to the learner."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.ppo.acting import PPOPolicy
from unity_rl.algorithms.ppo.host import PPOHost
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner, clipped_surrogate_loss
from unity_rl.algorithms.ppo.proximal import anchor, stale_rows
from unity_rl.experience import Segment, StepExtras, Trajectory

HYBRID = SimpleNamespace(continuous_size=2, discrete_branches=(3, 2))
OBS = 5
NET = NetworkConfig(hidden_units=16, num_layers=2)
MEMORY_NET = NetworkConfig(hidden_units=16, num_layers=2,
                           memory=MemoryConfig(sequence_length=4, memory_size=12))


def test_decoupled_loss_weights_each_term_of_the_clipped_surrogate():
    # the known batch of test_ppo: ratios 1.5, 0.5, 1.1, 0.5 to the centre, advantages +1, −1,
    # +2, +1, ε = 0.2: terms −1.2, 0.8, −2.2, −0.5; weighted by 2, 1, 0.5, 3
    newlogprob = torch.tensor([1.5, 0.5, 1.1, 0.5], dtype=torch.float64).log().requires_grad_()
    centre = torch.zeros(4, dtype=torch.float64)
    advantages = torch.tensor([1.0, -1.0, 2.0, 1.0], dtype=torch.float64)
    weight = torch.tensor([2.0, 1.0, 0.5, 3.0], dtype=torch.float64)
    loss = clipped_surrogate_loss(newlogprob, centre, advantages, 0.2, behaviour_weight=weight)
    assert loss.item() == pytest.approx((-2.4 + 0.8 - 1.1 - 1.5) / 4)
    loss.backward()
    np.testing.assert_allclose(newlogprob.grad.numpy(), [0.0, 0.0, -1.1 / 4, -1.5 / 4], atol=1e-12)


def test_anchor_keeps_fresh_rows_as_they_are_and_centres_stale_rows_on_the_proximal_policy():
    behaviour = torch.tensor([[-1.0, -2.0], [-1.0, -2.0]])
    proximal = torch.tensor([[-0.5, -2.5], [-0.5, -2.5]])
    centre, weight = anchor(behaviour, proximal, torch.tensor([False, True]))
    assert torch.equal(centre, torch.tensor([[-1.0, -2.0], [-0.5, -2.5]]))
    assert torch.equal(weight[0], torch.ones(2))
    np.testing.assert_allclose(weight[1].numpy(), np.exp([0.5, -0.5]), rtol=1e-6)


def test_stale_rows_are_padded_as_the_batch_and_none_without_a_lag():
    assert stale_rows(None, [3, 2]) is None and stale_rows([0, 0], [3, 2]) is None
    np.testing.assert_array_equal(stale_rows([0, 1, 2], [3, 2, 1]), [0, 0, 0, 1, 1, 1])
    # sequences of 2: 3 -> 4 rows, 2 -> 2, 1 -> 2 (padding never counts as stale)
    np.testing.assert_array_equal(stale_rows([0, 1, 2], [3, 2, 1], 2),
                                  [0, 0, 0, 0, 1, 1, 1, 0])
    with pytest.raises(ValueError, match="2 lags for 3 trajectories"):
        stale_rows([1, 0], [3, 2, 1])


def _masks(rng, n):
    allowed = rng.random((n, 5)) > 0.3
    allowed[:, [0, 3]] = True
    return allowed


def _rollout(policy: PPOPolicy, seed: int, num_agents=4, steps=9) -> list[Trajectory]:
    """Trajectories of agents acting together, memories stored when the policy has them."""
    rng = np.random.default_rng(seed)
    keys = [f"agent{i}" for i in range(num_agents)]
    rows = {k: {"obs": [], "actions": [], "logprobs": [], "masks": [], "memories": []} for k in keys}
    for _ in range(steps):
        obs, masks = rng.normal(size=(num_agents, OBS)).astype(np.float32), _masks(rng, num_agents)
        actions, logprobs, _ = policy.act(obs, masks, agent_keys=keys)
        memories = policy.step_extras().get("memories")
        for i, k in enumerate(keys):
            for name, value in (("obs", obs), ("actions", actions), ("logprobs", logprobs),
                                ("masks", masks), ("memories", memories)):
                rows[k][name].append(None if value is None else value[i])
    return [Trajectory(obs=np.stack(r["obs"]), actions=np.stack(r["actions"]),
                       logprobs=np.stack(r["logprobs"]), values=np.zeros(steps, np.float32),
                       rewards=rng.normal(size=steps).astype(np.float32),
                       last_obs=rng.normal(size=OBS).astype(np.float32), terminated=i == 0,
                       action_masks=np.stack(r["masks"]),
                       extras=StepExtras(memories=None if r["memories"][0] is None
                                         else np.stack(r["memories"])))
            for i, r in enumerate(rows.values())]


def _learner_and_policy(net, cfg, acting_seed: int | None = None):
    """A learner and a policy acting with its weights, or (``acting_seed``) with another
    learner's, an older policy's stand-in."""
    learner = PPOLearner(OBS, HYBRID, cfg, net, seed=0)
    acting = learner
    if acting_seed is not None:  # another network, moved well away from its initialisation
        acting = PPOLearner(OBS, HYBRID, cfg, net, seed=acting_seed)
        with torch.no_grad():
            generator = torch.Generator().manual_seed(acting_seed)
            for p in acting.model.parameters():
                p.add_(0.3 * torch.randn(p.shape, generator=generator))
    policy = PPOPolicy(OBS, HYBRID, net, seed=1)
    policy.load_weights(acting.weights())
    return learner, policy


def _parameters(learner: PPOLearner) -> list[torch.Tensor]:
    return [p.detach().clone() for p in learner.model.parameters()]


@pytest.mark.parametrize("net", [NET, MEMORY_NET], ids=["plain", "memory"])
def test_no_lagged_row_is_the_plain_update(net):
    cfg = PPOConfig(buffer_size=36, minibatch_size=12, num_epochs=2)
    runs = []
    for lags in (None, [0, 0, 0, 0]):
        learner, policy = _learner_and_policy(net, cfg, acting_seed=5)
        metrics = learner.update(_rollout(policy, seed=2), lags=lags)
        runs.append((_parameters(learner), metrics))
    assert all(torch.equal(a, b) for a, b in zip(runs[0][0], runs[1][0]))
    assert runs[0][1] == runs[1][1]


@pytest.mark.parametrize("net", [NET, MEMORY_NET], ids=["plain", "memory"])
def test_lagged_rows_acted_by_the_current_policy_train_as_on_policy_rows(net):
    """π_prox = π_behav: every weight is 1 and the centre the behaviour's log-prob (to rounding)."""
    cfg = PPOConfig(buffer_size=36, minibatch_size=12, num_epochs=2)
    runs = []
    for lags in (None, [1, 2, 1, 3]):
        learner, policy = _learner_and_policy(net, cfg)
        metrics = learner.update(_rollout(policy, seed=2), lags=lags)
        runs.append((metrics, _parameters(learner)))
    (plain_metrics, plain), (lagged_metrics, lagged) = runs
    for a, b in zip(plain, lagged):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert lagged_metrics["Policy/Approx KL"] == pytest.approx(plain_metrics["Policy/Approx KL"],
                                                               rel=1e-3, abs=1e-7)


def test_lagged_rows_are_clipped_around_the_current_policy_not_the_one_that_acted():
    """One minibatch, one epoch: the ratio is measured before the only step. Centred on the
    policy that acted (another network), it is far from 1 and often clipped; centred on the
    learner's current policy it is exactly 1."""
    cfg = PPOConfig(buffer_size=36, minibatch_size=36, num_epochs=1)
    clip = {}
    for name, lags in (("behaviour", None), ("decoupled", [1, 1, 1, 1])):
        learner, policy = _learner_and_policy(NET, cfg, acting_seed=5)
        metrics = learner.update(_rollout(policy, seed=2), lags=lags)
        clip[name] = (metrics["Policy/Clip Fraction"], metrics["Policy/Approx KL"])
    assert clip["behaviour"][0] > 0.2 and clip["behaviour"][1] > 0.01
    assert clip["decoupled"] == (0.0, 0.0)


class _RecordingLearner:
    """What a host gives its learner (the update is not the point here)."""

    agent_steps_collected = 0
    sequence_length = 1

    def __init__(self):
        self.calls = []

    def update(self, trajectories, collected_steps=None, episode_length=None, lags=None):
        self.calls.append(([len(t.rewards) for t in trajectories], lags))
        return {}


def _segment(version: int, lengths) -> Segment:
    trajectories = [Trajectory(np.zeros((n, 2), np.float32), np.zeros((n, 1), np.float32),
                               np.zeros((n, 1), np.float32), np.zeros(n, np.float32),
                               np.zeros(n, np.float32), np.zeros(2, np.float32), False)
                    for n in lengths]
    return Segment(trajectories, version, 0, sum(lengths), [], [])


@pytest.mark.parametrize("decoupled", [True, False])
def test_host_hands_each_kept_trajectory_its_lag(decoupled):
    learner = _RecordingLearner()
    host = PPOHost(learner, buffer_steps=10, drop_lag=1, decoupled=decoupled)
    host.version = 2
    assert host.accept(_segment(2, [3, 0, 2])) == 0        # the empty trajectory is not kept
    assert host.accept(_segment(0, [4])) is None           # lag 2 > 1: dropped
    assert host.accept(_segment(1, [5])) == 1
    host.train(sync=False)
    assert learner.calls == [([3, 2, 5], [0, 0, 1] if decoupled else None)]
    assert host._lags == []                                # the next buffer starts afresh


@pytest.mark.parametrize("trainer", ["ppo", "poca"])
@pytest.mark.parametrize("setting, decoupled", [(None, False), ("behaviour", False),
                                                ("decoupled", True)])
def test_the_config_key_reaches_the_host(trainer, setting, decoupled):
    from unity_rl.algorithms.registry import trainer_type
    from unity_rl.config import parse_config
    from unity_rl.runtime.algorithm import HostContext
    from unity_rl.runtime.messages import BehaviorInfo

    raw = {"behaviors": {"B": {"trainer_type": trainer,
                               "network_settings": {"hidden_units": 8, "num_layers": 1}}}}
    if setting is not None:
        raw["unity_rl"] = {"mode": "async", "lag_correction": setting}
    cfg = parse_config(raw)
    host = trainer_type(trainer).make_algorithm(cfg, "B", cfg.behaviors["B"]).make_host(
        BehaviorInfo("B?team=0", ((OBS,),), HYBRID, 1), HostContext("cpu", 0, 1, "async", 2))
    assert host.decoupled is decoupled
