"""UnityParallelEnv (PettingZoo ParallelEnv view) through the real stand-ins."""
from __future__ import annotations

import importlib
import sys
import warnings

import numpy as np
import pytest
from gymnasium import spaces

pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test  # noqa: E402

from tests.conftest import BUILDS_DIR  # noqa: E402
from unity_rl.envs.pettingzoo_env import DecisionTimingError, UnityParallelEnv  # noqa: E402
from unity_rl.testing import MockBehavior, MockObservation, mock_build  # noqa: E402

BASIC = str(BUILDS_DIR / "Basic")
BALL = str(BUILDS_DIR / "3DBall")
TWO = str(BUILDS_DIR / "TwoBehaviors")
NOTHING, LEFT, RIGHT = 0, 1, 2


def random_run(env, steps, seed=0):
    """Random actions (masks respected) for ``steps`` steps, checking the per-agent episode
    rules at every step. Returns the ends as (agent, "terminated"|"truncated", episode)."""
    rng = np.random.default_rng(seed)
    for agent in env.possible_agents:
        env.action_space(agent).seed(int(rng.integers(1 << 30)))
    ends = []
    ended = set()        # ended and not seen deciding since
    masks = {}
    obs, infos = env.reset()
    for agent in env.agents:
        masks[agent] = infos[agent].get("action_mask")
    for _ in range(steps):
        actions = {}
        for agent in env.agents:
            space = env.action_space(agent)
            mask = masks.get(agent)
            actions[agent] = (space.sample(mask=mask.astype(np.int8))
                              if mask is not None and isinstance(space, spaces.Discrete)
                              else space.sample())
        obs, rewards, terms, truncs, infos = env.step(actions)
        assert set(obs) == set(rewards) == set(terms) == set(truncs) == set(infos)
        assert set(env.agents) <= set(obs), "every agent that must act got an observation"
        assert set(env.agents) <= set(env.possible_agents)
        for agent in obs:
            assert env.observation_space(agent).contains(obs[agent]), agent
            assert env.observation_space(agent) is env.observation_space(agent)
            if terms[agent] or truncs[agent]:
                assert not (terms[agent] and truncs[agent])
                assert agent not in ended, f"{agent}: one episode end reported twice"
                assert agent not in env.agents
                ended.add(agent)
                ends.append((agent, "terminated" if terms[agent] else "truncated",
                             infos[agent]["episode"]))
            else:
                assert agent in env.agents
                ended.discard(agent)  # back with its fresh observation
                masks[agent] = infos[agent].get("action_mask")
    return ends


def test_basic_spaces_names_masks_and_goal_end(free_base_port):
    with UnityParallelEnv(BASIC, base_port=free_base_port(1), timeout_wait=30,
                          env_args=["--standin-basic-start", "0"]) as env:
        obs, infos = env.reset()
        (agent,) = env.possible_agents
        assert agent == "Basic/0/0" and env.agents == [agent]
        assert env.observation_space(agent) == spaces.Box(-np.inf, np.inf, (20,), np.float32)
        assert env.action_space(agent) == spaces.Discrete(3)
        assert obs[agent].dtype == np.float32 and obs[agent].argmax() == 0
        assert infos[agent]["action_mask"].tolist() == [True, False, True]  # no "left" on 0
        assert infos[agent] | {"action_mask": None} == {
            "behavior": "Basic?team=0", "build": 0, "agent_id": 0, "action_mask": None,
            "group_id": 0, "group_reward": 0.0}  # Basic has no SimpleMultiAgentGroup
        with pytest.raises(KeyError, match="exactly"):
            env.step({})
        with pytest.raises(KeyError, match="exactly"):
            env.step({agent: 0, "Basic/0/7": 0})
        # Right from cell 0 to the goal at 7: 7 actions, -0.01 each, +1 at the goal.
        for t in range(1, 8):
            obs, rewards, terms, truncs, infos = env.step({agent: RIGHT})
            if t < 7:
                assert obs[agent].argmax() == t and not terms[agent]
                assert rewards[agent] == pytest.approx(-0.01)
                assert infos[agent]["action_mask"].all()
        assert terms[agent] and not truncs[agent]
        assert obs[agent].argmax() == 7, "the final observation"
        assert rewards[agent] == pytest.approx(0.09)
        assert infos[agent]["episode"] == {"r": pytest.approx(0.03), "l": 7}
        # The new episode's first decision came in the same message: revival step.
        assert env.agents == [] and env.live_agents == [agent]
        obs, rewards, terms, truncs, infos = env.step({})
        assert env.agents == [agent] and obs[agent].argmax() == 0, "fresh observation kept"
        assert rewards[agent] == 0.0 and not terms[agent] and not truncs[agent]
        assert infos[agent]["action_mask"].tolist() == [True, False, True]
        obs, *_ = env.step({agent: RIGHT})
        assert obs[agent].argmax() == 1


