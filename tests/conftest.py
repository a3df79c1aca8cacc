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


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tests run torch on one thread: on a small shared machine more threads are far slower
    (a learner never sets threads itself; the trainer sets its own while it runs)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
