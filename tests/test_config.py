"""Strict config loading: ML-Agents files load, mistakes name file + section + key."""
from __future__ import annotations

import dataclasses
import pickle
import textwrap
from pathlib import Path

import pytest

from unity_rl.algorithms.ddpg.learner import DDPGConfig
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.config import RewardSignalConfig
from unity_rl.algorithms.ppo.learner import PPOConfig
from unity_rl.config import (ConfigError, RunConfig, apply_overrides, dump_config, load_config,
                             parse_config, select_behavior, write_config)

REPO_ROOT = Path(__file__).resolve().parent.parent

# config/ppo/3DBall.yaml as ML-Agents ships it.
MLAGENTS_3DBALL = """\
behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters:
      batch_size: 64
      buffer_size: 12000
      learning_rate: 0.0003
      beta: 0.001
      epsilon: 0.2
      lambd: 0.99
      num_epoch: 3
      learning_rate_schedule: linear
    network_settings:
      normalize: true
      hidden_units: 128
      num_layers: 2
      vis_encode_type: simple
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
    keep_checkpoints: 5
    max_steps: 500000
    time_horizon: 1000
    summary_freq: 12000
"""

# run_logs/configuration.yaml as mlagents-learn 1.x writes it for the file above.
MLAGENTS_RESOLVED = """\
default_settings: null
behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters:
      batch_size: 64
      buffer_size: 12000
      learning_rate: 0.0003
      beta: 0.001
      epsilon: 0.2
      lambd: 0.99
      num_epoch: 3
      shared_critic: false
      learning_rate_schedule: linear
      beta_schedule: linear
      epsilon_schedule: linear
    checkpoint_interval: 500000
    network_settings:
      normalize: true
      hidden_units: 128
      num_layers: 2
      vis_encode_type: simple
      memory: null
      goal_conditioning_type: hyper
      deterministic: false
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
        network_settings:
          normalize: false
          hidden_units: 128
          num_layers: 2
          vis_encode_type: simple
          memory: null
          goal_conditioning_type: hyper
          deterministic: false
    init_path: null
    keep_checkpoints: 5
    even_checkpoints: false
    max_steps: 500000
    time_horizon: 1000
    summary_freq: 12000
    threaded: false
    self_play: null
    behavioral_cloning: null
env_settings:
  env_path: null
  env_args: null
  base_port: 5005
  num_envs: 1
  num_areas: 1
  timeout_wait: 60
  seed: -1
  max_lifetime_restarts: 10
  restarts_rate_limit_n: 1
  restarts_rate_limit_period_s: 60
engine_settings:
  width: 84
  height: 84
  quality_level: 5
  time_scale: 20
  target_frame_rate: -1
  capture_frame_rate: 60
  no_graphics: false
  no_graphics_monitor: false
environment_parameters: null
checkpoint_settings:
  run_id: ppo
  initialize_from: null
  load_model: false
  resume: false
  force: false
  train_model: false
  inference: false
  results_dir: results
torch_settings:
  device: null
debug: false
"""


