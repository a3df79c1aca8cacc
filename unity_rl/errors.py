"""Errors that several layers raise and the CLI reports: defined here, below all of them, so a
trainer type can raise a configuration error without importing the config package."""
from __future__ import annotations


class ConfigError(ValueError):
    """A configuration problem; the message names the file, the section and the key."""

    def __init__(self, file: str, section: str | None, key: str | None, problem: str):
        where = file
        if section:
            where += f": section '{section}'"
        if key is not None:
            where += f", key '{key}'" if section else f": {key}"
        super().__init__(f"{where}: {problem}")
        self.file = file
        self.section = section
        self.key = key
        self.problem = problem
