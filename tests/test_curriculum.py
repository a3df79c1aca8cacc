"""Curricula: the ``environment_parameters`` curriculum schema with mlagents-learn 1.1.0's
validation, and ``training.curriculum`` (lesson steps by progress and by smoothed reward,
min_lesson_length, one step per check, buffers cleared, seeds, resume state)."""
from __future__ import annotations

import dataclasses
import math
import sys
import textwrap
from pathlib import Path

import pytest

from unity_rl.config import (
    CompletionCriteria,
    ConfigError,
    Curriculum,
    EnvironmentParameter,
    Lesson,
    dump_config,
    load_config,
    parse_config,
)
from unity_rl.training.curriculum import Curricula, need_increment

UNITY_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "mlagents_configs"
"""Copies of Unity's example configs (tests/fixtures/mlagents_configs/README.md)."""

BASE = """\
behaviors:
  Walker:
    trainer_type: ppo
    max_steps: 1000
  Other:
    trainer_type: ppo
    max_steps: 4000
"""


def load(tmp_path: Path, params: str):
    path = tmp_path / "run.yaml"
    path.write_text(BASE + "environment_parameters:\n" + textwrap.indent(textwrap.dedent(params), "  "))
    return load_config(path)


def error(tmp_path: Path, params: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, params)
    return info.value


def criteria(**kw) -> CompletionCriteria:
    return CompletionCriteria(**{"behavior": "Walker", **kw})


def lessons(*specs) -> Curriculum:
    """specs: (value, criteria or None) per lesson."""
    return Curriculum(tuple(Lesson(f"L{i}", EnvironmentParameter(value=v), c)
                            for i, (v, c) in enumerate(specs)))


# ----------------------------------------------------------------------------------------------
# config
# ----------------------------------------------------------------------------------------------

def test_walljump_curriculum_config_loads_unchanged():
    cfg = load_config(UNITY_CONFIGS / "ppo" / "WallJump_curriculum.yaml")
    big, small = cfg.environment_parameters["big_wall_height"], cfg.environment_parameters["small_wall_height"]
    assert [lesson.name for lesson in big.lessons] == ["Lesson0", "Lesson1", "Lesson2", "Lesson3"]
    assert (big.lessons[0].value.sampler_type, big.lessons[0].value.max_value) == ("uniform", 4.0)
    assert big.lessons[3].value == EnvironmentParameter(value=8.0) and big.lessons[3].completion_criteria is None
    assert [lesson.value.value for lesson in small.lessons] == [1.5, 2.0, 2.5, 4.0]
    c = small.lessons[1].completion_criteria
    assert (c.behavior, c.measure, c.min_lesson_length, c.threshold, c.signal_smoothing,
            c.require_reset) == ("SmallWallJump", "progress", 100, 0.3, True, False)
    assert parse_config(dump_config(cfg)) == cfg       # configuration.yaml round trip
    launch = dict(dataclasses.replace(cfg, launch=dataclasses.replace(
        cfg.launch, env_path="WallJump")).launch_settings(None).env_parameters)
    assert launch["small_wall_height"] == EnvironmentParameter(value=1.5)   # lesson 0


def test_criteria_defaults_are_mlagents(tmp_path):
    cfg = load(tmp_path, """\
        mass:
          curriculum:
            - name: light
              value: {sampler_type: uniform, sampler_parameters: {min_value: 1, max_value: 2, seed: 7}}
              completion_criteria: {behavior: Walker}
            - {name: heavy, value: 5}
        """)
    c = cfg.environment_parameters["mass"].lessons[0].completion_criteria
    assert c == CompletionCriteria(behavior="Walker", measure="reward", min_lesson_length=0,
                                   signal_smoothing=True, threshold=0.0, require_reset=False)
    assert cfg.environment_parameters["mass"].lessons[0].value.seed == 7


