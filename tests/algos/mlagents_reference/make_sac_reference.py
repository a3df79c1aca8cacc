"""Writes ``sac_<case>.npz``: a few SAC updates as mlagents-learn 1.1.0's own optimiser performs them.

Run with the Python of an mlagents-learn venv (never this project's: the two do not install
side by side), from the repository root::

    bash ../shared/mlagents_learn/install.sh DIR      # any folder outside the repository
    DIR/venv/bin/python tests/algos/mlagents_reference/make_sac_reference.py

For each case (continuous, discrete with masks, hybrid; vector observations, one case with
``normalize: true``; a buffer sensor beside a vector) this builds ML-Agents' ``SACTrainer`` with its policy
(``SimpleActor(conditional_sigma=True, tanh_squash=True)``) and ``TorchSACOptimizer``, then runs
``UPDATES`` calls of ``optimizer.update`` on fixed minibatches of random transitions, each
minibatch's rewards evaluated as ``OffPolicyTrainer._update_policy`` does
(``signal.evaluate(batch) · strength``). Before every update the global torch RNG is seeded with
``SEEDS[k]`` (the one reparameterised sample an update draws comes from it); with
``normalize``, the actor's normaliser first folds in that minibatch's observations (as
``_process_trajectory`` would) and the statistics it then normalises with are saved beside the
minibatch (``norm_mean<i>``, ``norm_var<i>`` = running variance / steps: ML-Agents' normaliser
counts a prior zero observation, unity_rl's ``RunningNormalizer`` does not, so the test loads
these rather than re-deriving them). Case ``memory`` (``network_settings.memory``) hands the
optimiser minibatches of whole sequences as ``sample_mini_batch(batch, sequence_length)`` cuts
them from the update buffer: some sequences padded at the end the way ``resequence_and_append``
pads (zeros, ``masks`` 0, the action mask repeating the last real row's), each row with a
random stored actor memory and critic memory (the optimiser reads each sequence's first). It saves the initial weights (under this project's
``SACLearner`` parameter names), the minibatches, the settings, the losses each update reported
and the weights after the last update; ``test_sac_mlagents_reference.py`` replays the updates
with ``SACLearner`` and compares.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch
from mlagents.trainers.behavior_id_utils import BehaviorIdentifiers
from mlagents.trainers.buffer import AgentBuffer, BufferKey, RewardSignalUtil
from mlagents.trainers.sac.optimizer_torch import SACSettings
from mlagents.trainers.sac.trainer import SACTrainer
from mlagents.trainers.settings import (NetworkSettings, RewardSignalSettings, RewardSignalType,
                                        TrainerSettings)
from mlagents.trainers.trajectory import ObsUtil
from mlagents_envs.base_env import (ActionSpec, BehaviorSpec, DimensionProperty,
                                    ObservationSpec, ObservationType)

HERE = Path(__file__).resolve().parent

CASES = {
    # name: observation shapes, continuous size, branches, hidden, layers, gamma, strength,
    # normalize
    "continuous": dict(obs=[(8,)], continuous=2, branches=(), hidden=16, layers=2, gamma=0.9,
                       strength=0.5, normalize=False),
    "discrete": dict(obs=[(6,)], continuous=0, branches=(3, 2), hidden=16, layers=2, gamma=0.95,
                     strength=2.0, normalize=False),
    "hybrid": dict(obs=[(6,)], continuous=2, branches=(3,), hidden=16, layers=2, gamma=0.99,
                   strength=1.0, normalize=False),
    # two observations side by side, normalised (the actor's normaliser copied to Q1, Q2, V, V')
    "normalized": dict(obs=[(5,), (3,)], continuous=2, branches=(2,), hidden=12, layers=1,
                       gamma=0.8, strength=1.5, normalize=True),
    # LSTM memory (sequence_length 4, memory_size 10): hybrid actions, padded sequences
    "memory": dict(obs=[(6,)], continuous=2, branches=(3,), hidden=16, layers=2, gamma=0.9,
                   strength=1.0, normalize=False, sequence_length=4, memory_size=10),
    # a buffer sensor (6 entities of 5, zero rows as padding) beside a vector, hybrid action:
    # every network's attention path. ML-Agents' attention width (128) shrunk to 16 alike
    "buffer": dict(obs=[(6, 5), (4,)], continuous=2, branches=(3,), hidden=16, layers=2,
                   gamma=0.95, strength=1.0, normalize=False, attention=16),
}
BATCH, UPDATES = 32, 3
SEEDS = (11, 12, 13)
LEARNING_RATE, TAU, INIT_ENTCOEF, MAX_STEPS = 3e-3, 0.05, 0.5, 500_000
LOSSES = ("Losses/Policy Loss", "Losses/Value Loss", "Losses/Q1 Loss", "Losses/Q2 Loss",
          "Policy/Discrete Entropy Coeff", "Policy/Continuous Entropy Coeff")


def _trainer(case: dict) -> SACTrainer:
    props = {1: (DimensionProperty.NONE,),
             2: (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)}  # a BufferSensor
    obs_specs = [ObservationSpec(tuple(shape), props[len(shape)],
                                 ObservationType.DEFAULT, f"obs{i}")
                 for i, shape in enumerate(case["obs"])]
    if "attention" in case:
        from mlagents.trainers.torch_entities.networks import ObservationEncoder
        ObservationEncoder.ATTENTION_EMBEDDING_SIZE = case["attention"]
    spec = BehaviorSpec(obs_specs, ActionSpec(case["continuous"], tuple(case["branches"])))
    settings = TrainerSettings(
        trainer_type="sac",
        hyperparameters=SACSettings(batch_size=BATCH, buffer_size=10 * BATCH,
                                    learning_rate=LEARNING_RATE, tau=TAU,
                                    init_entcoef=INIT_ENTCOEF),
        network_settings=NetworkSettings(
            normalize=case["normalize"], hidden_units=case["hidden"], num_layers=case["layers"],
            memory=NetworkSettings.MemorySettings(sequence_length=case["sequence_length"],
                                                  memory_size=case["memory_size"])
            if "memory_size" in case else None),
        reward_signals={RewardSignalType.EXTRINSIC: RewardSignalSettings(
            gamma=case["gamma"], strength=case["strength"])},
        max_steps=MAX_STEPS)
    trainer = SACTrainer("B", 100, settings, True, False, 0, os.devnull)
    behavior_id = BehaviorIdentifiers.from_name_behavior_id("B")
    trainer.add_policy(behavior_id, trainer.create_policy(behavior_id, spec))
    return trainer


def _linear_state(state: dict, prefix: str, ours: str) -> dict:
    """``prefix.<rest>`` entries of ``state`` as ``ours.<rest>``."""
    return {f"{ours}.{k[len(prefix):]}": v for k, v in state.items() if k.startswith(prefix)}


def _attention_state(state: dict, ours: str) -> dict:
    """The observation encoder's attention parameters (buffer sensors) under ours' names:
    ``processors.<i>`` is ``encoders.<i>``; ``rsa`` and ``x_self_encoder`` keep their names."""
    prefix = "network_body.observation_encoder."
    return {f"{ours}.body.encoder." + k[len(prefix):].replace("processors.", "encoders.", 1): v
            for k, v in state.items() if k.startswith(prefix)
            and any(p in k for p in ("self_ent_encoder", ".rsa.", "x_self_encoder"))}


def _value_network(module: torch.nn.Module, ours: str) -> dict:
    """An ML-Agents ``ValueNetwork`` under ``unity_rl.algorithms.sac.nets.ValueNetwork``'s names."""
    state = module.state_dict()
    return {**_linear_state(state, "network_body._body_endoder.seq_layers.", f"{ours}.body.layers"),
            **_linear_state(state, "network_body.lstm.lstm.", f"{ours}.body.lstm"),
            **_attention_state(state, ours),
            **_linear_state(state, "value_heads.value_heads.", f"{ours}.heads")}