def write(tmp_path: Path, text: str, name: str = "trainer.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_text(tmp_path: Path, text: str) -> RunConfig:
    return load_config(write(tmp_path, text))


def test_mlagents_3dball_config_loads_with_paper_names(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL)
    b = cfg.behaviors["3DBall"]
    assert b.trainer_type == "ppo" and b.time_horizon == 1000 and b.summary_freq == 12000
    assert b.max_steps == 500_000 and b.keep_checkpoints == 5
    assert b.hyperparameters == PPOConfig(
        minibatch_size=64, buffer_size=12000, learning_rate=3e-4, lr_schedule="linear",
        ent_coef=1e-3, ent_coef_schedule="linear", clip_coef=0.2, clip_coef_schedule="linear",
        gae_lambda=0.99, num_epochs=3, max_steps=500_000)
    assert b.network_settings == NetworkConfig(normalize=True, hidden_units=128, num_layers=2)
    assert b.gamma == 0.99 and b.reward_strength == 1.0
    assert b.reward_signals == (RewardSignalConfig("extrinsic", gamma=0.99, strength=1.0),)
    # sections not in the file take mlagents-learn's defaults
    assert cfg.env_settings.base_port == 5005 and cfg.engine_settings.time_scale == 20.0
    assert cfg.checkpoint_settings.run_id == "ppo" and cfg.checkpoint_settings.results_dir == "results"
    assert cfg.env_settings.max_lifetime_restarts == 10 and cfg.env_settings.timeout_wait == 60
    assert cfg.unity_rl.mode == "sync" and cfg.unity_rl.backend == "local"


def test_mlagents_resolved_configuration_yaml_loads(tmp_path):
    assert load_text(tmp_path, MLAGENTS_RESOLVED) == load_text(tmp_path, MLAGENTS_3DBALL)


def test_resolved_config_round_trips(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL + textwrap.dedent("""\
        default_settings:
          trainer_type: ddpg
          hyperparameters: {batch_size: 128, buffer_size: 100000, exploration_noise: ou}
          even_checkpoints: true
        env_settings: {env_path: builds/3DBall, env_args: [-logFile, "-", 640], num_envs: 2}
        environment_parameters:
          mass: 1.5
          scale: {sampler_type: uniform, sampler_parameters: {min_value: 0.5, max_value: 1.5}}
          gravity: {sampler_type: multirangeuniform, sampler_parameters: {intervals: [[7, 10], [15, 20]]}}
        unity_rl: {mode: async, num_actors: 3, backend: ray, ray_address: "127.0.0.1:6379"}
        """))
    path = tmp_path / "resolved.yaml"
    write_config(cfg, path)
    again = load_config(path)
    assert again == cfg
    assert dump_config(again) == dump_config(cfg)
    assert parse_config(dump_config(cfg), "dumped") == cfg
    assert cfg.env_settings.env_args == ("-logFile", "-", "640")
    assert cfg.environment_parameters["mass"].value == 1.5
    assert cfg.environment_parameters["gravity"].intervals == ((7.0, 10.0), (15.0, 20.0))
    assert cfg.default_settings.checkpoint_interval == 500_000 // 5
    assert pickle.loads(pickle.dumps(cfg)) == cfg


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "configs").rglob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_load_and_round_trip(path, tmp_path):
    cfg = load_config(path)
    write_config(cfg, tmp_path / "again.yaml")
    assert load_config(tmp_path / "again.yaml") == cfg


def test_ppo_3dball_config_targets_the_standin():
    cfg = load_config(REPO_ROOT / "configs" / "ppo" / "3dball.yaml")
    b = select_behavior(cfg, "3DBall?team=0")
    assert b.trainer_type == "ppo" and b.network_settings.normalize
    assert b.hyperparameters.buffer_size <= 12000


def test_numbers_without_a_dot_are_floats_and_integral_floats_ints(tmp_path):
    cfg = load_text(tmp_path, """\
        behaviors:
          B:
            hyperparameters: {learning_rate: 3e-4, beta: 5E-3}
            max_steps: 5e5
        """)
    hp = cfg.behaviors["B"].hyperparameters
    assert hp.learning_rate == 3e-4 and hp.ent_coef == 5e-3
    assert cfg.behaviors["B"].max_steps == 500_000 and isinstance(cfg.behaviors["B"].max_steps, int)
    assert hp.max_steps == 500_000


def error_for(tmp_path, text) -> ConfigError:
    path = write(tmp_path, text, "bad.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    return info.value


def assert_names(err: ConfigError, section: str | None, key: str, *phrases: str) -> None:
    message = str(err)
    assert err.section == section and err.key == key, message
    if section:
        assert f"'{section}'" in message, message
    assert f"'{key}'" in message, message
    for phrase in phrases:
        assert phrase in message, message


def test_unknown_key_names_file_section_key_and_accepted_keys(tmp_path):
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace("beta: 0.001", "betta: 0.001"))
    assert_names(err, "behaviors.3DBall.hyperparameters", "betta", "unknown key", "beta", "epsilon")


