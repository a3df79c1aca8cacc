"""MultiBehaviorVecEnv on the TwoBehaviors stand-in (3DBall every 5 steps, Basic every step)."""
from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from tests.conftest import BUILDS_DIR
from unity_rl import AgentStream
from unity_rl.envs.agent_stream import ALL_BEHAVIORS
from unity_rl.envs.multi_vec_env import DecisionTimingError, MultiBehaviorVecEnv

TWO = str(BUILDS_DIR / "TwoBehaviors")
BALL, BASIC = "3DBall?team=0", "Basic?team=0"
RIGHT = 2


def actions_for(env, ready):
    out = {}
    if BALL in ready:
        out[BALL] = np.zeros((env.num_envs[BALL], 2), np.float32)
    if BASIC in ready:
        out[BASIC] = np.full(env.num_envs[BASIC], RIGHT)
    return out


@pytest.mark.slow
def test_dicts_per_behavior_and_only_deciding_behaviors_per_step(free_base_port):
    with MultiBehaviorVecEnv(TWO, num_builds=2, base_port=free_base_port(2),
                             timeout_wait=30) as env:
        assert env.behavior_names == [BALL, BASIC]
        assert env.num_envs == {BALL: 8, BASIC: 4}
        assert env.single_action_spaces[BASIC] == spaces.Discrete(3)
        assert env.single_action_spaces[BALL].shape == (2,)
        assert env.single_observation_spaces[BASIC].shape == (20,)
        assert env.observation_spaces[BALL].shape == (8, 8)
        obs, infos = env.reset()
        assert set(obs) == set(infos) == {BALL, BASIC} == set(env.ready_behaviors)
        assert obs[BALL].shape == (8, 8) and obs[BASIC].shape == (4, 20)
        assert (obs[BASIC].argmax(axis=1) == 10).all()
        assert infos[BASIC]["action_mask"].shape == (4, 3)
        assert infos[BALL]["build"].tolist() == [0] * 4 + [1] * 4
        with pytest.raises(KeyError, match="exactly the behaviors"):
            env.step({BASIC: np.zeros(4, int)})
        ready = env.ready_behaviors
        seen = []
        for t in range(1, 8):
            obs, rewards, terminated, truncated, infos = env.step(actions_for(env, ready))
            ready = env.ready_behaviors
            seen.append(sorted(obs))
            assert set(obs) == set(rewards) == set(terminated) == set(truncated) == set(infos)
            assert set(obs) == set(ready)
            for name in ready:
                assert rewards[name].shape == (env.num_envs[name],)
            if t < 7:
                assert not terminated[BASIC].any()
                assert np.allclose(rewards[BASIC], -0.01)
        # Basic decides at every step, 3DBall at steps 5, 10, ...
        assert seen[:5] == [[BASIC]] * 4 + [[BALL, BASIC]]
        # Walking right from cell 10 reaches 17 at the 7th step: SAME_STEP autoreset.
        assert terminated[BASIC].all() and not truncated[BASIC].any()
        assert np.allclose(rewards[BASIC], 0.99)
        final = infos[BASIC]["final_info"]
        assert np.allclose(final["episode"]["r"], 0.93) and (final["episode"]["l"] == 7).all()
        assert (np.stack(infos[BASIC]["final_obs"]).argmax(axis=1) == 17).all()
        assert (obs[BASIC].argmax(axis=1) == 10).all(), "first observation of the next episode"


def test_3dball_rewards_accumulate_over_the_steps_it_skips(free_base_port):
    with MultiBehaviorVecEnv(TWO, base_port=free_base_port(1), timeout_wait=30) as env:
        env.reset()
        ready = env.ready_behaviors
        for _ in range(5):
            _, rewards, _, _, _ = env.step(actions_for(env, ready))
            ready = env.ready_behaviors
        assert BALL in ready
        # 3DBall: SetReward(0.1) per decision while the ball stays on (zero actions: it does).
        assert np.allclose(rewards[BALL], 0.1)


def test_from_stream_and_misaligned_agents_raise(free_base_port):
    stream = AgentStream(TWO, base_port=free_base_port(1), timeout_wait=30,
                         behaviors=ALL_BEHAVIORS)
    with MultiBehaviorVecEnv.from_stream(stream) as env:
        obs, _ = env.reset()
        assert set(obs) == {BALL, BASIC}
    with MultiBehaviorVecEnv(TWO, base_port=free_base_port(1), timeout_wait=30,
                             env_args=["--standin-decision-periods", "1,2"]) as env:
        env.reset()
        with pytest.raises(DecisionTimingError, match="step_all"):
            ready = env.ready_behaviors
            for _ in range(3):
                env.step(actions_for(env, ready))
                ready = env.ready_behaviors
