"""SAC's config, update rule, transitions, acting policy and learner, without builds (the
weight-for-weight check against ML-Agents is ``test_sac_mlagents_reference.py``)."""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.offpolicy.acting import trajectories_to_transitions
from unity_rl.algorithms.offpolicy.host import OffPolicyHost
from unity_rl.algorithms.sac.acting import SACActingPolicy
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.learner import SACLearner
from unity_rl.config import ConfigError, load_config
from unity_rl.experience import Segment, Trajectory, TransitionBatch
from unity_rl.replay import ReplayBuffer

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "mlagents_configs" / "sac"
"""Unity's SAC example configs, unchanged (copies: tests/fixtures/mlagents_configs/README.md)."""
NET = NetworkConfig(normalize=True, hidden_units=16, num_layers=2)


def spec(continuous: int = 0, branches: tuple[int, ...] = ()):
    return SimpleNamespace(continuous_size=continuous, discrete_branches=branches)


# -- config -------------------------------------------------------------------------------------

def test_defaults_are_ml_agents_sac_settings():
    cfg = SACConfig()
    assert (cfg.batch_size, cfg.buffer_size, cfg.warmup_steps, cfg.tau, cfg.steps_per_update,
            cfg.save_replay_buffer, cfg.init_entcoef, cfg.lr_schedule) == (
        128, 50_000, 0, 0.005, 1.0, False, 1.0, "constant")
    assert SACConfig(steps_per_update=10).reward_signal_steps_per_update == 10.0
    assert SACConfig(steps_per_update=10, reward_signal_steps_per_update=3
                     ).reward_signal_steps_per_update == 3
    assert not SACConfig.RANDOM_WARMUP
    with pytest.raises(ValueError, match="sac.tau"):
        SACConfig(tau=0.0)


def mlagents_updates(steps: list[int], init: int, spu: float, batch: int) -> list[int]:
    """ML-Agents' ``OffPolicyTrainer`` loop, run after each trajectory arrives."""
    update_steps, done, buffer = 1, [], 0
    for step in steps:
        buffer = step
        if buffer >= batch and step >= init:
            while (step - init) / update_steps > spu:
                update_steps += 1
        done.append(update_steps - 1)
    return done


@pytest.mark.parametrize("init,spu", [(0, 10.0), (1000, 10.0), (0, 1.0), (500, 2.5)])
def test_updates_owed_is_ml_agents_loop(init, spu):
    cfg = SACConfig(warmup_steps=init, steps_per_update=spu, batch_size=64)
    steps = list(range(0, 20_000, 37))
    expected = mlagents_updates(steps, init, spu, cfg.batch_size)
    done = 0
    for step, want in zip(steps, expected):
        if step >= cfg.min_replay_rows():
            done += cfg.updates_owed(step, done)
        assert done == want, step


def test_linear_schedule_reaches_its_floor_at_max_steps():
    cfg = SACConfig(lr_schedule="linear", learning_rate=1e-3, max_steps=1000)
    assert cfg.learning_rate_at(0) == pytest.approx(1e-3)
    assert cfg.learning_rate_at(500) == pytest.approx(0.5e-3, rel=1e-6)
    assert cfg.learning_rate_at(5000) == pytest.approx(1e-10)
    assert SACConfig().learning_rate_at(10**9) == 3e-4


@pytest.mark.parametrize("name", ["3DBall", "3DBallHard", "Basic", "Crawler", "FoodCollector",
                                  "GridWorld", "PushBlock", "WallJump", "Worm"])
def test_unity_sac_configs_load_with_their_values(name):
    cfg = load_config(CONFIGS / f"{name}.yaml")
    for behavior in cfg.behaviors.values():
        assert behavior.trainer_type == "sac"
        assert isinstance(behavior.hyperparameters, SACConfig)
    if name == "3DBall":
        hp = cfg.behaviors["3DBall"].hyperparameters
        assert (hp.batch_size, hp.buffer_size, hp.steps_per_update, hp.init_entcoef) == (
            64, 200_000, 10.0, 0.5)
        assert hp.max_steps == 200_000


def test_pre_1_0_walker_config_is_a_one_line_error_naming_its_old_key():
    with pytest.raises(ConfigError) as info:
        load_config(CONFIGS / "Walker.yaml")
    assert info.value.key == "output_path" and "pre-1.0" in str(info.value)
    assert "\n" not in str(info.value)


def test_fix_quirks_set_the_fields_and_unknown_names_are_refused(tmp_path):
    text = (CONFIGS / "3DBall.yaml").read_text()
    path = tmp_path / "fixed.yaml"
    path.write_text(text + "unity_rl:\n  fix_quirks: [sac_deterministic_squash, "
                           "sac_interrupted_bootstrap]\n")
    hp = load_config(path).behaviors["3DBall"].hyperparameters
    assert hp.deterministic_squash and hp.interrupted_next_obs == "final"
    assert hp.hybrid_entropy_sign == "mlagents"
    default = load_config(CONFIGS / "3DBall.yaml").behaviors["3DBall"].hyperparameters
    assert not default.deterministic_squash and default.interrupted_next_obs == "own"
    path.write_text(text + "unity_rl:\n  fix_quirks: [no_such_quirk]\n")
    with pytest.raises(ConfigError, match="sac_deterministic_squash"):
        load_config(path)


