"""The launch settings of a run, declared once: ``LaunchSettings``.

Contract:
- every setting a Unity build is started with is one field of ``LaunchSettings``: its name,
  type, default (mlagents-learn's), a one-line docstring, and in its metadata the YAML section
  that holds it (``env_settings`` or ``engine_settings``, ML-Agents' key = the field name) and
  its command-line flag (mlagents-learn's). Nothing else declares a launch default:
  the config sections load into this class (``RunConfig.launch``), the flags of ``unity-rl
  train``/``evaluate``/``random`` are generated from it (``add_launch_arguments``: default None =
  "not given", help = the field's docstring and its default), and ``UnityVecEnv``,
  ``MultiBehaviorVecEnv`` and ``AgentStream`` take ``settings=LaunchSettings(...)``;
- overrides stack, later wins: the declared defaults < the YAML sections < the command-line
  flags (``config.apply_overrides``) < keyword arguments of the Python classes
  (``with_overrides``); a value of None always means "not given";
- a bad value raises ``ValueError("<section>.<field> must be <what>, got <value>")``, the form
  the config loader maps back to a YAML key or a flag.

Torch- and mlagents-free: the config, the CLI and the launcher all import it.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import math
import tempfile
import textwrap
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

ENV_SECTION = "env_settings"
ENGINE_SECTION = "engine_settings"
LAUNCH_SECTIONS = (ENV_SECTION, ENGINE_SECTION)
"""The YAML sections whose keys are LaunchSettings fields (ML-Agents' names)."""


def _int(low: int, high: int | None = None) -> tuple[Callable[[Any], bool], str]:
    what = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"
    return (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low
            and (high is None or v <= high)), what


def _number(low: float) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v > low), f"a number > {low:g}"


_BOOL = (lambda v: isinstance(v, bool)), "true or false"


def _setting(default: Any, check: tuple[Callable[[Any], bool], str] | None = None, *,
             section: str | None = None, flag: str | None = None, off_flag: str | None = None,
             metavar: str | None = None) -> Any:
    """A LaunchSettings field: its default, its check, its YAML section and its flags."""
    return field(default=default, metadata={
        "check": check, "section": section, "flag": flag, "off_flag": off_flag,
        "metavar": metavar})


