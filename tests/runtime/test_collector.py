"""TrajectoryCollector on hand-made StepResults (no builds)."""
from __future__ import annotations

import numpy as np
import pytest

from unity_rl.envs.agent_stream import StepResult
from unity_rl.envs.types import AgentKey, DecisionBatch, TerminalBatch
from unity_rl.runtime.collector import TrajectoryCollector, flat_obs

B = "Ball?team=0"


def key(i: int, build: int = 0) -> AgentKey:
    return AgentKey(build, B, i)


def result(decisions=(), terminals=()) -> StepResult:
    """decisions: [(agent, obs_value, reward)], terminals: [(agent, obs_value, reward, interrupted)]."""
    dec = DecisionBatch(
        keys=[key(a) for a, _, _ in decisions],
        obs=[np.array([[v, -v] for _, v, _ in decisions], np.float32).reshape(-1, 2)],
        reward=np.array([r for _, _, r in decisions], np.float32),
        action_mask=None)
    term = TerminalBatch(
        keys=[key(a) for a, _, _, _ in terminals],
        obs=[np.array([[v, -v] for _, v, _, _ in terminals], np.float32).reshape(-1, 2)],
        reward=np.array([r for _, _, r, _ in terminals], np.float32),
        interrupted=np.array([i for _, _, _, i in terminals], bool))
    return StepResult(dec, term, {})


def act(c: TrajectoryCollector, res: StepResult, value: float = 0.5) -> None:
    """Observes ``res`` and records one action per decision row (action = obs[:, :1])."""
    obs = c.observe(res)
    n = len(res.decisions.keys)
    if n:
        c.record(res.decisions.keys, obs, obs[:, :1].copy(), np.full(n, -1.0, np.float32),
                 np.full(n, value, np.float32))


def test_flat_obs_concatenates_flattened_observations():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    out = flat_obs([a, b])
    assert out.shape == (2, 7)
    np.testing.assert_array_equal(out[1], [3, 4, 5, 4, 5, 6, 7])


def test_termination_ends_trajectory_without_bootstrap_and_drops_first_reward():
    c = TrajectoryCollector(time_horizon=100)
    act(c, result(decisions=[(0, 1.0, 7.0)]))        # first decision: reward 7 dropped
    act(c, result(decisions=[(0, 2.0, 0.1)]))
    c.observe(result(terminals=[(0, 3.0, -1.0, False)]))
    [traj] = c.take()
    np.testing.assert_allclose(traj.rewards, [0.1, -1.0])
    np.testing.assert_allclose(traj.obs[:, 0], [1.0, 2.0])
    np.testing.assert_allclose(traj.last_obs, [3.0, -3.0])
    assert traj.terminated is True
    returns, lengths = c.pop_episodes()
    assert returns == pytest.approx([-0.9]) and lengths == [2]


def test_interrupted_is_truncation_and_bootstraps_from_final_obs():
    c = TrajectoryCollector(time_horizon=100)
    act(c, result(decisions=[(0, 1.0, 0.0)]))
    c.observe(result(terminals=[(0, 9.0, 0.1, True)]))
    [traj] = c.take()
    assert traj.terminated is False
    np.testing.assert_allclose(traj.last_obs, [9.0, -9.0])
    np.testing.assert_allclose(traj.rewards, [0.1])


def test_terminal_and_decision_of_same_agent_in_one_result():
    c = TrajectoryCollector(time_horizon=100)
    act(c, result(decisions=[(0, 1.0, 0.0)]))
    # episode ends (reward -1) and the next one starts in the same result (its reward is dropped)
    act(c, result(decisions=[(0, 5.0, 0.3)], terminals=[(0, 2.0, -1.0, False)]))
    [old] = c.take()
    np.testing.assert_allclose(old.rewards, [-1.0])
    np.testing.assert_allclose(old.last_obs, [2.0, -2.0])
    assert old.terminated
    act(c, result(decisions=[(0, 6.0, 0.1)]))
    [new] = c.flush()
    np.testing.assert_allclose(new.obs[:, 0], [5.0])
    np.testing.assert_allclose(new.rewards, [0.1])
    np.testing.assert_allclose(new.last_obs, [6.0, -6.0])
    assert not new.terminated
    assert c.pop_episodes() == ([-1.0], [1])