# -- transitions ----------------------------------------------------------------------------------

def traj(obs0: float, n: int, *, terminated=False, interrupted=False, masks=None) -> Trajectory:
    obs = np.arange(obs0, obs0 + n, dtype=np.float32)[:, None]
    return Trajectory(obs, np.zeros((n, 1), np.int64), np.zeros((n, 1), np.float32),
                      np.full(n, np.nan, np.float32), np.ones(n, np.float32),
                      np.array([obs0 + 100], np.float32), terminated, masks,
                      interrupted=interrupted)


def test_interrupted_bootstrap_from_own_obs_as_ml_agents_sac_or_from_the_final_one():
    t = [traj(0, 3, interrupted=True), traj(10, 2), traj(20, 2, terminated=True)]
    own = trajectories_to_transitions(t, interrupted_next_obs="own")
    final = trajectories_to_transitions(t, interrupted_next_obs="final")
    np.testing.assert_array_equal(own.next_obs[:, 0], [1, 2, 2, 11, 110, 21, 120])
    np.testing.assert_array_equal(final.next_obs[:, 0], [1, 2, 100, 11, 110, 21, 120])
    np.testing.assert_array_equal(own.terminated, [0, 0, 0, 0, 0, 0, 1])


def test_masks_travel_with_transitions_and_through_the_replay():
    masks = np.array([[1, 0, 1], [0, 1, 1]], bool)
    batch = trajectories_to_transitions([traj(0, 2, masks=masks), traj(5, 1)], mask_size=3)
    np.testing.assert_array_equal(batch.action_masks, [[1, 0, 1], [0, 1, 1], [1, 1, 1]])
    replay = ReplayBuffer(10, 1, 1, 0, mask_dim=3)
    replay.add(batch)
    state = replay.state_dict()
    again = ReplayBuffer(10, 1, 1, 0, mask_dim=3)
    again.load_state_dict(state)
    sample = again.sample(50)
    rows = {float(o): tuple(m) for o, m in zip(sample.obs[:, 0], sample.action_masks)}
    assert rows == {0.0: (1, 0, 1), 1.0: (0, 1, 1), 5.0: (1, 1, 1)}
    np.testing.assert_array_equal(again.newest_obs(2)[:, 0], [1, 5])


# -- acting ---------------------------------------------------------------------------------------

def acting(action_spec, seed=0, **cfg) -> SACActingPolicy:
    learner = SACLearner([(4,)], action_spec, SACConfig(**cfg), NET, seed=seed)
    policy = SACActingPolicy([(4,)], action_spec, seed, network_cfg=NET, sac_cfg=SACConfig(**cfg))
    policy.load_weights({"policy": learner.weights(), "agent_steps": 0, "num_actors": 1,
                         "replay": None})
    return policy


def test_acting_policy_samples_squashed_and_masked_actions_from_the_first_step():
    obs = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    policy = acting(spec(2, (3, 2)), warmup_steps=10_000)
    mask = np.ones((200, 5), bool)
    mask[:, 1] = mask[:, 2] = False          # branch 0: only action 0 allowed
    actions, _, _ = policy.act(obs, mask)
    assert actions.shape == (200, 4) and actions.dtype == np.float32
    assert np.all(np.abs(actions[:, :2]) < 1) and actions[:, :2].std() > 0.1
    assert np.all(actions[:, 2] == 0) and set(actions[:, 3]) == {0.0, 1.0}
    # the policy acts during buffer_init_steps (no uniform random warm-up)
    assert not policy.is_warming_up()
    discrete, _, _ = acting(spec(0, (3,))).act(obs, np.ones((200, 3), bool))
    assert discrete.dtype == np.int64 and discrete.shape == (200, 1)


# -- the learner -----------------------------------------------------------------------------------

def bandit_batch(rng, n: int, action_spec) -> TransitionBatch:
    """One-step episodes: reward 1 for discrete action 0, plus the continuous action's value."""
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    parts, reward = [], np.zeros(n, np.float32)
    if action_spec.continuous_size:
        a = rng.uniform(-1, 1, (n, action_spec.continuous_size)).astype(np.float32)
        parts.append(a)
        reward += a[:, 0]
    if action_spec.discrete_branches:
        d = rng.integers(0, 3, (n, 1))
        parts.append(d.astype(np.float32))
        reward += (d[:, 0] == 0).astype(np.float32)
    masks = np.ones((n, 3), np.uint8) if action_spec.discrete_branches else None
    return TransitionBatch(obs, np.concatenate(parts, 1), reward, obs, np.ones(n, np.float32), masks)


@pytest.mark.parametrize("action_spec", [spec(1), spec(0, (3,)), spec(1, (3,))],
                         ids=["continuous", "discrete", "hybrid"])
