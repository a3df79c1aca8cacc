"""UnityVecEnv bookkeeping on scripted build answers (no processes): every irregular case."""
from __future__ import annotations

import numpy as np
import pytest

from tests.envs.fake_builds import ScriptedBuilds, obs_of
from unity_rl.envs.vec_env import AgentSetChangedError, DecisionTimingError, UnityVecEnv

D, T = "decision", "terminal"


def make_env(first, scripts, restarts=None):
    builds = ScriptedBuilds(first, scripts, restarts)
    env = UnityVecEnv.from_build_set(builds)
    return env, builds


def test_slots_are_builds_times_agents_in_id_order():
    env, _ = make_env([[5, 3], [7]], [[], []])
    obs, info = env.reset()
    assert env.num_envs == 3
    assert info["agent_id"].tolist() == [3, 5, 7]
    assert info["build"].tolist() == [0, 0, 1]
    assert obs.shape == (3, 2)
    assert obs[:, 0].tolist() == [3, 5, 7]


def test_actions_reach_each_agent_in_the_order_of_its_last_message():
    # Build 0 lists agent 5 before agent 3 in its reset answer; slots are id-ordered.
    env, builds = make_env([[5, 3]], [[[(3, D, 0.1, False), (5, D, 0.1, False)]]])
    env.reset()
    env.step(np.array([[0.3], [0.5]], np.float32))  # slot 0 = agent 3, slot 1 = agent 5
    _, actions = builds.sent[0]
    sent = next(iter(actions.values())).continuous[:, 0]
    assert sent.tolist() == pytest.approx([0.5, 0.3])  # agent 5 first, as Unity listed them


def test_terminal_only_message_is_absorbed_and_other_agents_undisturbed():
    script = [
        [(1, T, -1.0, False)],                         # terminal only: agent 1 fell
        [(1, D, 0.0, False), (2, D, 0.1, False)],      # next decision step for both
    ]
    env, builds = make_env([[1, 2]], [script])
    env.reset()
    obs, reward, terminated, truncated, info = env.step(np.zeros((2, 1), np.float32))
    assert terminated.tolist() == [True, False]
    assert truncated.tolist() == [False, False]
    assert reward.tolist() == pytest.approx([-1.0, 0.1])
    assert info["_final_obs"].tolist() == [True, False]
    assert info["final_obs"][0].tolist() == obs_of(1, 1).tolist()
    assert obs[0].tolist() == obs_of(1, 2).tolist()  # first obs of agent 1's new episode
    assert obs[1].tolist() == obs_of(2, 2).tolist()
    assert len(builds.sent) == 2  # one with actions, one empty step to absorb the terminal
    assert builds.sent[1][1] == {}


def test_terminal_and_decision_of_one_agent_in_the_same_message():
    env, _ = make_env([[1, 2]], [[[(1, T, -1.0, False), (1, D, 0.7, False), (2, D, 0.1, False)]]])
    env.reset()
    obs, reward, terminated, _, info = env.step(np.zeros((2, 1)))
    assert terminated.tolist() == [True, False]
    # The reward of the new episode's first decision has no action behind it: dropped.
    assert reward.tolist() == pytest.approx([-1.0, 0.1])
    assert info["final_info"]["episode"]["r"][0] == pytest.approx(-1.0)
    assert info["final_info"]["_episode"].tolist() == [True, False]


def test_interrupted_is_truncated_and_episode_stats_accumulate():
    script = [[(1, D, 0.1, False)], [(1, D, 0.1, False)], [(1, T, 0.1, True), (1, D, 0.0, False)]]
    env, _ = make_env([[1]], [script])
    env.reset()
    env.step(np.zeros((1, 1)))
    env.step(np.zeros((1, 1)))
    _, _, terminated, truncated, info = env.step(np.zeros((1, 1)))
    assert terminated.tolist() == [False] and truncated.tolist() == [True]
    assert info["final_info"]["episode"]["r"][0] == pytest.approx(0.3)
    assert info["final_info"]["episode"]["l"][0] == 3


def test_agents_deciding_at_different_steps_raise_a_clear_error():
    env, _ = make_env([[1, 2]], [[[(1, D, 0.1, False)]]])
    env.reset()
    with pytest.raises(DecisionTimingError, match="AgentStream"):
        env.step(np.zeros((2, 1)))


def test_late_agent_raises_a_clear_error():
    env, _ = make_env([[1]], [[[(1, D, 0.1, False), (9, D, 0.0, False)]]])
    env.reset()
    with pytest.raises(AgentSetChangedError, match=r"\[9\].*AgentStream"):
        env.step(np.zeros((1, 1)))


def test_restarted_build_truncates_only_its_slots():
    scripts = [
        [[(1, D, 0.1, False)]],
        [[(4, D, 0.0, False)]],   # the fresh build's reset answer
    ]
    env, _ = make_env([[1], [4]], scripts, restarts={(1, 1): "it exited"})
    env.reset()
    _, _, terminated, truncated, info = env.step(np.zeros((2, 1)))
    assert truncated.tolist() == [False, True]
    assert terminated.tolist() == [False, False]
    assert info["build_restarted"].tolist() == [False, True]
    assert info["final_info"]["build_restarted"][1]
    assert info["final_obs"][1].tolist() == obs_of(4, 0).tolist()  # last obs before the crash


def test_close_is_idempotent_and_context_manager_closes():
    env, builds = make_env([[1]], [[]])
    with env:
        env.reset()
    assert builds.closed
    env.close()
