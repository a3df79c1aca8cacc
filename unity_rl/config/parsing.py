"""Strict YAML loading (ML-Agents' ``strict_to_cls``, with better messages): ``parse_config``
and ``load_config``; an unknown key, a wrong type or an out-of-range value is a ``ConfigError``
naming the file, the section and the key.

The generic strict-structuring helpers are in ``strict.py``; this module holds the per-section
parsers and the YAML loader (about 480 lines: one parser per section; the behavior's
subsections, reward signals, behavioral cloning and self_play, are the next to move out).
"""
from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from unity_rl.algorithms.imitation.config import BC_KEYS, BehavioralCloningConfig
from unity_rl.algorithms.network_config import MemoryConfig, NetworkConfig
from unity_rl.algorithms.registry import MLAGENTS_TRAINER_TYPES, trainer_type_names
from unity_rl.algorithms.registry import trainer_type as trainer_type_spec
from unity_rl.algorithms.reward_signals.config import (EXTRINSIC_ONLY, RewardSignalConfig,
                                                      settings_class, yaml_fields)
from unity_rl.algorithms.reward_signals.registry import MLAGENTS_REWARD_SIGNALS, reward_signal_names
from unity_rl.config.keys import (
    BEHAVIOR_KEYS,
    CHECKPOINT_KEYS,
    ENGINE_KEYS,
    ENV_KEYS,
    MOVED,
    NETWORK_KEYS,
    MEMORY_KEYS,
    SELF_PLAY_KEYS,
    OLD_BEHAVIOR_KEYS,
    NOT_SUPPORTED,
    TOP_KEYS,
    TORCH_KEYS,
    UNITY_RL_KEYS,
    UNSUPPORTED,
)
from unity_rl.config.behavior_config import MEMORY_TRAINER_TYPES, BehaviorConfig, SelfPlayConfig
from unity_rl.config.environment_parameters import (SAMPLER_PARAMETERS, CompletionCriteria,
                                                    Curriculum, EnvironmentParameter, Lesson,
                                                    SamplerType)
from unity_rl.config.frozen_map import FrozenMap
from unity_rl.config.run_config import CheckpointConfig, RunConfig, TorchConfig, UnityRLConfig
from unity_rl.errors import ConfigError
from unity_rl.config.strict import (  # noqa: F401 - VALUE_ERROR, Where, coerce re-exported
    VALUE_ERROR,
    Where,
    _build,
    _deep_merge,
    _mapping,
    _read_keys,
    coerce,
)
from unity_rl.envs.settings import LaunchSettings


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


def _parse_behavior(raw: Any, where: Where) -> BehaviorConfig:
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


def _parse_environment_parameter(raw: Any, where: Where, name: str
                                 ) -> EnvironmentParameter | Curriculum:
    """One ``environment_parameters.<name>`` entry: a number, a sampler or a curriculum."""
    if isinstance(raw, Mapping) and "curriculum" in raw:
        return _parse_curriculum(raw, where.child(name))
    return _parse_value(raw, where, name)


def _parse_value(raw: Any, where: Where, name: str) -> EnvironmentParameter:
    """A number or a sampler (``sampler_type`` + ``sampler_parameters``) under key ``name``."""
    keys = {f.name: f.name for f in dataclasses.fields(EnvironmentParameter)}
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return _build(EnvironmentParameter, {"value": coerce(raw, float, where, name)}, where, keys)
    here = where.child(name)
    raw = _mapping(raw, here)
    for key in raw:
        if key not in ("sampler_type", "sampler_parameters"):
            raise here.error(key, "unknown key. Accepted: a number, or sampler_type and "
                                  "sampler_parameters (or curriculum, for a parameter)")
    if "sampler_type" not in raw:
        raise here.error("sampler_type", "missing; accepted: " + ", ".join(SAMPLER_PARAMETERS))
    sampler_type = coerce(raw["sampler_type"], SamplerType, here, "sampler_type")
    params_where = here.child("sampler_parameters")
    allowed = {k: k for k in SAMPLER_PARAMETERS[sampler_type]}
    kwargs = _read_keys(_mapping(raw.get("sampler_parameters"), params_where), EnvironmentParameter,
                        allowed, params_where)
    return _build(EnvironmentParameter, {"sampler_type": sampler_type, **kwargs}, params_where, allowed)


