"""Strict parsing of the ``environment_parameters`` section: each entry a number, a sampler
(``sampler_type`` + ``sampler_parameters``, the keys ``SAMPLER_PARAMETERS`` allows) or a
curriculum of lessons with completion criteria (ML-Agents 1.1.0's shapes; an older lesson shape
is refused with the rewrite it needs). ``check_curriculum_behaviors`` makes sure every
completion criterion names a configured behavior. Every error is a ``ConfigError`` naming the
file, the section path and the key.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from unity_rl.config.environment_parameters import (SAMPLER_PARAMETERS, CompletionCriteria,
                                                    Curriculum, EnvironmentParameter, Lesson,
                                                    SamplerType)
from unity_rl.config.strict import Where, _build, _mapping, _read_keys, coerce

logger = logging.getLogger(__name__)


def parse_environment_parameter(raw: Any, where: Where, name: str
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


def check_curriculum_behaviors(parameters: Mapping[str, Any], behaviors: Mapping[str, Any],
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
