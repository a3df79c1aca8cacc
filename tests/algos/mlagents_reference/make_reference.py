"""Writes ``<case>.npz``: one PPO update as mlagents-learn 1.1.0's own trainer code performs it.

Run with the Python of an mlagents-learn venv (never this project's: the two do not install
side by side), from the repository root::

    bash ../shared/mlagents_learn/install.sh /tmp/mlal
    /tmp/mlal/venv/bin/python tests/algos/mlagents_reference/make_reference.py

For each case (discrete with masks, continuous, hybrid; vector observations, no
normalisation) this builds ML-Agents' ``PPOTrainer`` with its policy and optimiser, samples
trajectories of random observations with ML-Agents' own policy, feeds them through the trainer's
``_process_trajectory`` (value estimates, GAE) and runs ``_update_policy`` once. One minibatch
per epoch (``batch_size`` = the buffer), so ML-Agents' shuffling does not matter. It saves the
initial weights (under this project's parameter names), the trajectories, the settings and the
weights after the update; ``test_mlagents_reference.py`` replays the update with ``PPOLearner``
and compares the weights.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch
from mlagents.trainers.behavior_id_utils import BehaviorIdentifiers
from mlagents.trainers.ppo.optimizer_torch import PPOSettings
from mlagents.trainers.ppo.trainer import PPOTrainer
from mlagents.trainers.settings import (NetworkSettings, RewardSignalSettings, RewardSignalType,
                                        TrainerSettings)
from mlagents.trainers.torch_entities.action_log_probs import LogProbsTuple
from mlagents.trainers.trajectory import AgentExperience, Trajectory
from mlagents_envs.base_env import (ActionSpec, ActionTuple, BehaviorSpec, DimensionProperty,
                                    ObservationSpec, ObservationType)

HERE = Path(__file__).resolve().parent

CASES = {
    # name: obs size, continuous size, branches, hidden, layers, gamma, lambd, beta, epochs
    "discrete": dict(obs=20, continuous=0, branches=(3,), hidden=20, layers=1, gamma=0.9,
                     lambd=0.95, beta=5e-3, epochs=3),
    "continuous": dict(obs=8, continuous=2, branches=(), hidden=16, layers=2, gamma=0.99,
                       lambd=0.99, beta=1e-3, epochs=3),
    "hybrid": dict(obs=6, continuous=2, branches=(3, 2), hidden=16, layers=2, gamma=0.99,
                   lambd=0.95, beta=5e-3, epochs=3),
}
NUM_TRAJECTORIES, LENGTH = 64, 4
LEARNING_RATE, EPSILON, MAX_STEPS = 3e-4, 0.2, 500_000


def _trainer(case: dict) -> tuple[PPOTrainer, BehaviorSpec]:
    obs_spec = ObservationSpec((case["obs"],), (DimensionProperty.NONE,),
                               ObservationType.DEFAULT, "obs")
    spec = BehaviorSpec([obs_spec], ActionSpec(case["continuous"], tuple(case["branches"])))
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=NUM_TRAJECTORIES * LENGTH,
                                    buffer_size=NUM_TRAJECTORIES * LENGTH - 1,
                                    learning_rate=LEARNING_RATE, beta=case["beta"],
                                    epsilon=EPSILON, lambd=case["lambd"],
                                    num_epoch=case["epochs"]),
        network_settings=NetworkSettings(normalize=False, hidden_units=case["hidden"],
                                         num_layers=case["layers"]),
        reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings(gamma=case["gamma"])},
        max_steps=MAX_STEPS)
    trainer = PPOTrainer("B", 100, settings, True, False, 0, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("B")
    trainer.add_policy(behavior_id, trainer.create_policy(behavior_id, spec))
    return trainer, spec


def _our_names(trainer: PPOTrainer, case: dict) -> dict[str, np.ndarray]:
    """ML-Agents' actor and critic weights under ``ActorCritic``'s parameter names."""
    actor = trainer.policy.actor.state_dict()
    critic = trainer.optimizer.critic.state_dict()
    out = {}
    for i in range(case["layers"]):
        j = 2 * i  # nn.Sequential: Linear, Swish, Linear, Swish, ...
        for part in ("weight", "bias"):
            key = f"network_body._body_endoder.seq_layers.{j}.{part}"
            out[f"actor.{j}.{part}"] = actor[key].numpy()
            out[f"critic.{j}.{part}"] = critic[key].numpy()
    head = 2 * case["layers"]
    rows_w, rows_b = [], []
    if case["continuous"]:
        rows_w.append(actor["action_model._continuous_distribution.mu.weight"])
        rows_b.append(actor["action_model._continuous_distribution.mu.bias"])
        out["actor_logstd"] = actor["action_model._continuous_distribution.log_sigma"].numpy()[0]
    for b in range(len(case["branches"])):
        rows_w.append(actor[f"action_model._discrete_distribution.branches.{b}.weight"])
        rows_b.append(actor[f"action_model._discrete_distribution.branches.{b}.bias"])
    out[f"actor.{head}.weight"] = torch.cat(rows_w).numpy()
    out[f"actor.{head}.bias"] = torch.cat(rows_b).numpy()
    out[f"critic.{head}.weight"] = critic["value_heads.value_heads.extrinsic.weight"].numpy()
    out[f"critic.{head}.bias"] = critic["value_heads.value_heads.extrinsic.bias"].numpy()
    return {k: np.array(v, np.float32, copy=True) for k, v in out.items()}


def _sample(trainer: PPOTrainer, case: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Trajectories acted by ML-Agents' policy; masks allow at least one action per branch."""
    n = NUM_TRAJECTORIES * LENGTH
    obs = rng.normal(size=(n, case["obs"])).astype(np.float32)
    branches = case["branches"]
    allowed = rng.random((n, sum(branches))) > 0.25
    start = 0
    for size in branches:  # the first action of every branch stays allowed
        allowed[:, start] = True
        start += size
    with torch.no_grad():
        mask = torch.from_numpy(allowed.astype(np.float32)) if branches else None
        action, run_out, _ = trainer.policy.actor.get_action_and_stats(
            [torch.from_numpy(obs)], masks=mask)
    log_probs = run_out["log_probs"]
    data = {"obs": obs, "allowed": allowed,
            "continuous": (action.continuous_tensor.numpy() if case["continuous"]
                           else np.zeros((n, 0), np.float32)),
            "discrete": (action.discrete_tensor.numpy().reshape(n, -1).astype(np.int64) if branches
                         else np.zeros((n, 0), np.int64)),
            "logprobs": log_probs.flatten().numpy(),
            "rewards": rng.normal(size=n).astype(np.float32),
            "last_obs": rng.normal(size=(NUM_TRAJECTORIES, case["obs"])).astype(np.float32),
            "terminated": rng.random(NUM_TRAJECTORIES) < 0.3}
    return data


