"""A few-second check that an install works: import, step a stand-in build, one PPO update.

    .venv/bin/python scripts/smoke.py      (used by scripts/check_pythons.sh)
"""
from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# The stand-in builds run on this interpreter (not on the repository's .venv).
os.environ.setdefault("UNITY_RL_PYTHON", sys.executable)


def main() -> None:
    import google.protobuf
    import numpy as np
    import torch
    from google.protobuf.internal import api_implementation

    from unity_rl import UnityVecEnv
    from unity_rl.envs.ports import find_free_port_block

    print(f"python {platform.python_version()}, torch {torch.__version__}, protobuf "
          f"{google.protobuf.__version__} ({api_implementation.Type()}), numpy {np.__version__}")
    start = time.perf_counter()
    port = find_free_port_block(2, 36000 + os.getpid() % 4000)
    with UnityVecEnv(str(REPO / "unity_builds" / "3DBall"), num_builds=1, base_port=port,
                     seed=0) as env:
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(50):
            env.step(env.action_space.sample())
    print(f"stepped 3DBall 50 times ({env.num_envs} agents) in {time.perf_counter() - start:.1f} s")

    from tests.runtime.helpers import tiny_config
    from unity_rl.training.trainer import train

    start = time.perf_counter()
    cfg = tiny_config(find_free_port_block(2, 38000 + os.getpid() % 4000), num_envs=1,
                      num_actors=1, max_steps=480, buffer_size=480)
    with tempfile.TemporaryDirectory() as tmp:
        result = train(cfg, Path(tmp) / "run", resume=False, console=False)
    assert result.policy_version >= 1, result
    print(f"PPO: {result.agent_steps} agent-steps, policy version {result.policy_version} "
          f"in {time.perf_counter() - start:.1f} s")
    print("smoke ok")


if __name__ == "__main__":
    main()
