"""Writes ``<case>.npz``: one PPO update as mlagents-learn 1.1.0's own trainer code performs it.

Run with the Python of an mlagents-learn venv (never this project's: the two do not install
side by side), from the repository root::

    bash ../shared/mlagents_learn/install.sh DIR      # any folder outside the repository
    DIR/venv/bin/python tests/algos/mlagents_reference/make_reference.py

For each case (discrete with masks, continuous, hybrid on vector observations; a camera
image beside a vector through the ``simple`` encoder; a vector beside a GOAL_SIGNAL vector with
``goal_conditioning_type: hyper``; ``shared_critic``; ``network_settings.memory``; no
normalisation; a buffer sensor beside a vector) this builds ML-Agents' ``PPOTrainer`` with its policy and optimiser, samples
trajectories of random observations with ML-Agents' own policy, feeds them through the trainer's
``_process_trajectory`` (value estimates, GAE) and runs ``_update_policy`` once. One minibatch
per epoch (``batch_size`` = the buffer), so ML-Agents' shuffling does not matter. With memory
the policy acts step by step, each trajectory's memory from zeros, and every step stores the
memory it acted from (as ML-Agents' agent processor); trajectories of 10 steps in sequences of
4 exercise the padding, and the critic memory carried between trajectories (its key ""). It saves the
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
sys.path.insert(0, str(HERE))
from reference_common import actor_output  # noqa: E402

CASES = {
    # name: observation shapes, continuous size, branches, hidden, layers, gamma, lambd, beta,
    # epochs (images are uint8 values / 255, as a PNG camera arrives)
    "discrete": dict(obs=[(20,)], continuous=0, branches=(3,), hidden=20, layers=1, gamma=0.9,
                     lambd=0.95, beta=5e-3, epochs=3),
    "continuous": dict(obs=[(8,)], continuous=2, branches=(), hidden=16, layers=2, gamma=0.99,
                       lambd=0.99, beta=1e-3, epochs=3),
    "hybrid": dict(obs=[(6,)], continuous=2, branches=(3, 2), hidden=16, layers=2, gamma=0.99,
                   lambd=0.95, beta=5e-3, epochs=3),
    "visual": dict(obs=[(3, 20, 20), (4,)], continuous=0, branches=(5,), hidden=16, layers=1,
                   gamma=0.9, lambd=0.95, beta=1e-2, epochs=3, trajectories=16),
    # GridWorld's shape on vectors: a one-hot GOAL_SIGNAL (goal_conditioning_type: hyper, the
    # default), one masked branch of 5, num_layers 1: each body's only layer is the HyperNetwork
    "goal": dict(obs=[(6,), (2,)], goals=(1,), continuous=0, branches=(5,), hidden=16, layers=1,
                 gamma=0.9, lambd=0.95, beta=5e-3, epochs=3),
    # shared_critic: value heads on the actor's body, one Adam over the actor (SharedActorCritic)
    "shared_critic": dict(obs=[(8,)], continuous=2, branches=(), hidden=16, layers=2, gamma=0.99,
                          lambd=0.95, beta=5e-3, epochs=3, shared_critic=True),
    # values that move well beyond epsilon within the update (a large learning rate, many
    # epochs): shows which anchor ML-Agents' value clipping really uses (its returns,
    # Unity-Technologies/ml-agents#6281), which the cases above cannot tell apart
    "value_clip": dict(obs=[(8,)], continuous=2, branches=(), hidden=16, layers=2, gamma=0.99,
                       lambd=0.95, beta=5e-3, epochs=6, learning_rate=0.03),
    # network_settings.memory on a hybrid action: LSTMs after both bodies, sequences of 4 over
    # trajectories of 10 (two full sequences and a padded one each), masked losses
    "memory": dict(obs=[(6,)], continuous=2, branches=(3,), hidden=16, layers=2, gamma=0.99,
                   lambd=0.95, beta=5e-3, epochs=3, sequence_length=4, memory_size=16,
                   length=10, trajectories=24),
    # a buffer sensor (6 entities of 5, zero rows as padding) beside a vector, two branches:
    # EntityEmbedding with the agent's own encoding, ResidualSelfAttention, masked mean-pool.
    # ML-Agents' attention width (ObservationEncoder.ATTENTION_EMBEDDING_SIZE, 128) is shrunk to
    # 16 in both trainers to keep the file small ("attention" below)
    "buffer": dict(obs=[(6, 5), (4,)], continuous=0, branches=(3, 2), hidden=16, layers=2,
                   gamma=0.99, lambd=0.95, beta=5e-3, epochs=3, attention=16),
}
NUM_TRAJECTORIES, LENGTH = 64, 4
LEARNING_RATE, EPSILON, MAX_STEPS = 3e-4, 0.2, 500_000


def _length(case: dict) -> int:
    return case.get("length", LENGTH)


def _buffer_rows(case: dict) -> int:
    """Rows of ML-Agents' update buffer: every trajectory padded to whole sequences."""
    seq = case.get("sequence_length", 1)
    return case.get("trajectories", NUM_TRAJECTORIES) * (-(-_length(case) // seq) * seq)


def _trainer(case: dict) -> tuple[PPOTrainer, BehaviorSpec]:
    props = {1: (DimensionProperty.NONE,),  # what Unity's vector and camera sensors report
             2: (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE),  # a BufferSensor
             3: (DimensionProperty.NONE,) + (DimensionProperty.TRANSLATIONAL_EQUIVARIANCE,) * 2}
    if "attention" in case:
        from mlagents.trainers.torch_entities.networks import ObservationEncoder
        ObservationEncoder.ATTENTION_EMBEDDING_SIZE = case["attention"]
    obs_specs = [ObservationSpec(tuple(shape), props[len(shape)],
                                 ObservationType.GOAL_SIGNAL if i in case.get("goals", ())
                                 else ObservationType.DEFAULT, f"obs{i}")
                 for i, shape in enumerate(case["obs"])]
    spec = BehaviorSpec(obs_specs, ActionSpec(case["continuous"], tuple(case["branches"])))
    n = _buffer_rows(case)
    memory = (NetworkSettings.MemorySettings(sequence_length=case["sequence_length"],
                                             memory_size=case["memory_size"])
              if "memory_size" in case else None)
    settings = TrainerSettings(
        hyperparameters=PPOSettings(batch_size=n, buffer_size=n - 1,
                                    learning_rate=case.get("learning_rate", LEARNING_RATE),
                                    beta=case["beta"],
                                    epsilon=EPSILON, lambd=case["lambd"],
                                    num_epoch=case["epochs"],
                                    shared_critic=case.get("shared_critic", False)),
        network_settings=NetworkSettings(normalize=False, hidden_units=case["hidden"],
                                         num_layers=case["layers"], memory=memory),
        reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings(gamma=case["gamma"])},
        max_steps=MAX_STEPS)
    trainer = PPOTrainer("B", 100, settings, True, False, 0, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("B")
    trainer.add_policy(behavior_id, trainer.create_policy(behavior_id, spec))
    return trainer, spec


def _our_names(trainer: PPOTrainer, case: dict) -> dict[str, np.ndarray]:
    """ML-Agents' actor and critic weights under ``ActorCritic``'s parameter names (the test maps
    them on: ``actor.<k>`` is the actor MLP's k-th module, ``critic.<2·layers>`` the value head;
    a goal-conditioned body keeps ML-Agents' ``ConditionalEncoder`` names after ``actor.`` /
    ``critic.``; with ``shared_critic`` there is no critic of its own)."""
    actor = trainer.policy.actor.state_dict()
    shared = case.get("shared_critic", False)
    assert (trainer.optimizer.critic is trainer.policy.actor) == shared
    critic = trainer.optimizer.critic.state_dict()
    out = {}
    modules = [("actor_encoder", trainer.policy.actor)]
    if not shared:
        modules.append(("critic_encoder", trainer.optimizer.critic))
    for ours, module in modules:
        encoder = module.network_body.observation_encoder  # parameters in observation order
        for k, (name, param) in enumerate(encoder.named_parameters()):
            out[f"{ours}/{k}/{name}"] = param.detach().numpy()
    for ours, state in [("actor", actor)] + ([] if shared else [("critic", critic)]):
        body = "network_body._body_endoder."
        for key, value in state.items():
            if key.startswith("network_body.lstm.lstm."):  # the LSTM after the body
                out[f"{ours}_lstm.{key[len('network_body.lstm.lstm.'):]}"] = value.numpy()
            if key.startswith(body + "seq_layers."):  # nn.Sequential: Linear, Swish, Linear, ...
                out[f"{ours}.{key[len(body + 'seq_layers.'):]}"] = value.numpy()
            elif key.startswith(body + "layers."):  # ConditionalEncoder: its own names
                out[f"{ours}.{key[len(body):]}"] = value.numpy()
    out.update(actor_output(actor, case))
    head = 2 * case["layers"]
    # the value head: critic.<head> (a separate critic), the actor's own (shared_critic)
    out[f"critic.{head}.weight"] = critic["value_heads.value_heads.extrinsic.weight"].numpy()
    out[f"critic.{head}.bias"] = critic["value_heads.value_heads.extrinsic.bias"].numpy()
    return {k: np.array(v, np.float32, copy=True) for k, v in out.items()}


def _sample(trainer: PPOTrainer, case: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Trajectories acted by ML-Agents' policy; masks allow at least one action per branch."""
    length = _length(case)
    n = case.get("trajectories", NUM_TRAJECTORIES) * length
    goals = case.get("goals", ())
    obs = [_random_obs(rng, n, shape, i in goals) for i, shape in enumerate(case["obs"])]
    branches = case["branches"]
    allowed = rng.random((n, sum(branches))) > 0.25
    start = 0
    for size in branches:  # the first action of every branch stays allowed
        allowed[:, start] = True
        start += size
    memories = None
    with torch.no_grad():
        mask = torch.from_numpy(allowed.astype(np.float32)) if branches else None
        if "memory_size" in case:  # step by step, each trajectory one agent from zero memory
            action, log_probs, memories = _act_with_memory(trainer, case, obs, mask)
        else:
            action, run_out, _ = trainer.policy.actor.get_action_and_stats(
                [torch.from_numpy(o) for o in obs], masks=mask)
            log_probs = run_out["log_probs"]
    data = {**{f"obs{i}": o for i, o in enumerate(obs)}, "allowed": allowed,
            "continuous": (action.continuous_tensor.numpy() if case["continuous"]
                           else np.zeros((n, 0), np.float32)),
            "discrete": (action.discrete_tensor.numpy().reshape(n, -1).astype(np.int64) if branches
                         else np.zeros((n, 0), np.int64)),
            "logprobs": (log_probs if torch.is_tensor(log_probs) else log_probs.flatten()).numpy(),
            "rewards": rng.normal(size=n).astype(np.float32),
            **{f"last_obs{i}": _random_obs(rng, n // length, shape, i in goals)
               for i, shape in enumerate(case["obs"])},
            "terminated": rng.random(n // length) < 0.3}
    if memories is not None:
        data["memories"] = memories
    return data


def _act_with_memory(trainer: PPOTrainer, case: dict, obs: list, mask):
    """ML-Agents' policy acting step by step for all trajectories at once (one agent each, its
    memory from zeros): (actions, log-probs, the memory each step acted from [n, memory_size])."""
    k, length, m = case.get("trajectories", NUM_TRAJECTORIES), _length(case), case["memory_size"]
    memory = torch.zeros(1, k, m)
    actions, log_probs, memories = [], [], np.zeros((k, length, m), np.float32)
    rows = lambda t: np.arange(k) * length + t  # noqa: E731 (row of trajectory j's step t)
    for t in range(length):
        memories[:, t] = memory[0].numpy()
        action, run_out, memory = trainer.policy.actor.get_action_and_stats(
            [torch.from_numpy(o[rows(t)]) for o in obs],
            masks=None if mask is None else mask[rows(t)], memories=memory, sequence_length=1)
        actions.append(action)
        log_probs.append(run_out["log_probs"].flatten())
    order = np.argsort(np.concatenate([rows(t) for t in range(length)]), kind="stable")
    cont = (torch.cat([a.continuous_tensor for a in actions])[order] if case["continuous"]
            else None)
    disc = torch.cat([a.discrete_tensor for a in actions])[order] if case["branches"] else None
    from mlagents.trainers.torch_entities.agent_action import AgentAction
    return (AgentAction(cont, list(disc.reshape(len(disc), -1).T) if disc is not None else []),
            torch.cat(log_probs)[order], memories.reshape(k * length, m))


def _random_obs(rng: np.random.Generator, n: int, shape, goal: bool = False) -> np.ndarray:
    """Vectors: standard normal (goals: one-hot, as GridWorld's); images: whole multiples of
    1/255 in [0, 1]."""
    if goal:
        return np.eye(shape[0], dtype=np.float32)[rng.integers(0, shape[0], n)]
    if len(shape) == 1:
        return rng.normal(size=(n, *shape)).astype(np.float32)
    if len(shape) == 2:  # a buffer sensor: the first k rows filled, the rest zero (padding)
        x = rng.normal(size=(n, *shape)).astype(np.float32)
        x[np.arange(shape[0])[None, :] >= rng.integers(0, shape[0] + 1, n)[:, None]] = 0.0
        return x
    return (rng.integers(0, 256, size=(n, *shape)) / 255.0).astype(np.float32)


def _feed(trainer: PPOTrainer, case: dict, data: dict) -> None:
    c = case["continuous"]
    num_obs = len(case["obs"])
    length = _length(case)
    for k in range(case.get("trajectories", NUM_TRAJECTORIES)):
        steps = []
        for t in range(length):
            i = k * length + t
            mask = [~data["allowed"][i, s:s + size] for s, size in
                    zip(np.cumsum((0,) + case["branches"][:-1]), case["branches"])]
            steps.append(AgentExperience(
                obs=[data[f"obs{j}"][i] for j in range(num_obs)], reward=float(data["rewards"][i]),
                done=bool(t == length - 1 and data["terminated"][k]),
                action=ActionTuple(continuous=data["continuous"][i],
                                   discrete=data["discrete"][i].astype(np.int32)),
                action_probs=LogProbsTuple(continuous=data["logprobs"][i, :c],
                                           discrete=data["logprobs"][i, c:]),
                action_mask=mask if case["branches"] else None,
                prev_action=np.zeros(len(case["branches"]), np.int32), interrupted=False,
                memory=data["memories"][i] if "memories" in data else None,
                group_status=[], group_reward=0.0))
        next_obs = [data[f"last_obs{j}"][k] for j in range(num_obs)]
        trainer._process_trajectory(Trajectory(steps=steps, next_obs=next_obs,
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
    images = {k: np.rint(v * 255).astype(np.uint8) for k, v in data.items()
              if k.startswith(("obs", "last_obs")) and v.ndim == 4}  # stored compactly
    shapes = {f"case/obs_shape{i}": np.asarray(shape) for i, shape in enumerate(case["obs"])}
    np.savez_compressed(
        path, **{f"before/{k}": v for k, v in before.items()},
        **{f"after/{k}": v for k, v in after.items()},
        **{f"data/{k}": images.get(k, v) for k, v in data.items()},
        **{f"case/{k}": np.asarray(v) for k, v in case.items()
           if k not in ("obs", "learning_rate", "length", "trajectories")},
        **shapes,
        **{"case/learning_rate": np.asarray(case.get("learning_rate", LEARNING_RATE)),
           "case/epsilon": np.asarray(EPSILON),
           "case/max_steps": np.asarray(MAX_STEPS), "case/length": np.asarray(_length(case)),
           "case/num_trajectories": np.asarray(case.get("trajectories", NUM_TRAJECTORIES))})
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
