"""Mock Unity builds for your own tests: your build's spec, without Unity.

``mock_build(directory, behaviors)`` writes an executable launcher, ``<directory>/Mock.x86_64``,
that behaves like a Unity Linux player of ML-Agents 3.0.0 (communication API 1.5.0) whose
behaviors have exactly the observation shapes, action specs, agent counts, decision periods and
MaxStep you give as ``MockBehavior`` values. It is a stand-in build (``python -m unity_rl.standin
Mock``, see ``unity_builds/README.md``): it speaks the real ML-Agents gRPC protocol, so the real
``mlagents_envs.UnityEnvironment`` launches it and everything built on it works unchanged:
``UnityVecEnv(path)``, ``AgentStream(path, behaviors=ALL_BEHAVIORS)``, ``unity-rl train --env
path``, ``UnityEnvironment(file_name=str(path))``. The same spec can be written as JSON and
passed to the player with ``--standin-spec JSON_OR_PATH`` (docs/testing.md gives the format).

Contract (what a test may rely on; details in docs/testing.md):

* Spaces: as the spec says. PNG observations arrive as images (uint8 in ``UnityVecEnv``),
  ``"none"`` observations as float32 exactly as sent; actions continuous, discrete or hybrid.
* Each agent has a hidden *target*: one value in [-1, 1] per continuous action and one index
  per discrete branch, drawn at each episode start from the scene's seeded generator. Every
  observation shows it (the *code*, below). An action is scored once per decision (Unity's
  TakeActionsBetweenDecisions off): reward ``0.1 * (match - 1)`` with ``match`` in [0, 1], plus
  ``+1`` for a *hit* (every branch equal to its target and every continuous action within 0.2
  of its target), which also ends the episode (``terminated``) unless ``terminate_on_match`` is
  False. Reaching ``max_step`` academy steps ends it as interrupted (``truncated``).
* Deterministic for a given seed (the trainer's handshake seed, or ``--standin-seed``) and
  the same actions.

What it does not simulate: physics, rendering, graphics-dependent behavior, your game's
rewards and dynamics, multi-agent groups (group ids and rewards), variable-length (rank 2)
observations, stacked observations, the Unity Editor.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["MockBehavior", "MockObservation", "MockSpecError", "mock_build", "parse_spec",
           "sensor_names", "spec_to_json"]

COMPRESSIONS = ("none", "png")
_NAME = re.compile(r"^[^?\s][^?]*(\?team=\d+)?$")
_BUILD_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class MockSpecError(ValueError):
    """A mock spec is invalid; the message names the field (``behaviors[1].branches[0]: ...``)."""


def _fail(where: str, message: str):
    raise MockSpecError(f"{where}: {message}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(where: str, value: Any, minimum: int) -> int:
    if not _is_int(value):
        _fail(where, f"expected an integer, got {value!r}")
    if value < minimum:
        _fail(where, f"must be >= {minimum}, got {value}")
    return value


def _check_bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        _fail(where, f"expected true or false, got {value!r}")
    return value


@dataclass(frozen=True)
class MockObservation:
    """One sensor of a mock behavior."""

    shape: tuple[int, ...]
    """(n,) for a vector; (channels, height, width) for an image or a float grid (channels
    first, as mlagents-envs 1.x delivers them). Every size >= 1."""
    compression: str = "none"
    """``"none"``: float32 values sent uncompressed (vectors, grid sensors); ``"png"``: a camera,
    sent as PNG bytes like a real camera sensor (rank 3 only; any channel count: 1 = grayscale,
    more than 3 = concatenated PNGs, as Unity sends them)."""
    name: str | None = None
    """Sensor name sent to the trainer (``UnityVecEnv`` keys its Dict observation by it). None:
    ``CameraSensor`` for png, ``GridSensor`` for rank 3, ``VectorSensor_size<n>`` for vectors,
    with ``_<position>`` appended when a default name would repeat within the behavior."""

    def __post_init__(self):
        _validate_observation(self, "observation")

    @property
    def png(self) -> bool:
        return self.compression == "png"

    def to_json(self) -> dict:
        out: dict = {"shape": list(self.shape), "compression": self.compression}
        if self.name is not None:
            out["name"] = self.name
        return out


def _validate_observation(obs: MockObservation, where: str) -> None:
    shape = obs.shape
    if isinstance(shape, list):
        object.__setattr__(obs, "shape", tuple(shape))
        shape = obs.shape
    if not isinstance(shape, tuple) or not shape:
        _fail(f"{where}.shape", f"expected a non-empty list of sizes, got {shape!r}")
    for i, size in enumerate(shape):
        _check_int(f"{where}.shape[{i}]", size, 1)
    if len(shape) not in (1, 3):
        _fail(f"{where}.shape", f"expected [n] (vector) or [channels, height, width], got "
                                f"{list(shape)} ({len(shape)} dimensions)")
    if obs.compression not in COMPRESSIONS:
        _fail(f"{where}.compression", f"expected one of {', '.join(map(repr, COMPRESSIONS))}, "
                                      f"got {obs.compression!r}")
    if obs.compression == "png" and len(shape) != 3:
        _fail(f"{where}.shape", f"a png observation needs [channels, height, width], got "
                                f"{list(shape)}")
    if obs.name is not None and (not isinstance(obs.name, str) or not obs.name.strip()):
        _fail(f"{where}.name", f"expected a non-empty string, got {obs.name!r}")


@dataclass(frozen=True)
class MockBehavior:
    """One behavior of a mock build: its layout as BrainParameters announce it, and its agents."""

    name: str
    """Behavior name; ``?team=0`` is appended when no team suffix is given (as Unity sends
    ``Name?team=0``), so ``behavior_name="Name"`` and config sections ``Name`` match it."""
    agents: int = 1
    """Agents of this behavior in one build (times ``num_areas`` from the trainer)."""
    decision_period: int = 1
    """DecisionRequester.DecisionPeriod: agents decide when the academy step is a multiple."""
    max_step: int = 100
    """Agent.MaxStep in academy steps (0 = unlimited): an episode that reaches it ends as
    interrupted (``truncated``)."""
    observations: tuple[MockObservation, ...] = (MockObservation((8,)),)
    """Sensors, in the order sent (a real build sorts them by name). Dicts in the JSON form
    (``{"shape": [3, 20, 20], "compression": "png"}``) are accepted and converted."""
    continuous: int = 0
    """Number of continuous actions (values in [-1, 1])."""
    branches: tuple[int, ...] = ()
    """Discrete branch sizes, one per branch (each >= 1). Continuous and branches: hybrid."""
    masks: bool = False
    """Send action masks: in each branch of 3 or more actions, one action that is not the
    target is unavailable (``(target + 1) % size``). Needs ``branches``."""
    terminate_on_match: bool = True
    """A hit ends the episode (``terminated``); False: episodes end only by ``max_step``."""

    def __post_init__(self):
        _validate_behavior(self, "behavior")

    @property
    def full_name(self) -> str:
        """The name as the build sends it (``Name?team=0``)."""
        return self.name if "?team=" in self.name else f"{self.name}?team=0"

    def to_json(self) -> dict:
        return {"name": self.name, "agents": self.agents,
                "decision_period": self.decision_period, "max_step": self.max_step,
                "observations": [o.to_json() for o in self.observations],
                "continuous": self.continuous, "branches": list(self.branches),
                "masks": self.masks, "terminate_on_match": self.terminate_on_match}


def _observation_from(value: Any, where: str) -> MockObservation:
    if isinstance(value, MockObservation):
        return value
    if not isinstance(value, Mapping):
        _fail(where, f"expected an object like {{\"shape\": [8]}}, got {value!r}")
    unknown = sorted(set(value) - {"shape", "compression", "name"})
    if unknown:
        _fail(f"{where}.{unknown[0]}", "unknown field (known: shape, compression, name)")
    if "shape" not in value:
        _fail(f"{where}.shape", "missing")
    shape = value["shape"]
    if not isinstance(shape, (list, tuple)):
        _fail(f"{where}.shape", f"expected a list of sizes, got {shape!r}")
    try:
        return MockObservation(tuple(shape), value.get("compression", "none"), value.get("name"))
    except MockSpecError as err:
        raise MockSpecError(where + str(err)[len("observation"):]) from None


def _validate_behavior(b: MockBehavior, where: str) -> None:
    if not isinstance(b.name, str) or not _NAME.match(b.name):
        _fail(f"{where}.name", f"expected a behavior name like 'Mover' or 'Mover?team=0', got "
                               f"{b.name!r}")
    _check_int(f"{where}.agents", b.agents, 1)
    _check_int(f"{where}.decision_period", b.decision_period, 1)
    _check_int(f"{where}.max_step", b.max_step, 0)
    _check_int(f"{where}.continuous", b.continuous, 0)
    branches = b.branches
    if isinstance(branches, list):
        branches = tuple(branches)
        object.__setattr__(b, "branches", branches)
    if not isinstance(branches, tuple):
        _fail(f"{where}.branches", f"expected a list of branch sizes, got {branches!r}")
    for i, size in enumerate(branches):
        _check_int(f"{where}.branches[{i}]", size, 1)
    if b.continuous == 0 and not branches:
        _fail(f"{where}", "no actions: give continuous >= 1 or at least one branch")
    _check_bool(f"{where}.masks", b.masks)
    _check_bool(f"{where}.terminate_on_match", b.terminate_on_match)
    if b.masks and not branches:
        _fail(f"{where}.masks", "action masks need discrete branches")
    observations = b.observations
    if isinstance(observations, (MockObservation, Mapping)) or not isinstance(
            observations, (list, tuple)):
        _fail(f"{where}.observations", f"expected a list of observations, got {observations!r}")
    if not observations:
        _fail(f"{where}.observations", "at least one observation is needed")
    converted = tuple(_observation_from(o, f"{where}.observations[{i}]")
                      for i, o in enumerate(observations))
    object.__setattr__(b, "observations", converted)
    names = sensor_names(converted)
    seen = set()
    for i, name in enumerate(names):
        if name in seen:
            _fail(f"{where}.observations[{i}].name", f"repeats the sensor name {name!r}")
        seen.add(name)


def sensor_names(observations: Sequence[MockObservation]) -> list[str]:
    """The names the build sends for ``observations`` (defaults as MockObservation.name says)."""
    defaults = []
    for obs in observations:
        if obs.png:
            defaults.append("CameraSensor")
        elif len(obs.shape) == 3:
            defaults.append("GridSensor")
        else:
            defaults.append(f"VectorSensor_size{obs.shape[0]}")
    unnamed = [d for obs, d in zip(observations, defaults) if obs.name is None]
    out = []
    for i, (obs, default) in enumerate(zip(observations, defaults)):
        if obs.name is not None:
            out.append(obs.name)
        elif unnamed.count(default) > 1:
            out.append(f"{default}_{i}")
        else:
            out.append(default)
    return out


_BEHAVIOR_KEYS = ("name", "agents", "decision_period", "max_step", "observations", "continuous",
                  "branches", "masks", "terminate_on_match")


def behavior_from_json(value: Any, where: str) -> MockBehavior:
    """A MockBehavior from its JSON form; MockSpecError names the field."""
    if not isinstance(value, Mapping):
        _fail(where, f"expected an object with at least 'name' and an action spec, got {value!r}")
    unknown = sorted(set(value) - set(_BEHAVIOR_KEYS))
    if unknown:
        _fail(f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(_BEHAVIOR_KEYS)})")
    if "name" not in value:
        _fail(f"{where}.name", "missing")
    kwargs = dict(value)
    if "branches" in kwargs and isinstance(kwargs["branches"], list):
        kwargs["branches"] = tuple(kwargs["branches"])
    if "observations" in kwargs and isinstance(kwargs["observations"], list):
        kwargs["observations"] = tuple(kwargs["observations"])
    try:
        return MockBehavior(**kwargs)
    except MockSpecError as err:
        raise MockSpecError(where + str(err)[len("behavior"):]) from None


def parse_spec(spec: Any) -> list[MockBehavior]:
    """Validates a whole spec: ``{"behaviors": [...]}``, a bare list of behaviors, or
    MockBehavior values; returns the behaviors. Raises MockSpecError naming the field."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"behaviors"})
        if unknown:
            _fail(unknown[0], "unknown top-level field (the spec is {\"behaviors\": [...]})")
        if "behaviors" not in spec:
            _fail("behaviors", "missing")
        spec = spec["behaviors"]
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Iterable):
        _fail("behaviors", f"expected a list of behaviors, got {spec!r}")
    behaviors = [b if isinstance(b, MockBehavior) else behavior_from_json(b, f"behaviors[{i}]")
                 for i, b in enumerate(spec)]
    if not behaviors:
        _fail("behaviors", "at least one behavior is needed")
    seen: dict[str, int] = {}
    for i, b in enumerate(behaviors):
        if b.full_name in seen:
            _fail(f"behaviors[{i}].name",
                  f"{b.full_name!r} is already behaviors[{seen[b.full_name]}]")
        seen[b.full_name] = i
    return behaviors