def _our_names(trainer: SACTrainer, case: dict) -> dict[str, np.ndarray]:
    """Every trained parameter under ``SACLearner``'s names: ``policy.*``, ``critic.*``,
    ``target_critic.*``, ``q1.*``, ``q2.*``, ``log_alpha_discrete``, ``log_alpha_continuous``
    (normalisers are not parameters; they are not saved)."""
    actor = trainer.policy.actor.state_dict()
    opt = trainer.optimizer
    out = _linear_state(actor, "network_body._body_endoder.seq_layers.", "policy.body.layers")
    out.update(_linear_state(actor, "network_body.lstm.lstm.", "policy.body.lstm"))
    out.update(_attention_state(actor, "policy"))
    if case["continuous"]:
        out.update(_linear_state(actor, "action_model._continuous_distribution.mu.", "policy.mu"))
        out.update(_linear_state(actor, "action_model._continuous_distribution.log_sigma.",
                                 "policy.log_sigma"))
    if case["branches"]:  # one Linear: the branches' rows stacked, branch after branch
        for field in ("weight", "bias"):
            out[f"policy.logits.{field}"] = torch.cat(
                [actor[f"action_model._discrete_distribution.branches.{b}.{field}"]
                 for b in range(len(case["branches"]))])
    out.update(_value_network(opt._critic, "critic"))
    out.update(_value_network(opt.target_network, "target_critic"))
    out.update(_value_network(opt.q_network.q1_network, "q1"))
    out.update(_value_network(opt.q_network.q2_network, "q2"))
    out["log_alpha_discrete"] = opt._log_ent_coef.discrete
    out["log_alpha_continuous"] = opt._log_ent_coef.continuous
    return {k: np.array(v.detach().numpy(), np.float32, copy=True) for k, v in out.items()}


