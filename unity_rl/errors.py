"""Errors that several layers raise and the CLI reports: defined here, below all of them, so a
trainer type can raise a configuration error without importing the config package, and the CLI
can tell a user's mistake from a bug without importing torch or mlagents-envs."""
from __future__ import annotations


class UserError(Exception):
    """An error whose message is the whole story: what is wrong and what to do. The CLI prints
    it without a traceback; every such error type of unity_rl derives from it."""


class CliError(UserError):
    """A problem with the command line the user can fix (a flag, a path, a run folder); the CLI
    prints it as one line and exits 1."""


class ConfigError(UserError, ValueError):
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
