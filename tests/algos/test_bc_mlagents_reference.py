"""Behavioral cloning here equals mlagents-learn 1.1.0's ``BCModule``, weight for weight.

The reference files (``mlagents_reference/bc_<case>.npz`` and ``.demo``) were written by
ML-Agents' own trainers (``make_bc_reference.py``, run in an mlagents-learn venv): a demonstration,
the actor's weights, and the weights after each of two ``bc_module.update()`` calls at policy
steps 200 and 600 of a 1000-step anneal (the learning rate decays between them), with the
shuffles ML-Agents drew and torch's seed before each update. Replaying them through
``BehavioralCloning`` on ``PPOLearner``'s / ``SACLearner``'s actor must land on the same weights.
This checks the demo rows (ML-Agents' pairing, episode chunks, padding to sequences), the
minibatch count (``samples_per_update`` included), the losses (MSE of the reparameterised sample,
tanh-squashed for SAC; the branches' cross-entropy), the normaliser, zero memories, BC's own Adam
at ``learning_rate · strength`` and its decay, set after the batches.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms.imitation.config import BehavioralCloningConfig
from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.algorithms.sac.config import SACConfig
from unity_rl.algorithms.sac.learner import SACLearner

from tests.algos.test_mlagents_reference import _our_key

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference"
CASES = ("ppo_discrete", "ppo_continuous", "ppo_hybrid", "ppo_memory", "sac_hybrid",
         "sac_memory")


def _load(name: str) -> dict:
    out: dict = {"case": {}, "shuffle": {}, "norm_obs": {}}
    with np.load(REFERENCE / f"bc_{name}.npz") as npz:
        for key in npz.files:
            group, _, field = key.partition("/")
            if field:
                out.setdefault(group, {})[field] = npz[key]
            else:
                out[group] = npz[key]
    return out


class RecordedShuffles:
    """Stands in for BC's generator: ML-Agents' permutations, in the order it drew them."""

    def __init__(self, shuffles: dict):
        self.pending = [shuffles[str(i)] for i in range(len(shuffles))]

    def permutation(self, n: int) -> np.ndarray:
        perm = self.pending.pop(0)
        assert len(perm) == n, "BC shuffles another number of sequences than ML-Agents"
        return perm


def _learner(case: dict):
    obs_shapes = [tuple(int(d) for d in case[f"obs_shape{i}"])
                  for i in range(sum(k.startswith("obs_shape") for k in case))]
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    memory = (MemoryConfig(sequence_length=int(case["sequence_length"]),
                           memory_size=int(case["memory_size"])) if "memory_size" in case else None)
    net = NetworkConfig(normalize=bool(case["normalize"]), hidden_units=int(case["hidden"]),
                        num_layers=int(case["layers"]), memory=memory)
    lr, batch = float(case["learning_rate"]), int(case["batch_size"])
    if str(case["trainer"]) == "ppo":
        return PPOLearner(obs_shapes, spec, PPOConfig(learning_rate=lr, minibatch_size=batch,
                                                      buffer_size=4 * batch), net, seed=0)
    return SACLearner(obs_shapes, spec, SACConfig(batch_size=batch, learning_rate=lr), net, seed=0)


def _actor_state(learner) -> tuple[torch.nn.Module, callable]:
    """(the module holding the actor, reference name -> our parameter name)."""
    if isinstance(learner, PPOLearner):
        return learner.model, lambda key: _our_key(learner, key)
    return learner.policy, lambda key: key[len("policy."):]


def _check(module, name_of, expected: dict, what: str) -> None:
    state = module.state_dict()
    for key, value in expected.items():
        np.testing.assert_allclose(state[name_of(key)].numpy(), value, rtol=0, atol=2e-6,
                                   err_msg=f"{what}: {key} differs from ML-Agents' BC")


@pytest.mark.parametrize("name", CASES)
def test_two_bc_updates_land_on_mlagents_weights(name):
    ref = _load(name)
    case = ref["case"]
    learner = _learner(case)
    module, name_of = _actor_state(learner)
    mapped = {name_of(k): torch.from_numpy(v) for k, v in ref["weights0"].items()}
    missing = [k for k in mapped if k not in module.state_dict()]
    assert not missing, f"the reference names parameters the actor lacks: {missing}"
    module.load_state_dict(mapped, strict=False)
    if ref["norm_obs"]:
        rows = np.concatenate([ref["norm_obs"][str(i)].reshape(30, -1)
                               for i in range(len(ref["norm_obs"]))], axis=1)
        learner.layout.update(learner.normalizer, rows)

    step = {"now": 0}
    cfg = BehavioralCloningConfig(demo_path=str(REFERENCE / f"bc_{name}.demo"),
                                  steps=int(case["anneal"]), strength=float(case["strength"]),
                                  samples_per_update=int(case.get("samples_per_update", 0)),
                                  num_epoch=int(case["num_epoch"]))
    if isinstance(learner, PPOLearner):
        from unity_rl.algorithms.ppo.imitation import make_behavioral_cloning
    else:
        from unity_rl.algorithms.sac.imitation import make_behavioral_cloning
    bc = make_behavioral_cloning(cfg, learner, lambda: step["now"], seed=0)
    bc.rng = RecordedShuffles(ref["shuffle"])
    for k, at in enumerate(ref["steps"]):
        step["now"] = int(at)
        bc.generator.manual_seed(100 + k)
        metrics = bc.update()
        moved = max(np.abs(ref[f"weights{k + 1}"][key] - ref[f"weights{k}"][key]).max()
                    for key in ref[f"weights{k}"])
        assert moved > 1e-4, "the reference's BC update moved nothing: the case tests nothing"
        assert metrics["Losses/Pretraining Loss"] == pytest.approx(float(ref["losses"][k]),
                                                                  rel=1e-5, abs=1e-6)
        _check(module, name_of, ref[f"weights{k + 1}"], f"{name} update {k + 1}")
    assert not bc.rng.pending, "ML-Agents shuffled more often than BC did"
