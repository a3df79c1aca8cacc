"""The helpers of benchmarks/zoo.py (no build, no training run)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "zoo.py"
spec = importlib.util.spec_from_file_location("zoo_benchmark", SCRIPT)
zoo = importlib.util.module_from_spec(spec)
sys.modules.setdefault(spec.name, zoo)
spec.loader.exec_module(zoo)


def test_scene_of_maps_every_behavior_of_a_config_to_one_scene():
    assert zoo.scene_of({"behaviors": {"SmallWallJump": {}, "BigWallJump": {}}}) == "WallJump"
    assert zoo.scene_of({"behaviors": {"Striker": {}, "Goalie": {}}}) == "StrikersVsGoalie"
    assert zoo.scene_of({"behaviors": {"3DBall": {}, "Basic": {}}}) is None  # two scenes
    assert zoo.scene_of({"behaviors": {"NotAScene": {}}}) is None


def test_one_update_copy_changes_only_max_steps_and_summary_freq(tmp_path):
    doc = {"default_settings": {"hyperparameters": {"buffer_size": 2048}},
           "behaviors": {"A": {"trainer_type": "ppo", "max_steps": 5e6, "time_horizon": 64},
                         "B": {"trainer_type": "sac", "max_steps": 1000,
                               "hyperparameters": {"batch_size": 64, "buffer_init_steps": 100}}}}
    out = yaml.safe_load(zoo.one_update_copy(doc, tmp_path, "ppo/X.yaml").read_text())
    assert out["behaviors"]["A"] == {"trainer_type": "ppo", "max_steps": 2049, "time_horizon": 64,
                                     "summary_freq": 2048}
    assert out["behaviors"]["B"]["max_steps"] == 100 + 2 * 64 + 1
    assert out["default_settings"]["max_steps"] == 2049  # it serves behaviors not listed
    assert out["default_settings"]["hyperparameters"] == {"buffer_size": 2048}
    assert doc["behaviors"]["A"]["max_steps"] == 5e6  # Unity's file itself is left alone


def test_zoo_configs_lists_the_four_folders(tmp_path):
    for sub in ("ppo", "sac", "poca", "imitation", "other"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "A.yaml").write_text("behaviors: {}\n")
    assert zoo.zoo_configs(tmp_path) == ["imitation/A.yaml", "poca/A.yaml", "ppo/A.yaml",
                                         "sac/A.yaml"]


def test_markdown_table_has_a_row_per_config_and_shortens_refusals():
    rows = [{"config": "ppo/Basic.yaml", "scene": "Basic", "loads": True,
             "run": {"exit_code": 0, "behaviors_updated": True, "seconds": 12.5}},
            {"config": "poca/X.yaml", "scene": None, "loads": False,
             "refusal": "<configs>/poca/X.yaml: section 'behaviors.X', key 'trainer_type': " + "x" * 300}]
    lines = zoo.markdown_table(rows).splitlines()
    assert len(lines) == 4
    assert lines[2] == "| `ppo/Basic.yaml` | Basic | yes | yes | 12.5 |  |"
    assert lines[3].startswith("| `poca/X.yaml` | ? | no | - |  | section 'behaviors.X', key")
    assert lines[3].endswith("... |") and "<configs>" not in lines[3]
