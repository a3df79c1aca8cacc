"""Unity-style command lines: single-dash flags, --mlagents-port, --standin-* options."""
from __future__ import annotations

import pytest

from unity_rl.standin.options import OptionError, parse_args


def test_unity_arguments_as_mlagents_passes_them():
    opts = parse_args(["-nographics", "-batchmode", "--mlagents-port", "5007",
                       "-logFile", "/logs/Player-2.log", "-screen-width", "84"])
    assert opts.port == 5007
    assert opts.log_file == "/logs/Player-2.log"
    assert opts.no_graphics
    assert opts.ignored == ["-screen-width", "84"]  # unknown arguments are ignored


def test_defaults_without_arguments():
    opts = parse_args([])
    assert opts.port == 5004 and opts.log_file is None and opts.crash_after is None


def test_standin_options_space_and_equals_forms():
    opts = parse_args([
        "--standin-agents", "4,2", "--standin-max-step=10", "--standin-decision-period", "3",
        "--standin-decision-periods", "5,3", "--standin-late-agents", "2@25",
        "--standin-crash-after", "100", "--standin-crash-code=7", "--standin-hang-after", "50",
        "--standin-step-delay", "0.01", "--standin-seed", "-3", "--standin-realtime",
        "--standin-basic-start", "0", "--mlagents-port=6000", "-LOGFILE", "x.log",
    ])
    assert opts.agents == (4, 2) and opts.max_step == 10 and opts.decision_period == 3
    assert opts.decision_periods == (5, 3) and opts.late_agents == (2, 25)
    assert (opts.crash_after, opts.crash_code, opts.hang_after) == (100, 7, 50)
    assert opts.step_delay == 0.01 and opts.seed == -3 and opts.realtime
    assert opts.basic_start == 0 and opts.port == 6000 and opts.log_file == "x.log"


def test_gridworld_tinted_flag_and_scene_choice():
    from unity_rl.standin.scenes import SCENES
    from unity_rl.standin.scenes.gridworld import GridWorldModel, TintedGridWorldModel

    assert not parse_args([]).gridworld_tinted
    assert not parse_args(["--standin-blind"]).gridworld_tinted
    assert parse_args(["--standin-gridworld-tinted"]).gridworld_tinted
    assert not parse_args(["--standin-gridworld-tinted=0"]).gridworld_tinted
    [unity] = SCENES["GridWorld"](parse_args([]))
    [tinted] = SCENES["GridWorld"](parse_args(["--standin-gridworld-tinted"]))
    assert (unity.factory, unity.decision_period, unity.max_step) == (GridWorldModel, 1, 100)
    assert (tinted.factory, tinted.decision_period, tinted.max_step) == (
        TintedGridWorldModel, 5, 500)


@pytest.mark.parametrize("argv", [
    ["--standin-agents", "zero"],
    ["--standin-agents", "0"],
    ["--standin-late-agents", "2"],
    ["--standin-decision-period", "0"],
    ["--standin-nonsense", "1"],
    ["--standin-max-step"],
    ["--standin-step-delay", "-1"],
    ["--standin-scripted-skill", "1.5"],
    ["--standin-scripted-skill", "-0.1"],
])
def test_malformed_standin_options_are_errors(argv):
    with pytest.raises(OptionError):
        parse_args(argv)
