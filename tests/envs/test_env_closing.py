"""Every env that owns builds closes them on ``with`` exit and when it is garbage-collected
unclosed (``unity_rl.envs.closing.ClosesBuilds``): no build process outlives its env."""
from __future__ import annotations

import gc

import psutil
import pytest

from tests.conftest import BUILDS_DIR
from tests.runtime.helpers import assert_gone
from unity_rl.envs.multi_vec_env import MultiBehaviorVecEnv
from unity_rl.envs.pettingzoo_env import UnityParallelEnv
from unity_rl.envs.vec_env import UnityVecEnv

BALL = str(BUILDS_DIR / "3DBall")
MAKERS = {"vec": UnityVecEnv, "multi": MultiBehaviorVecEnv, "pettingzoo": UnityParallelEnv}


def _builds() -> list[int]:
    return [p.pid for p in psutil.Process().children(recursive=True)
            if "3DBall" in " ".join(p.cmdline())]


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_forgotten_env_closes_its_build_when_collected(kind, free_base_port):
    env = MAKERS[kind](BALL, base_port=free_base_port(1), timeout_wait=30)
    env.reset()
    pids = _builds()
    assert pids, "the build should be running"
    del env
    gc.collect()
    assert_gone(pids, timeout=30)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_with_closes_the_build_and_closing_twice_is_harmless(kind, free_base_port):
    with MAKERS[kind](BALL, base_port=free_base_port(1), timeout_wait=30) as env:
        env.reset()
        pids = _builds()
    assert_gone(pids, timeout=30)
    env.close()