@dataclass(frozen=True)
class LaunchSettings:
    """How to start every build of a run (see the module docstring); defaults are
    mlagents-learn's. Fields in ``env_settings`` / ``engine_settings`` order, then ours."""

    # -- env_settings ---------------------------------------------------------------------------
    env_path: str | None = _setting(None, section=ENV_SECTION, flag="--env", metavar="PATH")
    """Unity build executable (.x86_64 optional)."""
    env_args: tuple[str, ...] | None = _setting(None, section=ENV_SECTION, flag="--env-args",
                                                metavar="...")
    """Extra command-line arguments for every build: the rest of the line (put it last)."""
    base_port: int = _setting(5005, _int(1, 65535), section=ENV_SECTION, flag="--base-port",
                              metavar="P")
    """gRPC port of worker 0; build i listens on base_port + i."""
    num_envs: int = _setting(1, _int(1), section=ENV_SECTION, flag="--num-envs", metavar="N")
    """Unity builds to run (split over --num-actors when training)."""
    num_areas: int = _setting(1, _int(1), section=ENV_SECTION, flag="--num-areas", metavar="N")
    """Training areas each build instantiates (sent in the handshake)."""
    seed: int = _setting(-1, _int(-1), section=ENV_SECTION, flag="--seed", metavar="S")
    """Random seed; build i gets seed + i (-1: training draws one, the env classes use 0)."""
    timeout_wait: int = _setting(60, _int(1), section=ENV_SECTION, flag="--timeout-wait",
                                 metavar="S")
    """Seconds to wait for a build to connect or to answer a step."""
    max_lifetime_restarts: int = _setting(10, _int(-1), section=ENV_SECTION,
                                          flag="--max-lifetime-restarts", metavar="N")
    """Restarts of crashed builds allowed over the run (-1: unlimited)."""
    restarts_rate_limit_n: int = _setting(1, _int(-1), section=ENV_SECTION,
                                          flag="--restarts-rate-limit-n", metavar="N")
    """At most this many restarts per restarts_rate_limit_period_s (-1: no limit)."""
    restarts_rate_limit_period_s: int = _setting(60, _int(1), section=ENV_SECTION,
                                                 flag="--restarts-rate-limit-period-s",
                                                 metavar="S")
    """Length of the restart rate-limit period in seconds."""
    # -- engine_settings (sent through the engine-configuration side channel) -------------------
    width: int = _setting(84, _int(1), section=ENGINE_SECTION, flag="--width", metavar="PX")
    """Window width in pixels."""
    height: int = _setting(84, _int(1), section=ENGINE_SECTION, flag="--height", metavar="PX")
    """Window height in pixels."""
    quality_level: int = _setting(5, _int(0), section=ENGINE_SECTION, flag="--quality-level",
                                  metavar="Q")
    """Unity quality level."""
    time_scale: float = _setting(20.0, _number(0), section=ENGINE_SECTION, flag="--time-scale",
                                 metavar="X")
    """Simulation speed multiplier."""
    target_frame_rate: int = _setting(-1, _int(-1), section=ENGINE_SECTION,
                                      flag="--target-frame-rate", metavar="FPS")
    """Unity's target frame rate (-1: unlimited)."""
    capture_frame_rate: int = _setting(60, _int(0), section=ENGINE_SECTION,
                                       flag="--capture-frame-rate", metavar="FPS")
    """Unity's capture frame rate (fixes the simulated time per frame)."""
    no_graphics: bool = _setting(False, _BOOL, section=ENGINE_SECTION, flag="--no-graphics",
                                 off_flag="--graphics")
    """Run the builds with -nographics -batchmode."""
    no_graphics_monitor: bool = _setting(False, _BOOL, section=ENGINE_SECTION,
                                         flag="--no-graphics-monitor")
    """Render only worker 0; every other build runs -nographics -batchmode."""
    # -- ours (no YAML key, no flag) ---------------------------------------------------------------
    worker_id_start: int = _setting(0, _int(0))
    """Worker id of build 0 (build i is worker worker_id_start + i): one range per actor."""
    step_timeout: float | None = None
    """Seconds a running build may take to answer one step before it counts as hung
    (None: timeout_wait)."""
    log_dir: str | None = None
    """Folder for the per-build log files Player-<worker>.log (created if missing)."""
    env_parameters: tuple[tuple[str, Any], ...] = ()
    """Environment parameters sent at start-up: (name, float) for a constant, or (name, spec)
    with spec's ``sampler_type`` uniform|gaussian|multirangeuniform and the fields of
    ``unity_rl.config.EnvironmentParameter`` (the config's environment_parameters)."""

    def __post_init__(self) -> None:
        if self.env_args is not None and not isinstance(self.env_args, tuple):
            object.__setattr__(self, "env_args", tuple(str(a) for a in self.env_args))
        if isinstance(self.env_parameters, Mapping):
            object.__setattr__(self, "env_parameters", tuple(self.env_parameters.items()))
        for f in dataclasses.fields(self):
            check = f.metadata.get("check")
            value = getattr(self, f.name)
            if check is not None and not check[0](value):
                raise ValueError(f"{f.metadata['section'] or 'launch'}.{f.name} must be "
                                 f"{check[1]}, got {value!r}")
        if self.base_port + self.num_envs - 1 > 65535:
            raise ValueError(f"env_settings.num_envs must be small enough that base_port + "
                             f"num_envs - 1 <= 65535, got {self.num_envs!r} (base_port "
                             f"{self.base_port}): lower --base-port or --num-envs")
        if self.step_timeout is not None and not _number(0)[0](self.step_timeout):
            raise ValueError(f"launch.step_timeout must be None or a number > 0, got "
                             f"{self.step_timeout!r}")

    # -- derived values -------------------------------------------------------------------------
    @property
    def answer_timeout(self) -> float:
        """Seconds a running build may take to answer one step (step_timeout or timeout_wait)."""
        return float(self.timeout_wait if self.step_timeout is None else self.step_timeout)

    @property
    def build_seed(self) -> int:
        """The seed of build 0 when the env classes launch directly: ``seed``, or 0 for -1
        (``mlagents_envs.UnityEnvironment``'s default; the trainer draws a run seed instead)."""
        return max(0, self.seed)

    @property
    def restart_limits(self) -> tuple[int, int, float]:
        """(max_lifetime_restarts, restarts_rate_limit_n, period in s): a RestartQuota's args."""
        return (self.max_lifetime_restarts, self.restarts_rate_limit_n,
                float(self.restarts_rate_limit_period_s))

    # -- overrides ------------------------------------------------------------------------------
    def with_overrides(self, **values: Any) -> "LaunchSettings":
        """A copy with ``values`` on top (None: not given, the current value stays). Unknown
        names raise TypeError listing the known ones; bad values raise ValueError."""
        unknown = sorted(set(values) - set(FIELD_NAMES))
        if unknown:
            raise TypeError(f"unknown launch setting(s) {unknown}: pass fields of "
                            f"LaunchSettings ({', '.join(FIELD_NAMES)})")
        given = {k: v for k, v in values.items() if v is not None}
        return dataclasses.replace(self, **given) if given else self

    def replace_args(self, extra: tuple[str, ...]) -> "LaunchSettings":
        """A copy with ``extra`` appended to ``env_args`` (e.g. one actor's slowed builds)."""
        if not extra:
            return self
        return dataclasses.replace(self, env_args=tuple(self.env_args or ()) + tuple(extra))

    def for_env_classes(self, env_path: str | None = None, num_builds: int | None = None,
                        **values: Any) -> "LaunchSettings":
        """What ``UnityVecEnv``/``AgentStream``/``MultiBehaviorVecEnv`` launch: these settings
        with ``env_path``, ``num_builds`` (their name for ``num_envs``) and ``values`` on top,
        and a fresh temporary log folder when none is set. Raises ValueError when no build is
        named."""
        if num_builds is not None and values.get("num_envs") not in (None, num_builds):
            raise ValueError(f"num_builds={num_builds!r} and num_envs={values['num_envs']!r}: "
                             f"they are the same setting, pass one of them")
        if num_builds is not None:
            values["num_envs"] = num_builds
        out = self.with_overrides(env_path=None if env_path is None else str(env_path),
                                  **values)
        if out.env_path is None:
            raise ValueError("no Unity build given: pass env_path=... or "
                             "settings=LaunchSettings(env_path=...)")
        if out.log_dir is None:
            out = dataclasses.replace(out, log_dir=tempfile.mkdtemp(prefix="unity_rl_logs_"))
        return out


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(LaunchSettings))
DEFAULTS = LaunchSettings()
"""Every launch setting at its declared default (what other modules read defaults from)."""


