"""AgentStream through the stand-in builds: per-agent timing, late agents, restarts."""
from __future__ import annotations

import numpy as np
import psutil
import pytest

from tests.conftest import BUILDS_DIR
from unity_rl import AgentKey, AgentStream
from unity_rl.envs.launcher import RestartQuota

BALL = str(BUILDS_DIR / "3DBall")


def random_actions(result, rng):
    return rng.uniform(-1, 1, (len(result.decisions.keys), 2)).astype(np.float32)


@pytest.mark.slow
def test_keys_identify_build_behavior_and_agent(free_base_port):
    with AgentStream(BALL, num_builds=2, base_port=free_base_port(2), timeout_wait=30) as stream:
        result = stream.reset()
        keys = result.decisions.keys
        assert len(keys) == 24 and len(set(keys)) == 24
        assert {k.build for k in keys} == {0, 1}
        assert all(isinstance(k, AgentKey) and k.behavior == "3DBall?team=0" for k in keys)
        assert result.decisions.obs[0].shape == (24, 8)


@pytest.mark.slow
def test_terminal_only_results_and_terminal_plus_decision(free_base_port):
    rng = np.random.default_rng(0)
    terminal_only = both = 0
    with AgentStream(BALL, base_port=free_base_port(1), timeout_wait=30, seed=4) as stream:
        result = stream.reset()
        for _ in range(600):
            result = stream.step(random_actions(result, rng))
            ended = set(result.terminals.keys)
            if ended and not result.decisions.keys:
                terminal_only += 1
            both += len(ended & set(result.decisions.keys))
    assert terminal_only > 0, "balls falling between decision steps give terminal-only messages"
    assert both > 0, "a fall just before a decision step gives terminal + decision at once"


def test_different_decision_periods_are_followed(free_base_port):
    rng = np.random.default_rng(0)
    counts: dict[int, int] = {}
    with AgentStream(BALL, base_port=free_base_port(1), timeout_wait=30,
                     env_args=["--standin-agents", "2", "--standin-decision-periods", "5,3",
                               "--standin-max-step", "0"]) as stream:
        result = stream.reset()
        for _ in range(60):
            for key in result.decisions.keys:
                counts[key.agent_id] = counts.get(key.agent_id, 0) + 1
            result = stream.step(random_actions(result, rng))
    fast, slow = sorted(counts.values(), reverse=True)
    assert fast > slow * 1.4, counts


def test_late_agent_appears(free_base_port):
    rng = np.random.default_rng(0)
    with AgentStream(BALL, base_port=free_base_port(1), timeout_wait=30,
                     env_args=["--standin-agents", "3", "--standin-late-agents", "1@50"]) as stream:
        result = stream.reset()
        first = {k.agent_id for k in result.decisions.keys}
        seen = set(first)
        for _ in range(40):
            result = stream.step(random_actions(result, rng))
            seen |= {k.agent_id for k in result.decisions.keys}
    assert len(first) == 2 and len(seen) == 3


@pytest.mark.slow
def test_restart_reports_cut_episodes_for_that_build_only(free_base_port):
    rng = np.random.default_rng(0)
    quota = RestartQuota(max_lifetime_restarts=2, rate_limit_n=-1)
    with AgentStream(BALL, num_builds=2, base_port=free_base_port(2), timeout_wait=30,
                     restart_quota=quota) as stream:
        result = stream.reset()
        result = stream.step(random_actions(result, rng))
        psutil.Process(stream.builds.pids()[1]).kill()
        result = stream.step(random_actions(result, rng))
        assert set(result.restarted) == {1}
        cut = [k for k, i in zip(result.terminals.keys, result.terminals.interrupted) if i]
        assert len(cut) == 12 and {k.build for k in cut} == {1}
        assert {k.build for k in result.decisions.keys} >= {1}