def test_wrong_type_names_key_and_expected_type(tmp_path):
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace("batch_size: 64", "batch_size: '64'"))
    assert_names(err, "behaviors.3DBall.hyperparameters", "batch_size", "expected an integer")
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace("normalize: true", "normalize: 1"))
    assert_names(err, "behaviors.3DBall.network_settings", "normalize", "expected true or false")
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace("schedule: linear", "schedule: cosine"))
    assert_names(err, "behaviors.3DBall.hyperparameters", "learning_rate_schedule", "'linear', 'constant'")


@pytest.mark.parametrize("old, new, section, key, phrase", [
    ("epsilon: 0.2", "epsilon: 1.5", "behaviors.3DBall.hyperparameters", "epsilon", "in (0, 1)"),
    ("buffer_size: 12000", "buffer_size: 32", "behaviors.3DBall.hyperparameters", "buffer_size", ">= batch_size"),
    ("num_epoch: 3", "num_epoch: 0", "behaviors.3DBall.hyperparameters", "num_epoch", ">= 1"),
    ("gamma: 0.99", "gamma: 1.5", "behaviors.3DBall.reward_signals.extrinsic", "gamma", "[0, 1]"),
    ("strength: 1.0", "strength: -1", "behaviors.3DBall.reward_signals.extrinsic", "strength", "> 0"),
    ("hidden_units: 128", "hidden_units: 0", "behaviors.3DBall.network_settings", "hidden_units", ">= 1"),
    ("time_horizon: 1000", "time_horizon: 0", "behaviors.3DBall", "time_horizon", ">= 1"),
])
def test_out_of_range_names_the_yaml_key(tmp_path, old, new, section, key, phrase):
    assert old in MLAGENTS_3DBALL
    assert_names(error_for(tmp_path, MLAGENTS_3DBALL.replace(old, new)), section, key, phrase)


def test_out_of_range_in_other_sections(tmp_path):
    err = error_for(tmp_path, MLAGENTS_3DBALL + "env_settings: {num_envs: 0}\n")
    assert_names(err, "env_settings", "num_envs", ">= 1")
    err = error_for(tmp_path, MLAGENTS_3DBALL + "unity_rl: {mode: fast}\n")
    assert_names(err, "unity_rl", "mode", "'sync', 'async'")
    err = error_for(tmp_path, MLAGENTS_3DBALL + "unity_rl: {ray_address: 'x:1'}\n")
    assert_names(err, "unity_rl", "ray_address", "backend is 'ray'")
    err = error_for(tmp_path, MLAGENTS_3DBALL + "torch_settings: {device: gpu}\n")
    assert_names(err, "torch_settings", "device", "'cuda'")
    err = error_for(tmp_path, MLAGENTS_3DBALL + "unity_rl: {max_lifetime_restarts: 3}\n")
    assert_names(err, "unity_rl", "max_lifetime_restarts", "env_settings")


HP = "behaviors.3DBall.hyperparameters"
NET = "behaviors.3DBall.network_settings"


def test_memory_is_read_with_mlagents_defaults_and_written_back(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL.replace(
        "vis_encode_type: simple", "vis_encode_type: simple\n      memory: {memory_size: 32}"))
    memory = cfg.behaviors["3DBall"].network_settings.memory
    assert (memory.sequence_length, memory.memory_size) == (64, 32)  # ML-Agents' default length
    dumped = dump_config(cfg)["behaviors"]["3DBall"]["network_settings"]["memory"]
    assert dumped == {"sequence_length": 64, "memory_size": 32}
    assert load_text(tmp_path, MLAGENTS_3DBALL).behaviors["3DBall"].network_settings.memory is None