def test_learner_finds_the_rewarding_action_of_a_bandit(action_spec):
    rng = np.random.default_rng(1)
    learner = SACLearner([(4,)], action_spec, SACConfig(batch_size=64, init_entcoef=0.05,
                                                        learning_rate=3e-3), NET, seed=1)
    data = bandit_batch(rng, 2048, action_spec)
    learner.observe(data.obs)
    for _ in range(300):
        idx = rng.integers(0, 2048, 64)
        learner.update(TransitionBatch(*(None if f is None else f[idx] for f in data)))
    module = learner.export_module()
    obs = torch.as_tensor(rng.normal(size=(256, 4)).astype(np.float32))
    with torch.no_grad():
        out = module(obs, torch.ones(256, 3)) if action_spec.discrete_branches else module(obs)
    continuous, discrete = (out if isinstance(out, tuple) else
                            (out, None) if action_spec.continuous_size else (None, out))
    if continuous is not None:
        assert float(continuous[:, 0].mean()) > 0.6
    if discrete is not None:
        assert float((discrete[:, 0] == 0).float().mean()) > 0.9


def test_state_dict_round_trip_continues_identically():
    rng = np.random.default_rng(2)
    data = bandit_batch(rng, 64, spec(1, (3,)))
    a = SACLearner([(4,)], spec(1, (3,)), SACConfig(batch_size=64), NET, seed=3)
    a.observe(data.obs)
    a.update(data)
    b = SACLearner([(4,)], spec(1, (3,)), SACConfig(batch_size=64), NET, seed=99)
    b.load_state_dict(a.state_dict())
    ra, rb = a.update(data), b.update(data)
    assert ra.metrics == rb.metrics
    for (name, pa), pb in zip(a.policy.state_dict().items(), b.policy.state_dict().values()):
        torch.testing.assert_close(pa, pb, msg=name)


def test_target_value_network_moves_by_tau():
    rng = np.random.default_rng(4)
    data = bandit_batch(rng, 64, spec(2))
    learner = SACLearner([(4,)], spec(2), SACConfig(batch_size=64, tau=0.25), NET, seed=0)
    before = {k: v.clone() for k, v in learner.target_critic.state_dict().items()}
    learner.update(data)
    critic = learner.critic.state_dict()
    for key, old in before.items():
        torch.testing.assert_close(learner.target_critic.state_dict()[key],
                                   0.75 * old + 0.25 * critic[key])


def test_host_waits_for_a_batch_then_pays_ml_agents_updates_and_folds_the_normaliser():
    cfg = SACConfig(batch_size=32, steps_per_update=4.0)
    learner = SACLearner([(1,)], spec(0, (2,)), cfg, NET, seed=0)
    host = OffPolicyHost(learner, ReplayBuffer(1000, 1, 1, 0, mask_dim=2), name="sac",
                         num_actors=1)
    seg = Segment([traj(0, 20)], 0, 0, 20, [], [])
    host.accept(seg)
    assert not host.ready() and learner.normalizer.count > 0
    host.accept(seg._replace(trajectories=[traj(50, 20)]))
    assert host.ready()
    metrics = host.train(sync=True)
    assert learner.updates == math.ceil(40 / 4) - 1 == metrics["Policy/Updates"]


def test_a_camera_update_hands_adam_gradients_laid_out_as_their_parameters():
    """The policy's gradients come from ``autograd.grad``, which skips the layout contract
    ``backward()`` keeps; conv weights trained on channels-last images then got channels-last
    gradients, which CUDA's fused Adam refuses ("same dtype, device, and layout")."""
    rng = np.random.default_rng(5)
    shapes = [(3, 36, 36), (2,)]
    n = 16
    obs = rng.uniform(0, 1, (n, 3 * 36 * 36 + 2)).astype(np.float32)
    batch = TransitionBatch(obs, rng.integers(0, 3, (n, 1)).astype(np.float32),
                            rng.normal(size=n).astype(np.float32), obs,
                            np.zeros(n, np.float32), np.ones((n, 3), np.uint8))
    learner = SACLearner(shapes, spec(0, (3,)), SACConfig(batch_size=n),
                         NetworkConfig(hidden_units=16, num_layers=1, vis_encode_type="simple"),
                         seed=0)
    seen = []
    original = learner.optimizer.step

    def step(*args, **kwargs):
        seen.extend((p.shape, p.stride(), p.grad.stride()) for group in learner.optimizer.param_groups
                    for p in group["params"] if p.grad is not None)
        return original(*args, **kwargs)

    learner.optimizer.step = step
    learner.update(batch)
    convs = [s for s in seen if len(s[0]) == 4]
    assert convs, "no conv weight was trained"
    assert all(param == grad for _, param, grad in seen), [s for s in seen if s[1] != s[2]]


def test_parameter_count_is_what_the_update_steps_not_the_target_network():
    learner = SACLearner(6, SimpleNamespace(continuous_size=2, discrete_branches=(3,)),
                         SACConfig(batch_size=8), NetworkConfig(hidden_units=16), seed=0)
    trained = [*learner.policy.parameters(), *learner.q1.parameters(), *learner.q2.parameters(),
               *learner.critic.parameters(), learner.log_alpha_discrete,
               learner.log_alpha_continuous]
    assert learner.parameter_count() == sum(p.numel() for p in trained)
