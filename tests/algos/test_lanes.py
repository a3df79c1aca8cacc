"""Update lanes (``algorithms/lanes.py``): PPO's actor and critic halves side by side.

The claim that matters: two lanes change where the halves run, not what the update computes —
the weights after an update are bit-identical to one lane's, on a network with a camera (whose
channels-last conversion both halves share) and a goal-conditioned hyper layer."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from unity_rl.algorithms import lanes
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
    lanes.set_learner_cores(threads, split=False)


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
    lanes.set_learner_cores(cores, split=split)
    learner = _learner()
    metrics = [learner.update(_trajectories(seed)) for seed in (0, 1)]
    return {k: v.clone() for k, v in learner.model.state_dict().items()}, metrics


def test_two_lanes_train_the_same_weights_bit_for_bit_as_one(restore_cores):
    one_lane, one_metrics = _weights_after_updates(1, split=False)
    assert lanes.lane_count() == 1
    two_lanes, two_metrics = _weights_after_updates(2, split=True)
    assert lanes.lane_count() == 2 and torch.get_num_threads() == 1  # 2 lanes of 1 thread
    assert one_lane.keys() == two_lanes.keys()
    changed = [k for k in one_lane if not torch.equal(one_lane[k], _learner().model.state_dict()[k])]
    assert changed  # the updates did move the weights
    for key in one_lane:
        assert torch.equal(one_lane[key], two_lanes[key]), key
    assert one_metrics == two_metrics


def test_ppo_splits_its_update_only_with_separate_actor_and_critic():
    assert _learner().update_lanes() == 2
    assert _learner(shared_critic=True).update_lanes() == 1


def test_second_half_runs_on_another_thread_and_both_finish_before_an_error(restore_cores):
    lanes.set_learner_cores(2, split=True)
    threads, finished = [], []

    def first():
        threads.append(threading.get_ident())
        raise RuntimeError("first half failed")

    def second():
        threads.append(threading.get_ident())
        finished.append("second")
        return 2

    with pytest.raises(RuntimeError, match="first half failed"):
        lanes.run_lanes(first, second)
    assert finished == ["second"] and len(set(threads)) == 2

    def failing_second():
        raise ValueError("second half failed")

    with pytest.raises(ValueError, match="second half failed"):
        lanes.run_lanes(lambda: 1, failing_second)
    assert lanes.run_lanes(lambda: 1, lambda: 2) == (1, 2)


def test_without_split_one_lane_of_every_core(restore_cores):
    lanes.set_learner_cores(2, split=False)
    assert lanes.lane_count() == 1 and torch.get_num_threads() == 2
    main = threading.get_ident()
    assert lanes.run_lanes(threading.get_ident, threading.get_ident) == (main, main)