def spec_to_json(behaviors: Sequence[MockBehavior]) -> str:
    """The JSON text of a spec (what ``mock_build`` writes and ``--standin-spec`` reads)."""
    return json.dumps({"behaviors": [b.to_json() for b in parse_spec(behaviors)]}, indent=2)


def load_spec_text(value: str) -> list[MockBehavior]:
    """``--standin-spec``'s value: JSON text (starting with ``{`` or ``[``) or a JSON file's
    path. Raises MockSpecError."""
    text = value.strip()
    source = "--standin-spec"
    if not text.startswith(("{", "[")):
        try:
            text = Path(value).read_text()
        except OSError as err:
            raise MockSpecError(f"--standin-spec: cannot read the spec file {value!r} "
                                f"({err.strerror or err})") from None
        source = value
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise MockSpecError(f"{source}: not valid JSON ({err})") from None
    return parse_spec(data)


_LAUNCHER = """#!/usr/bin/env bash
# Mock Unity build written by unity_rl.testing.mock_build: NOT a Unity build, but the stand-in
# player's Mock scene with the spec in {spec_name} next to this file (docs/testing.md).
# Interpreter: $UNITY_RL_PYTHON if set, else the Python that wrote this file. exec: the player
# process keeps this PID, so killing it leaves nothing behind.
here="$(dirname "$(readlink -f "${{BASH_SOURCE[0]}}")")"
py="${{UNITY_RL_PYTHON:-{python}}}"
export PYTHONPATH={package_root}"${{PYTHONPATH:+:$PYTHONPATH}}"
export PYTHONSAFEPATH=1  # Python >= 3.11: the caller's working directory is not on sys.path
exec "$py" -m unity_rl.standin Mock --standin-spec "$here/{spec_name}" "$@"
"""


