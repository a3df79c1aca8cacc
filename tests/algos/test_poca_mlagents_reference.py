"""One POCA update here equals mlagents-learn 1.1.0's on the same groups, weight for weight.

``mlagents_reference/poca_<case>.npz`` were written by ML-Agents' own ``POCATrainer``
(``make_poca_reference.py``): its initial actor and centralised critic, groups of three acted by
its policy with their groupmates' statuses, and its weights after ``_update_policy``. Replaying
the same trajectories (``StepExtras.group_*``, ``Trajectory.next_group_obs`` /
``group_continues``, as ``TrajectoryCollector(groups=True)`` fills them) through
``POCALearner`` must land on the same actor and critic. The groups cover a horizon cut, a group
that ends together (no bootstrap), a member that dies first (it bootstraps from the group value;
its mates' later steps have one member masked out) and an interrupted group, so this checks
the entity embeddings, the masked attention, the member count, the baseline with groupmates'
actions, the groupmate and group rewards, the λ-returns and their bootstrap rule, both value
losses, the policy loss and one Adam over actor and critic together.

``poca_curiosity.npz`` and ``poca_rnd.npz`` add a learned reward signal beside the extrinsic one,
as mlagents-learn 1.1.0's POCA runs it after its warning: the signal's rewards per trajectory,
its own value and baseline heads with its gamma and ``ignore_done``, the mean advantage over the
two streams, and the signal's update after each minibatch's POCA step, with its own Adam.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.sequences import padded_length
from unity_rl.algorithms.poca.config import POCAConfig
from unity_rl.algorithms.poca.learner import POCALearner, lambda_return
from tests.algos.test_reward_signal_reference import our_name
from unity_rl.algorithms.reward_signals.base import SignalBatch
from unity_rl.algorithms.reward_signals.config import (CuriosityConfig, RewardSignalConfig,
                                                       RNDConfig)
from unity_rl.experience import StepExtras, Trajectory

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference"
MEMBERS = 3


def _load(name: str) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {"before": {}, "after": {}, "data": {}, "case": {},
                                             "pre": {}, "shuffle": {}}
    with np.load(REFERENCE / f"poca_{name}.npz") as npz:
        for key in npz.files:
            group, field = key.split("/", 1)
            out.setdefault(group, {})[field] = npz[key]
    return out


def _lengths(kind: str, case: dict) -> list[int]:
    length, dies = int(case["length"]), int(case["dies_at"])
    return [length, length, dies + 1] if kind == "C" else [length] * MEMBERS


def _trajectories(case: dict, data: dict) -> list[Trajectory]:
    """Each member's trajectory, as make_poca_reference.py feeds ML-Agents (same order)."""
    length, c = int(case["length"]), int(case["continuous"])
    actions = (np.concatenate([data["continuous"], data["discrete"].astype(np.float32)], axis=1)
               if c else data["discrete"])
    action_rows = np.concatenate([data["continuous"], data["discrete"].astype(np.float32)], axis=1)
    masks = data["allowed"] if len(case["branches"]) else None
    row = lambda g, i, t: (g * MEMBERS + i) * length + t  # noqa: E731
    trajs = []
    for g, kind in enumerate(chr(k) for k in data["kinds"]):
        lengths = _lengths(kind, case)
        done = lambda j, t: kind != "A" and t == lengths[j] - 1  # noqa: E731
        for i in range(MEMBERS):
            n = lengths[i]
            mates_obs, mates_act, mates_rew, mates_done = [], [], [], []
            for t in range(n):
                js = [j for j in range(MEMBERS) if j != i and t < lengths[j]]
                obs_t = np.full((MEMBERS - 1, data["obs"].shape[1]), np.nan, np.float32)
                act_t = np.zeros((MEMBERS - 1, action_rows.shape[1]), np.float32)
                obs_t[:len(js)] = data["obs"][[row(g, j, t) for j in js]]
                act_t[:len(js)] = action_rows[[row(g, j, t) for j in js]]
                mates_obs.append(obs_t)
                mates_act.append(act_t)
                mates_rew.append(sum(float(data["rewards"][row(g, j, t)]) for j in js))
                mates_done.append([done(j, t) for j in js] + [True] * (MEMBERS - 1 - len(js)))
            rows = [row(g, i, t) for t in range(n)]
            if kind == "C" and i == 2:
                next_group = data["obs"][[row(g, j, n) for j in range(MEMBERS) if j != i]]
            else:
                next_group = data["next_obs"][[g * MEMBERS + j for j in range(MEMBERS)
                                               if j != i and lengths[j] > n - 1]]
            ended = kind != "A"
            trajs.append(Trajectory(
                obs=data["obs"][rows], actions=actions[rows], logprobs=data["logprobs"][rows],
                values=np.zeros(n, np.float32), rewards=data["rewards"][rows],
                last_obs=data["next_obs"][g * MEMBERS + i],
                terminated=ended and kind != "D", interrupted=kind == "D",
                action_masks=None if masks is None else masks[rows],
                extras=StepExtras(memories=data["memories"][rows] if "memories" in data else None,
                                  group_obs=np.stack(mates_obs), group_actions=np.stack(mates_act),
                                  groupmate_rewards=np.asarray(mates_rew, np.float32),
                                  group_rewards=data["group_rewards"][rows],
                                  group_dones=np.asarray(mates_done)),
                next_group_obs=next_group.astype(np.float32),
                group_continues=not all(mates_done[-1])))
    return trajs


