"""``self_play:`` loads strictly with ML-Agents 1.1.0's SelfPlaySettings keys and code defaults."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from unity_rl.config import ConfigError, dump_config, load_config, parse_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mlagents_configs"


def load_text(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(text))
    return load_config(path)


def behavior(trainer_type: str, self_play: str) -> str:
    return f"behaviors:\n  B:\n    trainer_type: {trainer_type}\n    self_play: {self_play}\n"


def test_defaults_are_mlagents_code_defaults(tmp_path):
    sp = load_text(tmp_path, behavior("ppo", "{}")).behaviors["B"].self_play
    assert (sp.save_steps, sp.team_change, sp.swap_steps, sp.window,
            sp.play_against_latest_model_ratio, sp.initial_elo) == (20000, 100000, 2000, 10, 0.5,
                                                                    1200.0)


def test_team_change_default_follows_save_steps(tmp_path):
    sp = load_text(tmp_path, behavior("sac", "{save_steps: 300}")).behaviors["B"].self_play
    assert sp.team_change == 1500


def test_absent_or_null_is_off(tmp_path):
    assert load_text(tmp_path, behavior("ppo", "null")).behaviors["B"].self_play is None
    assert load_text(tmp_path, "behaviors:\n  B: {}\n").behaviors["B"].self_play is None


@pytest.mark.parametrize("file", ["poca/SoccerTwos.yaml", "poca/StrikersVsGoalie.yaml"])
def test_unity_configs_load_unchanged(file):
    cfg = load_config(FIXTURES / file)
    for b in cfg.behaviors.values():
        assert b.self_play.save_steps == 50000 and b.self_play.team_change == 200000
        assert b.self_play.window == 10 and b.self_play.initial_elo == 1200.0
    if "Strikers" in file:
        assert cfg.behaviors["Goalie"].self_play.swap_steps == 1000
        assert cfg.behaviors["Striker"].self_play.swap_steps == 4000


def test_unknown_key_is_named(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, behavior("ppo", "{windoww: 3}"))
    assert err.value.section == "behaviors.B.self_play" and err.value.key == "windoww"


@pytest.mark.parametrize("value, key", [("{window: 0}", "window"), ("{save_steps: -1}", "save_steps"),
                                        ("{swap_steps: 1.5}", "swap_steps"),
                                        ("{initial_elo: .nan}", "initial_elo"),
                                        ("[1, 2]", None)])
def test_bad_values_are_named(tmp_path, value, key):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, behavior("poca", value))
    assert "self_play" in (err.value.section or "") + str(err.value.key)
    if key is not None:
        assert err.value.key == key


def test_ddpg_is_refused_clearly(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, behavior("ddpg", "{window: 3}"))
    assert err.value.key == "self_play" and "ddpg" in str(err.value)
    assert "ppo" in str(err.value) and "poca" in str(err.value)


def test_ratio_outside_unit_interval_warns_as_mlagents(tmp_path, caplog):
    load_text(tmp_path, behavior("ppo", "{play_against_latest_model_ratio: 1.5}"))
    assert "play_against_latest_model_ratio" in caplog.text


def test_dump_round_trips():
    cfg = load_config(FIXTURES / "poca/SoccerTwos.yaml")
    assert parse_config(dump_config(cfg), "dumped").behaviors == cfg.behaviors
