"""One PPO update here equals mlagents-learn 1.1.0's on the same buffer, weight for weight.

The reference files in ``mlagents_reference/`` were written by ML-Agents' own trainer code
(``make_reference.py``, run in an mlagents-learn venv): its initial weights, trajectories acted
by its policy, and its weights after ``PPOTrainer._update_policy``. Replaying that buffer through
``PPOLearner`` with the same settings must land on the same weights. With vector, hybrid and
camera-plus-vector cases this checks the ``simple`` visual encoder, observation concatenation,
value estimates, GAE, advantage normalisation, per-action ratios,
masking, entropy, the value-loss clip, loss weights, schedules and Adam together; the "goal"
case (a GOAL_SIGNAL vector, ``goal_conditioning_type: hyper``) checks the HyperNetwork bodies
and the "shared_critic" case ML-Agents' ``SharedActorCritic``; in the "value_clip" case (a large
learning rate, six epochs) the values move well past epsilon, which shows the value clip's real
anchor in ML-Agents 1.1.0: the returns (Unity-Technologies/ml-agents#6281). The "memory" case
(``network_settings.memory``, a hybrid action) checks the LSTMs after both bodies, the stored
rollout memories at each sequence start, the critic memories computed sequence by sequence and
carried between trajectories, padding at the end of each trajectory, the masked losses and the
advantages normalised over the padded buffer. The "buffer" case (a buffer sensor of 6 entities
beside a vector, zero rows as padding) checks the attention path of both encoders: entity
embedding with the agent's own encoding, residual self-attention with masking, masked mean-pool,
its place in the body input.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.encoders import ObservationEncoder
from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.sequences import padded_length
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.algorithms.reward_signals.config import RewardSignalConfig
from unity_rl.experience import StepExtras, Trajectory

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference"
CASES = ("discrete", "continuous", "hybrid", "visual", "goal", "shared_critic", "value_clip",
         "memory", "buffer")


def _load(name: str) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {"before": {}, "after": {}, "data": {}, "case": {}}
    with np.load(REFERENCE / f"{name}.npz") as npz:
        for key in npz.files:
            group, field = key.split("/", 1)
            out[group][field] = npz[key]
    return out


def _obs_shapes(case: dict) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in case[f"obs_shape{i}"])
            for i in range(sum(k.startswith("obs_shape") for k in case))]


def _learner(case: dict) -> PPOLearner:
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    memory = (MemoryConfig(sequence_length=int(case["sequence_length"]),
                           memory_size=int(case["memory_size"]))
              if "memory_size" in case else None)
    seq = memory.sequence_length if memory is not None else 1
    n = int(case["num_trajectories"]) * padded_length(int(case["length"]), seq)  # one minibatch
    cfg = PPOConfig(learning_rate=float(case["learning_rate"]), buffer_size=n, minibatch_size=n,
                    num_epochs=int(case["epochs"]), gae_lambda=float(case["lambd"]),
                    clip_coef=float(case["epsilon"]), ent_coef=float(case["beta"]),
                    max_steps=int(case["max_steps"]),
                    shared_critic=bool(case.get("shared_critic", False)))
    net = NetworkConfig(normalize=False, hidden_units=int(case["hidden"]),
                        num_layers=int(case["layers"]), memory=memory)
    extrinsic = RewardSignalConfig("extrinsic", gamma=float(case["gamma"]))
    goals = tuple(int(i) for i in case.get("goals", ()))
    return PPOLearner(_obs_shapes(case), spec, cfg, net, seed=0, reward_signals=(extrinsic,),
                      goal_indices=goals)


def _our_key(learner: PPOLearner, key: str) -> str:
    """The reference's parameter name as ``ActorCritic`` calls it. Encoder parameters are named
    ``<actor|critic>_encoder/<k>/<ML-Agents' name>``: ours is that encoder's k-th parameter.
    The critic's last layer ``critic.<2·layers>`` is ML-Agents' ``value_heads.extrinsic``.
    Goal-conditioned bodies keep ML-Agents' ``ConditionalEncoder`` names (``<actor|critic>.layers.*``):
    the actor's is ``<head>.body``, its output layer ``actor.<2·layers>`` is ``<head>.out``."""
    model = learner.model
    head = 2 * model.num_layers  # a trunk holds 2·layers modules: Linear, Swish, ...
    if key.startswith(f"critic.{head}."):
        return "value_heads.extrinsic." + key[len(f"critic.{head}."):]
    if "/" in key:
        encoder, k, _ = key.split("/", 2)
        names = [name for name, _ in getattr(model, encoder).named_parameters()]
        return f"{encoder}.{names[int(k)]}"
    if not key.startswith("actor."):
        return key
    rest = key[len("actor."):]
    if model.goal_conditioned:
        rest = "out." + rest[len(f"{head}."):] if rest.startswith(f"{head}.") else "body." + rest
    return f"{model.head_name}.{rest}"


def _flat(data: dict, prefix: str, count: int) -> np.ndarray:
    """Observations ``prefix0..`` flattened side by side (images stored as uint8: / 255)."""
    parts = []
    for i in range(count):
        o = data[f"{prefix}{i}"]
        o = o.astype(np.float32) / np.float32(255.0) if o.dtype == np.uint8 else o
        parts.append(o.reshape(len(o), -1))
    return np.concatenate(parts, axis=1)


def _trajectories(case: dict, data: dict) -> list[Trajectory]:
    length, c = int(case["length"]), int(case["continuous"])
    actions = (np.concatenate([data["continuous"], data["discrete"].astype(np.float32)], axis=1)
               if c else data["discrete"])
    masks = data["allowed"] if len(case["branches"]) else None
    obs, last_obs = (_flat(data, p, len(_obs_shapes(case))) for p in ("obs", "last_obs"))
    trajs = []
    for k in range(int(case["num_trajectories"])):
        rows = slice(k * length, (k + 1) * length)
        trajs.append(Trajectory(
            obs=obs[rows], actions=actions[rows], logprobs=data["logprobs"][rows],
            values=np.zeros(length, np.float32), rewards=data["rewards"][rows],
            last_obs=last_obs[k], terminated=bool(data["terminated"][k]),
            action_masks=None if masks is None else masks[rows],
            extras=StepExtras(memories=data["memories"][rows] if "memories" in data else None)))
    return trajs


@pytest.mark.parametrize("name", CASES)
def test_one_update_lands_on_mlagents_weights(name, monkeypatch):
    ref = _load(name)
    case = ref["case"]
    if "attention" in case:  # the reference shrank ML-Agents' attention width (128) alike
        monkeypatch.setattr(ObservationEncoder, "ATTENTION_EMBEDDING_SIZE", int(case["attention"]))
    learner = _learner(case)
    state = learner.model.state_dict()
    mapped = {_our_key(learner, k): v for k, v in ref["before"].items()}
    assert set(mapped) == set(state), "the reference and ActorCritic name different parameters"
    learner.model.load_state_dict({k: torch.from_numpy(v) for k, v in mapped.items()})

    trajectories = _trajectories(case, ref["data"])
    learner.update(trajectories, collected_steps=sum(len(t.rewards) for t in trajectories))

    after = learner.model.state_dict()
    for key, expected in ref["after"].items():
        ours = after[_our_key(learner, key)].numpy()
        moved = np.abs(expected - ref["before"][key]).max()
        # the key bias adds q·b to every logit of a query alike: softmax ignores it (no gradient)
        assert moved > 1e-4 or key.endswith("rsa.fc_k.bias"), \
            f"{key} did not move in the reference: the case tests nothing"
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6,
                                   err_msg=f"{name}: {key} differs from ML-Agents' update")
