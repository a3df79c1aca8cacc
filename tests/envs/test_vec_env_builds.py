"""UnityVecEnv through the real mlagents-envs path and the stand-in builds."""
from __future__ import annotations

import numpy as np
import psutil
import pytest
from gymnasium import spaces
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from tests.conftest import BUILDS_DIR
from unity_rl import UnityVecEnv
from unity_rl.envs.behavior import BehaviorNotFoundError
from unity_rl.envs.launcher import BuildFailedError, RestartQuota
from unity_rl.envs.vec_env import DecisionTimingError

BALL = str(BUILDS_DIR / "3DBall")


def listening_ports() -> set[int]:
    me = psutil.Process()
    return {c.laddr.port for c in me.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def test_3dball_spaces_slots_and_random_episodes(free_base_port, tmp_path):
    with UnityVecEnv(BALL, base_port=free_base_port(1), timeout_wait=30,
                     log_dir=str(tmp_path)) as env:
        assert env.num_envs == 12
        assert env.behavior_name == "3DBall?team=0"
        assert env.single_observation_space == spaces.Box(-np.inf, np.inf, (8,), np.float32)
        assert env.single_action_space == spaces.Box(-1, 1, (2,), np.float32)
        obs, info = env.reset()
        assert obs.shape == (12, 8) and np.isfinite(obs).all()
        assert sorted(info["agent_id"].tolist()) == info["agent_id"].tolist()
        env.action_space.seed(1)
        ended = 0
        for _ in range(150):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert obs.shape == (12, 8) and reward.shape == (12,)
            if terminated.any():
                ended += int(terminated.sum())
                assert info["_final_obs"][terminated].all()
                assert reward[terminated] == pytest.approx(-1.0)  # the ball fell
                lengths = info["final_info"]["episode"]["l"][terminated]
                assert (lengths >= 1).all()
        assert ended > 0, "random actions should drop some balls within 150 decisions"
    assert (tmp_path / "Player-0.log").exists()


def test_record_episode_statistics_wrapper(free_base_port):
    env = RecordEpisodeStatistics(UnityVecEnv(BALL, base_port=free_base_port(1),
                                              timeout_wait=30))
    try:
        env.reset(seed=3)
        env.action_space.seed(3)
        for _ in range(100):
            env.step(env.action_space.sample())
        assert len(env.return_queue) > 0
    finally:
        env.close()


@pytest.mark.slow
def test_builds_listen_on_distinct_ports(free_base_port):
    base = free_base_port(4)
    with UnityVecEnv(BALL, num_builds=2, base_port=base, worker_id_start=2,
                     timeout_wait=30) as env:
        assert env.num_envs == 24
        assert {base + 2, base + 3} <= listening_ports()
        _, info = env.reset()
        assert info["build"].tolist() == [0] * 12 + [1] * 12
        env.step(env.action_space.sample())


def test_one_agent_balancing_is_not_disturbed_by_others_ending(free_base_port):
    """Slot 0 holds its platform level-ish while every other slot acts randomly and falls."""
    with UnityVecEnv(BALL, base_port=free_base_port(1), timeout_wait=30,
                     env_args=["--standin-agents", "4"]) as env:
        obs, _ = env.reset()
        env.action_space.seed(0)
        previous = obs[0].copy()
        others_ended = 0
        for _ in range(120):
            action = env.action_space.sample()
            action[0] = 0.0  # agent 0: no rotation; its ball keeps its own smooth motion
            obs, _, terminated, truncated, _ = env.step(action)
            others_ended += int(terminated[1:].sum())
            if terminated[0] or truncated[0]:
                break
            # ball position relative to the platform moves by a bounded amount per decision
            assert np.abs(obs[0][2:5] - previous[2:5]).max() < 1.0
            previous = obs[0].copy()
        assert others_ended > 0


def test_two_behavior_build_requires_a_name(free_base_port):
    with pytest.raises(BehaviorNotFoundError, match="several behaviors"):
        UnityVecEnv(str(BUILDS_DIR / "TwoBehaviors"), base_port=free_base_port(1),
                    timeout_wait=30)
    with pytest.raises(BehaviorNotFoundError, match="is not in the build"):
        UnityVecEnv(str(BUILDS_DIR / "TwoBehaviors"), base_port=free_base_port(1),
                    timeout_wait=30, behavior_name="NoSuchBehavior")


def test_discrete_basic_has_mask(free_base_port):
    # Starting on cell 0, Basic masks "left" (action 1) there.
    with UnityVecEnv(str(BUILDS_DIR / "Basic"), base_port=free_base_port(1), timeout_wait=30,
                     env_args=["--standin-basic-start", "0"]) as env:
        assert env.single_action_space == spaces.Discrete(3)
        _, info = env.reset()
        assert info["action_mask"].shape == (env.num_envs, 3)
        assert info["action_mask"].dtype == bool
        assert info["action_mask"][0].tolist() == [True, False, True]
        _, _, _, _, info = env.step(np.full(env.num_envs, 2, np.int64))  # move right
        assert info["action_mask"][0].tolist() == [True, True, True]


def test_visual_observation_is_uint8_chw(free_base_port):
    with UnityVecEnv(str(BUILDS_DIR / "VisualBall"), base_port=free_base_port(1),
                     timeout_wait=30) as env:
        obs, _ = env.reset()
        space = env.single_observation_space
        boxes = space.spaces.values() if isinstance(space, spaces.Dict) else [space]
        images = [b for b in boxes if len(b.shape) == 3]
        assert images and images[0].dtype == np.uint8 and images[0].shape[0] in (1, 3)
        assert env.observation_space.contains(obs)
        env.step(env.action_space.sample())


def test_different_decision_periods_raise_timing_error(free_base_port):
    with UnityVecEnv(BALL, base_port=free_base_port(1), timeout_wait=30,
                     env_args=["--standin-agents", "2",
                               "--standin-decision-periods", "5,3"]) as env:
        env.reset()
        with pytest.raises(DecisionTimingError, match="AgentStream"):
            for _ in range(5):
                env.step(env.action_space.sample())


@pytest.mark.slow
def test_same_seed_same_start_different_seed_differs(free_base_port):
    with UnityVecEnv(BALL, base_port=free_base_port(1), timeout_wait=30) as env:
        a, _ = env.reset(seed=11)
        b, _ = env.reset(seed=11)
        c, _ = env.reset(seed=12)
    np.testing.assert_allclose(a, b)
    assert not np.allclose(a, c)


@pytest.mark.slow
def test_killed_build_is_restarted_alone(free_base_port):
    quota = RestartQuota(max_lifetime_restarts=3, rate_limit_n=-1)
    with UnityVecEnv(BALL, num_builds=2, base_port=free_base_port(2), timeout_wait=30,
                     restart_quota=quota) as env:
        env.reset()
        for _ in range(3):
            env.step(env.action_space.sample())
        lengths_before = None
        victim = psutil.Process(env.builds.pids()[1])
        victim.kill()
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        assert truncated[12:].all() and not terminated[12:].any()
        assert info["build_restarted"][12:].all() and not info["build_restarted"][:12].any()
        assert not truncated[:12].any()
        assert env.builds.restart_count == [0, 1]
        assert psutil.wait_procs([victim], timeout=15)[1] == []   # gone (not a zombie either)
        del lengths_before
        env.step(env.action_space.sample())


@pytest.mark.slow
def test_hung_build_is_restarted(free_base_port):
    quota = RestartQuota(max_lifetime_restarts=3, rate_limit_n=-1)
    with UnityVecEnv(BALL, num_builds=2, base_port=free_base_port(2), timeout_wait=30,
                     step_timeout=2.0, restart_quota=quota) as env:
        env.reset()
        victim = psutil.Process(env.builds.pids()[0])
        victim.suspend()
        _, _, _, truncated, info = env.step(env.action_space.sample())
        assert truncated[:12].all() and not truncated[12:].any()
        assert env.builds.restart_count == [1, 0]
        assert psutil.wait_procs([victim], timeout=15)[1] == []   # gone (not a zombie either)


@pytest.mark.slow
def test_restart_quota_spent_is_a_clear_error(free_base_port):
    quota = RestartQuota(max_lifetime_restarts=0, rate_limit_n=-1)
    with UnityVecEnv(BALL, base_port=free_base_port(1), timeout_wait=30,
                     restart_quota=quota) as env:
        env.reset()
        psutil.Process(env.builds.pids()[0]).kill()
        with pytest.raises(BuildFailedError, match=r"Build 0 \(port \d+\).*lifetime restarts"):
            env.step(env.action_space.sample())


@pytest.mark.slow
def test_environment_parameters_reach_the_build(free_base_port):
    """With gravity 0 no ball falls under random actions; with the default some do."""
    def falls(env_parameters):
        with UnityVecEnv(BALL, base_port=free_base_port(1), timeout_wait=30, seed=2,
                         env_parameters=env_parameters) as env:
            env.reset()
            env.action_space.seed(2)
            return sum(int(env.step(env.action_space.sample())[2].sum()) for _ in range(120))
    assert falls({"gravity": 0.0}) == 0
    assert falls(None) > 0
