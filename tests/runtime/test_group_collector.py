"""TrajectoryCollector(groups=True) on hand-made StepResults: groupmates' data per step as
ML-Agents' agent processor records it (statuses, their order, a member's departure, the group
bootstrap flag, group returns)."""
from __future__ import annotations

import numpy as np

from unity_rl.envs.agent_stream import StepResult
from unity_rl.envs.types import AgentKey, DecisionBatch, TerminalBatch
from unity_rl.runtime.collector import TrajectoryCollector

B = "Team?team=0"


def key(i: int, build: int = 0) -> AgentKey:
    return AgentKey(build, B, i)


def result(decisions=(), terminals=(), group=1, build=0) -> StepResult:
    """decisions: [(agent, obs, reward, group_reward)]; terminals: [(agent, obs, reward,
    group_reward, interrupted)]; every agent in ``group`` of ``build``."""
    def obs(rows):
        return [np.array([[v, 10 * v] for v in rows], np.float32).reshape(-1, 2)]

    dec = DecisionBatch([key(a, build) for a, *_ in decisions], obs([d[1] for d in decisions]),
                        np.array([d[2] for d in decisions], np.float32), None,
                        np.full(len(decisions), group, np.int32),
                        np.array([d[3] for d in decisions], np.float32))
    term = TerminalBatch([key(a, build) for a, *_ in terminals], obs([t[1] for t in terminals]),
                         np.array([t[2] for t in terminals], np.float32),
                         np.array([t[4] for t in terminals], bool),
                         np.full(len(terminals), group, np.int32),
                         np.array([t[3] for t in terminals], np.float32))
    return StepResult(dec, term, {})


def act(c: TrajectoryCollector, res: StepResult) -> None:
    """Observes ``res``; each decision row's action is 100 + its first observation value."""
    obs = c.observe(res)
    n = len(res.decisions.keys)
    if n:
        c.record(res.decisions.keys, obs, 100 + obs[:, :1], np.zeros(n, np.float32),
                 np.zeros(n, np.float32))


def test_steps_carry_groupmates_and_a_dead_member_bootstraps_from_the_group():
    c = TrajectoryCollector(time_horizon=100, groups=True)
    act(c, result([(0, 1.0, 0, 0), (1, 2.0, 0, 0), (2, 3.0, 0, 0)]))
    act(c, result([(0, 4.0, 0.1, 0.5), (1, 5.0, 0.2, 0.5), (2, 6.0, 0.3, 0.5)]))
    # agent 2 dies (a real end) while 0 and 1 go on
    act(c, result([(0, 7.0, 1.0, 0.0), (1, 8.0, 2.0, 0.0)],
                  terminals=[(2, 9.0, 3.0, 0.0, False)]))
    (dead,) = c.take()
    assert dead.terminated and dead.group_continues
    g = dead.extras
    # step 0 of agent 2: mates 0 and 1 as they acted at step 0, their rewards after it
    np.testing.assert_array_equal(g.group_obs[0], [[1, 10], [2, 20]])
    np.testing.assert_array_equal(g.group_actions[0], [[101], [102]])
    np.testing.assert_allclose(g.groupmate_rewards, [0.1 + 0.2, 0.1 + 0.2])  # last: stale (ML-Agents)
    np.testing.assert_allclose(g.group_rewards, [0.5, 0.0])
    assert not g.group_dones.any()
    # its last step saw the statuses of the previous message: ML-Agents notes terminal rows
    # before decision rows, so the mates' statuses are still those of step 0
    np.testing.assert_array_equal(g.group_obs[1], [[1, 10], [2, 20]])
    np.testing.assert_array_equal(dead.next_group_obs, [[4, 40], [5, 50]])
    # the two survivors end together later: agent 2 is gone from their groups (NaN-padded)
    act(c, result(terminals=[(0, 10.0, 0, 1.0, False), (1, 11.0, 0, 1.0, False)]))
    a0, a1 = sorted(c.take(), key=lambda t: t.obs[0, 0])
    assert a0.terminated and not a0.group_continues
    assert a0.extras.group_obs.shape == (3, 2, 2)
    np.testing.assert_array_equal(a0.extras.group_obs[1], [[5, 50], [6, 60]])  # step 1: 1, 2
    assert np.isnan(a0.extras.group_obs[2, 1]).all()                          # step 2: only 1
    np.testing.assert_array_equal(a0.extras.group_obs[2, 0], [8, 80])
    np.testing.assert_array_equal(a0.extras.group_dones[2], [True, True])   # 1 done, pad
    np.testing.assert_array_equal(a0.next_group_obs, [[11, 110]])
    np.testing.assert_allclose(a0.extras.group_rewards, [0.5, 0.0, 1.0])
    # group returns: only the agents that ended with their group
    np.testing.assert_allclose(sorted(c.pop_group_returns()), [1.5, 1.5])


