"""Strict parsing of one ``behaviors.<name>`` section (or ``default_settings``) into a
``BehaviorConfig``: its keys, the trainer type's ``hyperparameters`` (read by the type's spec:
its YAML keys, defaults and "off" values, ``unity_rl.algorithms.registry``), ``network_settings``
with ``memory``, ``reward_signals`` (one ``RewardSignalConfig`` per entry, YAML order),
``behavioral_cloning`` and ``self_play``. What ML-Agents has and unity_rl does not is refused by
name; every error is a ``ConfigError`` naming the file, the section path and the key. Values
ML-Agents accepts and ignores (memory on a reward signal, a self-play ratio outside [0, 1]) are
logged as warnings, as mlagents-learn does.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

from unity_rl.algorithms.imitation.config import BC_KEYS, BehavioralCloningConfig
from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.registry import MLAGENTS_TRAINER_TYPES, trainer_type_names
from unity_rl.algorithms.registry import trainer_type as trainer_type_spec
from unity_rl.algorithms.reward_signals.config import (EXTRINSIC_ONLY, RewardSignalConfig,
                                                      settings_class, yaml_fields)
from unity_rl.algorithms.reward_signals.registry import MLAGENTS_REWARD_SIGNALS, reward_signal_names
from unity_rl.config.behavior_config import MEMORY_TRAINER_TYPES, BehaviorConfig, SelfPlayConfig
from unity_rl.config.keys import (BEHAVIOR_KEYS, MEMORY_KEYS, NETWORK_KEYS, NOT_SUPPORTED,
                                  OLD_BEHAVIOR_KEYS, SELF_PLAY_KEYS, UNSUPPORTED)
from unity_rl.config.strict import Where, _build, _mapping, _read_keys

logger = logging.getLogger(__name__)


def _parse_network(raw: Any, where: Where) -> NetworkConfig:
    raw = _mapping(raw, where)
    kwargs = _read_keys(raw, NetworkConfig, NETWORK_KEYS, where, UNSUPPORTED["network"],
                        skip=("memory",))
    if raw.get("memory") is not None:  # a mapping (null: no memory, ML-Agents' default)
        mem_where = where.child("memory")
        mem_kwargs = _read_keys(_mapping(raw["memory"], mem_where), MemoryConfig, MEMORY_KEYS,
                                mem_where)
        kwargs["memory"] = _build(MemoryConfig, mem_kwargs, mem_where, MEMORY_KEYS)
    return _build(NetworkConfig, kwargs, where, NETWORK_KEYS)


def _check_memory(trainer_type: str, hyperparameters: Any, network: NetworkConfig,
                  where: Where) -> None:
    """ML-Agents' memory validation: ``sequence_length <= batch_size`` (its
    ``TrainerSettings._check_batch_size_seq_length``); trainer types without memory refuse it."""
    memory = network.memory
    if memory is None:
        return
    net_where = where.child("network_settings")
    if trainer_type not in MEMORY_TRAINER_TYPES:
        raise net_where.error("memory", f"memory is not supported for trainer_type "
                                        f"{trainer_type} yet (supported: "
                                        f"{', '.join(MEMORY_TRAINER_TYPES)}); set memory: null")
    batch_size = getattr(hyperparameters, "minibatch_size",
                         getattr(hyperparameters, "batch_size", None))
    if batch_size is not None and memory.sequence_length > batch_size:
        raise net_where.child("memory").error(
            "sequence_length", f"must be <= hyperparameters.batch_size ({batch_size}), "
                               f"got {memory.sequence_length}")


REWARD_SIGNAL_KEYS = {"gamma": "gamma", "strength": "strength"}
"""YAML keys of every ``reward_signals.<name>`` entry besides ``network_settings`` (ML-Agents'
``RewardSignalSettings``); a signal's settings class adds its own (``signal_keys``)."""


def signal_keys(cls: type) -> dict[str, str]:
    """YAML key -> field of a reward signal's settings class: its fields but name and
    network_settings."""
    return {f.name: f.name for f in yaml_fields(cls)
            if f.name not in ("name", "network_settings")}


