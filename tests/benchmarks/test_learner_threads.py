"""benchmarks/learner_threads.py: one timed PPO update per repeat, at the thread count asked."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import learner_threads  # noqa: E402


def test_each_repeat_times_one_update_at_the_thread_count_asked():
    before = torch.get_num_threads()
    try:
        seconds = learner_threads.time_update((4, 2, 16, 1, 64, 512), threads=1, repeats=2)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert len(seconds) == 2 and all(s > 0 for s in seconds)


def test_the_sizes_straddle_the_width_at_which_a_sync_learner_takes_threads():
    from unity_rl.training.wiring import WIDE_NETWORK_UNITS
    widths = {size[2] for size in learner_threads.SIZES.values()}
    assert min(widths) < WIDE_NETWORK_UNITS <= max(widths)