@pytest.mark.parametrize(("params", "section", "key", "phrase"), [
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1}
         - {name: b, value: 2}
     """, "environment_parameters.mass", "curriculum", "every lesson but the last"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1, completion_criteria: {behavior: Walker, measure: progress, threshold: 1.5}}
         - {name: b, value: 2}
     """, "environment_parameters.mass.curriculum[0].completion_criteria", "threshold", "[0, 1]"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1, completion_criteria: {behavior: Walker, measure: progress, threshold: -0.1}}
         - {name: b, value: 2}
     """, "environment_parameters.mass.curriculum[0].completion_criteria", "threshold", "[0, 1]"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1, completion_criteria: {behavior: Runner}}
         - {name: b, value: 2}
     """, "environment_parameters.mass.curriculum[0].completion_criteria", "behavior",
     "not a trained behavior"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1, completion_criteria: {measure: reward}}
         - {name: b, value: 2}
     """, "environment_parameters.mass.curriculum[0].completion_criteria", "behavior", "missing"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1, completion_criteria: {behavior: Walker, measure: steps}}
         - {name: b, value: 2}
     """, "environment_parameters.mass.curriculum[0].completion_criteria", "measure", "'reward'"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1, completion_criteria: {behavior: Walker, patience: 3}}
         - {name: b, value: 2}
     """, "environment_parameters.mass.curriculum[0].completion_criteria", "patience", "unknown key"),
    ("""\
     mass:
       curriculum:
         - {value: 1}
     """, "environment_parameters.mass.curriculum[0]", "name", "missing"),
    ("""\
     mass:
       curriculum:
         - {name: a}
     """, "environment_parameters.mass.curriculum[0]", "value", "missing"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: {sampler_type: uniform, sampler_parameters: {min_value: 3, max_value: 1}}}
     """, "environment_parameters.mass.curriculum[0].value.sampler_parameters", "min_value", "<= max_value"),
    ("""\
     mass:
       curriculum: []
     """, "environment_parameters.mass", "curriculum", "non-empty list"),
    ("""\
     mass:
       curriculum:
         - {name: a, value: 1}
       sampler_type: uniform
     """, "environment_parameters.mass", "sampler_type", "beside curriculum"),
    ("""\
     mass:
       curriculum:
         - Lesson0:
             completion_criteria: {behavior: Walker}
             value: 1
         - Lesson1:
             value: 2
     """, "environment_parameters.mass.curriculum[0]", "Lesson0", "- name: Lesson0"),
])
def test_curriculum_errors_name_the_key(tmp_path, params, section, key, phrase):
    err = error(tmp_path, params)
    assert (err.section, err.key) == (section, key), str(err)
    assert phrase in str(err), str(err)


def test_criteria_on_the_last_lesson_are_ignored_with_a_warning(tmp_path, caplog):
    cfg = load(tmp_path, """\
        mass:
          curriculum:
            - {name: a, value: 1, completion_criteria: {behavior: Walker}}
            - {name: b, value: 2, completion_criteria: {behavior: Walker}}
        """)
    assert "final lesson 'b'" in caplog.text
    curricula = Curricula(cfg.environment_parameters, run_seed=0)
    curricula.record_episodes("Walker", [5.0])
    assert curricula.update({"Walker": 1.0}).changed == ("mass",)
    assert curricula.update({"Walker": 1.0}).changed == ()      # the last lesson never ends
    assert curricula.lesson["mass"] == 1