def _minibatch(case: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random transitions: standard-normal observations, continuous actions in (−1, 1), discrete
    actions among the allowed ones (a quarter of the actions masked, never a branch's first)."""
    n, branches = BATCH, case["branches"]
    allowed = rng.random((n, sum(branches))) > 0.25
    discrete, start = [], 0
    for size in branches:
        allowed[:, start] = True
        discrete.append([rng.choice(np.flatnonzero(row)) for row in allowed[:, start:start + size]])
        start += size
    return {**{f"obs{i}": _random_obs(rng, n, s) for i, s in enumerate(case["obs"])},
            **{f"next_obs{i}": _random_obs(rng, n, s) for i, s in enumerate(case["obs"])},
            "continuous": rng.uniform(-0.99, 0.99, (n, case["continuous"])).astype(np.float32),
            "discrete": np.asarray(discrete, np.int64).T.reshape(n, len(branches)),
            "allowed": allowed,
            "rewards": rng.normal(size=n).astype(np.float32),
            "terminated": (rng.random(n) < 0.25).astype(np.float32)}


def _pad_sequences(case: dict, data: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``data`` (BATCH rows) as BATCH / L sequences, some padded at the end as ML-Agents'
    ``resequence_and_append`` pads a trajectory's last sequence, with stored memories and the
    loss ``masks``."""
    L, m = case["sequence_length"], case["memory_size"]
    masks = np.ones(BATCH, np.float32)
    for start in range(0, BATCH, L):
        real = int(rng.integers(1, L + 1)) if start % (2 * L) else L  # every other one padded
        masks[start + real:start + L] = 0.0
    pad = masks == 0
    for key, value in data.items():
        if key == "allowed":  # padding_value 1: the last real row's mask repeated
            for row in np.flatnonzero(pad):
                value[row] = value[row - 1]
        else:
            value[pad] = 0
    data["masks"] = masks
    data["memories"] = rng.normal(size=(BATCH, m)).astype(np.float32) * 0.5
    data["critic_memories"] = rng.normal(size=(BATCH, m)).astype(np.float32) * 0.5
    data["memories"][pad] = 0.0
    data["critic_memories"][pad] = 0.0
    return data
def _random_obs(rng: np.random.Generator, n: int, shape) -> np.ndarray:
    """Standard normal; a buffer sensor's rows past a random count are zero (padding)."""
    x = rng.normal(size=(n, *shape)).astype(np.float32)
    if len(shape) == 2:
        x[np.arange(shape[0])[None, :] >= rng.integers(0, shape[0] + 1, n)[:, None]] = 0.0
    return x


def _buffer(case: dict, data: dict) -> AgentBuffer:
    """The minibatch as ``OffPolicyTrainer._update_policy`` hands it to ``optimizer.update``."""
    buf = AgentBuffer()
    for i in range(len(case["obs"])):
        buf[ObsUtil.get_name_at(i)].extend(list(data[f"obs{i}"]))
        buf[ObsUtil.get_name_at_next(i)].extend(list(data[f"next_obs{i}"]))
    buf[BufferKey.CONTINUOUS_ACTION].extend(list(data["continuous"]))
    buf[BufferKey.DISCRETE_ACTION].extend(list(data["discrete"].astype(np.int32)))
    buf[BufferKey.ACTION_MASK].extend(list(data["allowed"].astype(np.float32)))  # 1: allowed
    buf[BufferKey.ENVIRONMENT_REWARDS].extend(list(data["rewards"]))
    buf[BufferKey.DONE].extend(list(data["terminated"]))
    buf[BufferKey.MASKS].extend(list(data.get("masks", np.ones(BATCH, np.float32))))
    if "memories" in data:
        buf[BufferKey.MEMORY].extend(list(data["memories"]))
        buf[BufferKey.CRITIC_MEMORY].extend(list(data["critic_memories"]))
    return buf


def make(name: str) -> Path:
    case = CASES[name]
    torch.manual_seed(0)
    trainer = _trainer(case)
    optimizer = trainer.optimizer
    before = _our_names(trainer, case)
    rng = np.random.default_rng(0)
    batches = [_minibatch(case, rng) for _ in range(UPDATES)]
    if "memory_size" in case:
        batches = [_pad_sequences(case, data, rng) for data in batches]
    losses = []
    for data, seed in zip(batches, SEEDS):
        buf = _buffer(case, data)
        if case["normalize"]:
            trainer.policy.actor.update_normalization(buf)
            for i, processor in enumerate(
                    trainer.policy.actor.network_body.observation_encoder.processors):
                norm = processor.normalizer
                data[f"norm_mean{i}"] = norm.running_mean.numpy().copy()
                data[f"norm_var{i}"] = (norm.running_variance / norm.normalization_steps).numpy()
        for signal_name, signal in optimizer.reward_signals.items():
            buf[RewardSignalUtil.rewards_key(signal_name)].extend(
                signal.evaluate(buf) * signal.strength)
        torch.manual_seed(seed)
        stats = optimizer.update(buf, BATCH // case.get("sequence_length", 1))
        losses.append([stats[k] for k in LOSSES])
    after = _our_names(trainer, case)
    path = HERE / f"sac_{name}.npz"
    shapes = {f"case/obs_shape{i}": np.asarray(shape) for i, shape in enumerate(case["obs"])}
    np.savez_compressed(
        path, **{f"before/{k}": v for k, v in before.items()},
        **{f"after/{k}": v for k, v in after.items()},
        **{f"data/{k}/{u}": v for u, data in enumerate(batches) for k, v in data.items()},
        **{f"case/{k}": np.asarray(v) for k, v in case.items() if k != "obs"}, **shapes,
        **{"case/learning_rate": np.asarray(LEARNING_RATE), "case/tau": np.asarray(TAU),
           "case/init_entcoef": np.asarray(INIT_ENTCOEF), "case/max_steps": np.asarray(MAX_STEPS),
           "case/batch_size": np.asarray(BATCH), "case/updates": np.asarray(UPDATES),
           "case/seeds": np.asarray(SEEDS)},
        **{"losses/values": np.asarray(losses, np.float64), "losses/names": np.asarray(LOSSES)})
    return path


if __name__ == "__main__":
    for case_name in sys.argv[1:] or CASES:
        print("wrote", make(case_name).relative_to(Path.cwd()))
