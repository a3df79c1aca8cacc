"""Where the command finds what it uses when no CONFIG or --env is given: the bundled
``configs/ppo/3dball.yaml`` and 3DBall stand-in build, next to the package or in the current
folder. Neither found raises ``CliError`` naming the places looked in and what to pass instead.
"""
from __future__ import annotations

from pathlib import Path

from unity_rl.errors import CliError

DEFAULT_CONFIG = "configs/ppo/3dball.yaml"
DEFAULT_ENV = "unity_builds/3DBall"


def repo_root() -> Path:
    """The checkout this package runs from (the parent folder of ``unity_rl``)."""
    return Path(__file__).resolve().parent.parent.parent


def _bases() -> list[Path]:
    return list(dict.fromkeys([repo_root(), Path.cwd()]))


def default_config_path() -> Path:
    """configs/ppo/3dball.yaml next to the package, else in the current folder."""
    for base in _bases():
        candidate = base / DEFAULT_CONFIG
        if candidate.is_file():
            return candidate
    raise CliError(f"No CONFIG given and the default '{DEFAULT_CONFIG}' was not found (looked in "
                   f"{', '.join(str(b) for b in _bases())}). Pass a trainer config YAML.")


def default_env_path() -> str:
    """The bundled 3DBall stand-in build, next to the package or in the current folder."""
    from unity_rl.envs.launcher import BuildLaunchError, resolve_env_path

    for base in _bases():
        try:
            return resolve_env_path(str(base / DEFAULT_ENV))
        except BuildLaunchError:
            continue
    raise CliError(f"No --env given and the bundled stand-in '{DEFAULT_ENV}' was not found "
                   f"(looked in {', '.join(str(b) for b in _bases())}). Pass --env with the "
                   f"path to your Unity build.")
