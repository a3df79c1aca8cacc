"""Checks shared by the trainer types' frozen hyperparameter dataclasses (torch-free).

``NamedChecks`` is a mixin: a subclass sets ``TRAINER_TYPE`` and calls ``self.check(ok, field,
what)`` in its ``__post_init__``; a failed check is ``ValueError("<trainer type>.<field> must be
<what>, got <value>")``, which the config loader reports under the YAML key. ``is_int`` is an
int that is not a bool (YAML's ``true`` is not a count).
"""
from __future__ import annotations

from typing import Any, ClassVar


def is_int(value: Any) -> bool:
    """An int, and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


class NamedChecks:
    """``check`` for a hyperparameter dataclass whose errors name its trainer type."""

    TRAINER_TYPE: ClassVar[str] = "trainer"

    def check(self, ok: bool, name: str, what: str) -> None:
        """ValueError naming ``<TRAINER_TYPE>.<name>`` and its value unless ``ok``."""
        if not ok:
            raise ValueError(f"{self.TRAINER_TYPE}.{name} must be {what}, "
                             f"got {getattr(self, name)!r}")