def test_groups_are_per_build_and_group_zero_is_alone():
    c = TrajectoryCollector(time_horizon=2, groups=True)
    for step in range(3):
        res0 = result([(0, 1.0 + step, 0, 0), (1, 2.0 + step, 0, 0)], build=0)
        res1 = result([(0, 5.0 + step, 0, 0)], build=1)  # same group id, another build
        merged = StepResult(
            DecisionBatch(res0.decisions.keys + res1.decisions.keys,
                          [np.concatenate([res0.decisions.obs[0], res1.decisions.obs[0]])],
                          np.zeros(3, np.float32), None, np.ones(3, np.int32),
                          np.zeros(3, np.float32)),
            res0.terminals, {})
        act(c, merged)
    trajs = {t.obs[0, 0]: t for t in c.take()}
    assert trajs[1.0].extras.group_obs.shape == (2, 1, 2)  # agent 0 of build 0: agent 1 only
    assert trajs[5.0].extras.group_obs.shape == (2, 0, 2)  # alone in its build's group
    assert trajs[5.0].next_group_obs.shape == (0, 2) and not trajs[5.0].group_continues
    solo = TrajectoryCollector(time_horizon=2, groups=True)
    for step in range(3):
        act(solo, result([(0, 1.0 + step, 0, 0), (1, 2.0 + step, 0, 0)], group=0))
    assert all(t.extras.group_obs.shape[1] == 0 for t in solo.take())


def test_without_groups_nothing_changes():
    c = TrajectoryCollector(time_horizon=2)
    for step in range(3):
        act(c, result([(0, 1.0 + step, 0, 0.5)]))
    (t,) = c.take()
    assert t.extras.group_obs is None and t.next_group_obs is None
    assert c.pop_group_returns() == []


def test_flush_cuts_open_trajectories_with_their_group_end():
    """A segment cut (``unity_rl.trajectory_cuts: segment``) bootstraps with the mates' latest
    observations; the pending step stays to open the next piece."""
    c = TrajectoryCollector(time_horizon=100, groups=True)
    act(c, result([(0, 1.0, 0, 0), (1, 2.0, 0, 0)]))
    act(c, result([(0, 3.0, 0, 0.5), (1, 4.0, 0, 0.5)]))
    trajs = sorted(c.flush(), key=lambda t: t.obs[0, 0])
    assert [len(t.rewards) for t in trajs] == [1, 1]
    np.testing.assert_array_equal(trajs[0].next_group_obs, [[4, 40]])
    assert trajs[0].group_continues and not trajs[0].terminated
    np.testing.assert_allclose(trajs[0].extras.group_rewards, [0.5])
    act(c, result([(0, 5.0, 0, 0), (1, 6.0, 0, 0)]))
    nxt = sorted(c.flush(), key=lambda t: t.obs[0, 0])
    np.testing.assert_array_equal(nxt[0].obs[:, 0], [3.0])
    np.testing.assert_array_equal(nxt[0].extras.group_obs[0], [[4, 40]])


def test_without_groups_the_group_reward_is_added_to_the_reward_with_one_warning(caplog):
    """PPO/SAC/DDPG collectors (groups=False): ML-Agents' extrinsic provider adds GROUP_REWARD
    for every trainer, and warns once; the episode return counts the agent's own reward."""
    c = TrajectoryCollector(time_horizon=100, groups=False)
    with caplog.at_level("WARNING", logger="unity_rl.runtime.collector"):
        act(c, result([(0, 1.0, 0, 0), (1, 2.0, 0, 0)]))
        act(c, result([(0, 4.0, 0.1, 0.5), (1, 5.0, 0.2, 0.5)]))
        act(c, result([(0, 7.0, 1.0, 0.0), (1, 8.0, 2.0, -0.25)]))
        act(c, result(terminals=[(0, 10.0, 0.0, 1.0, False), (1, 11.0, 0.0, 1.0, True)]))
    a0, a1 = sorted(c.take(), key=lambda t: t.obs[0, 0])
    np.testing.assert_allclose(a0.rewards, [0.6, 1.0, 1.0])
    np.testing.assert_allclose(a1.rewards, [0.7, 1.75, 1.0])
    assert a0.extras.group_rewards is None  # no group data without group collection
    assert a0.terminated and not a1.terminated
    np.testing.assert_allclose(sorted(c.episode_returns), [1.1, 2.2])
    warnings = [r for r in caplog.records if "Group Reward" in r.getMessage()]
    assert len(warnings) == 1 and "POCA" in warnings[0].getMessage()
