"""Strict YAML loading (ML-Agents' ``strict_to_cls``, with better messages): ``parse_config``
and ``load_config``; an unknown key, a wrong type or an out-of-range value is a ``ConfigError``
naming the file, the section and the key.

The generic strict-structuring helpers are in ``strict``; the parsers of the large sections in
``parse_behavior`` (``behaviors``, ``default_settings``) and ``parse_environment_parameters``.
This module reads the top level (``default_settings`` merged under every behavior; the run-level
sections; ``env_settings`` + ``engine_settings`` into one ``LaunchSettings``) and the YAML file
itself (duplicate keys refused; ``3e-4`` read as a float, YAML 1.2).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from unity_rl.config.behavior_config import BehaviorConfig
from unity_rl.config.frozen_map import FrozenMap
from unity_rl.config.keys import (CHECKPOINT_KEYS, ENGINE_KEYS, ENV_KEYS, MOVED, NOT_SUPPORTED,
                                  TOP_KEYS, TORCH_KEYS, UNITY_RL_KEYS, UNSUPPORTED)
from unity_rl.config.parse_behavior import parse_behavior
from unity_rl.config.parse_environment_parameters import (check_curriculum_behaviors,
                                                          parse_environment_parameter)
from unity_rl.config.run_config import CheckpointConfig, RunConfig, TorchConfig, UnityRLConfig
from unity_rl.config.strict import Where, _build, _deep_merge, _mapping, _read_keys, coerce
from unity_rl.envs.settings import LaunchSettings
from unity_rl.errors import ConfigError


def _section(raw: Mapping, name: str, cls: type, keys: dict[str, str], file: str,
             unsupported: Mapping[str, tuple] = {}) -> Any:
    where = Where(file, name)
    kwargs = _read_keys(_mapping(raw.get(name), where), cls, keys, where, unsupported)
    return _build(cls, kwargs, where, keys)


def _parse_launch(raw: Mapping, file: str) -> LaunchSettings:
    """env_settings + engine_settings -> the one LaunchSettings; errors name the section."""
    kwargs: dict[str, Any] = {}
    elsewhere: dict[str, tuple[Where, str]] = {}
    for name, keys in (("env_settings", ENV_KEYS), ("engine_settings", ENGINE_KEYS)):
        where = Where(file, name)
        kwargs.update(_read_keys(_mapping(raw.get(name), where), LaunchSettings, keys, where))
        elsewhere.update({field_name: (where, key) for key, field_name in keys.items()})
    return _build(LaunchSettings, kwargs, Where(file, "env_settings"), {}, elsewhere)


def parse_config(raw: Any, source: str = "<config>") -> RunConfig:
    """A YAML document (already parsed) -> RunConfig; ``source`` names it in errors."""
    top = Where(source, None)
    if raw is None:
        raise top.error(None, "the file is empty; it needs at least a 'behaviors' section")
    raw = _mapping(raw, top)
    for key in raw:
        if key in UNSUPPORTED["top"]:
            raise top.error(key, f"{NOT_SUPPORTED} (an old ML-Agents format): use "
                                 "environment_parameters")
        if key not in TOP_KEYS:
            raise top.error(key, f"unknown section. Accepted: {', '.join(TOP_KEYS)}")

    default_raw = raw.get("default_settings")
    default_settings = None
    if default_raw is not None:
        default_settings = parse_behavior(default_raw, Where(source, "default_settings"))
        default_raw = _mapping(default_raw, Where(source, "default_settings"))

    behaviors_where = Where(source, "behaviors")
    behaviors = {}
    for name, behavior_raw in _mapping(raw.get("behaviors"), behaviors_where).items():
        where = behaviors_where.child(name)
        behavior_raw = _mapping(behavior_raw, where)
        if default_raw is not None:
            base = dict(default_raw)
            default_type = BehaviorConfig.trainer_type
            if behavior_raw.get("trainer_type", default_type) != base.get("trainer_type", default_type):
                base.pop("hyperparameters", None)  # another algorithm's keys would not fit
            behavior_raw = _deep_merge(base, behavior_raw)
        behaviors[name] = parse_behavior(behavior_raw, where)
    if not behaviors and default_settings is None:
        raise behaviors_where.error(None, "no behavior is configured: add a section "
                                          "behaviors.<BehaviorName> (or default_settings)")

    env_params_where = Where(source, "environment_parameters")
    environment_parameters = {
        name: parse_environment_parameter(value, env_params_where, name)
        for name, value in _mapping(raw.get("environment_parameters"), env_params_where).items()}
    check_curriculum_behaviors(environment_parameters, behaviors, default_settings is not None,
                                env_params_where)

    unity_rl_where = Where(source, "unity_rl")
    for key in _mapping(raw.get("unity_rl"), unity_rl_where):
        if key in MOVED:
            raise unity_rl_where.error(key, f"belongs in env_settings (as in ML-Agents), not in unity_rl")

    debug = coerce(raw.get("debug", False), bool, top, "debug")
    return RunConfig(
        behaviors=FrozenMap(behaviors),
        default_settings=default_settings,
        launch=_parse_launch(raw, source),
        environment_parameters=FrozenMap(environment_parameters),
        checkpoint_settings=_section(raw, "checkpoint_settings", CheckpointConfig, CHECKPOINT_KEYS,
                                     source, UNSUPPORTED["checkpoint"]),
        torch_settings=_section(raw, "torch_settings", TorchConfig, TORCH_KEYS, source),
        debug=debug,
        unity_rl=_section(raw, "unity_rl", UnityRLConfig, UNITY_RL_KEYS, source),
        source=source,
    )


# ==============================================================================================
# Files
# ==============================================================================================

class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and reads 3e-4 as a float (YAML 1.2)."""


class _DuplicateKey(Exception):
    pass


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue  # unhashable key: construct_mapping reports it
        if duplicate:
            raise _DuplicateKey(f"key '{key}' appears twice in one mapping (line {key_node.start_mark.line + 1})")
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def load_config(path: str | Path) -> RunConfig:
    """Reads and checks a YAML config file; raises ConfigError (naming file, section, key)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, None, None, f"cannot read the file: {exc.strerror or exc}") from None
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(source, None, None, str(exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, None, None, f"not valid YAML: {exc}") from None
    return parse_config(raw, source)