def _feed(trainer: PPOTrainer, case: dict, data: dict) -> None:
    c = case["continuous"]
    for k in range(NUM_TRAJECTORIES):
        steps = []
        for t in range(LENGTH):
            i = k * LENGTH + t
            mask = [~data["allowed"][i, s:s + size] for s, size in
                    zip(np.cumsum((0,) + case["branches"][:-1]), case["branches"])]
            steps.append(AgentExperience(
                obs=[data["obs"][i]], reward=float(data["rewards"][i]),
                done=bool(t == LENGTH - 1 and data["terminated"][k]),
                action=ActionTuple(continuous=data["continuous"][i],
                                   discrete=data["discrete"][i].astype(np.int32)),
                action_probs=LogProbsTuple(continuous=data["logprobs"][i, :c],
                                           discrete=data["logprobs"][i, c:]),
                action_mask=mask if case["branches"] else None,
                prev_action=np.zeros(len(case["branches"]), np.int32), interrupted=False,
                memory=None, group_status=[], group_reward=0.0))
        trainer._process_trajectory(Trajectory(steps=steps, next_obs=[data["last_obs"][k]],
                                               next_group_obs=[], agent_id=f"agent-{k}",
                                               behavior_id="B"))


def make(name: str, seed: int = 0) -> Path:
    case = CASES[name]
    torch.manual_seed(seed)
    trainer, _ = _trainer(case)
    before = _our_names(trainer, case)
    data = _sample(trainer, case, np.random.default_rng(seed))
    _feed(trainer, case, data)
    assert trainer._is_ready_update(), "the buffer must trigger exactly one update"
    trainer._update_policy()
    after = _our_names(trainer, case)
    path = HERE / f"{name}.npz"
    np.savez_compressed(
        path, **{f"before/{k}": v for k, v in before.items()},
        **{f"after/{k}": v for k, v in after.items()}, **{f"data/{k}": v for k, v in data.items()},
        **{f"case/{k}": np.asarray(v) for k, v in case.items()},
        **{"case/learning_rate": np.asarray(LEARNING_RATE), "case/epsilon": np.asarray(EPSILON),
           "case/max_steps": np.asarray(MAX_STEPS), "case/length": np.asarray(LENGTH),
           "case/num_trajectories": np.asarray(NUM_TRAJECTORIES)})
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
