"""Groups through the adapter: ``group_id`` and ``group_reward`` of every agent step in
AgentStream, UnityVecEnv / MultiBehaviorVecEnv infos and the PettingZoo view, on the
PushBlockCollab stand-in (4 groups of 3, a group penalty of -0.5/5000 per academy step) through
the real UnityEnvironment."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tests.conftest import BUILDS_DIR
from unity_rl import AgentStream
from unity_rl.envs.multi_vec_env import MultiBehaviorVecEnv
from unity_rl.envs.vec_env import UnityVecEnv

COLLAB = str(BUILDS_DIR / "PushBlockCollab")
PENALTY = -0.5 / 5000 * 5  # per decision (5 academy steps)
SHORT = ["--standin-max-step", "15"]  # agents' MaxStep: interrupted after 3 decisions


def test_agent_stream_rows_carry_group_id_and_group_reward(free_base_port):
    with AgentStream(COLLAB, num_builds=2, base_port=free_base_port(2), timeout_wait=30,
                     env_args=SHORT) as stream:
        result = stream.reset()
        dec = result.decisions
        assert dec.group_id.dtype == np.int32 and len(dec.group_id) == 24
        assert Counter(zip([k.build for k in dec.keys], dec.group_id.tolist())) == {
            (b, g): 3 for b in (0, 1) for g in (1, 2, 3, 4)}
        assert np.allclose(dec.group_reward, 0.0)
        ends = None
        for _ in range(3):
            result = stream.step(np.zeros((len(result.decisions.keys), 1), np.int64))
            if result.terminals.keys:
                ends = result.terminals
            else:
                assert np.allclose(result.decisions.group_reward, PENALTY)
                assert np.allclose(result.decisions.reward, 0.0)
        assert ends is not None and len(ends.keys) == 24 and ends.interrupted.all()
        assert sorted(ends.group_id.tolist()) == sorted(dec.group_id.tolist())
        assert np.allclose(ends.group_reward, PENALTY)


def test_vec_env_infos_have_group_id_and_group_reward(free_base_port):
    with UnityVecEnv(COLLAB, base_port=free_base_port(1), timeout_wait=30,
                     env_args=SHORT) as env:
        _, infos = env.reset()
        assert sorted(infos["group_id"].tolist()) == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
        assert np.allclose(infos["group_reward"], 0.0)
        zeros = np.zeros((12, 1), np.int64)
        _, rewards, _, truncated, infos = env.step(zeros)
        assert np.allclose(infos["group_reward"], PENALTY) and np.allclose(rewards, 0.0)
        for _ in range(2):
            _, _, _, truncated, infos = env.step(zeros)
        assert truncated.all()
        finals = infos["final_info"]
        assert [finals["group_id"][i] for i in range(12)] == infos["group_id"].tolist()
        assert np.allclose(infos["group_reward"], PENALTY)


@pytest.mark.slow
def test_multi_behavior_and_pettingzoo_infos(free_base_port):
    pytest.importorskip("pettingzoo")
    from unity_rl.envs.pettingzoo_env import UnityParallelEnv

    with MultiBehaviorVecEnv(COLLAB, base_port=free_base_port(1), timeout_wait=30) as env:
        _, infos = env.reset()
        (name,) = infos
        assert len(infos[name]["group_id"]) == 12 and "group_reward" in infos[name]
    with UnityParallelEnv(COLLAB, base_port=free_base_port(1), timeout_wait=30,
                          env_args=SHORT) as env:
        _, infos = env.reset()
        assert Counter(i["group_id"] for i in infos.values()) == {1: 3, 2: 3, 3: 3, 4: 3}
        ended = {}
        for _ in range(3):
            _, _, _, truncations, infos = env.step({a: 0 for a in env.agents})
            ended.update({a: infos[a] for a, t in truncations.items() if t})
            assert all(np.isclose(i["group_reward"], PENALTY) for i in infos.values())
        assert len(ended) == 12 and all(i["group_id"] in (1, 2, 3, 4) for i in ended.values())
