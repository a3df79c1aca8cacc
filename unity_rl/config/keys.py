"""YAML keys <-> dataclass fields, and the ML-Agents features refused by name."""
from __future__ import annotations

import dataclasses

from unity_rl.config.sections import (
    HYPERPARAMETERS,
    CheckpointConfig,
    UnityRLConfig,
)
from unity_rl.envs.settings import ENGINE_SECTION, ENV_SECTION, section_fields


PPO_KEYS: dict[str, str] = {
    "batch_size": "minibatch_size",
    "buffer_size": "buffer_size",
    "learning_rate": "learning_rate",
    "learning_rate_schedule": "lr_schedule",
    "beta": "ent_coef",
    "beta_schedule": "ent_coef_schedule",
    "epsilon": "clip_coef",
    "epsilon_schedule": "clip_coef_schedule",
    "lambd": "gae_lambda",
    "num_epoch": "num_epochs",
    # ours (ML-Agents has fixed values for these; the defaults reproduce them, see PPOConfig)
    "vf_coef": "vf_coef",
    "max_grad_norm": "max_grad_norm",
    "adam_eps": "adam_eps",
    "clip_value_loss": "clip_vloss",
    "normalize_advantage": "norm_adv",
    "advantage_normalization": "adv_norm_scope",
    "minibatch_remainder": "minibatch_remainder",
    "policy_ratio": "policy_ratio",
    "gaussian_entropy": "gaussian_entropy",
    "schedule_steps": "schedule_steps",
    "activation": "activation",
    "weight_init": "weight_init",
    "action_clip": "action_clip",
    "target_kl": "target_kl",
    "log_std_init": "log_std_init",
}
"""YAML key under behaviors.<name>.hyperparameters (trainer_type ppo) -> PPOConfig field."""

FROM_ELSEWHERE = {"gamma", "reward_scale", "max_steps"}
"""Learner-config fields filled from other YAML keys (reward_signals, max_steps)."""


def hyperparameter_keys(trainer_type: str) -> dict[str, str]:
    if trainer_type == "ppo":
        return PPO_KEYS
    return {f.name: f.name for f in dataclasses.fields(HYPERPARAMETERS[trainer_type])
            if f.name not in FROM_ELSEWHERE}


NETWORK_KEYS = {"normalize": "normalize", "hidden_units": "hidden_units", "num_layers": "num_layers",
                 "vis_encode_type": "vis_encode_type"}
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
    "behavior": {"init_path": (None,), "self_play": (None,),
                 "behavioral_cloning": (None,), "framework": ("pytorch",)},
    "ppo": {"shared_critic": (False,)},
    "network": {"memory": (None,), "goal_conditioning_type": ("hyper",), "deterministic": (False,)},
    "reward_signals": {"curiosity": (), "gail": (), "rnd": ()},
    "checkpoint": {"load_model": (False,), "train_model": (False,)},
    "top": {"curriculum": (), "parameter_randomization": ()},
}

MOVED = {"timeout_wait", "max_lifetime_restarts", "restarts_rate_limit_n", "restarts_rate_limit_period_s",
         "seed", "num_envs", "base_port", "env_path", "env_args"}
"""Keys someone may put under unity_rl that ML-Agents (and we) keep in env_settings."""
