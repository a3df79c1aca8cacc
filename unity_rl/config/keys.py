"""YAML keys <-> dataclass fields, and the ML-Agents features refused by name."""
from __future__ import annotations

import dataclasses

from unity_rl.algorithms.registry import trainer_type as trainer_type_spec
from unity_rl.config.run_config import CheckpointConfig, UnityRLConfig
from unity_rl.envs.settings import ENGINE_SECTION, ENV_SECTION, section_fields


def hyperparameter_keys(trainer_type: str) -> dict[str, str]:
    """YAML key under ``hyperparameters`` -> field of the trainer type's config (its SPEC)."""
    return dict(trainer_type_spec(trainer_type).yaml_keys)


NETWORK_KEYS = {"normalize": "normalize", "hidden_units": "hidden_units", "num_layers": "num_layers",
                 "vis_encode_type": "vis_encode_type",
                 "goal_conditioning_type": "goal_conditioning_type", "memory": "memory"}
SELF_PLAY_KEYS = {k: k for k in ("save_steps", "team_change", "swap_steps", "window",
                                   "play_against_latest_model_ratio", "initial_elo")}
"""``self_play`` keys -> ``SelfPlayConfig`` fields (ML-Agents' ``SelfPlaySettings``)."""
MEMORY_KEYS = {"sequence_length": "sequence_length", "memory_size": "memory_size"}
"""``network_settings.memory`` keys -> ``MemoryConfig`` fields (ML-Agents' ``MemorySettings``)."""
BEHAVIOR_KEYS = {k: k for k in ("trainer_type", "max_steps", "time_horizon", "summary_freq",
                                 "checkpoint_interval", "keep_checkpoints", "even_checkpoints",
                                 "threaded")}
ENV_KEYS = {f.name: f.name for f in section_fields(ENV_SECTION)}
"""env_settings key -> LaunchSettings field (the same name, ML-Agents')."""
ENGINE_KEYS = {f.name: f.name for f in section_fields(ENGINE_SECTION)}
"""engine_settings key -> LaunchSettings field (the same name, ML-Agents')."""
CHECKPOINT_KEYS = {f.name: f.name for f in dataclasses.fields(CheckpointConfig)}
TORCH_KEYS = {"device": "device"}
UNITY_RL_KEYS = {f.name: f.name for f in dataclasses.fields(UnityRLConfig)}
TOP_KEYS = ("behaviors", "default_settings", "env_settings", "engine_settings",
             "environment_parameters", "checkpoint_settings", "torch_settings", "debug", "unity_rl")

NOT_SUPPORTED = "is an ML-Agents option that unity_rl does not support"
UNSUPPORTED: dict[str, dict[str, tuple]] = {
    # section kind -> key -> values that mean "feature off" (accepted and ignored)
    "behavior": {"init_path": (None,), "framework": ("pytorch",)},
    "network": {"deterministic": (False,)},
    "checkpoint": {"load_model": (False,), "train_model": (False,)},
    "top": {"curriculum": (), "parameter_randomization": ()},
}

MOVED = {"timeout_wait", "max_lifetime_restarts", "restarts_rate_limit_n", "restarts_rate_limit_period_s",
         "seed", "num_envs", "base_port", "env_path", "env_args"}
"""Keys someone may put under unity_rl that ML-Agents (and we) keep in env_settings."""

OLD_BEHAVIOR_KEYS = {
    "output_path": "a key of pre-1.0 ML-Agents configs that mlagents-learn 1.1.0 no longer "
                   "reads (results go under checkpoint_settings.results_dir / --results-dir): "
                   "delete it",
}
"""Behavior keys of ML-Agents configs older than 1.0 -> what to do (one-line errors)."""