def test_terminal_only_result_then_decisions():
    c = TrajectoryCollector(time_horizon=100)
    act(c, result(decisions=[(0, 1.0, 0.0), (1, 1.5, 0.0)]))
    act(c, result(terminals=[(1, 4.0, -1.0, False)]))    # only a terminal: nothing to act on
    act(c, result(decisions=[(0, 2.0, 0.1), (1, 0.0, 0.0)]))
    done = c.take()
    assert len(done) == 1 and done[0].terminated
    np.testing.assert_allclose(done[0].rewards, [-1.0])
    flushed = c.flush()
    assert len(flushed) == 1           # agent 0; agent 1's new episode has no completed step yet
    np.testing.assert_allclose(flushed[0].rewards, [0.1])


def test_time_horizon_cut_bootstraps_and_keeps_episode_running():
    c = TrajectoryCollector(time_horizon=2)
    for t in range(5):
        act(c, result(decisions=[(0, float(t), 1.0)]))
    done = c.take()
    assert [len(t.rewards) for t in done] == [2, 2]
    np.testing.assert_allclose(done[0].obs[:, 0], [0.0, 1.0])
    np.testing.assert_allclose(done[0].last_obs[0], 2.0)      # the next decision's obs
    np.testing.assert_allclose(done[1].obs[:, 0], [2.0, 3.0])
    assert not any(t.terminated for t in done)
    c.observe(result(terminals=[(0, 7.0, 2.0, False)]))
    [last] = c.take()
    np.testing.assert_allclose(last.rewards, [2.0])
    returns, lengths = c.pop_episodes()
    assert returns == [6.0] and lengths == [5]


def test_late_agent_and_flush_keeps_pending_action_open():
    c = TrajectoryCollector(time_horizon=100)
    act(c, result(decisions=[(0, 1.0, 0.0)]))
    act(c, result(decisions=[(0, 2.0, 0.1), (3, 10.0, 5.0)]))   # agent 3 appears late
    act(c, result(decisions=[(3, 11.0, 0.2)]))                   # agent 0 skips this step
    assert c.completed_steps == 2
    flushed = sorted(c.flush(), key=lambda t: t.obs[0, 0])
    assert [len(t.rewards) for t in flushed] == [1, 1]
    # agent 0's action at obs 2 is still waiting for its reward: cut before it, bootstrap from it
    np.testing.assert_allclose(flushed[0].last_obs[0], 2.0)
    np.testing.assert_allclose(flushed[1].obs[:, 0], [10.0])
    np.testing.assert_allclose(flushed[1].last_obs[0], 11.0)
    # the pending action is completed later and starts the next piece
    act(c, result(decisions=[(0, 3.0, 0.4)]))
    nxt = [t for t in c.flush() if t.obs[0, 0] == 2.0]
    assert len(nxt) == 1
    np.testing.assert_allclose(nxt[0].rewards, [0.4])
    np.testing.assert_allclose(nxt[0].logprobs, [-1.0])


def test_agents_are_kept_apart_across_builds():
    c = TrajectoryCollector(time_horizon=100)
    k0, k1 = AgentKey(0, B, 0), AgentKey(1, B, 0)       # same agent id, different builds
    res = StepResult(DecisionBatch([k0, k1], [np.array([[1, 1], [2, 2]], np.float32)],
                                   np.zeros(2, np.float32), None),
                     TerminalBatch([], [np.zeros((0, 2), np.float32)], np.zeros(0, np.float32),
                                   np.zeros(0, bool)), {})
    obs = c.observe(res)
    c.record(res.decisions.keys, obs, obs[:, :1], np.zeros(2, np.float32), np.zeros(2, np.float32))
    assert c.num_agents == 2


def test_acting_twice_without_reward_is_an_error():
    c = TrajectoryCollector(time_horizon=100)
    res = result(decisions=[(0, 1.0, 0.0)])
    act(c, res)
    with pytest.raises(RuntimeError, match="acted twice"):
        c.record(res.decisions.keys, np.zeros((1, 2), np.float32), np.zeros((1, 1)),
                 np.zeros(1), np.zeros(1))