def _learner(case: dict, n: int) -> POCALearner:
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    cfg = POCAConfig(learning_rate=float(case["learning_rate"]), buffer_size=n, minibatch_size=n,
                     num_epochs=int(case["epochs"]), gae_lambda=float(case["lambd"]),
                     clip_coef=float(case["epsilon"]), ent_coef=float(case["beta"]),
                     max_steps=int(case["max_steps"]))
    memory = (MemoryConfig(sequence_length=int(case["sequence_length"]),
                           memory_size=int(case["memory_size"])) if "memory_size" in case else None)
    net = NetworkConfig(normalize=False, hidden_units=int(case["hidden"]),
                        num_layers=int(case["layers"]), memory=memory)
    signals = [RewardSignalConfig("extrinsic", gamma=float(case["gamma"]))]
    if "signal" in case:
        settings = {"curiosity": CuriosityConfig, "rnd": RNDConfig}[str(case["signal"])]
        signals.append(settings(str(case["signal"]), gamma=float(case["signal_gamma"]),
                                strength=float(case["strength"]),
                                learning_rate=float(case["signal_lr"]),
                                network_settings=NetworkConfig(
                                    hidden_units=int(case["signal_hidden"]),
                                    num_layers=int(case["signal_layers"]))))
    return POCALearner([(int(case["obs"]),)], spec, cfg, net, seed=0, reward_signals=signals)


def _ours(learner: POCALearner, key: str) -> tuple[torch.nn.Module, str]:
    """(module, parameter name) of a reference key."""
    if key.startswith("critic/"):
        name = key[len("critic/"):]
        return learner.critic, "max_agents" if name == "_current_max_agents" else name
    if key.startswith("actor."):
        return learner.model, f"{learner.model.head_name}.{key[len('actor.'):]}"
    return learner.model, key


def _signal_state(weights: dict) -> dict[str, torch.Tensor]:
    """ML-Agents' reward-provider parameters under our names (normaliser buffers left out)."""
    return {ours: torch.from_numpy(v) for k, v in weights.items()
            if (ours := our_name(k)) is not None}