@pytest.mark.parametrize("memory, key, problem", [
    ("{memory_size: 33}", "memory_size", "even"),
    ("{memory_size: 0}", "memory_size", ">= 1"),
    ("{sequence_length: 65}", "sequence_length", "batch_size (64)"),  # 3DBall: batch_size 64
    ("{sequence_lenght: 8}", "sequence_lenght", "unknown key"),
])
def test_memory_is_validated_as_mlagents_does(tmp_path, memory, key, problem):
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace(
        "vis_encode_type: simple", f"vis_encode_type: simple\n      memory: {memory}"))
    assert_names(err, NET + ".memory", key, problem)


def test_memory_is_refused_for_trainer_types_without_it(tmp_path):
    err = error_for(tmp_path, "behaviors:\n  B:\n    trainer_type: ddpg\n    network_settings:\n"
                              "      memory: {sequence_length: 8, memory_size: 16}\n")
    assert_names(err, "behaviors.B.network_settings", "memory",
                 "memory is not supported for trainer_type ddpg yet")


def test_sac_memory_sequence_length_is_checked_against_batch_size(tmp_path):
    err = error_for(tmp_path, "behaviors:\n  B:\n    trainer_type: sac\n    hyperparameters:\n"
                              "      batch_size: 32\n    network_settings:\n"
                              "      memory: {sequence_length: 64, memory_size: 16}\n")
    assert_names(err, "behaviors.B.network_settings.memory", "sequence_length", "batch_size (32)")


@pytest.mark.parametrize("old, new, section, key", [
    ("vis_encode_type: simple", "deterministic: true", NET, "deterministic"),
    ("keep_checkpoints: 5", "keep_checkpoints: 5\n    init_path: results/old", "behaviors.3DBall", "init_path"),
])
def test_unsupported_mlagents_features_are_refused_by_name(tmp_path, old, new, section, key):
    assert old in MLAGENTS_3DBALL
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace(old, new))
    assert_names(err, section, key, "not support")


def test_threaded_is_accepted_as_unity_s_food_collector_config_sets_it(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL.replace("keep_checkpoints: 5",
                                                      "keep_checkpoints: 5\n    threaded: true"))
    assert cfg.behaviors["3DBall"].threaded is True


def test_unknown_trainer_type_and_load_model(tmp_path):
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace("trainer_type: ppo", "trainer_type: mappo"))
    assert_names(err, "behaviors.3DBall", "trainer_type", "'ppo', 'ddpg', 'sac', 'poca'")
    err = error_for(tmp_path, MLAGENTS_3DBALL + "checkpoint_settings: {load_model: true}\n")
    assert_names(err, "checkpoint_settings", "load_model", "not support")


def test_initialize_from_and_inference_are_accepted_and_checked(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL + "checkpoint_settings: {initialize_from: old}\n")
    assert cfg.checkpoint_settings.initialize_from == "old"
    err = error_for(tmp_path, MLAGENTS_3DBALL + "checkpoint_settings: {inference: true}\n")
    assert_names(err, "checkpoint_settings", "inference", "resume or initialize_from")


@pytest.mark.parametrize("encoder", ["simple", "nature_cnn", "resnet", "match3", "fully_connected"])
def test_every_ml_agents_visual_encoder_is_accepted(tmp_path, encoder):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL.replace("vis_encode_type: simple",
                                                      f"vis_encode_type: {encoder}"))
    assert cfg.behaviors["3DBall"].network_settings.vis_encode_type == encoder


@pytest.mark.parametrize("kind", ["hyper", "none"])
def test_goal_conditioning_type_and_shared_critic_are_read(tmp_path, kind):
    text = MLAGENTS_3DBALL.replace("vis_encode_type: simple",
                                   f"vis_encode_type: simple\n      goal_conditioning_type: {kind}")
    cfg = load_text(tmp_path, text.replace("num_epoch: 3", "num_epoch: 3\n      shared_critic: true"))
    assert cfg.behaviors["3DBall"].network_settings.goal_conditioning_type == kind
    assert cfg.behaviors["3DBall"].hyperparameters.shared_critic is True
    assert load_text(tmp_path, MLAGENTS_3DBALL).behaviors["3DBall"].network_settings \
        .goal_conditioning_type == "hyper"  # ML-Agents' default
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace(
        "vis_encode_type: simple", "vis_encode_type: simple\n      goal_conditioning_type: film"))
    assert_names(err, NET, "goal_conditioning_type", "'film'", "hyper")