def section_fields(section: str) -> tuple[dataclasses.Field, ...]:
    """The fields that ``section`` (env_settings or engine_settings) holds, in YAML order."""
    return tuple(f for f in dataclasses.fields(LaunchSettings)
                 if f.metadata.get("section") == section)


def flag_fields() -> tuple[dataclasses.Field, ...]:
    """The fields that have a command-line flag."""
    return tuple(f for f in dataclasses.fields(LaunchSettings) if f.metadata.get("flag"))


@functools.cache
def field_docs() -> dict[str, str]:
    """Field name -> its docstring, read from this module's source (as simple-parsing and tyro
    read field docstrings): the one text behind the docs and the flags' help."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(LaunchSettings)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


# ==============================================================================================
# Command-line flags, generated from the fields
# ==============================================================================================

def _with_default(doc: str, default: str) -> str:
    """'Text (note).' + '1' -> 'Text (note; default 1)'; 'Text.' -> 'Text (default 1)'."""
    doc = doc[:-1] if doc.endswith(".") else doc
    if doc.endswith(")"):
        return f"{doc[:-1]}; default {default})"
    return f"{doc} (default {default})"


def _help(f: dataclasses.Field, env_default: str) -> str:
    doc = field_docs().get(f.name, "")
    if f.name == "env_path":
        return _with_default(doc, env_default)
    if f.default is None or isinstance(f.default, bool):
        return doc
    return _with_default(doc, f"{f.default:g}" if isinstance(f.default, float) else f.default)


def add_launch_arguments(parser: argparse.ArgumentParser,
                         env_default: str = "the bundled 3DBall stand-in") -> None:
    """Adds a flag per launch setting (mlagents-learn's names), grouped by YAML section.
    Every default is None ("not given": the config or the declared default decides)."""
    hints = typing.get_type_hints(LaunchSettings)
    titles = {ENV_SECTION: "build and supervision (config section env_settings)",
              ENGINE_SECTION: "engine settings sent to every build (config section "
                              "engine_settings)"}
    groups = {s: parser.add_argument_group(t) for s, t in titles.items()}
    rest = None
    for f in flag_fields():
        group, flag, hint = groups[f.metadata["section"]], f.metadata["flag"], _help(f, env_default)
        if f.name == "env_args":
            rest = (group, flag, hint, f)  # REMAINDER: declared last
        elif hints[f.name] is bool:
            both = group.add_mutually_exclusive_group() if f.metadata["off_flag"] else group
            both.add_argument(flag, dest=f.name, action="store_const", const=True, default=None,
                              help=hint)
            if f.metadata["off_flag"]:
                both.add_argument(f.metadata["off_flag"], dest=f.name, action="store_const",
                                  const=False, default=None,
                                  help=f"the opposite of {flag} ({f.name}: false, the default)")
        else:
            kind = next(t for t in (int, float, str) if t in (hints[f.name],
                                                              *typing.get_args(hints[f.name])))
            group.add_argument(flag, dest=f.name, type=kind, metavar=f.metadata["metavar"],
                               default=None, help=hint)
    if rest is not None:
        group, flag, hint, f = rest
        group.add_argument(flag, dest=f.name, nargs=argparse.REMAINDER, default=None,
                           metavar=f.metadata["metavar"], help=hint)


def launch_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The launch flags of parsed ``args`` as {field: value}, None where not given."""
    values = {f.name: getattr(args, f.name, None) for f in flag_fields()}
    if values.get("env_args") is not None:
        values["env_args"] = tuple(values["env_args"])
    return values
