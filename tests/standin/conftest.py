"""Fixtures for the stand-in build tests: real UnityEnvironment instances over unity_builds/."""
from __future__ import annotations

from pathlib import Path

import pytest

BUILDS_DIR = Path(__file__).resolve().parents[2] / "unity_builds"


@pytest.fixture
def open_env(free_base_port, tmp_path):
    """``open_env(build, args=(), timeout_wait=30, **kw)`` -> a UnityEnvironment on a stand-in.

    Every environment opened is closed at teardown, whatever the test did. The player's log is
    ``tmp_path / "Player-0.log"``.
    """
    from mlagents_envs.environment import UnityEnvironment

    envs = []

    def _open(build: str = "3DBall", args=(), timeout_wait: int = 30, **kwargs):
        kwargs.setdefault("log_folder", str(tmp_path))
        env = UnityEnvironment(
            file_name=str(BUILDS_DIR / build),
            base_port=free_base_port(1),
            no_graphics=True,
            timeout_wait=timeout_wait,
            additional_args=list(args),
            **kwargs,
        )
        envs.append(env)
        return env

    yield _open
    for env in envs:
        process = env._process
        try:
            env.close()
        except Exception:  # noqa: BLE001 - teardown must reach every env
            pass
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(5)