def test_unknown_visual_encoder_names_the_key_and_the_value(tmp_path):
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace("vis_encode_type: simple",
                                                      "vis_encode_type: vit"))
    assert_names(err, NET, "vis_encode_type", "'vit'", "nature_cnn", "match3")


def test_feature_off_values_of_unsupported_keys_are_accepted(tmp_path):
    text = MLAGENTS_3DBALL.replace("vis_encode_type: simple",
                                   "vis_encode_type: simple\n      memory: null\n      deterministic: false")
    text = text.replace("keep_checkpoints: 5", "keep_checkpoints: 5\n    threaded: false\n    self_play: null")
    assert load_text(tmp_path, text) == load_text(tmp_path, MLAGENTS_3DBALL)


def test_structural_mistakes(tmp_path):
    err = error_for(tmp_path, MLAGENTS_3DBALL + "envsettings: {}\n")
    assert err.key == "envsettings" and "env_settings" in str(err)
    err = error_for(tmp_path, MLAGENTS_3DBALL.replace("epsilon: 0.2", "epsilon: 0.2\n      epsilon: 0.3"))
    assert "'epsilon' appears twice" in str(err)
    err = error_for(tmp_path, "behaviors:\n  B: [1, 2]\n")
    assert err.section == "behaviors.B" and "mapping" in str(err)
    err = error_for(tmp_path, "env_settings: {num_envs: 1}\n")
    assert err.section == "behaviors" and "no behavior" in str(err)
    err = error_for(tmp_path, "behaviors: {B: {reward_signals: {}}}\n")
    assert_names(err, "behaviors.B.reward_signals", "extrinsic", "missing")
    assert "not valid YAML" in str(error_for(tmp_path, "behaviors: [\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_ddpg_behavior_uses_ddpg_config_names(tmp_path):
    cfg = load_text(tmp_path, """\
        behaviors:
          3DBall:
            trainer_type: ddpg
            hyperparameters: {batch_size: 128, buffer_size: 100000, tau: 0.01, exploration_noise: ou}
            reward_signals: {extrinsic: {gamma: 0.98}}
        """)
    hp = cfg.behaviors["3DBall"].hyperparameters
    assert isinstance(hp, DDPGConfig)
    assert (hp.batch_size, hp.buffer_size, hp.tau, hp.exploration_noise, hp.gamma) == (128, 100000, 0.01, "ou", 0.98)
    err = error_for(tmp_path, """\
        behaviors: {B: {trainer_type: ddpg, hyperparameters: {tau: 0.0}}}
        """)
    assert_names(err, "behaviors.B.hyperparameters", "tau", "(0, 1]")
    err = error_for(tmp_path, """\
        behaviors: {B: {trainer_type: ddpg, hyperparameters: {beta: 0.01}}}
        """)
    assert_names(err, "behaviors.B.hyperparameters", "beta", "unknown key", "tau")
    err = error_for(tmp_path, """\
        behaviors: {B: {trainer_type: ddpg, reward_signals: {extrinsic: {strength: 2.0}}}}
        """)
    assert_names(err, "behaviors.B.reward_signals.extrinsic", "strength", "1.0")


def test_default_settings_merge_and_behavior_selection(tmp_path):
    cfg = load_text(tmp_path, """\
        default_settings:
          hyperparameters: {batch_size: 32, buffer_size: 1024, beta: 0.01}
          time_horizon: 128
        behaviors:
          3DBall:
            hyperparameters: {batch_size: 64}
          Walker:
            trainer_type: ddpg
        """)
    ball = select_behavior(cfg, "3DBall?team=0")
    assert ball is select_behavior(cfg, "3DBall")
    assert (ball.hyperparameters.minibatch_size, ball.hyperparameters.buffer_size) == (64, 1024)
    assert ball.hyperparameters.ent_coef == 0.01 and ball.time_horizon == 128
    walker = select_behavior(cfg, "Walker?team=1")
    assert walker.trainer_type == "ddpg" and walker.time_horizon == 128  # PPO keys not merged into DDPG
    assert select_behavior(cfg, "Crawler") is cfg.default_settings
    no_default = load_text(tmp_path, MLAGENTS_3DBALL)
    with pytest.raises(ConfigError) as info:
        select_behavior(no_default, "Crawler?team=0")
    assert "Crawler" in str(info.value) and "3DBall" in str(info.value)


def test_command_line_overrides_win_and_are_checked(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL + "env_settings: {num_envs: 2, base_port: 6000}\n")
    out = apply_overrides(cfg, env="builds/3DBall", num_envs=4, base_port=None, run_id="r1",
                          resume=None, time_scale=10, torch_device="cpu", env_args=["-a", "b"],
                          num_actors=2, mode="async", seed=7)
    assert out.env_settings.env_path == "builds/3DBall" and out.env_settings.num_envs == 4
    assert out.env_settings.base_port == 6000  # None = not given: the YAML value stays
    assert out.checkpoint_settings.run_id == "r1" and out.checkpoint_settings.resume is False
    assert out.engine_settings.time_scale == 10.0 and out.torch_settings.device == "cpu"
    assert out.env_settings.env_args == ("-a", "b") and out.env_settings.seed == 7
    assert out.unity_rl.num_actors == 2 and out.unity_rl.mode == "async"
    assert cfg.env_settings.num_envs == 2  # the original is untouched

    with pytest.raises(ConfigError) as info:
        apply_overrides(cfg, num_envs=0)
    assert str(info.value).startswith("command line: --num-envs: must be an int >= 1")
    with pytest.raises(ConfigError, match="--time-scale.*expected a number"):
        apply_overrides(cfg, time_scale="fast")
    with pytest.raises(TypeError, match="unknown option"):
        apply_overrides(cfg, num_env=3)


def test_num_actors_null_is_one_per_build_in_sync_local_runs_up_to_the_cores(tmp_path,
                                                                            monkeypatch):
    from unity_rl.config import run_config

    cfg = load_text(tmp_path, MLAGENTS_3DBALL)
    assert cfg.unity_rl.num_actors is None and cfg.num_actors == 1      # one build
    monkeypatch.setattr(run_config, "usable_cores", lambda: 2)
    assert apply_overrides(cfg, num_envs=2).num_actors == 2
    assert apply_overrides(cfg, num_envs=8).num_actors == 2             # capped by the cores
    assert apply_overrides(cfg, num_envs=8, num_actors=3).num_actors == 3  # given: kept
    assert apply_overrides(cfg, num_envs=2, mode="async").num_actors == 1
    assert apply_overrides(cfg, num_envs=2, backend="ray").num_actors == 1
    # the default segment is then a share of the buffer per actor (PPO)
    two = apply_overrides(cfg, num_envs=2)
    [behavior] = two.behaviors.values()
    assert two.unity_rl.resolve_segment_steps(behavior, two.num_actors) == \
        -(-behavior.hyperparameters.buffer_size // 2)


def test_max_steps_override_reaches_every_behavior_and_the_learner_schedule(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL + "default_settings: {time_horizon: 32}\n")
    out = apply_overrides(cfg, max_steps=100_000)
    for b in (out.behaviors["3DBall"], out.default_settings):
        assert b.max_steps == 100_000 and b.hyperparameters.max_steps == 100_000
    with pytest.raises(ConfigError, match="--max-steps: must be an int >= 1"):
        apply_overrides(cfg, max_steps=0)


def test_configs_are_frozen(tmp_path):
    cfg = load_text(tmp_path, MLAGENTS_3DBALL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.debug = True
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.behaviors["3DBall"].hyperparameters.clip_coef = 0.3
    with pytest.raises(TypeError):
        cfg.behaviors["3DBall"] = None


def test_a_plain_mlagents_ppo_file_gets_mlagents_ppo(tmp_path):
    """PPOConfig holds ML-Agents' PPOSettings and nothing else (see docs/ppo.md)."""
    hp = parse_config({"behaviors": {"B": {"hyperparameters": {"batch_size": 32,
                                                                "buffer_size": 256}}}}
                      ).behaviors["B"].hyperparameters
    assert {f.name for f in dataclasses.fields(hp)} == {
        "learning_rate", "lr_schedule", "buffer_size", "minibatch_size", "num_epochs", "gae_lambda",
        "clip_coef", "clip_coef_schedule", "ent_coef", "ent_coef_schedule", "max_steps",
        "shared_critic"}


@pytest.mark.parametrize("key, value", [
    ("vf_coef", 0.5), ("max_grad_norm", 0.5), ("adam_eps", 1.0e-5), ("clip_value_loss", True),
    ("normalize_advantage", True), ("advantage_normalization", "minibatch"),
    ("minibatch_remainder", "spread"), ("policy_ratio", "joint"), ("gaussian_entropy", "sum"),
    ("schedule_steps", "trained"), ("activation", "tanh"), ("weight_init", "orthogonal"),
    ("action_clip", "unit"), ("target_kl", 0.02), ("log_std_init", 0.0)])
def test_removed_project_ppo_keys_are_unknown_keys(tmp_path, key, value):
    """Issue 16 item 6: the project-only PPO toggles are gone (docs/ppo.md says why)."""
    err = error_for(tmp_path, f"behaviors: {{B: {{hyperparameters: {{{key}: {value}}}}}}}\n")
    assert_names(err, "behaviors.B.hyperparameters", key, "unknown key")


def test_reward_signals_load_in_yaml_order_and_dump_back(tmp_path):
    cfg = load_text(tmp_path, """\
        behaviors:
          B:
            reward_signals:
              extrinsic: {gamma: 0.995, strength: 0.5, network_settings: {hidden_units: 64}}
        """)
    (extrinsic,) = cfg.behaviors["B"].reward_signals
    assert extrinsic == RewardSignalConfig("extrinsic", 0.995, 0.5, NetworkConfig(hidden_units=64))
    assert cfg.behaviors["B"].gamma == 0.995 and cfg.behaviors["B"].reward_strength == 0.5
    dumped = dump_config(cfg)["behaviors"]["B"]["reward_signals"]
    assert dumped == {"extrinsic": {"gamma": 0.995, "strength": 0.5, "network_settings": {
        "normalize": False, "hidden_units": 64, "num_layers": 2, "vis_encode_type": "simple",
        "goal_conditioning_type": "hyper", "memory": None}}}
    assert parse_config(dump_config(cfg)) == cfg
    assert load_text(tmp_path, "behaviors: {B: {reward_signals: null}}\n").behaviors["B"].reward_signals \
        == (RewardSignalConfig("extrinsic"),)
    err = error_for(tmp_path, "behaviors: {B: {reward_signals: {extrinsic: {encoding_size: 64}}}}\n")
    assert_names(err, "behaviors.B.reward_signals.extrinsic", "encoding_size", "unknown key")
    err = error_for(tmp_path, "behaviors: {B: {reward_signals: {pleasure: {}}}}\n")
    assert_names(err, "behaviors.B.reward_signals", "pleasure", "unknown reward signal", "extrinsic")


def test_poca_takes_learned_reward_signals_as_mlagents_does(tmp_path):
    """mlagents-learn 1.1.0's POCA warns about learned signals at run time, then trains them:
    the config takes them as for PPO."""
    cfg = load_text(tmp_path, "behaviors:\n  B:\n    trainer_type: poca\n    reward_signals:\n"
                              "      extrinsic: {gamma: 0.99, strength: 1.0}\n"
                              "      curiosity: {gamma: 0.9, strength: 0.02}\n"
                              "      rnd: {strength: 0.01}\n")
    signals = cfg.behaviors["B"].reward_signals
    assert [s.name for s in signals] == ["extrinsic", "curiosity", "rnd"]
    assert signals[1].gamma == 0.9 and signals[1].strength == 0.02
