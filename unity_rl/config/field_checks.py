"""The check every config section makes of its fields when it is built.

``check_field`` raises ``ValueError("<section>.<field> must be <what>, got <value>")``: the one
format the strict loader (``unity_rl.config.strict``) maps back to the YAML key, so that the user
reads a ``ConfigError`` naming the file, section and key.
"""
from __future__ import annotations

from typing import Any


def check_field(ok: bool, section: str, name: str, what: str, value: Any) -> None:
    """Raises the ValueError format that the loader maps back to a YAML key."""
    if not ok:
        raise ValueError(f"{section}.{name} must be {what}, got {value!r}")


def is_int(value: Any) -> bool:
    """An int that is not a bool (YAML's true/false are no counts)."""
    return isinstance(value, int) and not isinstance(value, bool)