def _parse_reward_signals(raw: Any, where: Where) -> tuple[RewardSignalConfig, ...]:
    """``reward_signals`` -> one ``RewardSignalConfig`` per entry, in YAML order (ML-Agents' order
    of the value heads); absent or null: ML-Agents' default, extrinsic only."""
    if raw is None:
        return EXTRINSIC_ONLY
    raw = _mapping(raw, where)
    known = reward_signal_names()
    signals = []
    for name, value in raw.items():
        if name not in known:
            accepted = ", ".join(known)
            if name in MLAGENTS_REWARD_SIGNALS:
                raise where.error(name, f"reward signal '{name}' {NOT_SUPPORTED} yet; accepted: {accepted}")
            raise where.error(name, f"unknown reward signal. Accepted keys: {accepted}")
        here = where.child(name)
        entry = _mapping(value, here)
        cls = settings_class(name)
        keys = signal_keys(cls)
        if "demo_path" in keys and "demo_path" not in entry:
            raise here.error("demo_path", "missing: the expert .demo file (or a directory of "
                                          "them) the discriminator learns from")
        kwargs = _read_keys(entry, cls, keys, here, skip=("network_settings",))
        network = _parse_network(entry.get("network_settings"), here.child("network_settings"))
        if kwargs.get("encoding_size") is not None and entry.get("network_settings") is None:
            # ML-Agents: the deprecated encoding_size is the hidden size without network_settings
            network = dataclasses.replace(network, hidden_units=kwargs["encoding_size"])
        if network.memory is not None:  # ML-Agents strips it from reward signals (with a warning)
            logger.warning("%s.network_settings: memory is ignored for reward signals (as "
                           "mlagents-learn does)", here.section)
            network = dataclasses.replace(network, memory=None)
        kwargs["network_settings"] = network
        signals.append(_build(cls, {"name": name, **kwargs}, here, keys))
    if not signals:
        raise where.error("extrinsic", "missing: reward_signals needs at least one signal (ML-Agents' default: extrinsic)")
    return tuple(signals)


def _parse_self_play(raw: Any, trainer_type: str, where: Where) -> SelfPlayConfig | None:
    """``self_play`` (null or absent: off) -> ``SelfPlayConfig``, strictly; a trainer type whose
    spec says it cannot be wrapped (DDPG) is refused by name."""
    if raw is None:
        return None
    if not trainer_type_spec(trainer_type).self_play:
        wrappable = [n for n in trainer_type_names() if trainer_type_spec(n).self_play]
        raise where.error("self_play", f"self-play is not available for trainer_type "
                                       f"{trainer_type!r} (mlagents-learn's GhostTrainer wraps "
                                       f"{', '.join(wrappable)}); remove self_play or change "
                                       f"trainer_type")
    sp_where = where.child("self_play")
    kwargs = _read_keys(_mapping(raw, sp_where), SelfPlayConfig, SELF_PLAY_KEYS, sp_where)
    config = _build(SelfPlayConfig, kwargs, sp_where, SELF_PLAY_KEYS)
    if not 0.0 <= config.play_against_latest_model_ratio <= 1.0:  # ML-Agents only warns
        logger.warning("%s: play_against_latest_model_ratio %s is not between 0 and 1",
                       sp_where.section, config.play_against_latest_model_ratio)
    return config


