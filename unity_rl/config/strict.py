"""Strict structuring, the generic half of config loading: ``Where`` (file, section) for error
messages, ``coerce`` (a YAML value to a field's type, or a ``ConfigError`` naming the key),
``_read_keys`` (known keys only; ML-Agents options refused by name unless "off"), ``_build``
(a dataclass, its ``ValueError`` turned into a ``ConfigError`` at the right key) and
``_deep_merge``. ``parsing``, ``parse_behavior`` and ``parse_environment_parameters`` hold the
per-section parsers that use them.
"""
from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from unity_rl.config.keys import NOT_SUPPORTED
from unity_rl.config.field_checks import is_int
from unity_rl.errors import ConfigError


class Where:
    """File and section path of the mapping being read, for error messages."""

    def __init__(self, file: str, section: str | None):
        self.file, self.section = file, section

    def child(self, name: str) -> "Where":
        return Where(self.file, f"{self.section}.{name}" if self.section else name)

    def error(self, key: str | None, problem: str) -> ConfigError:
        return ConfigError(self.file, self.section, key, problem)


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return "null or " + " or ".join(_describe(a) for a in rest)
    if origin is tuple:
        return "a list of " + ("strings" if args[0] is str else "[min, max] pairs")
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, where: Where, key: str) -> Any:
    """Checks ``value`` against the field type ``tp``; returns it in the field's Python form."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)

    def wrong() -> ConfigError:
        return where.error(key, f"expected {_describe(tp)}, got {value!r} ({type(value).__name__})")

    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        for arm in rest:
            try:
                return coerce(value, arm, where, key)
            except ConfigError:
                pass
        raise wrong()
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise wrong()
    if tp is int:
        if is_int(value):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)  # 5.0e5 (ML-Agents accepts max_steps as a float)
        raise wrong()
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise where.error(key, f"expected a finite number, got {value!r}")
            return float(value)
        raise wrong()
    if tp is str:
        if isinstance(value, str):
            return value
        raise wrong()
    if origin is Literal:
        if value in args and type(value) is type(args[args.index(value)]):
            return value
        raise where.error(key, f"expected {_describe(tp)}, got {value!r}")
    if origin is tuple and args and args[-1] is Ellipsis:
        if not isinstance(value, (list, tuple)):
            raise wrong()
        item_tp = args[0]
        if item_tp is str:
            # Build arguments are strings; numbers in the list are taken as their text.
            if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
                raise wrong()
            return tuple(str(v) for v in value)
        return tuple(coerce(v, item_tp, where, key) for v in value)
    if origin is tuple:  # fixed-length tuple, e.g. tuple[float, float]
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise wrong()
        return tuple(coerce(v, a, where, key) for v, a in zip(value, args))
    raise TypeError(f"config.py cannot check fields of type {tp!r}")  # a bug here, not in the file


def _same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _mapping(raw: Any, where: Where) -> Mapping:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(where.file, where.section, None,
                          f"expected a mapping of keys to values, got {raw!r} ({type(raw).__name__})")
    for key in raw:
        if not isinstance(key, str):
            raise where.error(str(key), f"keys must be strings, got {key!r} ({type(key).__name__})")
    return raw


def _read_keys(raw: Mapping, cls: type, keys: dict[str, str], where: Where,
               unsupported: Mapping[str, tuple] = {}, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """YAML mapping -> {field: value} for ``cls``: unknown, unsupported and ill-typed keys raise."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key in skip:
            continue
        if key in unsupported:
            accepted = unsupported[key]
            if any(_same_value(value, a) for a in accepted):
                continue
            hint = (f"; only its default {' or '.join(_yaml_repr(a) for a in accepted)} is accepted"
                    if accepted else "")
            raise where.error(key, f"{NOT_SUPPORTED}{hint}, got {value!r}")
        if key not in keys:
            accepted_keys = sorted(set(keys) | set(skip))
            raise where.error(key, f"unknown key. Accepted keys: {', '.join(accepted_keys)}")
        kwargs[keys[key]] = coerce(value, hints[keys[key]], where, key)
    return kwargs


def _yaml_repr(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


VALUE_ERROR = re.compile(r"^[\w]+\.(\w+) must be (.*)$", re.S)


def _build(cls: type, kwargs: dict[str, Any], where: Where, keys: dict[str, str],
           elsewhere: Mapping[str, tuple[Where, str]] = {}) -> Any:
    """cls(**kwargs); a range error from its __post_init__ is reported under the YAML key."""
    try:
        return cls(**kwargs)
    except ValueError as exc:
        match = VALUE_ERROR.match(str(exc))
        if not match:
            raise where.error(None, str(exc)) from None
        field_name, problem = match.groups()
        if field_name in elsewhere:
            other, key = elsewhere[field_name]
            raise other.error(key, f"must be {problem}") from None
        by_field = {f: k for k, f in keys.items()}
        raise where.error(by_field.get(field_name, field_name), f"must be {problem}") from None


def _deep_merge(base: Mapping, update: Mapping) -> dict:
    """update over base, recursively for nested mappings (ML-Agents' deep_update_dict)."""
    out = dict(base)
    for key, value in update.items():
        if key in out and isinstance(out[key], Mapping) and isinstance(value, Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
