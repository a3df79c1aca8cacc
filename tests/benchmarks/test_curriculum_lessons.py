"""benchmarks/curriculum_lessons.py: reading lesson changes out of a stand-in log."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import curriculum_lessons  # noqa: E402

LOG = """\
environment parameter: big_wall_height ~ uniform(0, 4), seed 1
environment parameter: small_wall_height = 1.5
environment parameters received at: academy step 0; decisions sent: none
RESET (reset #1, academy step 0)
environment parameter: big_wall_height ~ uniform(0, 4), seed 1
environment parameter: small_wall_height = 1.5
environment parameters received at: academy step 900; decisions sent: BigWallJump?team=0 2000, SmallWallJump?team=0 1500
environment parameter: big_wall_height ~ uniform(4, 7), seed 2
environment parameter: small_wall_height = 1.5
environment parameters received at: academy step 2436; decisions sent: BigWallJump?team=0 6803, SmallWallJump?team=0 4909
"""


def test_only_changed_values_count_with_the_builds_counts_at_arrival():
    changes = curriculum_lessons.lesson_changes(LOG)
    assert [(c["parameter"], c["value"]) for c in changes] == [
        ("big_wall_height", "~ uniform(0, 4), seed 1"), ("small_wall_height", "= 1.5"),
        ("big_wall_height", "~ uniform(4, 7), seed 2")]
    assert changes[0]["decisions"] == {} and changes[0]["academy_step"] == 0
    assert changes[2]["decisions"] == {"BigWallJump": 6803, "SmallWallJump": 4909}
    assert changes[2]["academy_step"] == 2436
