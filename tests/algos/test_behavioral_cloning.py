"""Behavioral cloning around the reference test: config, demo rows, spec errors, scheduling,
checkpoints (``unity_rl.algorithms.imitation``; weight for weight in
``test_bc_mlagents_reference.py``)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.imitation.config import BehavioralCloningConfig
from unity_rl.algorithms.imitation.demo_buffer import load_demo_buffer
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.host import PPOHost
from unity_rl.algorithms.ppo.imitation import make_behavioral_cloning
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.config import parse_config
from unity_rl.demos import DemoSpecError, load_demo
from unity_rl.experience import Trajectory

DEMO = Path(__file__).resolve().parent / "mlagents_reference" / "bc_ppo_discrete.demo"
"""Four ended episodes (7, 5, 9, 4 decisions) of obs (6,), branches (3, 2)."""
SPEC = SimpleNamespace(continuous_size=0, discrete_branches=(3, 2))


def _learner(**cfg) -> PPOLearner:
    return PPOLearner([(6,)], SPEC, PPOConfig(minibatch_size=8, buffer_size=32, **cfg),
                      NetworkConfig(hidden_units=16, num_layers=1), seed=0)


def _bc(learner, step, **cfg) -> object:
    return make_behavioral_cloning(BehavioralCloningConfig(str(DEMO), **cfg), learner,
                                   lambda: step["now"], seed=3, behavior="B")


def test_rows_follow_mlagents_pairing_and_aligned_drops_each_episodes_last_step():
    ml = load_demo_buffer(str(DEMO), [(6,)], SPEC)
    records = 7 + 5 + 9 + 4 + 4  # decisions + one final record per episode
    assert len(ml) == records - 1  # every record but the last (ML-Agents' make_demo_buffer)
    demo = load_demo(str(DEMO))
    np.testing.assert_array_equal(ml.discrete_actions, demo.mlagents_rows()["discrete_action"])
    aligned = load_demo_buffer(str(DEMO), [(6,)], SPEC, pairing="aligned")
    assert len(aligned) == records - 4 - 4
    seq = load_demo_buffer(str(DEMO), [(6,)], SPEC, sequence_length=4)
    assert len(seq) % 4 == 0 and len(seq) > len(ml)  # each episode chunk padded with zeros
    assert not seq.obs[len(seq) - 1].any()


@pytest.mark.parametrize("shapes,spec,needle", [
    ([(5,)], SPEC, "observation 0 of shape (6,), the behavior has (5,)"),
    ([(6,)], SimpleNamespace(continuous_size=2, discrete_branches=()), "action spec"),
])
def test_spec_mismatch_names_the_key_and_the_difference(shapes, spec, needle):
    with pytest.raises(DemoSpecError) as err:
        load_demo_buffer(str(DEMO), shapes, spec, where="behaviors.B.behavioral_cloning.demo_path")
    assert "behaviors.B.behavioral_cloning.demo_path" in str(err.value)
    assert needle in str(err.value) and DEMO.name in str(err.value)


def test_learning_rate_anneals_to_zero_then_bc_stops():
    learner, step = _learner(), {"now": 0}
    bc = _bc(learner, step, steps=100, strength=0.5)
    assert bc.optimizer.param_groups[0]["lr"] == pytest.approx(1.5e-4)
    step["now"] = 50
    assert bc.update()["Losses/Pretraining Loss"] > 0
    assert bc.optimizer.param_groups[0]["lr"] == pytest.approx(0.75e-4)  # set for the next one
    step["now"] = 100
    bc.update()
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    assert bc.update() == {"Losses/Pretraining Loss": 0.0}
    for k, v in learner.model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} moved after BC ended"


def test_bc_moves_the_policy_toward_the_demo_actions():
    learner, step = _learner(), {"now": 0}
    bc = _bc(learner, step, num_epoch=20)
    first = bc.update()["Losses/Pretraining Loss"]
    for _ in range(5):
        last = bc.update()["Losses/Pretraining Loss"]
    assert last < first


def test_host_runs_bc_after_each_ppo_update_and_checkpoints_it():
    learner, rng = _learner(), np.random.default_rng(0)
    host = PPOHost(learner, buffer_steps=32, drop_lag=None)
    host.auxiliary.append(_bc(learner, {"now": 0}))
    traj = Trajectory(obs=rng.normal(size=(32, 6)).astype(np.float32),
                      actions=rng.integers(0, 2, (32, 2)), logprobs=np.full((32, 2), -1.0, np.float32),
                      values=np.zeros(32, np.float32), rewards=np.ones(32, np.float32),
                      last_obs=np.zeros(6, np.float32), terminated=True)
    host._buffer, host._buffered_steps = [traj], 32
    metrics = host.train(sync=True)
    assert metrics["Losses/Pretraining Loss"] > 0 and "Losses/Policy Loss" in metrics
    state = host.state_dict()
    assert set(state["auxiliary"]) == {"behavioral_cloning"}
    other = PPOHost(_learner(), buffer_steps=32, drop_lag=None)
    other.auxiliary.append(_bc(other.learner, {"now": 0}))
    other.load_state_dict(state)
    a, b = host.auxiliary[0], other.auxiliary[0]
    np.testing.assert_array_equal(a.order, b.order)
    assert a.update() == b.update()  # same weights, Adam, order and generators: same loss


def test_config_loads_behavioral_cloning_strictly():
    raw = {"behaviors": {"B": {"behavioral_cloning": {"demo_path": "x.demo", "steps": 5.0e4,
                                                      "strength": 0.5}}}}
    bc = parse_config(raw).behaviors["B"].behavioral_cloning
    assert (bc.demo_path, bc.steps, bc.strength, bc.num_epoch) == ("x.demo", 50000, 0.5, None)
    with pytest.raises(ValueError, match="samples_per_updat"):
        parse_config({"behaviors": {"B": {"behavioral_cloning": {"demo_path": "x.demo",
                                                                 "samples_per_updat": 3}}}})
    with pytest.raises(ValueError, match="not available for trainer_type 'ddpg'"):
        parse_config({"behaviors": {"B": {"trainer_type": "ddpg",
                                          "behavioral_cloning": {"demo_path": "x.demo"}}}})


def test_sac_runs_bc_once_per_gradient_update_and_checkpoints_it():
    from mlagents_envs.base_env import ActionSpec

    from unity_rl.algorithms.registry import trainer_type
    from unity_rl.experience import Segment
    from unity_rl.runtime.algorithm import HostContext
    from unity_rl.runtime.messages import BehaviorInfo

    demo = DEMO.parent / "bc_sac_hybrid.demo"  # obs (6,), 2 continuous + a branch of 3
    cfg = parse_config({"behaviors": {"B": {
        "trainer_type": "sac", "hyperparameters": {"batch_size": 16, "buffer_init_steps": 32},
        "network_settings": {"hidden_units": 16, "num_layers": 1},
        "behavioral_cloning": {"demo_path": str(demo), "num_epoch": 1}}}})
    behavior = cfg.behaviors["B"]
    algorithm = trainer_type("sac").make_algorithm(cfg, "B", behavior)
    host = algorithm.make_host(BehaviorInfo("B?team=0", ((6,),), ActionSpec(2, (3,)), 1),
                               HostContext("cpu", 0, 1, "sync", 2))
    rng = np.random.default_rng(0)
    n = 48
    actions = np.concatenate([rng.uniform(-1, 1, (n, 2)), rng.integers(0, 3, (n, 1))], 1)
    traj = Trajectory(obs=rng.normal(size=(n, 6)).astype(np.float32),
                      actions=actions.astype(np.float32),
                      logprobs=np.zeros((n, 3), np.float32), values=np.zeros(n, np.float32),
                      rewards=np.ones(n, np.float32), last_obs=np.zeros(6, np.float32),
                      terminated=True, action_masks=np.ones((n, 3), bool))
    host.accept(Segment([traj], 0, 0, n, [], []))
    bc = host.auxiliary[0]
    calls = []
    original = bc.update
    bc.update = lambda *a: calls.append(1) or original(*a)
    metrics = host.train(sync=True)
    assert len(calls) == metrics["Runtime/Updates This Round"] >= 10  # one per update
    assert metrics["Losses/Pretraining Loss"] > 0
    assert set(host.state_dict()["auxiliary"]) == {"behavioral_cloning"}
    algorithm.close()


def test_demo_pairing_reaches_gail_and_stays_out_of_its_yaml_keys():
    from unity_rl.config.dump import dump_config

    raw = {"behaviors": {"B": {"reward_signals": {"gail": {"demo_path": "x.demo"}}}},
           "unity_rl": {"demo_pairing": "aligned"}}
    cfg = parse_config(raw)
    assert cfg.behaviors["B"].signal("gail").demo_pairing == "aligned"
    dumped = dump_config(cfg)
    assert "demo_pairing" not in dumped["behaviors"]["B"]["reward_signals"]["gail"]
    assert parse_config(dumped) == cfg
    with pytest.raises(ValueError, match="demo_pairing"):
        parse_config({"behaviors": {"B": {"reward_signals": {"gail": {
            "demo_path": "x.demo", "demo_pairing": "aligned"}}}}})
    with pytest.raises(ValueError, match="demo_path"):
        parse_config({"behaviors": {"B": {"reward_signals": {"gail": {"strength": 0.1}}}}})
