"""Shared fixtures: repository paths and free ports for builds launched by tests."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from unity_rl.envs.ports import find_free_port_block

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILDS_DIR = REPO_ROOT / "unity_builds"

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@pytest.fixture
def free_base_port():
    """Returns a function ``(count) -> base_port`` with ``count`` free consecutive ports.

    The search starts at a random offset so that test processes running side by side (pytest
    workers, several checkouts) rarely race for the same block.
    """
    rng = random.Random(os.getpid() * 7919 + random.randrange(1 << 30))

    def pick(count: int = 1) -> int:
        return find_free_port_block(count, start=rng.randrange(20000, 50000))

    return pick