def parse_behavior(raw: Any, where: Where) -> BehaviorConfig:
    """One behavior section (``default_settings`` already merged in) -> ``BehaviorConfig``."""
    raw = _mapping(raw, where)
    old = [key for key in raw if key in OLD_BEHAVIOR_KEYS]
    if old:
        raise where.error(old[0], OLD_BEHAVIOR_KEYS[old[0]])
    name = raw.get("trainer_type", BehaviorConfig.trainer_type)
    known = trainer_type_names()
    if name not in known:
        accepted = ", ".join(repr(n) for n in known)
        if name in MLAGENTS_TRAINER_TYPES:
            raise where.error("trainer_type", f"'{name}' {NOT_SUPPORTED}; accepted: {accepted}")
        raise where.error("trainer_type", f"unknown trainer type {name!r}; accepted: {accepted}")
    spec = trainer_type_spec(name)
    subsections = ("hyperparameters", "network_settings", "reward_signals", "behavioral_cloning",
                   "self_play")
    kwargs = _read_keys(raw, BehaviorConfig, BEHAVIOR_KEYS, where, UNSUPPORTED["behavior"], skip=subsections)
    trainer_type = kwargs.get("trainer_type", BehaviorConfig.trainer_type)

    hp_where = where.child("hyperparameters")
    hp_raw = dict(_mapping(raw.get("hyperparameters"), hp_where))
    hp_keys = dict(spec.yaml_keys)
    hp_cls = spec.hyperparameters
    if spec.fill_defaults is not None:
        hp_raw = spec.fill_defaults(hp_raw)
    hp_kwargs = _read_keys(hp_raw, hp_cls, hp_keys, hp_where, spec.off_values)

    rs_where = where.child("reward_signals")
    signals = _parse_reward_signals(raw.get("reward_signals"), rs_where)
    hp_fields = {f.name for f in dataclasses.fields(hp_cls)}
    max_steps = kwargs.get("max_steps", BehaviorConfig.max_steps)
    if "max_steps" in hp_fields:
        hp_kwargs["max_steps"] = max_steps
    elsewhere = {"max_steps": (where, "max_steps")}
    if "gamma" in hp_fields:
        # a one-discount learner (DDPG): the extrinsic reward alone, unscaled
        if [s.name for s in signals] != ["extrinsic"]:
            raise rs_where.error(None, f"trainer_type {trainer_type!r} learns from the extrinsic "
                                       f"reward alone, got {', '.join(s.name for s in signals)}")
        if signals[0].strength != 1.0:
            raise rs_where.child("extrinsic").error(
                "strength", f"must be 1.0 with trainer_type {trainer_type!r} (it has no reward "
                            f"scaling), got {signals[0].strength!r}")
        hp_kwargs["gamma"] = signals[0].gamma
        elsewhere["gamma"] = (rs_where.child("extrinsic"), "gamma")
    kwargs["hyperparameters"] = _build(hp_cls, hp_kwargs, hp_where, hp_keys, elsewhere)
    kwargs["network_settings"] = _parse_network(raw.get("network_settings"), where.child("network_settings"))
    _check_memory(trainer_type, kwargs["hyperparameters"], kwargs["network_settings"], where)
    learned = [s.name for s in signals if s.name != "extrinsic"]
    if learned and not spec.learned_reward_signals:
        raise rs_where.error(learned[0], f"{learned[0]} is not supported for trainer_type "
                                         f"{trainer_type!r} yet (extrinsic only); remove it")
    kwargs["reward_signals"] = signals
    if raw.get("behavioral_cloning") is not None:
        kwargs["behavioral_cloning"] = _parse_behavioral_cloning(
            raw["behavioral_cloning"], where.child("behavioral_cloning"), trainer_type, spec)
    kwargs["self_play"] = _parse_self_play(raw.get("self_play"), trainer_type, where)
    return _build(BehaviorConfig, kwargs, where, BEHAVIOR_KEYS, {"reward_signals": (rs_where, None)})


def _parse_behavioral_cloning(raw: Any, where: Where, trainer_type: str,
                              spec: Any) -> BehavioralCloningConfig:
    """``behavioral_cloning`` (ML-Agents' ``BehavioralCloningSettings``); ``demo_path`` required."""
    if not spec.behavioral_cloning:
        raise where.error(None, f"behavioral cloning is not available for trainer_type "
                                f"{trainer_type!r} (ML-Agents has it for ppo, sac and poca); "
                                "remove the section")
    raw = _mapping(raw, where)
    if "demo_path" not in raw:
        raise where.error("demo_path", "missing: the .demo file (or directory of them) to clone")
    kwargs = _read_keys(raw, BehavioralCloningConfig, BC_KEYS, where)
    return _build(BehavioralCloningConfig, kwargs, where, BC_KEYS)
