"""``process_state``: imports started early."""
from __future__ import annotations


def test_import_in_background_imports_and_leaves_a_failed_import_to_fail_where_used():
    import sys

    from unity_rl.runtime.process_state import import_in_background

    sys.modules.pop("colorsys", None)
    import_in_background(("colorsys", "unity_rl_no_such_module")).join(timeout=30)
    assert "colorsys" in sys.modules and "unity_rl_no_such_module" not in sys.modules