def mock_build(directory: str | os.PathLike, behaviors: Sequence[MockBehavior],
               name: str = "Mock") -> Path:
    """Writes ``<directory>/<name>.x86_64`` (an executable launcher) and ``<name>.json`` (its
    spec) and returns the launcher's path, ready for ``UnityVecEnv(path)``,
    ``AgentStream(path, ...)``, ``unity-rl train --env path`` or ``UnityEnvironment(str(path))``.

    ``behaviors``: MockBehavior values (or their JSON dicts). Raises MockSpecError (a
    ValueError naming the field) for an invalid spec, ValueError for a bad ``name``.
    Existing files of the same name are replaced.
    """
    if not isinstance(name, str) or not _BUILD_NAME.match(name):
        raise ValueError(f"name: expected letters, digits, '_', '-' or '.', got {name!r}")
    text = spec_to_json(parse_spec(behaviors))
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / f"{name}.json"
    spec_path.write_text(text + "\n")
    package_root = Path(__file__).resolve().parent.parent
    launcher = folder / f"{name}.x86_64"
    tmp = folder / f".{name}.x86_64.tmp"
    tmp.write_text(_LAUNCHER.format(spec_name=spec_path.name,  # safe: name matches _BUILD_NAME
                                    python=_bash_default(sys.executable),
                                    package_root=shlex.quote(str(package_root))))
    tmp.chmod(0o755)
    os.replace(tmp, launcher)
    return launcher


def _bash_default(path: str) -> str:
    """``path`` escaped for the word of ``"${VAR:-word}"`` (inside double quotes)."""
    return re.sub(r'(["\\$`])', r"\\\1", path)
