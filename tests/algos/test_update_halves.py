"""``algorithms/update_halves.py``: PPO's actor and critic halves side by side.

The claim that matters: side by side changes where the halves run, not what the update
computes — the weights after an update are bit-identical to one piece's, on a network with a
camera (whose channels-last conversion both halves share) and a goal-conditioned hyper layer."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms import update_halves
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.ppo.learner import PPOConfig, PPOLearner
from unity_rl.experience import Trajectory

CAMERA, GOAL = (3, 20, 24), 2
SHAPES = [CAMERA, (GOAL,)]
DISCRETE = SimpleNamespace(continuous_size=0, discrete_branches=(5,))


@pytest.fixture
def restore_cores():
    threads = torch.get_num_threads()
    yield
    update_halves.set_learner_cores(threads, split=False)


def _trajectories(seed: int, n: int = 4, length: int = 16) -> list[Trajectory]:
    rng = np.random.default_rng(seed)
    size = int(np.prod(CAMERA))

    def obs(rows):
        goal = np.eye(GOAL, dtype=np.float32)[rng.integers(0, GOAL, rows)]
        return np.concatenate([rng.random((rows, size), dtype=np.float32), goal], axis=1)

    out = []
    for _ in range(n):
        rows = obs(length + 1)
        out.append(Trajectory(obs=rows[:-1], actions=rng.integers(0, 5, (length, 1)),
                              logprobs=np.full((length, 1), np.log(0.2), np.float32),
                              values=np.zeros(length, np.float32),
                              rewards=rng.normal(size=length).astype(np.float32),
                              last_obs=rows[-1], terminated=False))
    return out


def _learner(shared_critic: bool = False) -> PPOLearner:
    return PPOLearner(SHAPES, DISCRETE, PPOConfig(buffer_size=64, minibatch_size=16,
                                                  num_epochs=2, shared_critic=shared_critic),
                      NetworkConfig(hidden_units=32, num_layers=1, vis_encode_type="simple"),
                      seed=3, goal_indices=(1,))


def _weights_after_updates(cores: int, split: bool) -> tuple[dict, list[dict]]:
    update_halves.set_learner_cores(cores, split=split)
    learner = _learner()
    metrics = [learner.update(_trajectories(seed)) for seed in (0, 1)]
    return {k: v.clone() for k, v in learner.model.state_dict().items()}, metrics


def test_halves_side_by_side_train_the_same_weights_bit_for_bit_as_one_piece(restore_cores):
    one_piece, one_metrics = _weights_after_updates(1, split=False)
    assert not update_halves.halves_side_by_side()
    side_by_side, two_metrics = _weights_after_updates(2, split=True)
    assert update_halves.halves_side_by_side() and torch.get_num_threads() == 1  # 1 each
    assert one_piece.keys() == side_by_side.keys()
    initial = _learner().model.state_dict()
    assert any(not torch.equal(one_piece[k], initial[k]) for k in one_piece)  # they trained
    for key in one_piece:
        assert torch.equal(one_piece[key], side_by_side[key]), key
    assert one_metrics == two_metrics


def test_ppo_splits_its_update_only_with_separate_actor_and_critic():
    assert _learner().splits_update()
    assert not _learner(shared_critic=True).splits_update()


def test_second_half_runs_on_another_thread_and_both_finish_before_an_error(restore_cores):
    update_halves.set_learner_cores(2, split=True)
    threads, finished = [], []

    def first():
        threads.append(threading.get_ident())
        raise RuntimeError("first half failed")

    def second():
        threads.append(threading.get_ident())
        finished.append("second")
        return 2

    with pytest.raises(RuntimeError, match="first half failed"):
        update_halves.run_halves(first, second)
    assert finished == ["second"] and len(set(threads)) == 2

    def failing_second():
        raise ValueError("second half failed")

    with pytest.raises(ValueError, match="second half failed"):
        update_halves.run_halves(lambda: 1, failing_second)
    assert update_halves.run_halves(lambda: 1, lambda: 2) == (1, 2)


def test_without_split_one_piece_on_every_core(restore_cores):
    update_halves.set_learner_cores(2, split=False)
    assert not update_halves.halves_side_by_side() and torch.get_num_threads() == 2
    main = threading.get_ident()
    assert update_halves.run_halves(threading.get_ident, threading.get_ident) == (main, main)


def test_poca_halves_side_by_side_train_the_same_weights_bit_for_bit(restore_cores):
    """POCA's actor half and its critic's (value and baseline) half, with own and mates'
    cameras converted channels-last from both threads."""
    from tests.algos.test_poca import SPEC, trajectories
    from unity_rl.algorithms.poca.config import POCAConfig
    from unity_rl.algorithms.poca.learner import POCALearner

    shape = (3, 20, 20)

    def trained(split: bool) -> dict:
        update_halves.set_learner_cores(2 if split else 1, split=split)
        poca = POCALearner([shape], SPEC, POCAConfig(buffer_size=32, minibatch_size=16),
                           NetworkConfig(hidden_units=16, num_layers=1, vis_encode_type="simple"),
                           seed=0)
        assert poca.splits_update()
        for seed in (3, 4):
            poca.update(trajectories(np.random.default_rng(seed), obs=int(np.prod(shape))))
        return {**{f"actor.{k}": v.clone() for k, v in poca.model.state_dict().items()},
                **{f"critic.{k}": v.clone() for k, v in poca.critic.state_dict().items()}}

    one_piece, side_by_side = trained(False), trained(True)
    assert update_halves.halves_side_by_side()
    for key in one_piece:
        assert torch.equal(one_piece[key], side_by_side[key]), key
