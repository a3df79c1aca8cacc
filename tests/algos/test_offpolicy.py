"""The generic off-policy pieces over a learner that is not DDPG: what SAC will plug into."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from unity_rl.algorithms.offpolicy.acting import OffPolicyActingPolicy, carried_priorities
from unity_rl.algorithms.offpolicy.config import ReplayConfig
from unity_rl.algorithms.offpolicy.host import OffPolicyHost
from unity_rl.algorithms.offpolicy.learner import OffPolicyLearner, UpdateResult
from unity_rl.experience import Segment, Trajectory, TransitionBatch
from unity_rl.replay import ReplayBuffer


@dataclass(frozen=True)
class ToyConfig(ReplayConfig):
    TRAINER_TYPE = "toy"
    step_size: float = 0.5
    """The toy's own key."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check(self.step_size > 0, "step_size", "> 0")


class ToyLearner:
    """Numpy only: fits ``OffPolicyLearner`` without torch (|TD error| = |reward − q|)."""

    def __init__(self, cfg: ToyConfig):
        self.cfg = cfg
        self.updates = 0
        self.agent_steps = 0
        self.observed = 0
        self.q = 0.0
        self.seen_weights: list = []

    def observe(self, obs) -> None:
        self.observed += len(obs)

    def update(self, batch: TransitionBatch, importance_weights=None) -> UpdateResult:
        td = batch.rewards - self.q
        self.q += self.cfg.step_size * float(np.mean(td))
        self.updates += 1
        self.seen_weights.append(importance_weights)
        return UpdateResult({"Policy/Q": self.q}, np.abs(td).astype(np.float32))

    def weights(self, include_critic: bool = False) -> dict:
        return {"q": self.q, "version": self.updates, "critic": include_critic}

    def export_module(self):
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {"q": self.q, "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.q, self.updates = state["q"], state["updates"]


class ToyActing(OffPolicyActingPolicy):
    def load_policy_weights(self, weights):
        self.version, self.has_critic = weights["version"], weights["critic"]

    def policy_actions(self, obs, deterministic, agent_keys, action_mask=None):
        return np.full((len(obs), 1), 0.25 if deterministic else 0.5, np.float32)

    def random_actions(self, n):
        return np.full((n, 1), -1.0, np.float32)

    def td_errors(self, batch):
        return np.abs(batch.rewards) if self.has_critic else None


def batch(n: int, reward: float = 1.0) -> TransitionBatch:
    obs = np.zeros((n, 2), np.float32)
    return TransitionBatch(obs, np.zeros((n, 1), np.float32), np.full(n, reward, np.float32), obs,
                           np.zeros(n, np.float32))


def trajectory(n: int) -> Trajectory:
    return Trajectory(np.zeros((n, 2), np.float32), np.zeros((n, 1), np.float32),
                      np.zeros(n, np.float32), np.full(n, np.nan, np.float32),
                      np.arange(1, n + 1, dtype=np.float32), np.zeros(2, np.float32), True)


def test_config_checks_name_the_trainer_type_and_the_ratio_rule():
    with pytest.raises(ValueError, match=r"toy\.batch_size must be"):
        ToyConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"toy\.step_size must be"):
        ToyConfig(step_size=0)
    cfg = ToyConfig(warmup_steps=100, replay_ratio=0.5)
    assert cfg.updates_owed(99, 0) == 0 and cfg.updates_owed(140, 0) == 20
    assert cfg.updates_owed(140, 15) == 5


@pytest.mark.parametrize("prioritized", [False, True])
def test_host_drives_any_learner_of_the_protocol(prioritized):
    cfg = ToyConfig(warmup_steps=0, buffer_size=64, batch_size=4, replay_ratio=0.5,
                    prioritized=prioritized, save_replay_buffer=True)
    learner: OffPolicyLearner = ToyLearner(cfg)
    host = OffPolicyHost(learner, ReplayBuffer(64, 2, 1, 0, prioritized=prioritized),
                         name="toy", num_actors=2)
    host.replay.add(batch(20))
    host.agent_steps = 20
    metrics = host.train(sync=True)
    assert host.updates == 10 and metrics["Runtime/Updates This Round"] == 10
    assert (learner.seen_weights[0] is not None) == prioritized
    assert host.weights()["policy"]["critic"] == prioritized
    state = host.state_dict()
    assert state["toy"] == {"q": learner.q, "updates": 10} and state["replay"]["size"] == 20
    other = OffPolicyHost(ToyLearner(cfg), ReplayBuffer(64, 2, 1, 0, prioritized=prioritized),
                          name="toy", num_actors=2)
    other.load_state_dict(state)
    assert (other.updates, other.version, len(other.replay)) == (10, 1, 20)


@pytest.mark.parametrize("prioritized", [False, True])
def test_acting_policy_warms_up_then_acts_and_carries_priorities_in_extras(prioritized):
    policy = ToyActing(ToyConfig(warmup_steps=10, prioritized=prioritized))
    policy.load_weights({"policy": {"version": 3, "critic": prioritized}, "agent_steps": 4,
                         "num_actors": 3, "replay": None})
    obs = np.zeros((2, 2), np.float32)
    assert policy.version == 3
    assert (policy.act(obs, agent_keys=["a", "b"])[0] == -1).all()   # 4 + 3·0 < 10: warm-up
    assert (policy.act(obs, agent_keys=["a", "b"])[0] == 0.5).all()  # 4 + 3·2 >= 10
    assert (policy.act(obs, deterministic=True)[0] == 0.25).all()
    segment = policy.finish_segment(Segment([trajectory(2), trajectory(3)], 3, 0, 5, [], []))
    priorities = carried_priorities(segment.trajectories)
    if prioritized:
        np.testing.assert_allclose(priorities, [1, 2, 1, 2, 3])
        assert all(np.isnan(t.values).all() for t in segment.trajectories)
    else:
        assert priorities is None
