"""``PPOLearner(seed=s)`` starts from the network ``mlagents-learn --seed s`` starts from.

Both tools seed torch's RNG with the run seed before the first behavior's networks are built
(mlagents-learn's ``TrainerController``; ``PPOLearner``'s ``seeded_init``), so the same draws in
the same order give the same weights: the actor (body, then the Gaussian mean, then each branch),
then the critic (body, then the value heads). PushBlock's early drift is decided by the initial
network (``benchmarks/pushblock_seed_drift.py``): with the same draws, the two tools' runs of a
seed start from the same network, and a race's seeds are paired.

``mlagents_reference/init.npz`` was written by ML-Agents' own code
(``mlagents_reference/make_init_reference.py``).
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.algos.test_mlagents_reference import _obs_shapes, _our_key
from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner

REFERENCE = Path(__file__).resolve().parent / "mlagents_reference" / "init.npz"
CASES = ("discrete", "continuous", "hybrid", "goal", "shared_critic", "memory")
SEEDS = (0, 6)


def _reference(name: str) -> tuple[dict, dict[int, dict[str, np.ndarray]]]:
    case: dict = {}
    weights: dict[int, dict[str, np.ndarray]] = {s: {} for s in SEEDS}
    with np.load(REFERENCE) as npz:
        for key in npz.files:
            owner, group, field = key.split("/", 2)
            if owner != name:
                continue
            if group == "case":
                case[field] = npz[key]
            else:
                weights[int(group[len("seed"):])][field] = npz[key]
    return case, weights


def _learner(case: dict, seed: int) -> PPOLearner:
    spec = SimpleNamespace(continuous_size=int(case["continuous"]),
                           discrete_branches=tuple(int(b) for b in case["branches"]))
    memory = (MemoryConfig(sequence_length=int(case["sequence_length"]),
                           memory_size=int(case["memory_size"]))
              if "memory_size" in case else None)
    cfg = PPOConfig(shared_critic=bool(case.get("shared_critic", False)))
    net = NetworkConfig(normalize=False, hidden_units=int(case["hidden"]),
                        num_layers=int(case["layers"]), memory=memory)
    return PPOLearner(_obs_shapes(case), spec, cfg, net, seed=seed,
                      goal_indices=tuple(int(i) for i in case.get("goals", ())))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", CASES)
def test_initial_network_is_mlagents_learns_for_the_same_seed(name, seed):
    case, weights = _reference(name)
    learner = _learner(case, seed)
    state = learner.model.state_dict()
    mapped = {_our_key(learner, k): v for k, v in weights[seed].items()}
    assert set(mapped) == set(state), "the reference and ActorCritic name different parameters"
    for key, expected in mapped.items():
        np.testing.assert_array_equal(state[key].numpy(), expected,
                                      err_msg=f"{name}, seed {seed}: {key} is not ML-Agents' draw")


def test_the_seeds_draw_different_networks():
    _, weights = _reference("discrete")
    assert not np.array_equal(weights[0]["actor.0.weight"], weights[6]["actor.0.weight"])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_runs_first_learner_draws_mlagents_learns_network_for_the_run_seed(seed):
    """``unity-rl train --seed s``: the first behavior's learner gets the seed that pairs it."""
    from unity_rl.training.session import learner_seed

    case, weights = _reference("hybrid")
    learner = _learner(case, learner_seed(seed, 0))
    state = learner.model.state_dict()
    for key, expected in weights[seed].items():
        np.testing.assert_array_equal(state[_our_key(learner, key)].numpy(), expected)
    others = {learner_seed(seed, i) for i in range(1, 4)}
    assert len(others) == 3 and seed not in others  # later behaviors draw networks of their own