def test_basic_max_step_truncates_and_random_episodes(free_base_port):
    with UnityParallelEnv(BASIC, base_port=free_base_port(1), timeout_wait=30,
                          env_args=["--standin-max-step", "5"]) as env:
        env.reset()
        (agent,) = env.agents
        ends = []
        for _ in range(30):
            obs, rewards, terms, truncs, infos = env.step({a: NOTHING for a in env.agents})
            if truncs.get(agent):
                assert not terms[agent] and obs[agent].argmax() == 10
                ends.append(infos[agent]["episode"])
        assert len(ends) == 5 and all(e["l"] == 5 for e in ends)
        assert all(e["r"] == pytest.approx(-0.05) for e in ends)
        ends = random_run(env, 300, seed=1)
        kinds = {kind for _, kind, _ in ends}
        assert kinds == {"terminated", "truncated"}  # goals and MaxStep 5 both happen
        assert all(ep["l"] <= 5 for _, _, ep in ends)
        assert all(ep["l"] == 5 for _, kind, ep in ends if kind == "truncated")


@pytest.mark.slow
def test_3dball_two_builds_random_episodes(free_base_port):
    with UnityParallelEnv(BALL, num_builds=2, base_port=free_base_port(2),
                          timeout_wait=30) as env:
        obs, infos = env.reset()
        assert env.agents == env.possible_agents == (
            [f"3DBall/0/{i}" for i in range(12)] + [f"3DBall/1/{i}" for i in range(12)])
        assert env.action_space("3DBall/1/3") == spaces.Box(-1, 1, (2,), np.float32)
        assert env.observation_space("3DBall/1/3").shape == (8,)
        assert "action_mask" not in infos["3DBall/0/0"]
        ends = random_run(env, 150, seed=2)
        assert len(ends) > 24 and {kind for _, kind, _ in ends} == {"terminated"}
        # 0.1 per decision, then -1 for the fall (SetReward: the fall replaces the 0.1).
        for _, _, ep in ends:
            assert ep["r"] == pytest.approx(0.1 * (ep["l"] - 1) - 1.0, abs=1e-4)
        assert len({a for a, _, _ in ends}) > 12
        counts = [sum(a == b for b, _, _ in ends) for a in env.possible_agents]
        assert max(counts) >= 2, "agents come back after their episode ends"
        assert env.live_agents == env.possible_agents or env.agents == []


