"""AgentStream over several behaviors (TwoBehaviors stand-in) and the other_behaviors rule."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import BUILDS_DIR
from unity_rl import AgentStream, UnityVecEnv
from unity_rl.envs.agent_stream import ALL_BEHAVIORS
from unity_rl.envs.behavior import BehaviorNotFoundError, UnselectedBehaviorError

TWO = str(BUILDS_DIR / "TwoBehaviors")
BALL, BASIC = "3DBall?team=0", "Basic?team=0"
RIGHT = 2


def all_actions(results):
    ball = results[BALL].decisions
    basic = results[BASIC].decisions
    return {BALL: np.zeros((len(ball.keys), 2), np.float32),
            BASIC: np.full(len(basic.keys), RIGHT)}


@pytest.mark.slow
def test_all_behaviors_step_every_build_once_and_route_actions(free_base_port):
    with AgentStream(TWO, num_builds=2, base_port=free_base_port(2), timeout_wait=30,
                     behaviors=ALL_BEHAVIORS) as stream:
        assert stream.behavior_names == [BALL, BASIC]
        assert stream.specs[BASIC].action_spec.discrete_branches == (3,)
        with pytest.raises(AttributeError, match="several behaviors"):
            _ = stream.spec
        results = stream.reset_all()
        assert set(results) == {BALL, BASIC}
        assert len(results[BALL].decisions.keys) == 8 and len(results[BASIC].decisions.keys) == 4
        assert {k.behavior for k in results[BASIC].decisions.keys} == {BASIC}
        ball_empty = goal_rewards = 0
        for _ in range(12):
            results = stream.step_all(all_actions(results))
            assert set(results) == {BALL, BASIC}
            assert results[BALL].restarted is results[BASIC].restarted
            ball_empty += len(results[BALL].decisions.keys) == 0
            term = results[BASIC].terminals
            goal_rewards += int(np.sum(np.isclose(term.reward, 0.99)))
        assert ball_empty >= 8, "3DBall decides every 5 steps, Basic every step"
        assert goal_rewards == 4, "walking right from cell 10 reaches 17 (+1 - 0.01) in 7 steps"


def test_behaviors_by_short_and_full_name_and_errors(free_base_port):
    port = free_base_port(1)
    with AgentStream(TWO, base_port=port, timeout_wait=30, behaviors=["Basic", BALL]) as stream:
        assert stream.behavior_names == [BALL, BASIC]
    with pytest.raises(ValueError, match="not both"):
        AgentStream(TWO, base_port=port, behavior_name="Basic", behaviors=["Basic"])
    with pytest.raises(BehaviorNotFoundError, match="Nope"):
        AgentStream(TWO, base_port=port, timeout_wait=30, behaviors=["Basic", "Nope"])


def test_unselected_behavior_is_an_error_by_default(free_base_port):
    with pytest.raises(UnselectedBehaviorError) as err:
        AgentStream(TWO, base_port=free_base_port(1), timeout_wait=30, behaviors=["3DBall"])
    message = str(err.value)
    assert BASIC in message and "behaviors=" in message and "other_behaviors='zeros'" in message


def test_unselected_behavior_gets_zeros_when_asked(free_base_port, caplog):
    with caplog.at_level("INFO", logger="unity_rl.envs.behavior"):
        with AgentStream(TWO, base_port=free_base_port(1), timeout_wait=30,
                         behavior_name="3DBall", other_behaviors="zeros") as stream:
            assert stream.behavior_names == [BALL] and list(stream.specs) == [BALL]
            result = stream.reset()
            for _ in range(10):
                result = stream.step(np.zeros((len(result.decisions.keys), 2), np.float32))
    zero_logs = [r for r in caplog.records if "zero actions" in r.getMessage()]
    assert len(zero_logs) == 1 and BASIC in zero_logs[0].getMessage()


def test_vec_env_other_behaviors(free_base_port):
    port = free_base_port(1)
    with pytest.raises(UnselectedBehaviorError, match="Basic"):
        UnityVecEnv(TWO, base_port=port, timeout_wait=30, behavior_name="3DBall")
    with UnityVecEnv(TWO, base_port=port, timeout_wait=30, behavior_name="3DBall",
                     other_behaviors="zeros") as env:
        env.reset()
        for _ in range(3):
            obs, *_ = env.step(np.zeros((4, 2), np.float32))
        assert obs.shape == (4, 8)
