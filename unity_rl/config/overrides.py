"""Command-line values over a loaded config (``apply_overrides``, mlagents-learn's option names)
and the settings of one behavior (``select_behavior``)."""
from __future__ import annotations

import dataclasses
import typing
from typing import Any


from unity_rl.config.keys import CHECKPOINT_KEYS, ENGINE_KEYS, ENV_KEYS, UNITY_RL_KEYS
from unity_rl.config.strict import VALUE_ERROR, Where, coerce
from unity_rl.config.behavior_config import BehaviorConfig
from unity_rl.config.frozen_map import FrozenMap
from unity_rl.config.run_config import RunConfig
from unity_rl.envs.types import short_name
from unity_rl.errors import ConfigError


# ==============================================================================================
# Behavior selection and command-line overrides
# ==============================================================================================

def select_behavior(cfg: RunConfig, behavior_name: str) -> BehaviorConfig:
    """The settings for ``behavior_name`` ('3DBall?team=0' matches a section '3DBall').

    Exact name first, then the name without its '?team=..' suffix, then default_settings.
    """
    for name in (behavior_name, short_name(behavior_name)):
        if name in cfg.behaviors:
            return cfg.behaviors[name]
    if cfg.default_settings is not None:
        return cfg.default_settings
    raise ConfigError(cfg.source or "<config>", "behaviors", short_name(behavior_name),
                      f"no settings for behavior '{behavior_name}'. Configured behaviors: "
                      f"{', '.join(sorted(cfg.behaviors)) or '(none)'}. Add a section "
                      f"behaviors.{behavior_name.split('?', 1)[0]} or default_settings.")


OVERRIDES: dict[str, tuple[str, str]] = {
    # command-line name (mlagents-learn's) -> (RunConfig attribute, field)
    "env": ("launch", "env_path"),
    **{name: ("launch", name) for name in (*ENV_KEYS, *ENGINE_KEYS)},  # env_path, num_envs...
    **{name: ("checkpoint_settings", name) for name in CHECKPOINT_KEYS},
    "torch_device": ("torch_settings", "device"),
    "device": ("torch_settings", "device"),
    "debug": ("", "debug"),
    **{name: ("unity_rl", name) for name in UNITY_RL_KEYS},
    "max_steps": ("behaviors", "max_steps"),
}
"""apply_overrides' keyword -> (section attribute of RunConfig, field); '' is RunConfig itself,
'behaviors' every behavior and default_settings."""


def apply_overrides(cfg: RunConfig, **cli_values: Any) -> RunConfig:
    """A copy of ``cfg`` with command-line values applied (they win over the YAML).

    Keywords are mlagents-learn's option names (``env``, ``run_id``, ``num_envs``,
    ``torch_device``...; see ``OVERRIDES``), plus ``max_steps`` (every behavior); a value of None
    means "not given".  Store-true flags must pass None, not False, when absent.  Bad values
    raise ConfigError naming the flag.
    """
    unknown = sorted(set(cli_values) - set(OVERRIDES))
    if unknown:
        raise TypeError(f"apply_overrides: unknown option(s) {unknown}; known: {sorted(OVERRIDES)}")
    changes: dict[str, dict[str, Any]] = {}
    flags: dict[tuple[str, str], str] = {}
    for name, value in cli_values.items():
        if value is None:
            continue
        section, field_name = OVERRIDES[name]
        flag = "--" + ("env" if name == "env_path" else name).replace("_", "-")
        owner = {"": RunConfig, "behaviors": BehaviorConfig}.get(section) or type(getattr(cfg, section))
        value = coerce(value, typing.get_type_hints(owner)[field_name], Where("command line", None), flag)
        changes.setdefault(section, {})[field_name] = value
        flags[(section, field_name)] = flag
    top_changes = changes.pop("", {})
    for section, values in changes.items():
        try:
            if section == "behaviors":
                top_changes["behaviors"] = FrozenMap(
                    {name: dataclasses.replace(b, **values) for name, b in cfg.behaviors.items()})
                if cfg.default_settings is not None:
                    top_changes["default_settings"] = dataclasses.replace(cfg.default_settings, **values)
            else:
                top_changes[section] = dataclasses.replace(getattr(cfg, section), **values)
        except ValueError as exc:
            match = VALUE_ERROR.match(str(exc))
            field_name = match.group(1) if match else None
            flag = flags.get((section, field_name), f"{section}.{field_name}")
            problem = f"must be {match.group(2)}" if match else str(exc)
            raise ConfigError("command line", None, flag, problem) from None
    return dataclasses.replace(cfg, **top_changes)