LESSON_KEYS = ("name", "value", "completion_criteria")
"""Keys of one lesson (ML-Agents' ``Lesson``)."""
CRITERIA_KEYS = {f.name: f.name for f in dataclasses.fields(CompletionCriteria)}
"""``completion_criteria`` keys -> ``CompletionCriteria`` fields (the same names, ML-Agents')."""


def _parse_curriculum(raw: Mapping, here: Where) -> Curriculum:
    """``{curriculum: [lesson, ...]}`` (ML-Agents' EnvironmentParameterSettings, strict)."""
    for key in raw:
        if key != "curriculum":
            raise here.error(key, "unknown key beside curriculum (a parameter with a curriculum "
                                  "takes its values from its lessons)")
    lessons_raw = raw["curriculum"]
    if not isinstance(lessons_raw, list) or not lessons_raw:
        raise here.error("curriculum", f"expected a non-empty list of lessons (- name: ..., "
                                       f"value: ..., completion_criteria: ...), got {lessons_raw!r}")
    lessons = []
    for i, item in enumerate(lessons_raw):
        lessons.append(_parse_lesson(item, Where(here.file, f"{here.section}.curriculum[{i}]")))
    last = lessons[-1]
    for lesson in lessons[:-1]:
        if lesson.completion_criteria is None:
            raise here.error("curriculum", f"lesson {lesson.name!r} has no completion_criteria: "
                                           f"every lesson but the last needs one")
    if last.completion_criteria is not None:  # ML-Agents warns and ignores them too
        logger.warning("%s: the final lesson %r has completion_criteria; they are ignored (as "
                       "mlagents-learn does)", here.section, last.name)
    return Curriculum(tuple(lessons))


def _parse_lesson(item: Any, where: Where) -> Lesson:
    if (isinstance(item, Mapping) and len(item) == 1 and next(iter(item)) not in LESSON_KEYS
            and isinstance(next(iter(item.values())), Mapping)):
        old = next(iter(item))
        raise where.error(old, f"'- {old}:' is an older ML-Agents lesson shape that mlagents-learn "
                               f"1.1.0 no longer reads: write '- name: {old}' with value and "
                               f"completion_criteria beside name")
    item = _mapping(item, where)
    for key in item:
        if key not in LESSON_KEYS:
            raise where.error(key, f"unknown key. Accepted keys: {', '.join(LESSON_KEYS)}")
    for key in ("name", "value"):
        if key not in item:
            raise where.error(key, "missing: every lesson needs a name and a value")
    name = coerce(item["name"], str, where, "name")
    value = _parse_value(item["value"], where, "value")
    criteria = None
    if item.get("completion_criteria") is not None:
        cw = where.child("completion_criteria")
        raw = _mapping(item["completion_criteria"], cw)
        if "behavior" not in raw:
            raise cw.error("behavior", "missing: the behavior whose progress or reward ends "
                                       "the lesson")
        criteria = _build(CompletionCriteria, _read_keys(raw, CompletionCriteria, CRITERIA_KEYS, cw),
                          cw, CRITERIA_KEYS)
    return Lesson(name=name, value=value, completion_criteria=criteria)


def _check_curriculum_behaviors(parameters: Mapping[str, Any], behaviors: Mapping[str, Any],
                                has_default: bool, where: Where) -> None:
    """A completion criterion names a configured behavior (without default_settings, a section
    of ``behaviors``; the trainer checks again against the behaviors the builds have)."""
    if has_default:
        return
    for name, parameter in parameters.items():
        if not isinstance(parameter, Curriculum):
            continue
        for i, lesson in enumerate(parameter.lessons[:-1]):
            behavior = lesson.completion_criteria.behavior
            if behavior not in behaviors:
                raise Where(where.file, f"{where.section}.{name}.curriculum[{i}]"
                            ".completion_criteria").error(
                    "behavior", f"{behavior!r} is not a trained behavior (sections: "
                                f"{', '.join(sorted(behaviors))})")


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
        default_settings = _parse_behavior(default_raw, Where(source, "default_settings"))
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
        behaviors[name] = _parse_behavior(behavior_raw, where)
    if not behaviors and default_settings is None:
        raise behaviors_where.error(None, "no behavior is configured: add a section "
                                          "behaviors.<BehaviorName> (or default_settings)")

    env_params_where = Where(source, "environment_parameters")
    environment_parameters = {
        name: _parse_environment_parameter(value, env_params_where, name)
        for name, value in _mapping(raw.get("environment_parameters"), env_params_where).items()}
    _check_curriculum_behaviors(environment_parameters, behaviors, default_settings is not None,
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