@pytest.mark.parametrize("name", ["discrete", "hybrid", "curiosity", "rnd", "memory"])
def test_one_update_lands_on_mlagents_weights(name, caplog):
    ref = _load(name)
    case, data = ref["case"], ref["data"]
    trajectories = _trajectories(case, data)
    L = int(case.get("sequence_length", 1))
    n = sum(padded_length(len(t.rewards), L) for t in trajectories)  # one minibatch per epoch
    learner = _learner(case, n)
    signal = learner.reward_signals[1] if "signal" in case else None
    if signal is not None:  # ML-Agents' create_reward_signals warning, then the signal is used
        assert f"Reward signal {signal.name.capitalize()} is not supported with the POCA " \
               "trainer" in caplog.text
        assert learner.critic.value_head_names == ["extrinsic", signal.name]
        signal.modules.load_state_dict(_signal_state(ref["signal_before"]))
        pre = ref["pre"]
        if pre:  # curiosity: its first update, on a batch of its own
            signal.update(SignalBatch(pre["obs0"], pre["continuous"], pre["discrete"],
                                      pre["next_obs0"], np.zeros(len(pre["obs0"]), np.float32),
                                      np.zeros(len(pre["obs0"]), np.float32), pre["masks"]))
        evaluated = np.concatenate([
            signal.rewards(SignalBatch.from_trajectory(t, learner.continuous_size))
            for t in trajectories]) * signal.strength
        assert np.ptp(data["signal_rewards"]) > 1e-2, "the case tests nothing"
        np.testing.assert_allclose(evaluated, data["signal_rewards"], rtol=1e-5, atol=1e-6)
    _set_weights(learner, ref)

    metrics = learner.update(trajectories, collected_steps=n)

    assert float(learner.critic.max_agents) == MEMBERS
    if signal is not None:
        tag = signal.name.capitalize()
        assert {f"Policy/{tag} Value Estimate", f"Policy/{tag} Baseline Estimate",
                f"Policy/{tag} Reward"} <= set(metrics)
        assert any(k.startswith("Losses/") and k not in ("Losses/Policy Loss",
                   "Losses/Value Loss", "Losses/Baseline Loss") for k in metrics), metrics
        before = _signal_state(ref["signal_before"])
        got = signal.modules.state_dict()
        for key, expected in _signal_state(ref["signal_after"]).items():
            if not key.startswith("target."):  # RND's target network is fixed
                assert (expected - before[key]).abs().max() > 1e-5, f"{key} did not move"
            np.testing.assert_allclose(got[key].numpy(), expected.numpy(), rtol=0, atol=2e-6,
                                       err_msg=f"{name}: signal {key} differs from ML-Agents'")
    _check_weights(learner, ref, name)


def _set_weights(learner: POCALearner, ref: dict) -> None:
    """Actor and critic start from the reference's initial weights."""
    critic_keys = {k for k in ref["before"] if k.startswith("critic/")}
    assert {_ours(learner, k)[1] for k in critic_keys} == set(learner.critic.state_dict()), \
        "the reference and POCACritic name different parameters"
    for module in (learner.model, learner.critic):
        state = module.state_dict()
        for key, value in ref["before"].items():
            owner, ours = _ours(learner, key)
            if owner is module:
                assert state[ours].shape == value.shape, key
                state[ours] = torch.as_tensor(value, dtype=state[ours].dtype)
        module.load_state_dict(state)


def _check_weights(learner: POCALearner, ref: dict, name: str) -> None:
    """Actor and critic equal the reference's weights after its update."""
    for key, expected in ref["after"].items():
        if key == "critic/_current_max_agents":
            continue
        owner, ours = _ours(learner, key)
        got = owner.state_dict()[ours].numpy()
        moved = np.abs(expected - ref["before"][key]).max()
        if not key.endswith("fc_k.bias"):  # softmax ignores a bias shared by every key: no gradient
            assert moved > 1e-4, f"{key} did not move in the reference: the case tests nothing"
        np.testing.assert_allclose(got, expected, rtol=0, atol=2e-6,
                                   err_msg=f"{name}: {key} differs from ML-Agents' update")