def strict_api_test(env, num_cycles):
    """pettingzoo's parallel_api_test, its warnings (soft failures) made errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        parallel_api_test(env, num_cycles=num_cycles)


def test_parallel_api_test_basic_and_3dball_without_revival(free_base_port):
    with UnityParallelEnv(BASIC, base_port=free_base_port(1), timeout_wait=30) as env:
        strict_api_test(env, num_cycles=200)  # stops once the only agent's episode ends
    with UnityParallelEnv(BALL, base_port=free_base_port(1), timeout_wait=30,
                          revive=False) as env:
        strict_api_test(env, num_cycles=300)
        assert env.agents == [] and env.live_agents == []
        assert env.step({}) == ({}, {}, {}, {}, {})  # every agent is out until reset()
        env.reset()
        assert len(env.agents) == 12


@pytest.mark.slow
def test_two_behaviors_decide_at_their_own_periods(free_base_port):
    with UnityParallelEnv(TWO, base_port=free_base_port(1), timeout_wait=30) as env:
        obs, infos = env.reset()
        ball = [f"3DBall/0/{i}" for i in range(4)]
        basic = ["Basic/0/4", "Basic/0/5"]
        assert env.agents == ball + basic
        assert env.action_space(ball[0]).shape == (2,)
        assert env.action_space(basic[0]) == spaces.Discrete(3)
        assert infos[ball[0]]["behavior"] == "3DBall?team=0"
        for t in range(1, 11):
            obs, rewards, *_ = env.step({a: (NOTHING if a in basic else np.zeros(2))
                                         for a in env.agents})
            assert env.agents == (ball + basic if t % 5 == 0 else basic)
            assert env.live_agents == ball + basic
            if t % 5 == 0:
                assert all(rewards[a] == pytest.approx(0.1) for a in ball)  # per decision
        ends = random_run(env, 200, seed=3)
        assert {a.split("/")[0] for a, _, _ in ends} == {"3DBall", "Basic"}
        # Agents of a behavior that skips a step leave `agents` without ending: PettingZoo's
        # own checker rejects that (the documented relaxation): it looks up terminations
        # of every agent it saw alive.
        with pytest.raises((AssertionError, KeyError)), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            parallel_api_test(env, num_cycles=10)


def test_misaligned_agents_of_one_behavior_raise(free_base_port):
    with UnityParallelEnv(BALL, base_port=free_base_port(1), timeout_wait=30,
                          env_args=["--standin-decision-periods", "5,3"]) as env:
        env.reset()
        with pytest.raises(DecisionTimingError, match="AgentStream"):
            env.step({a: np.zeros(2, np.float32) for a in env.agents})


def test_late_agents_grow_possible_agents(free_base_port):
    with UnityParallelEnv(BALL, base_port=free_base_port(1), timeout_wait=30,
                          env_args=["--standin-late-agents", "2@12"]) as env:
        env.reset()
        assert len(env.possible_agents) == 10
        for _ in range(4):
            env.step({a: np.zeros(2, np.float32) for a in env.agents})
        assert env.possible_agents[10:] == ["3DBall/0/10", "3DBall/0/11"]
        assert set(env.agents) == set(env.possible_agents)


def test_shared_short_names_dict_obs_and_hybrid_actions(tmp_path, free_base_port):
    path = mock_build(tmp_path, [
        MockBehavior("Soccer?team=0", agents=2, continuous=2, branches=(3,),
                     observations=(MockObservation((4,)), MockObservation((3,)))),
        MockBehavior("Soccer?team=1", agents=1, branches=(3, 2), masks=True),
    ])
    with UnityParallelEnv(str(path), base_port=free_base_port(1), timeout_wait=30) as env:
        obs, infos = env.reset()
        assert env.agents == ["Soccer?team=0/0/0", "Soccer?team=0/0/1", "Soccer?team=1/0/2"]
        hybrid = env.action_space("Soccer?team=0/0/0")
        assert isinstance(hybrid, spaces.Dict) and set(hybrid) == {"continuous", "discrete"}
        assert env.action_space("Soccer?team=1/0/2") == spaces.MultiDiscrete([3, 2])
        assert isinstance(env.observation_space("Soccer?team=0/0/1"), spaces.Dict)
        assert env.observation_space("Soccer?team=0/0/1").contains(obs["Soccer?team=0/0/1"])
        assert infos["Soccer?team=1/0/2"]["action_mask"].shape == (5,)
        ends = random_run(env, 150, seed=4)
        assert ends


def test_seeded_reset_relaunches(free_base_port):
    with UnityParallelEnv(BASIC, base_port=free_base_port(1), timeout_wait=30) as env:
        pid = env.stream.builds.pids()
        obs, _ = env.reset(seed=0)  # the construction seed: no relaunch
        assert env.stream.builds.pids() == pid
        obs, _ = env.reset(seed=7)
        assert env.stream.builds.pids() != pid and env.agents == ["Basic/0/0"]
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_import_without_pettingzoo_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    monkeypatch.delitem(sys.modules, "unity_rl.envs.pettingzoo_env")
    with pytest.raises(ImportError, match="pip install pettingzoo"):
        importlib.import_module("unity_rl.envs.pettingzoo_env")
