"""The parsing helpers of benchmarks/vs_mlagents_learn.py (no build, no mlagents-learn run)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "vs_mlagents_learn.py"
spec = importlib.util.spec_from_file_location("vs_mlagents_learn", SCRIPT)
vs = importlib.util.module_from_spec(spec)
sys.modules.setdefault(spec.name, vs)  # dataclasses look their module up
spec.loader.exec_module(vs)

BASIC = """behaviors:
  Basic:
    trainer_type: ppo
    hyperparameters: {batch_size: 32, buffer_size: 256, learning_rate: 0.0003}
    max_steps: 500000
    summary_freq: 2000
"""
BALL = "behaviors:\n  3DBall:\n    trainer_type: ppo\n    max_steps: 500000\n"


def write_events(folder: Path, points) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    for step, value in points:
        writer.add_scalar(vs.TAG, value, step)
        writer.add_scalar("Policy/Entropy", 1.0, step)
    writer.close()


def test_config_unchanged_is_unitys_own_file(tmp_path):
    (tmp_path / "Basic.yaml").write_text(BASIC)
    path, changed = vs.make_config(tmp_path, ("Basic.yaml",), None, tmp_path)
    assert path == tmp_path / "Basic.yaml" and not changed


def test_max_steps_override_changes_only_max_steps(tmp_path):
    (tmp_path / "Basic.yaml").write_text(BASIC)
    path, changed = vs.make_config(tmp_path, ("Basic.yaml",), 3000, tmp_path)
    assert changed and path != tmp_path / "Basic.yaml"
    original, copy = yaml.safe_load(BASIC), yaml.safe_load(path.read_text())
    assert copy["behaviors"]["Basic"].pop("max_steps") == 3000
    original["behaviors"]["Basic"].pop("max_steps")
    assert copy == original


def test_several_configs_merge_their_behaviors(tmp_path):
    (tmp_path / "Basic.yaml").write_text(BASIC)
    (tmp_path / "3DBall.yaml").write_text(BALL)
    path, changed = vs.make_config(tmp_path, ("3DBall.yaml", "Basic.yaml"), None, tmp_path)
    assert changed
    assert list(yaml.safe_load(path.read_text())["behaviors"]) == ["3DBall", "Basic"]


@pytest.mark.parametrize("layout", ["per_behavior", "flat", "team_suffix"])
def test_read_curves_in_both_layouts(tmp_path, layout):
    run = tmp_path / "run"
    folder = {"per_behavior": run / "Basic", "flat": run, "team_suffix": run / "Basic?team=0"}
    write_events(folder[layout], [(2000, 0.2), (4000, 0.95), (6000, 0.5)])
    (run / "run_logs").mkdir(parents=True, exist_ok=True)  # mlagents-learn's, no events
    curves = vs.match_behaviors(vs.read_curves(run), {"Basic": 0.9})
    assert [(s, round(v, 3)) for s, v, _ in curves["Basic"]] == [
        (2000, 0.2), (4000, 0.95), (6000, 0.5)]


def test_read_curves_two_behaviors(tmp_path):
    write_events(tmp_path / "3DBall", [(12000, 10.0)])
    write_events(tmp_path / "Basic", [(2000, 0.5)])
    curves = vs.match_behaviors(vs.read_curves(tmp_path), {"3DBall": 95, "Basic": 0.9})
    assert sorted(curves) == ["3DBall", "Basic"]


def test_first_at_target_and_run_metrics():
    points = [(1000, 0.1, 110.0), (2000, 0.9, 120.0), (3000, 0.95, 130.0)]
    assert vs.first_at_target(points, 0.9, 100.0) == {"steps": 2000, "wall_s": 20.0,
                                                      "value": 0.9}
    assert vs.first_at_target(points, 1.0, 100.0) is None
    m = vs.run_metrics(points, 0.9, 100.0)
    assert m["reached"] and m["steps_to_target"] == 2000 and m["wall_s_to_target"] == 20.0
    assert m["agent_steps_per_s"] == 100.0 and m["curve"][0] == [1000, 0.1, 10.0]
    empty = vs.run_metrics([], 0.9, 100.0)
    assert not empty["reached"] and "agent_steps_per_s" not in empty


def test_summarize_medians_and_ratio():
    def run(tool, steps, wall, rate):
        return {"scene": "Basic", "tool": tool, "behaviors": {"Basic": {
            "reached": steps is not None, "steps_to_target": steps, "wall_s_to_target": wall,
            "agent_steps_per_s": rate}}}
    runs = [run("mlagents-learn", 1000, 10, 100), run("mlagents-learn", 3000, 30, 100),
            run("mlagents-learn", None, None, 100), run("unity-rl", 1000, 5, 200)]
    s = vs.summarize(runs)["Basic"]["Basic"]
    assert s["mlagents-learn"]["runs"] == 3 and s["mlagents-learn"]["reached"] == 2
    assert s["mlagents-learn"]["median_steps_to_target"] == 2000
    ratio = s["ratio_unity_rl_over_mlagents_learn"]
    assert ratio == {"median_steps_to_target": 0.5, "median_wall_s_to_target": 0.25,
                     "median_agent_steps_per_s": 2.0}


def test_missing_mlagents_venv_says_how_to_make_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        vs.main(["--mlagents-venv", str(tmp_path / "x" / "venv"), "--configs-dir",
                 str(tmp_path / "shared" / "configs")])
    message = str(exit_info.value.code)
    assert f"bash {tmp_path / 'shared' / 'install.sh'} {tmp_path / 'x'}" in message


def test_stays_at_target_is_the_window_after_the_last_dip():
    points = [(10, 50.0, 0), (20, 96.0, 0), (30, 80.0, 0), (40, 97.0, 0), (50, 99.0, 0)]
    assert vs.stays_at_target(points, 95.0) == 40
    assert vs.stays_at_target(points[:3], 95.0) is None  # ends below the target
    assert vs.stays_at_target([], 95.0) is None


def test_env_args_reach_both_tools_after_the_scenes_own(tmp_path):
    """``--env-args`` (stand-in options) go to mlagents-learn and unity-rl alike, last on the
    line; ``--unity-rl-args`` only to unity-rl."""
    args = vs.argparse.Namespace(num_envs=2, mlagents_venv=tmp_path, unity_rl_args="--mode async",
                                 env_args="--standin-pyramid-pushes=10 --standin-max-step=9")
    scene = vs.Scene("GridWorld", ("ppo/GridWorld.yaml",), {"GridWorld": 0.8},
                     env_args=("--standin-blind",))
    extra = vs.env_args_of(scene, args)
    assert extra == ("--standin-blind", "--standin-pyramid-pushes=10", "--standin-max-step=9")
    for tool in ("mlagents-learn", "unity-rl"):
        cmd = vs.command(tool, args, tmp_path / "c.yaml", tmp_path / "b", 5005, "r", tmp_path, 1,
                         extra)
        assert cmd[-4:] == ["--env-args", *extra]
        assert ("--mode" in cmd) == (tool == "unity-rl")


def test_png_from_names_a_file_that_is_not_a_result(tmp_path):
    bad = tmp_path / "zoo.json"
    bad.write_text('{"configs": []}')
    with pytest.raises(SystemExit, match="zoo.json: not a vs_mlagents_learn.py result"):
        vs.main(["--png-from", str(bad)])


def test_png_from_draws_one_png_per_scene_beside_the_result(tmp_path):
    pytest.importorskip("matplotlib")
    run = lambda tool, seed: {"scene": "Basic", "tool": tool, "seed": seed, "behaviors": {  # noqa: E731
        "Basic": {"target": 0.9, "curve": [[2000, 0.1, 5.0], [4000, 0.93, 9.0]]}}}
    result = tmp_path / "race.json"
    result.write_text(vs.json.dumps({"runs": [run("mlagents-learn", 1), run("unity-rl", 1)]}))
    vs.main(["--png-from", str(result)])
    assert (tmp_path / "race_Basic.png").stat().st_size > 1000


def test_report_is_written_after_every_run_and_marked_partial_until_the_last(tmp_path):
    args = vs.argparse.Namespace(scenes=["Basic"], tools=list(vs.TOOLS), seeds=3, seed=1,
                                 num_envs=2, max_steps=None, stop_at_target=True,
                                 unity_rl_args="", env_args="", configs_dir=tmp_path,
                                 out=tmp_path / "race.json")
    run = {"scene": "Basic", "tool": "unity-rl", "seed": 1, "behaviors": {"Basic": {
        "target": 0.9, "reached": True, "steps_to_target": 4000, "wall_s_to_target": 9.0,
        "steps_stays_at_target": 4000, "agent_steps_per_s": 400.0, "curve": []}}}
    vs.write_report(args, [run], [], str(tmp_path / "tmp"), partial=True)
    report = vs.json.loads(args.out.read_text())
    assert report["partial"] is True and len(report["runs"]) == 1
    vs.write_report(args, [run, {**run, "seed": 2}], [], str(tmp_path / "tmp"), partial=False)
    report = vs.json.loads(args.out.read_text())
    assert report["partial"] is False and [r["seed"] for r in report["runs"]] == [1, 2]
