"""Run configuration: ML-Agents' trainer-config YAML, loaded strictly into frozen dataclasses.

One format, the one ``mlagents-learn`` reads, so that its users keep their files (including the
``configuration.yaml`` that mlagents-learn writes into a run folder)::

    behaviors:
      3DBall:                       # one section per behavior name (Unity's name before '?')
        trainer_type: ppo           # a name in unity_rl.algorithms.registry (ppo | ddpg)
        hyperparameters: {batch_size: 64, buffer_size: 12000, learning_rate: 3.0e-4, ...}
        network_settings: {normalize: true, hidden_units: 128, num_layers: 2}
        reward_signals: {extrinsic: {gamma: 0.99, strength: 1.0}}
        max_steps: 500000
        time_horizon: 1000
        summary_freq: 12000
        checkpoint_interval: 500000
        keep_checkpoints: 5
    default_settings: {...}         # optional: merged under every behavior, used for others
    env_settings: {env_path, env_args, base_port, num_envs, num_areas, seed, timeout_wait,
                   max_lifetime_restarts, restarts_rate_limit_n, restarts_rate_limit_period_s}
    engine_settings: {width, height, quality_level, time_scale, target_frame_rate,
                      capture_frame_rate, no_graphics, no_graphics_monitor}
                                    # both load into RunConfig.launch, one LaunchSettings
                                    # (unity_rl/envs/settings.py declares keys and defaults)
    environment_parameters: {mass: 1.0, scale: {sampler_type: uniform, sampler_parameters: ...},
                             wall: {curriculum: [{name, value, completion_criteria}, ...]}}
    checkpoint_settings: {run_id, resume, force, results_dir, initialize_from, inference}
    torch_settings: {device}
    debug: false
    unity_rl:                       # ours: what ML-Agents has no key for
      mode: sync                    # sync | async
      num_actors: null              # sync, local: one per build (up to the cores); else 1
      ...

Strictness (as ML-Agents' ``strict_to_cls``, with better messages): an unknown key, a value of
the wrong type or out of range raises ``ConfigError`` naming the file, the section path (e.g.
``behaviors.3DBall.hyperparameters``) and the key, and saying what is accepted.  ML-Agents
features that unity_rl does not implement (the curiosity, GAIL and RND reward signals, behavioral cloning,
self-play, memory outside PPO and SAC, ...) are refused by name; only the values that mean "feature off"
(``deterministic: false``, ...) are accepted; ``threaded`` is accepted either way (it changes nothing here). Every
``vis_encode_type`` is implemented (``unity_rl.algorithms.encoders``).

The package splits by concern: the sections as frozen dataclasses (``run_config``: ``RunConfig``
and its run-level sections; ``behavior_config``; ``environment_parameters``: samplers and
curricula; built of ``frozen_map`` and ``field_checks``), ``keys`` (YAML keys <-> fields),
``strict``, ``parsing``, ``parse_behavior`` and ``parse_environment_parameters`` (strict
loading), ``overrides`` (command-line values), ``dump`` (writing it back).

``hyperparameters`` are read by the trainer type's spec (``unity_rl.algorithms.registry``): its
torch-free config dataclass and YAML keys. PPO keeps ML-Agents' keys and lands in ``PPOConfig``,
whose fields carry the paper's names (``epsilon`` -> ``clip_coef``, ``lambd`` -> ``gae_lambda``,
``beta`` -> ``ent_coef``...).  ``reward_signals`` load as one ``RewardSignalConfig`` per entry
(name, gamma, strength, network_settings; ``unity_rl.algorithms.reward_signals``), held by the
behavior in YAML order; curiosity, GAIL and RND are refused by name until they are registered.
Importing this package imports no torch.

YAML floats: PyYAML reads ``3e-4`` (no dot) as a *string*; ML-Agents' loader converts it
silently.  We read such numbers as floats (YAML 1.2 rules), so the same files load.
"""
from __future__ import annotations

from unity_rl.config.dump import CONFIG_FILE, config_to_yaml, dump_config, write_config
from unity_rl.config.overrides import OVERRIDES, apply_overrides, select_behavior
from unity_rl.config.parsing import load_config, parse_config
from unity_rl.config.behavior_config import BehaviorConfig
from unity_rl.config.environment_parameters import (SAMPLER_PARAMETERS, CompletionCriteria,
                                                    Curriculum, EnvironmentParameter, Lesson)
from unity_rl.config.frozen_map import FrozenMap
from unity_rl.config.run_config import CheckpointConfig, RunConfig, TorchConfig, UnityRLConfig
from unity_rl.envs.settings import LaunchSettings
from unity_rl.errors import ConfigError

__all__ = [
    "CONFIG_FILE", "OVERRIDES", "SAMPLER_PARAMETERS", "BehaviorConfig",
    "CheckpointConfig", "CompletionCriteria", "ConfigError", "Curriculum",
    "EnvironmentParameter", "FrozenMap", "Lesson", "LaunchSettings", "RunConfig", "TorchConfig", "UnityRLConfig", "apply_overrides",
    "config_to_yaml", "dump_config", "load_config", "parse_config", "select_behavior",
    "write_config",
]
