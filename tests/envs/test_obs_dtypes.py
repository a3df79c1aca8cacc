"""Observations arrive as sent: only PNG ones become uint8 (FloatGrid and GridWorld stand-ins)."""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from tests.conftest import BUILDS_DIR
from unity_rl import AgentStream, UnityVecEnv
from unity_rl.standin.scenes.float_grid import float_grid

FLOAT_GRID = str(BUILDS_DIR / "FloatGrid")


def max_grid_error(grids, cells) -> float:
    expected = np.stack([float_grid(int(x), int(y)) for x, y in cells])
    return float(np.abs(grids - expected).max())


def test_float_grid_through_vec_env(free_base_port):
    with UnityVecEnv(FLOAT_GRID, base_port=free_base_port(1), timeout_wait=30) as env:
        grid_space = env.single_observation_space["GridSensor"]
        assert grid_space == spaces.Box(-np.inf, np.inf, (2, 6, 6), np.float32)
        obs, _ = env.reset()
        for _ in range(5):
            grids = obs["GridSensor"]
            assert grids.dtype == np.float32 and grids.min() == -20.0 and grids.max() == 12.0
            assert max_grid_error(grids, obs["VectorSensor_size2"]) < 1e-5
            obs, *_ = env.step(env.action_space.sample())


def test_float_grid_through_agent_stream(free_base_port):
    with AgentStream(FLOAT_GRID, base_port=free_base_port(1), timeout_wait=30) as stream:
        result = stream.reset()
        for _ in range(5):
            grids, cells = result.decisions.obs
            assert grids.dtype == np.float32 and max_grid_error(grids, cells) < 1e-5
            result = stream.step(np.ones(len(result.decisions.keys), np.int64))


def test_png_camera_is_uint8(free_base_port):
    # the tinted GridWorld: one camera only (3x40x40)
    with UnityVecEnv(str(BUILDS_DIR / "GridWorld"), base_port=free_base_port(1),
                     timeout_wait=30, env_args=["--standin-gridworld-tinted"]) as env:
        assert env.single_observation_space == spaces.Box(0, 255, (3, 40, 40), np.uint8)
        obs, info = env.reset()
        assert obs.dtype == np.uint8 and obs.shape == (9, 3, 40, 40) and obs.max() > 150
        assert info["action_mask"].shape == (9, 5)
        assert env.builds.png_observations == {"GridWorld?team=0": (True,)}
