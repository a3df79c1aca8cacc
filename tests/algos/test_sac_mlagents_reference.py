"""A few SAC updates here equal mlagents-learn 1.1.0's on the same minibatches, weight for weight.

The reference files ``mlagents_reference/sac_*.npz`` were written by ML-Agents' own
``TorchSACOptimizer`` (``make_sac_reference.py``, run in an mlagents-learn venv): its initial
weights, the minibatches, the losses each ``update`` reported and the weights after the last one.
Replaying them through ``SACLearner`` with the same settings and the same reparameterisation noise
(ML-Agents draws it from the global RNG seeded before every update; ``SACLearner`` from its
``generator``, seeded the same) must land on the same policy, V, V', Q1, Q2 and log α's. The cases
check the tanh-squashed Gaussian with state-dependent σ, masked branches with exact expectations,
the hybrid V target with ML-Agents' sign, the discount, the reward strength, the entropy targets,
the three Adams in their order, the Polyak step and (case "normalized") the normaliser's
statistics (folded in by ``observe``) and their use by every network. Case "memory" adds
``network_settings.memory``: minibatches of whole sequences, some padded, each sequence's stored
actor and critic memory, zero Q memories, V' from the critic's memory one step in, padded rows
masked out of the policy and entropy losses but (ML-Agents' quirk) not out of the Q and V losses.
Case "buffer" (a buffer sensor beside a vector): the attention path of the policy, V, V', Q1 and
Q2 encoders.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.encoders import ObservationEncoder
from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.reward_signals.config import RewardSignalConfig
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.learner import SACLearner
from unity_rl.experience import TransitionBatch

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference"
CASES = ("continuous", "discrete", "hybrid", "normalized", "memory", "buffer")
MODULES = ("policy", "critic", "target_critic", "q1", "q2")
ALPHAS = ("log_alpha_discrete", "log_alpha_continuous")


def _load(name: str) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict] = {"before": {}, "after": {}, "data": {}, "case": {}, "losses": {}}
    with np.load(REFERENCE / f"sac_{name}.npz") as npz:
        for key in npz.files:
            group, field = key.split("/", 1)
            out[group][field] = npz[key]
    return out


def _obs_shapes(case: dict) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in case[f"obs_shape{i}"])
            for i in range(sum(k.startswith("obs_shape") for k in case))]


def _learner(case: dict, **cfg_overrides) -> SACLearner:
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    cfg = SACConfig(batch_size=int(case["batch_size"]), learning_rate=float(case["learning_rate"]),
                    tau=float(case["tau"]), init_entcoef=float(case["init_entcoef"]),
                    max_steps=int(case["max_steps"]), **cfg_overrides)
    memory = (MemoryConfig(sequence_length=int(case["sequence_length"]),
                           memory_size=int(case["memory_size"])) if "memory_size" in case else None)
    net = NetworkConfig(normalize=bool(case["normalize"]), hidden_units=int(case["hidden"]),
                        num_layers=int(case["layers"]), memory=memory)
    extrinsic = RewardSignalConfig("extrinsic", gamma=float(case["gamma"]),
                                   strength=float(case["strength"]))
    return SACLearner(_obs_shapes(case), spec, cfg, net, reward_signals=(extrinsic,), seed=0)


def _state(learner: SACLearner) -> dict[str, np.ndarray]:
    out = {f"{m}.{k}": v.detach().cpu().numpy().copy()
           for m in MODULES for k, v in getattr(learner, m).state_dict().items()}
    out.update({a: getattr(learner, a).detach().cpu().numpy().copy() for a in ALPHAS})
    return out


def _load_weights(learner: SACLearner, weights: dict[str, np.ndarray]) -> None:
    assert set(weights) == set(_state(learner)), "the reference and SACLearner name different parameters"
    for m in MODULES:
        module = getattr(learner, m)
        module.load_state_dict({k: torch.from_numpy(weights[f"{m}.{k}"])
                                for k in module.state_dict()})
    with torch.no_grad():
        for a in ALPHAS:
            getattr(learner, a).copy_(torch.from_numpy(weights[a]))


def _batch(case: dict, data: dict, u: int) -> TransitionBatch:
    n_obs = len(_obs_shapes(case))
    obs, next_obs = (np.concatenate([data[f"{p}{i}/{u}"].reshape(len(data[f"{p}{i}/{u}"]), -1)
                                     for i in range(n_obs)], axis=1) for p in ("obs", "next_obs"))
    actions = np.concatenate([data[f"continuous/{u}"],
                              data[f"discrete/{u}"].astype(np.float32)], axis=1)
    masks = data[f"allowed/{u}"].astype(np.uint8) if len(case["branches"]) else None
    memory = {}
    if "memory_size" in case:
        memory = dict(memories=data[f"memories/{u}"], critic_memories=data[f"critic_memories/{u}"],
                      loss_mask=data[f"masks/{u}"].astype(np.uint8))
    return TransitionBatch(obs=obs, actions=actions, rewards=data[f"rewards/{u}"],
                           next_obs=next_obs, terminated=data[f"terminated/{u}"],
                           action_masks=masks, **memory)


def _fold_into_normalizer(learner: SACLearner, case: dict, data: dict, u: int) -> None:
    """``learner.observe`` on update ``u``'s observations, as ML-Agents' actor folded them in;
    our statistics then equal the ones ML-Agents normalised that update with (its
    ``Normalizer`` and ``RunningNormalizer`` both start from one pseudo-observation)."""
    n_obs = len(_obs_shapes(case))
    obs = np.concatenate([data[f"obs{i}/{u}"].reshape(len(data[f"obs{i}/{u}"]), -1)
                          for i in range(n_obs)], axis=1)
    learner.observe(obs)
    mean = np.concatenate([data[f"norm_mean{i}/{u}"] for i in range(n_obs)])
    var = np.concatenate([data[f"norm_var{i}/{u}"] for i in range(n_obs)])
    np.testing.assert_allclose(learner.normalizer.mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(learner.normalizer.var, var, rtol=1e-5, atol=1e-6)


def _replay(name: str, **cfg_overrides) -> tuple[dict, SACLearner, list]:
    ref = _load(name)
    case, data = ref["case"], ref["data"]
    with pytest.MonkeyPatch.context() as mp:
        if "attention" in case:  # the reference shrank ML-Agents' attention width (128) alike
            mp.setattr(ObservationEncoder, "ATTENTION_EMBEDDING_SIZE", int(case["attention"]))
        learner = _learner(case, **cfg_overrides)
    _load_weights(learner, ref["before"])
    results = []
    for u, seed in enumerate(int(s) for s in case["seeds"]):
        if bool(case["normalize"]):
            _fold_into_normalizer(learner, case, data, u)
        learner.generator.manual_seed(seed)
        results.append(learner.update(_batch(case, data, u)))
    return ref, learner, results


def test_generator_noise_is_mlagents_global_rng_noise():
    """ML-Agents draws ``randn_like(mean)`` from the global RNG after ``torch.manual_seed(s)``;
    the learner ``torch.randn(shape, generator=g)`` after ``g.manual_seed(s)``: the same numbers."""
    mean = torch.zeros(32, 3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(12)
        expected = torch.randn_like(mean)
    g = torch.Generator()
    g.manual_seed(12)
    assert torch.equal(torch.randn(mean.shape, generator=g, dtype=mean.dtype), expected)


@pytest.mark.parametrize("name", CASES)
def test_updates_land_on_mlagents_weights(name):
    ref, learner, _ = _replay(name)
    after = _state(learner)
    case = ref["case"]
    unused = {"log_alpha_discrete": not len(case["branches"]),  # no branch: no α to train
              "log_alpha_continuous": not int(case["continuous"])}
    for key, expected in ref["after"].items():
        # the key bias adds q·b to every logit of a query alike: softmax ignores it (no gradient)
        if not unused.get(key, False) and not key.endswith("rsa.fc_k.bias"):
            moved = np.abs(expected - ref["before"][key]).max()
            assert moved > 1e-4, f"{key} did not move in the reference: the case tests nothing"
        # ... its gradient is rounding noise, which Adam turns into steps of up to lr each
        atol = (float(case["learning_rate"]) * int(case["updates"])
                if key.endswith("rsa.fc_k.bias") else 1e-5)
        np.testing.assert_allclose(after[key], expected, rtol=0, atol=atol,
                                   err_msg=f"{name}: {key} differs from ML-Agents' updates")


@pytest.mark.parametrize("name", CASES)
def test_reported_losses_are_mlagents(name):
    ref, learner, results = _replay(name)
    names = [str(n) for n in ref["losses"]["names"]]
    expected = ref["losses"]["values"]
    for u, result in enumerate(results):
        for k, metric in enumerate(names):
            if metric == "Policy/Discrete Entropy Coeff" and not len(ref["case"]["branches"]):
                continue  # ML-Agents reports the mean of no coefficient (NaN); we report 0
            np.testing.assert_allclose(result.metrics[metric], expected[u, k], rtol=1e-5,
                                       atol=1e-5, err_msg=f"{name}: update {u}: {metric}")


def test_memory_case_has_padding_and_memories():
    """The memory case tests what it claims: padded rows, and stored memories that matter."""
    ref = _load("memory")
    case, data = ref["case"], ref["data"]
    L = int(case["sequence_length"])
    masks = data["masks/0"]
    assert 0 < masks.sum() < len(masks) and masks[::L].all()  # padding, never a whole sequence
    learner = _learner(case)
    _load_weights(learner, ref["before"])
    batch = _batch(case, data, 0)
    learner.generator.manual_seed(int(case["seeds"][0]))
    with_memory = learner.update(batch).metrics["Losses/Value Loss"]
    learner = _learner(case)
    _load_weights(learner, ref["before"])
    learner.generator.manual_seed(int(case["seeds"][0]))
    zeroed = learner.update(batch._replace(critic_memories=np.zeros_like(batch.critic_memories)))
    assert abs(zeroed.metrics["Losses/Value Loss"] - with_memory) > 1e-4


def test_masked_padded_value_loss_departs_from_mlagents():
    """``sac_padded_value_loss`` (Q and V losses over the real rows only) changes the update."""
    ref, learner, _ = _replay("memory", padded_value_loss="masked")
    q1 = "q1.heads.extrinsic.weight"
    assert np.abs(_state(learner)[q1] - ref["after"][q1]).max() > 1e-4


def test_hybrid_fixed_sign_departs_from_mlagents():
    """The hybrid case exercises the V-target sign quirk: fixing it changes the update."""
    ref, learner, _ = _replay("hybrid", hybrid_entropy_sign="fixed")
    critic = "critic.heads.extrinsic.weight"
    assert np.abs(_state(learner)[critic] - ref["after"][critic]).max() > 1e-4