def test_default_settings_lets_criteria_name_any_behavior(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("default_settings: {trainer_type: ppo}\nenvironment_parameters:\n"
                    "  mass:\n    curriculum:\n"
                    "      - {name: a, value: 1, completion_criteria: {behavior: Anyone}}\n"
                    "      - {name: b, value: 2}\n")
    assert Curricula(load_config(path).environment_parameters, 0).behaviors == {"Anyone"}


def test_importing_the_curriculum_module_imports_no_torch():
    import subprocess

    code = "import sys, unity_rl.training.curriculum; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------------------------
# need_increment (mlagents-learn's CompletionCriteriaSettings.need_increment)
# ----------------------------------------------------------------------------------------------

def test_need_increment_progress_and_min_lesson_length():
    c = criteria(measure="progress", threshold=0.5, min_lesson_length=2)
    assert need_increment(c, 0.9, [1.0], 0.3) == (False, 0.3)    # too few episodes
    assert need_increment(c, 0.5, [1.0, 1.0], 0.3) == (False, 0.3)  # not > threshold
    assert need_increment(c, 0.51, [1.0, 1.0], 0.3) == (True, 0.3)
    assert need_increment(criteria(measure="progress", threshold=0.1), 0.2, [], 0.0) == (True, 0.0)


def test_need_increment_reward_smoothed_and_not():
    c = criteria(measure="reward", threshold=0.7)
    assert need_increment(c, 0.0, [], 0.0) == (False, 0.0)       # no episode yet
    ok, smoothed = need_increment(c, 0.0, [0.8, 1.0], 0.0)        # 0.25*0 + 0.75*0.9 = 0.675
    assert not ok and smoothed == pytest.approx(0.675)
    ok, smoothed = need_increment(c, 0.0, [0.8, 1.0], smoothed)   # 0.25*0.675 + 0.675 = 0.84375
    assert ok and smoothed == pytest.approx(0.84375)
    raw = criteria(measure="reward", threshold=0.7, signal_smoothing=False)
    assert need_increment(raw, 0.0, [0.8, 1.0], 0.0) == (True, 0.0)
    assert need_increment(raw, 0.0, [math.nan], 0.0) == (False, 0.0)


# ----------------------------------------------------------------------------------------------
# Curricula
# ----------------------------------------------------------------------------------------------

def test_progress_lessons_advance_one_step_per_check_and_clear_every_buffer():
    wall = lessons((1.0, criteria(measure="progress", threshold=0.1)),
                   (2.0, criteria(measure="progress", threshold=0.2)),
                   (3.0, None))
    other = lessons((5.0, criteria(behavior="Other", measure="progress", threshold=0.9,
                                   min_lesson_length=3)),
                    (6.0, None))
    c = Curricula({"wall": wall, "other": other}, run_seed=0)
    assert {b: d.maxlen for b, d in c.reward_buffers.items()} == {"Walker": 1, "Other": 3}
    c.record_episodes("Other", [1.0, 2.0])
    c.record_episodes("Unrelated", [9.0])                        # no criterion names it
    assert c.check({"Walker": 0.05, "Other": 0.0}) == ((), False)
    assert c.check({"Walker": 0.5, "Other": 0.0}).changed == ("wall",)   # one step, not two
    assert c.lesson_numbers() == {"wall": 1, "other": 0}
    assert list(c.reward_buffers["Other"]) == []                 # every buffer cleared
    assert c.values()["wall"].value == 2.0
    assert c.check({"Walker": 0.5}).changed == ("wall",)         # the next check: the next step
    assert c.check({"Walker": 1.0}).changed == ()                # last lesson
    c.record_episodes("Other", [1.0, 1.0])
    assert c.check({"Other": 0.95}).changed == ()                # 2 < min_lesson_length 3
    c.record_episodes("Other", [1.0])
    assert c.check({"Other": 0.95}).changed == ("other",)
    assert c.check({}).changed == ()                             # no behavior: nothing checked


def test_update_repeats_checks_as_mlagents_checks_every_environment_step():
    c = Curricula({"wall": lessons((1.0, criteria(measure="progress", threshold=0.1)),
                                   (2.0, criteria(measure="progress", threshold=0.2)),
                                   (3.0, criteria(measure="progress", threshold=0.9)),
                                   (4.0, None))}, run_seed=0)
    assert c.update({"Walker": 0.5}) == (("wall",), False)       # thresholds 0.1 and 0.2 passed
    assert c.lesson["wall"] == 2
    def reward_curricula():
        r = Curricula({"mass": lessons((1.0, criteria(threshold=0.7)), (2.0, None))}, run_seed=0)
        r.record_episodes("Walker", [0.72])
        return r

    once = reward_curricula()
    assert once.check({"Walker": 0.0}).changed == ()             # one check: 0.54, not > 0.7
    # mlagents-learn checks again at every environment step: the smoothed value moves on to
    # the mean (0.54, 0.675, 0.70875 > 0.7) and the lesson ends there
    repeated = reward_curricula()
    assert repeated.update({"Walker": 0.0}).changed == ("mass",)
    assert repeated.smoothed["mass"] == pytest.approx(0.70875) and repeated.lesson["mass"] == 1


def test_reward_lesson_with_min_lesson_length_and_smoothing():
    r = Curricula({"mass": lessons((1.0, criteria(threshold=0.5, min_lesson_length=3)),
                                   (2.0, None))}, run_seed=0)
    r.record_episodes("Walker", [1.0, 1.0])
    assert r.check({"Walker": 0.0}) == ((), False) and r.smoothed["mass"] == 0.0  # too few
    r.record_episodes("Walker", [0.0, 0.0, 0.0])                 # buffer keeps the latest 3
    assert list(r.reward_buffers["Walker"]) == [0.0, 0.0, 0.0]
    assert r.check({"Walker": 0.0}).changed == ()
    r.record_episodes("Walker", [1.0, 0.5, 0.5])                 # mean 2/3
    assert r.check({"Walker": 0.0}).changed == ()                # 0.75 * 2/3 = 0.5: not > 0.5
    assert r.smoothed["mass"] == pytest.approx(0.5)
    assert r.check({"Walker": 0.0}).changed == ("mass",)         # 0.125 + 0.5 = 0.625


def test_require_reset_is_reported():
    c = Curricula({"a": lessons((1.0, criteria(measure="progress", require_reset=True)), (2.0, None)),
                   "b": lessons((1.0, criteria(measure="progress")), (2.0, None))}, run_seed=0)
    assert c.check({"Walker": 0.5}) == (("a", "b"), True)


def test_sampler_seeds_as_mlagents_assigns_them():
    seeded = EnvironmentParameter(sampler_type="uniform", seed=42)
    c = Curricula({
        "plain": EnvironmentParameter(value=3.0),                          # offset 0
        "wall": Curriculum((Lesson("a", EnvironmentParameter(sampler_type="uniform"),
                                   criteria(measure="progress")),          # offset 1
                            Lesson("b", seeded, criteria(measure="progress")),  # its own seed
                            Lesson("c", EnvironmentParameter(sampler_type="gaussian")))),  # 2
        "noise": EnvironmentParameter(sampler_type="gaussian")}, run_seed=100)  # offset 3
    assert c.values()["plain"].seed == 100 and c.values()["noise"].seed == 103
    assert [lesson.value.seed for lesson in c.lessons["wall"]] == [101, 42, 102]
    assert c.values()["wall"] == EnvironmentParameter(sampler_type="uniform", seed=101)


def test_state_dict_round_trip_and_resume_checks():
    def make():
        return Curricula({"mass": lessons((1.0, criteria(measure="progress", threshold=0.1)),
                                          (2.0, criteria(threshold=0.5, min_lesson_length=2)),
                                          (3.0, None))}, run_seed=5)
    c = make()
    assert c.update({"Walker": 0.2}).changed == ("mass",)
    c.record_episodes("Walker", [0.3])
    c.check({"Walker": 0.2})
    state = c.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state and resumed.values() == c.values()
    assert resumed.lesson_numbers() == {"mass": 1}
    fresh = make()
    fresh.load_state_dict({})                                    # an older checkpoint: lesson 0
    assert fresh.lesson_numbers() == {"mass": 0}
    with pytest.raises(ValueError, match="3 lesson"):
        make().load_state_dict({"lessons": {"mass": 7}})
