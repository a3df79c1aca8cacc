"""The resolved configuration written back as YAML (``configuration.yaml`` of a run)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from unity_rl.algorithms.reward_signals.config import yaml_fields
from unity_rl.config.keys import MEMORY_KEYS, NETWORK_KEYS, SELF_PLAY_KEYS, hyperparameter_keys
from unity_rl.config.behavior_config import BehaviorConfig
from unity_rl.config.environment_parameters import SAMPLER_PARAMETERS, Curriculum, EnvironmentParameter
from unity_rl.config.run_config import RunConfig
from unity_rl.envs.settings import ENGINE_SECTION, ENV_SECTION, LaunchSettings, section_fields


CONFIG_FILE = "configuration.yaml"
"""The resolved configuration's file name in a run folder (as mlagents-learn names it)."""

# ==============================================================================================
# Writing the resolved configuration
# ==============================================================================================

def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _network(n) -> dict:
    """``network_settings`` as YAML: ``memory`` a mapping (or null)."""
    out = {key: getattr(n, f) for key, f in NETWORK_KEYS.items()}
    if n.memory is not None:
        out["memory"] = {key: getattr(n.memory, f) for key, f in MEMORY_KEYS.items()}
    return out


def _dump_behavior(b: BehaviorConfig) -> dict:
    hp = b.hyperparameters
    hp_keys = hyperparameter_keys(b.trainer_type)
    return {
        "trainer_type": b.trainer_type,
        "hyperparameters": {key: _plain(getattr(hp, f)) for key, f in hp_keys.items()},
        "network_settings": _network(b.network_settings),
        "reward_signals": {s.name: {**{f.name: _plain(getattr(s, f.name))
                                       for f in yaml_fields(type(s))
                                       if f.name not in ("name", "network_settings")},
                                    "network_settings": _network(s.network_settings)}
                           for s in b.reward_signals},
        "max_steps": b.max_steps,
        "time_horizon": b.time_horizon,
        "summary_freq": b.summary_freq,
        "checkpoint_interval": b.checkpoint_interval,
        "keep_checkpoints": b.keep_checkpoints,
        "even_checkpoints": b.even_checkpoints,
        "threaded": b.threaded,
        "behavioral_cloning": (None if b.behavioral_cloning is None
                               else _dump_section(b.behavioral_cloning)),
        "self_play": None if b.self_play is None else
        {key: getattr(b.self_play, f) for key, f in SELF_PLAY_KEYS.items()},
    }


def _dump_environment_parameter(p: EnvironmentParameter) -> Any:
    if p.sampler_type == "constant" and p.seed == -1:
        return p.value
    return {"sampler_type": p.sampler_type,
            "sampler_parameters": {k: _plain(getattr(p, k)) for k in SAMPLER_PARAMETERS[p.sampler_type]}}


def _dump_parameter(p: EnvironmentParameter | Curriculum) -> Any:
    """An ``environment_parameters`` entry: a value, or ``{curriculum: [lesson, ...]}``."""
    if not isinstance(p, Curriculum):
        return _dump_environment_parameter(p)
    lessons = []
    for lesson in p.lessons:
        entry = {"name": lesson.name, "value": _dump_environment_parameter(lesson.value)}
        if lesson.completion_criteria is not None:
            entry["completion_criteria"] = _dump_section(lesson.completion_criteria)
        lessons.append(entry)
    return {"curriculum": lessons}


def _dump_section(obj: Any) -> dict:
    return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _dump_launch(launch: LaunchSettings, section: str) -> dict:
    """The keys of one launch section (env_settings or engine_settings), in declaration order."""
    return {f.name: _plain(getattr(launch, f.name)) for f in section_fields(section)}


def dump_config(cfg: RunConfig) -> dict:
    """The resolved configuration as plain YAML-ready data, every key explicit.

    ``parse_config(dump_config(cfg)) == cfg``; write it next to a run's results so that the run
    can be repeated or resumed with exactly these settings.
    """
    return {
        "default_settings": None if cfg.default_settings is None else _dump_behavior(cfg.default_settings),
        "behaviors": {name: _dump_behavior(b) for name, b in cfg.behaviors.items()},
        "env_settings": _dump_launch(cfg.launch, ENV_SECTION),
        "engine_settings": _dump_launch(cfg.launch, ENGINE_SECTION),
        "environment_parameters": {name: _dump_parameter(p)
                                   for name, p in cfg.environment_parameters.items()} or None,
        "checkpoint_settings": _dump_section(cfg.checkpoint_settings),
        "torch_settings": _dump_section(cfg.torch_settings),
        "debug": cfg.debug,
        "unity_rl": _dump_section(cfg.unity_rl),
    }


def config_to_yaml(cfg: RunConfig) -> str:
    """dump_config as YAML text."""
    return yaml.safe_dump(dump_config(cfg), sort_keys=False, default_flow_style=False)


def write_config(cfg: RunConfig, path: str | Path) -> None:
    """Writes the resolved configuration as YAML (ML-Agents writes run_logs/configuration.yaml)."""
    Path(path).write_text(config_to_yaml(cfg), encoding="utf-8")