def test_poca_update_then_behavioral_cloning_lands_on_mlagents_weights():
    """``behavioral_cloning`` with POCA: ML-Agents' POCA optimizer has a ``BCModule`` and its
    ``_update_policy`` runs it once after the POCA epochs; the POCA host here runs PPO's BC
    (``ppo/imitation.py``) on the POCA actor once after the update. Built from a config as a run
    builds it, fed ML-Agents' shuffles and BC's noise seed (``make_poca_reference.py``)."""
    from mlagents_envs.base_env import ActionSpec

    from tests.algos.test_bc_mlagents_reference import RecordedShuffles
    from unity_rl.algorithms.registry import trainer_type
    from unity_rl.config import parse_config
    from unity_rl.runtime.algorithm import HostContext
    from unity_rl.runtime.messages import BehaviorInfo

    ref = _load("bc")
    case, data = ref["case"], ref["data"]
    trajectories = _trajectories(case, data)
    n = sum(len(t.rewards) for t in trajectories)
    cfg = parse_config({"behaviors": {"B": {
        "trainer_type": "poca", "max_steps": int(case["max_steps"]),
        "hyperparameters": {"batch_size": n, "buffer_size": n,
                            "learning_rate": float(case["learning_rate"]),
                            "beta": float(case["beta"]), "epsilon": float(case["epsilon"]),
                            "lambd": float(case["lambd"]), "num_epoch": int(case["epochs"])},
        "network_settings": {"normalize": False, "hidden_units": int(case["hidden"]),
                             "num_layers": int(case["layers"])},
        "reward_signals": {"extrinsic": {"gamma": float(case["gamma"])}},
        "behavioral_cloning": {"demo_path": str(REFERENCE / "poca_bc.demo"),
                               "steps": int(case["bc_steps"]),
                               "strength": float(case["bc_strength"]),
                               "batch_size": int(case["bc_batch_size"]),
                               "num_epoch": int(case["bc_num_epoch"])}}}})
    algorithm = trainer_type("poca").make_algorithm(cfg, "B", cfg.behaviors["B"])
    host = algorithm.make_host(
        BehaviorInfo("B?team=0", ((int(case["obs"]),),),
                     ActionSpec(int(case["continuous"]), tuple(int(b) for b in case["branches"])),
                     1), HostContext("cpu", 0, 1, "sync", 2))
    [bc] = host.auxiliary
    learner = host.learner
    _set_weights(learner, ref)
    shuffles = [ref["shuffle"][str(i)] for i in range(len(ref["shuffle"]))]
    epochs = int(case["epochs"])
    assert [len(s) for s in shuffles[:epochs]] == [n] * epochs  # the POCA epochs' shuffles first
    bc.rng = RecordedShuffles({str(i): s for i, s in enumerate(shuffles[epochs:])})
    bc.generator.manual_seed(100)  # make_poca_reference.BC_SEED
    host._buffer, host._buffered_steps = trajectories, n  # ML-Agents' trainer step is still 0

    metrics = host.train(sync=True)

    assert metrics["Losses/Pretraining Loss"] > 0 and "Losses/Baseline Loss" in metrics
    assert not bc.rng.pending, "ML-Agents shuffled the demo more often than BC did"
    _check_weights(learner, ref, "bc")
    assert bc.name == "behavioral_cloning"  # checkpointed under the host's "auxiliary"


def test_lambda_return_is_td_lambda():
    """G_T = r_T + γ·V_next, G_t = r_t + (1−λ)·γ·V_{t+1} + λ·γ·G_{t+1} (not GAE)."""
    r = np.array([1.0, 0.0, 2.0], np.float32)
    v = np.array([0.5, 1.0, -1.0], np.float32)
    g = lambda_return(r, v, gamma=0.9, lambd=0.5, value_next=3.0)
    g2 = 2.0 + 0.9 * 3.0
    g1 = 0.0 + 0.5 * 0.9 * (-1.0) + 0.5 * 0.9 * g2
    g0 = 1.0 + 0.5 * 0.9 * 1.0 + 0.5 * 0.9 * g1
    np.testing.assert_allclose(g, [g0, g1, g2], rtol=1e-6)
