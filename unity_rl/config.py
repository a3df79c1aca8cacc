"""Run configuration: ML-Agents' trainer-config YAML, loaded strictly into frozen dataclasses.

One format, the one ``mlagents-learn`` reads, so that its users keep their files (including the
``configuration.yaml`` that mlagents-learn writes into a run folder)::

    behaviors:
      3DBall:                       # one section per behavior name (Unity's name before '?')
        trainer_type: ppo           # ppo | ddpg
        hyperparameters: {batch_size: 64, buffer_size: 12000, learning_rate: 3.0e-4, ...}
        network_settings: {normalize: true, hidden_units: 128, num_layers: 2}
        reward_signals: {extrinsic: {gamma: 0.99, strength: 1.0}}
        max_steps: 500000
        time_horizon: 1000
        summary_freq: 12000
        checkpoint_interval: 500000
        keep_checkpoints: 5
    default_settings: {...}         # optional: merged under every behavior, used for others
    env_settings: {env_path, env_args, base_port, num_envs, num_areas, seed, timeout_wait,
                   max_lifetime_restarts, restarts_rate_limit_n, restarts_rate_limit_period_s}
    engine_settings: {width, height, quality_level, time_scale, target_frame_rate,
                      capture_frame_rate, no_graphics, no_graphics_monitor}
    environment_parameters: {mass: 1.0, scale: {sampler_type: uniform, sampler_parameters: ...}}
    checkpoint_settings: {run_id, resume, force, results_dir, initialize_from, inference}
    torch_settings: {device}
    debug: false
    unity_rl:                       # ours: what ML-Agents has no key for
      mode: sync                    # sync | async
      num_actors: 1
      ...

Strictness (as ML-Agents' ``strict_to_cls``, with better messages): an unknown key, a value of
the wrong type or out of range raises ``ConfigError`` naming the file, the section path (e.g.
``behaviors.3DBall.hyperparameters``) and the key, and saying what is accepted.  ML-Agents
features that unity_rl does not implement (curiosity, GAIL, RND, memory, behavioral cloning,
self-play, ...) are refused by name; only the values that mean "feature off" (``memory: null``,
``threaded: false``...) are accepted. Every ``vis_encode_type`` is implemented
(``unity_rl.algos.encoders``).

PPO hyperparameters keep ML-Agents' YAML keys and land in ``PPOConfig``, whose fields carry the
paper's names (``epsilon`` -> ``clip_coef``, ``lambd`` -> ``gae_lambda``, ``beta`` ->
``ent_coef``...); see ``PPO_KEYS``.  DDPG hyperparameters use ``DDPGConfig``'s field names.  The
discount comes from ``reward_signals.extrinsic.gamma`` as in ML-Agents.

YAML floats: PyYAML reads ``3e-4`` (no dot) as a *string*; ML-Agents' loader converts it
silently.  We read such numbers as floats (YAML 1.2 rules), so the same files load.
"""
from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from unity_rl.algos.ddpg import DDPGConfig
from unity_rl.algos.nets import NetworkConfig
from unity_rl.algos.ppo import PPOConfig


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


class FrozenMap(Mapping):
    """A read-only dict (frozen dataclasses hold these instead of dicts); pickles like one."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping | None = None):
        object.__setattr__(self, "_data", dict(data or {}))

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self) -> Iterator:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __setattr__(self, name, value):
        raise AttributeError("FrozenMap is read-only")

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self):
        return (FrozenMap, (self._data,))

    def __hash__(self):
        return hash(tuple(self._data.items()))


def _check(ok: bool, section: str, name: str, what: str, value: Any) -> None:
    """Raises the ValueError format that the loader maps back to a YAML key."""
    if not ok:
        raise ValueError(f"{section}.{name} must be {what}, got {value!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ==============================================================================================
# Sections
# ==============================================================================================

TrainerType = Literal["ppo", "ddpg"]
HYPERPARAMETERS: dict[str, type] = {"ppo": PPOConfig, "ddpg": DDPGConfig}
"""Trainer type -> the dataclass its ``hyperparameters`` section fills."""


@dataclass(frozen=True)
class BehaviorConfig:
    """One ``behaviors.<name>`` section (ML-Agents' TrainerSettings)."""

    trainer_type: TrainerType = "ppo"
    """Learning algorithm: 'ppo' or 'ddpg'."""
    hyperparameters: PPOConfig | DDPGConfig = field(default_factory=PPOConfig)
    """The learner's config (its gamma comes from reward_signals.extrinsic.gamma)."""
    network_settings: NetworkConfig = field(default_factory=NetworkConfig)
    """Network size and observation normalisation."""
    reward_strength: float = 1.0
    """reward_signals.extrinsic.strength: multiplier of the environment reward."""
    max_steps: int = 500_000
    """Agent-steps to train for (all agents of the behavior together)."""
    time_horizon: int = 64
    """Agent-steps after which an agent's trajectory is cut and bootstrapped."""
    summary_freq: int = 50_000
    """Agent-steps between summaries (console line and TensorBoard scalars)."""
    checkpoint_interval: int = 500_000
    """Agent-steps between checkpoints."""
    keep_checkpoints: int = 5
    """Number of most recent checkpoints kept."""
    even_checkpoints: bool = False
    """Space checkpoints evenly: checkpoint_interval = max_steps // keep_checkpoints."""

    def __post_init__(self) -> None:
        _check(self.trainer_type in HYPERPARAMETERS, "behavior", "trainer_type",
               "'ppo' or 'ddpg'", self.trainer_type)
        expected = HYPERPARAMETERS[self.trainer_type]
        if not isinstance(self.hyperparameters, expected):
            raise ValueError(f"behavior.hyperparameters must be a {expected.__name__} for "
                             f"trainer_type {self.trainer_type!r}, got {type(self.hyperparameters).__name__}")
        for name in ("max_steps", "time_horizon", "summary_freq", "checkpoint_interval",
                     "keep_checkpoints"):
            value = getattr(self, name)
            _check(_is_int(value) and value >= 1, "behavior", name, "an int >= 1", value)
        _check(self.reward_strength > 0, "behavior", "reward_strength", "> 0", self.reward_strength)
        hp = self.hyperparameters
        if self.even_checkpoints:
            object.__setattr__(self, "checkpoint_interval", max(1, self.max_steps // self.keep_checkpoints))
        # max_steps and the reward strength are behavior-level keys in the YAML; the learner's
        # config carries copies where it has such fields (PPO's schedules, reward scaling).
        if hasattr(hp, "max_steps") and hp.max_steps != self.max_steps:
            object.__setattr__(self, "hyperparameters", dataclasses.replace(hp, max_steps=self.max_steps))
        hp = self.hyperparameters
        if hasattr(hp, "reward_scale"):
            if hp.reward_scale != self.reward_strength:
                object.__setattr__(self, "hyperparameters",
                                   dataclasses.replace(hp, reward_scale=self.reward_strength))
        elif self.reward_strength != 1.0:
            raise ValueError(f"behavior.reward_strength must be 1.0 with trainer_type "
                             f"{self.trainer_type!r} (it has no reward scaling), got {self.reward_strength!r}")

    @property
    def gamma(self) -> float:
        """The discount (reward_signals.extrinsic.gamma)."""
        return self.hyperparameters.gamma


@dataclass(frozen=True)
class EnvConfig:
    """``env_settings``: which build to run and how to supervise it (ML-Agents' names)."""

    env_path: str | None = None
    """Path of the Unity build (None: connect to the Unity Editor)."""
    env_args: tuple[str, ...] | None = None
    """Extra command-line arguments for the build."""
    base_port: int = 5005
    """First gRPC port; build i uses base_port + i."""
    num_envs: int = 1
    """Builds launched in all (mlagents-learn's --num-envs), split over unity_rl.num_actors."""
    num_areas: int = 1
    """Training areas each build instantiates (sent in the handshake)."""
    seed: int = -1
    """Random seed of the run (-1: draw one)."""
    timeout_wait: int = 60
    """Seconds to wait for a build to connect or answer before it counts as failed."""
    max_lifetime_restarts: int = 10
    """Restarts of crashed builds allowed over the run (-1: unlimited)."""
    restarts_rate_limit_n: int = 1
    """At most this many restarts per restarts_rate_limit_period_s (-1: no limit)."""
    restarts_rate_limit_period_s: int = 60
    """Window of the restart rate limit, seconds."""

    def __post_init__(self) -> None:
        s = "env_settings"
        _check(_is_int(self.base_port) and 1 <= self.base_port <= 65535, s, "base_port",
               "an int in [1, 65535]", self.base_port)
        _check(_is_int(self.num_envs) and self.num_envs >= 1, s, "num_envs", "an int >= 1", self.num_envs)
        _check(self.base_port + self.num_envs - 1 <= 65535, s, "num_envs",
               "small enough that base_port + num_envs - 1 <= 65535", self.num_envs)
        _check(_is_int(self.num_areas) and self.num_areas >= 1, s, "num_areas", "an int >= 1", self.num_areas)
        _check(_is_int(self.seed) and self.seed >= -1, s, "seed", "an int >= -1", self.seed)
        _check(_is_int(self.timeout_wait) and self.timeout_wait >= 1, s, "timeout_wait",
               "an int >= 1 (seconds)", self.timeout_wait)
        _check(_is_int(self.max_lifetime_restarts) and self.max_lifetime_restarts >= -1, s,
               "max_lifetime_restarts", "an int >= -1", self.max_lifetime_restarts)
        _check(_is_int(self.restarts_rate_limit_n) and self.restarts_rate_limit_n >= -1, s,
               "restarts_rate_limit_n", "an int >= -1", self.restarts_rate_limit_n)
        _check(_is_int(self.restarts_rate_limit_period_s) and self.restarts_rate_limit_period_s >= 1, s,
               "restarts_rate_limit_period_s", "an int >= 1", self.restarts_rate_limit_period_s)


@dataclass(frozen=True)
class EngineConfig:
    """``engine_settings``: sent to each build through the engine configuration side channel."""

    width: int = 84
    """Window width in pixels."""
    height: int = 84
    """Window height in pixels."""
    quality_level: int = 5
    """Unity quality level."""
    time_scale: float = 20.0
    """Simulation speed multiplier."""
    target_frame_rate: int = -1
    """Unity's target frame rate (-1: unlimited)."""
    capture_frame_rate: int = 60
    """Unity's capture frame rate (fixes the simulated time per frame)."""
    no_graphics: bool = False
    """Run builds with -nographics -batchmode."""
    no_graphics_monitor: bool = False
    """Run all builds but the first without graphics."""

    def __post_init__(self) -> None:
        s = "engine_settings"
        for name in ("width", "height"):
            _check(_is_int(getattr(self, name)) and getattr(self, name) >= 1, s, name, "an int >= 1",
                   getattr(self, name))
        _check(_is_int(self.quality_level) and self.quality_level >= 0, s, "quality_level",
               "an int >= 0", self.quality_level)
        _check(self.time_scale > 0 and math.isfinite(self.time_scale), s, "time_scale", "> 0", self.time_scale)
        _check(_is_int(self.target_frame_rate) and self.target_frame_rate >= -1, s, "target_frame_rate",
               "an int >= -1", self.target_frame_rate)
        _check(_is_int(self.capture_frame_rate) and self.capture_frame_rate >= 0, s,
               "capture_frame_rate", "an int >= 0", self.capture_frame_rate)


SamplerType = Literal["constant", "uniform", "gaussian", "multirangeuniform"]
SAMPLER_PARAMETERS: dict[str, tuple[str, ...]] = {
    "constant": ("value", "seed"),
    "uniform": ("min_value", "max_value", "seed"),
    "gaussian": ("mean", "st_dev", "seed"),
    "multirangeuniform": ("intervals", "seed"),
}
"""sampler_type -> the keys its sampler_parameters accept (ML-Agents' names)."""


@dataclass(frozen=True)
class EnvironmentParameter:
    """One ``environment_parameters`` entry: a constant or a sampler (no curriculum)."""

    sampler_type: SamplerType = "constant"
    """'constant', 'uniform', 'gaussian' or 'multirangeuniform'."""
    value: float = 0.0
    """constant: the value."""
    min_value: float = 0.0
    """uniform: lower bound."""
    max_value: float = 1.0
    """uniform: upper bound."""
    mean: float = 1.0
    """gaussian: mean."""
    st_dev: float = 1.0
    """gaussian: standard deviation."""
    intervals: tuple[tuple[float, float], ...] = ((0.0, 1.0),)
    """multirangeuniform: [min, max] intervals."""
    seed: int = -1
    """Seed of the sampler inside the build (-1: the run's seed)."""

    def __post_init__(self) -> None:
        s = "environment_parameter"
        _check(self.sampler_type in SAMPLER_PARAMETERS, s, "sampler_type",
               "one of " + ", ".join(SAMPLER_PARAMETERS), self.sampler_type)
        _check(self.min_value <= self.max_value, s, "min_value", "<= max_value", self.min_value)
        _check(self.st_dev >= 0, s, "st_dev", ">= 0", self.st_dev)
        _check(len(self.intervals) >= 1 and all(len(i) == 2 and i[0] <= i[1] for i in self.intervals),
               s, "intervals", "a non-empty list of [min, max] pairs with min <= max", self.intervals)
        _check(_is_int(self.seed), s, "seed", "an int", self.seed)


@dataclass(frozen=True)
class CheckpointConfig:
    """``checkpoint_settings``: where results go, and resuming."""

    run_id: str = "ppo"
    """Name of the run; results go to results_dir/run_id."""
    resume: bool = False
    """Continue the run from its latest checkpoint."""
    force: bool = False
    """Overwrite an existing run folder of the same run_id."""
    results_dir: str = "results"
    """Folder that holds the run folders."""
    initialize_from: str | None = None
    """Run id (under results_dir) whose latest checkpoint's learners start this run; the step
    counts, schedules' progress and statistics start afresh."""
    inference: bool = False
    """Run the policies without training (weights from --resume or --initialize-from)."""

    def __post_init__(self) -> None:
        s = "checkpoint_settings"
        _check(bool(self.run_id) and "/" not in self.run_id and "\\" not in self.run_id
               and self.run_id not in (".", ".."), s, "run_id",
               "a non-empty name without path separators", self.run_id)
        _check(bool(self.results_dir), s, "results_dir", "a non-empty path", self.results_dir)
        _check(not (self.resume and self.force), s, "force",
               "false when resume is true (resume continues a run, force overwrites it)", self.force)
        _check(self.initialize_from is None or (bool(self.initialize_from) and not self.resume),
               s, "initialize_from", "a run id, and not together with resume",
               self.initialize_from)
        _check(not self.inference or self.resume or self.initialize_from is not None, s,
               "inference", "used with resume or initialize_from (the weights to run)",
               self.inference)


_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps)$")


@dataclass(frozen=True)
class TorchConfig:
    """``torch_settings``."""

    device: str | None = None
    """Learner device: 'cpu', 'cuda', 'cuda:N' or 'mps' (None: cuda when available, else cpu)."""

    def __post_init__(self) -> None:
        _check(self.device is None or bool(_DEVICE.match(self.device)), "torch_settings", "device",
               "null, 'cpu', 'cuda', 'cuda:N' or 'mps'", self.device)


@dataclass(frozen=True)
class UnityRLConfig:
    """``unity_rl``: how experience is collected and distributed (no ML-Agents equivalent)."""

    mode: Literal["sync", "async"] = "sync"
    """'sync': the learner waits for all actors, then updates; 'async': it trains on segments as they come."""
    num_actors: int = 1
    """Actor processes, each running env_settings.num_envs builds."""
    segment_steps: int | None = None
    """Agent-steps an actor collects per segment (None: see resolve_segment_steps)."""
    max_policy_lag: int = 2
    """async: segments collected with weights more than this many versions old are dropped."""
    backend: Literal["local", "ray"] = "local"
    """Where actors run: 'local' processes or a 'ray' cluster."""
    ray_address: str | None = None
    """Address of an existing Ray cluster (backend ray; None: $RAY_ADDRESS if set, else a local
    Ray instance is started)."""
    num_cpus_per_actor: float = 1.0
    """backend ray: CPUs each actor reserves on its node (its builds run inside that share)."""
    max_actor_restarts: int | None = None
    """Re-creations of a dead or hung actor allowed per actor, local or Ray (-1: no limit);
    null: the builds' restart quota (env_settings.max_lifetime_restarts with its rate limit)."""
    torch_threads: int = 1
    """torch intra-op threads of the learner (actors always use 1)."""
    behavior: str | None = None
    """Train only this behavior (--behavior); the agents of the others get zero actions."""
    trajectory_cuts: Literal["time_horizon", "segment"] = "time_horizon"
    """'time_horizon': cut trajectories only at time_horizon or an episode end (ML-Agents);
    'segment': also at every segment end (each actor's share of a buffer)."""

    def __post_init__(self) -> None:
        s = "unity_rl"
        _check(self.mode in ("sync", "async"), s, "mode", "'sync' or 'async'", self.mode)
        _check(_is_int(self.num_actors) and self.num_actors >= 1, s, "num_actors", "an int >= 1", self.num_actors)
        _check(self.segment_steps is None or (_is_int(self.segment_steps) and self.segment_steps >= 1), s,
               "segment_steps", "null or an int >= 1", self.segment_steps)
        _check(_is_int(self.max_policy_lag) and self.max_policy_lag >= 0, s, "max_policy_lag",
               "an int >= 0", self.max_policy_lag)
        _check(self.backend in ("local", "ray"), s, "backend", "'local' or 'ray'", self.backend)
        _check(self.ray_address is None or self.backend == "ray", s, "ray_address",
               "null unless backend is 'ray'", self.ray_address)
        _check(isinstance(self.num_cpus_per_actor, (int, float)) and self.num_cpus_per_actor > 0,
               s, "num_cpus_per_actor", "a number > 0", self.num_cpus_per_actor)
        _check(self.max_actor_restarts is None or (_is_int(self.max_actor_restarts)
               and self.max_actor_restarts >= -1), s, "max_actor_restarts",
               "null or an int >= -1", self.max_actor_restarts)
        _check(_is_int(self.torch_threads) and self.torch_threads >= 1, s, "torch_threads",
               "an int >= 1", self.torch_threads)
        _check(self.trajectory_cuts in ("time_horizon", "segment"), s, "trajectory_cuts",
               "'time_horizon' or 'segment'", self.trajectory_cuts)

    def resolve_segment_steps(self, behavior: BehaviorConfig) -> int:
        """segment_steps, or its default: PPO buffer_size / num_actors (rounded up); DDPG 256."""
        if self.segment_steps is not None:
            return self.segment_steps
        if behavior.trainer_type == "ppo":
            return -(-behavior.hyperparameters.buffer_size // self.num_actors)
        return 256


@dataclass(frozen=True)
class RunConfig:
    """A whole run: the resolved form of one YAML file plus command-line overrides."""

    behaviors: FrozenMap = field(default_factory=FrozenMap)
    """Behavior name -> BehaviorConfig (default_settings already merged in)."""
    default_settings: BehaviorConfig | None = None
    """Settings for behaviors not listed in behaviors (None: such behaviors are an error)."""
    env_settings: EnvConfig = field(default_factory=EnvConfig)
    """Build and its supervision."""
    engine_settings: EngineConfig = field(default_factory=EngineConfig)
    """Engine configuration sent to the builds."""
    environment_parameters: FrozenMap = field(default_factory=FrozenMap)
    """Parameter name -> EnvironmentParameter, sent through the environment parameters channel."""
    checkpoint_settings: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Run folder, resume and force."""
    torch_settings: TorchConfig = field(default_factory=TorchConfig)
    """Learner device."""
    debug: bool = False
    """Verbose logging."""
    unity_rl: UnityRLConfig = field(default_factory=UnityRLConfig)
    """Collection and distribution (ours)."""
    source: str | None = field(default=None, compare=False)
    """The YAML file this was loaded from (None when built in code); used in error messages."""

    def __post_init__(self) -> None:
        for name in ("behaviors", "environment_parameters"):
            if not isinstance(getattr(self, name), FrozenMap):
                object.__setattr__(self, name, FrozenMap(getattr(self, name)))

    def launch_settings(self, log_dir: str | None = None):
        """The ``LaunchSettings`` every build of this run starts with (worker 0 first)."""
        from unity_rl.envs.launcher import LaunchSettings

        env, engine = self.env_settings, self.engine_settings
        if env.env_path is None:
            raise ValueError("env_settings.env_path (--env) is required: the path of a Unity "
                             "build (connecting to the Unity Editor is not supported)")
        return LaunchSettings(
            env_path=str(env.env_path), base_port=env.base_port, no_graphics=engine.no_graphics,
            no_graphics_monitor=engine.no_graphics_monitor, time_scale=float(engine.time_scale),
            width=engine.width, height=engine.height, quality_level=engine.quality_level,
            target_frame_rate=engine.target_frame_rate,
            capture_frame_rate=engine.capture_frame_rate, num_areas=env.num_areas,
            env_args=tuple(env.env_args or ()), timeout_wait=float(env.timeout_wait),
            step_timeout=float(env.timeout_wait), log_dir=log_dir,
            env_parameters=tuple(self.environment_parameters.items()))


# ==============================================================================================
# YAML keys <-> fields
# ==============================================================================================

PPO_KEYS: dict[str, str] = {
    "batch_size": "minibatch_size",
    "buffer_size": "buffer_size",
    "learning_rate": "learning_rate",
    "learning_rate_schedule": "lr_schedule",
    "beta": "ent_coef",
    "beta_schedule": "ent_coef_schedule",
    "epsilon": "clip_coef",
    "epsilon_schedule": "clip_coef_schedule",
    "lambd": "gae_lambda",
    "num_epoch": "num_epochs",
    # ours (ML-Agents has fixed values for these; the defaults reproduce them, see PPOConfig)
    "vf_coef": "vf_coef",
    "max_grad_norm": "max_grad_norm",
    "adam_eps": "adam_eps",
    "clip_value_loss": "clip_vloss",
    "normalize_advantage": "norm_adv",
    "advantage_normalization": "adv_norm_scope",
    "minibatch_remainder": "minibatch_remainder",
    "policy_ratio": "policy_ratio",
    "gaussian_entropy": "gaussian_entropy",
    "schedule_steps": "schedule_steps",
    "activation": "activation",
    "weight_init": "weight_init",
    "action_clip": "action_clip",
    "target_kl": "target_kl",
    "log_std_init": "log_std_init",
}
"""YAML key under behaviors.<name>.hyperparameters (trainer_type ppo) -> PPOConfig field."""

_FROM_ELSEWHERE = {"gamma", "reward_scale", "max_steps"}
"""Learner-config fields filled from other YAML keys (reward_signals, max_steps)."""


def _hyperparameter_keys(trainer_type: str) -> dict[str, str]:
    if trainer_type == "ppo":
        return PPO_KEYS
    return {f.name: f.name for f in dataclasses.fields(HYPERPARAMETERS[trainer_type])
            if f.name not in _FROM_ELSEWHERE}


_NETWORK_KEYS = {"normalize": "normalize", "hidden_units": "hidden_units", "num_layers": "num_layers",
                 "vis_encode_type": "vis_encode_type"}
_BEHAVIOR_KEYS = {k: k for k in ("trainer_type", "max_steps", "time_horizon", "summary_freq",
                                 "checkpoint_interval", "keep_checkpoints", "even_checkpoints")}
_ENV_KEYS = {f.name: f.name for f in dataclasses.fields(EnvConfig)}
_ENGINE_KEYS = {f.name: f.name for f in dataclasses.fields(EngineConfig)}
_CHECKPOINT_KEYS = {f.name: f.name for f in dataclasses.fields(CheckpointConfig)}
_TORCH_KEYS = {"device": "device"}
_UNITY_RL_KEYS = {f.name: f.name for f in dataclasses.fields(UnityRLConfig)}
_TOP_KEYS = ("behaviors", "default_settings", "env_settings", "engine_settings",
             "environment_parameters", "checkpoint_settings", "torch_settings", "debug", "unity_rl")

_NOT_SUPPORTED = "is an ML-Agents option that unity_rl does not support"
_UNSUPPORTED: dict[str, dict[str, tuple]] = {
    # section kind -> key -> values that mean "feature off" (accepted and ignored)
    "behavior": {"init_path": (None,), "threaded": (False,), "self_play": (None,),
                 "behavioral_cloning": (None,), "framework": ("pytorch",)},
    "ppo": {"shared_critic": (False,)},
    "network": {"memory": (None,), "goal_conditioning_type": ("hyper",), "deterministic": (False,)},
    "reward_signals": {"curiosity": (), "gail": (), "rnd": ()},
    "checkpoint": {"load_model": (False,), "train_model": (False,)},
    "top": {"curriculum": (), "parameter_randomization": ()},
}

_MOVED = {"timeout_wait", "max_lifetime_restarts", "restarts_rate_limit_n", "restarts_rate_limit_period_s",
          "seed", "num_envs", "base_port", "env_path", "env_args"}
"""Keys someone may put under unity_rl that ML-Agents (and we) keep in env_settings."""


# ==============================================================================================
# Strict structuring
# ==============================================================================================

class _Where:
    """File and section path of the mapping being read, for error messages."""

    def __init__(self, file: str, section: str | None):
        self.file, self.section = file, section

    def child(self, name: str) -> "_Where":
        return _Where(self.file, f"{self.section}.{name}" if self.section else name)

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


def _coerce(value: Any, tp: Any, where: _Where, key: str) -> Any:
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
                return _coerce(value, arm, where, key)
            except ConfigError:
                pass
        raise wrong()
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise wrong()
    if tp is int:
        if _is_int(value):
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
        return tuple(_coerce(v, item_tp, where, key) for v in value)
    if origin is tuple:  # fixed-length tuple, e.g. tuple[float, float]
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise wrong()
        return tuple(_coerce(v, a, where, key) for v, a in zip(value, args))
    raise TypeError(f"config.py cannot check fields of type {tp!r}")  # a bug here, not in the file


def _same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _mapping(raw: Any, where: _Where) -> Mapping:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(where.file, where.section, None,
                          f"expected a mapping of keys to values, got {raw!r} ({type(raw).__name__})")
    for key in raw:
        if not isinstance(key, str):
            raise where.error(str(key), f"keys must be strings, got {key!r} ({type(key).__name__})")
    return raw


def _read_keys(raw: Mapping, cls: type, keys: dict[str, str], where: _Where,
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
            raise where.error(key, f"{_NOT_SUPPORTED}{hint}, got {value!r}")
        if key not in keys:
            accepted_keys = sorted(set(keys) | set(skip))
            raise where.error(key, f"unknown key. Accepted keys: {', '.join(accepted_keys)}")
        kwargs[keys[key]] = _coerce(value, hints[keys[key]], where, key)
    return kwargs


def _yaml_repr(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


_VALUE_ERROR = re.compile(r"^[\w]+\.(\w+) must be (.*)$", re.S)


def _build(cls: type, kwargs: dict[str, Any], where: _Where, keys: dict[str, str],
           elsewhere: Mapping[str, tuple[_Where, str]] = {}) -> Any:
    """cls(**kwargs); a range error from its __post_init__ is reported under the YAML key."""
    try:
        return cls(**kwargs)
    except ValueError as exc:
        match = _VALUE_ERROR.match(str(exc))
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


def _parse_network(raw: Any, where: _Where) -> NetworkConfig:
    kwargs = _read_keys(_mapping(raw, where), NetworkConfig, _NETWORK_KEYS, where, _UNSUPPORTED["network"])
    return _build(NetworkConfig, kwargs, where, _NETWORK_KEYS)


def _parse_reward_signals(raw: Any, where: _Where) -> tuple[float, float, _Where]:
    """-> (gamma, strength, where of extrinsic)."""
    raw = _mapping(raw, where)
    for key, value in raw.items():
        if key in _UNSUPPORTED["reward_signals"]:
            raise where.error(key, f"reward signal '{key}' {_NOT_SUPPORTED}: only 'extrinsic' is supported")
        if key != "extrinsic":
            raise where.error(key, "unknown reward signal. Accepted keys: extrinsic")
    if "extrinsic" not in raw:
        raise where.error("extrinsic", "missing: unity_rl trains on the extrinsic reward, so "
                                       "reward_signals must contain 'extrinsic'")
    ext_where = where.child("extrinsic")
    ext = _mapping(raw["extrinsic"], ext_where)
    keys = {"gamma": float, "strength": float}
    values = {"gamma": 0.99, "strength": 1.0}
    for key, value in ext.items():
        if key == "network_settings":
            # ML-Agents writes it for every signal but uses it only for learned rewards
            # (curiosity, GAIL, RND): checked, then unused, as there.
            _parse_network(value, ext_where.child("network_settings"))
            continue
        if key not in keys:
            raise ext_where.error(key, "unknown key. Accepted keys: gamma, network_settings, strength")
        values[key] = _coerce(value, keys[key], ext_where, key)
    if not 0.0 <= values["gamma"] <= 1.0:
        raise ext_where.error("gamma", f"must be in [0, 1], got {values['gamma']!r}")
    if not values["strength"] > 0:
        raise ext_where.error("strength", f"must be > 0, got {values['strength']!r}")
    return values["gamma"], values["strength"], ext_where


def _parse_behavior(raw: Any, where: _Where) -> BehaviorConfig:
    raw = _mapping(raw, where)
    if raw.get("trainer_type") in ("sac", "poca", "coma"):
        raise where.error("trainer_type", f"'{raw['trainer_type']}' {_NOT_SUPPORTED}; "
                                          "accepted: 'ppo', 'ddpg'")
    subsections = ("hyperparameters", "network_settings", "reward_signals")
    kwargs = _read_keys(raw, BehaviorConfig, _BEHAVIOR_KEYS, where, _UNSUPPORTED["behavior"], skip=subsections)
    trainer_type = kwargs.get("trainer_type", "ppo")

    hp_where = where.child("hyperparameters")
    hp_raw = dict(_mapping(raw.get("hyperparameters"), hp_where))
    hp_keys = _hyperparameter_keys(trainer_type)
    hp_cls = HYPERPARAMETERS[trainer_type]
    if trainer_type == "ppo":
        # ML-Agents: beta and epsilon schedules follow learning_rate_schedule unless given.
        for key in ("beta_schedule", "epsilon_schedule"):
            if key not in hp_raw and "learning_rate_schedule" in hp_raw:
                hp_raw[key] = hp_raw["learning_rate_schedule"]
    hp_kwargs = _read_keys(hp_raw, hp_cls, hp_keys, hp_where,
                           _UNSUPPORTED["ppo"] if trainer_type == "ppo" else {})

    gamma, strength, ext_where = _parse_reward_signals(
        raw.get("reward_signals", {"extrinsic": {}}), where.child("reward_signals"))
    hp_kwargs["gamma"] = gamma
    hp_fields = {f.name for f in dataclasses.fields(hp_cls)}
    max_steps = kwargs.get("max_steps", BehaviorConfig.max_steps)
    if "max_steps" in hp_fields:
        hp_kwargs["max_steps"] = max_steps
    if "reward_scale" in hp_fields:
        hp_kwargs["reward_scale"] = strength
    elif strength != 1.0:
        raise ext_where.error("strength", f"must be 1.0 with trainer_type {trainer_type!r} "
                                          f"(it has no reward scaling), got {strength!r}")
    elsewhere = {"gamma": (ext_where, "gamma"), "reward_scale": (ext_where, "strength"),
                 "max_steps": (where, "max_steps")}
    kwargs["hyperparameters"] = _build(hp_cls, hp_kwargs, hp_where, hp_keys, elsewhere)
    kwargs["network_settings"] = _parse_network(raw.get("network_settings"), where.child("network_settings"))
    kwargs["reward_strength"] = strength
    return _build(BehaviorConfig, kwargs, where, _BEHAVIOR_KEYS,
                  {"reward_strength": (ext_where, "strength")})


def _parse_environment_parameter(raw: Any, where: _Where, name: str) -> EnvironmentParameter:
    keys = {f.name: f.name for f in dataclasses.fields(EnvironmentParameter)}
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return _build(EnvironmentParameter, {"value": _coerce(raw, float, where, name)}, where, keys)
    here = where.child(name)
    raw = _mapping(raw, here)
    if "curriculum" in raw:
        raise here.error("curriculum", f"{_NOT_SUPPORTED}: give a number or a sampler "
                                       "(sampler_type + sampler_parameters)")
    for key in raw:
        if key not in ("sampler_type", "sampler_parameters"):
            raise here.error(key, "unknown key. Accepted: a number, or sampler_type and sampler_parameters")
    if "sampler_type" not in raw:
        raise here.error("sampler_type", "missing; accepted: " + ", ".join(SAMPLER_PARAMETERS))
    sampler_type = _coerce(raw["sampler_type"], SamplerType, here, "sampler_type")
    params_where = here.child("sampler_parameters")
    allowed = {k: k for k in SAMPLER_PARAMETERS[sampler_type]}
    kwargs = _read_keys(_mapping(raw.get("sampler_parameters"), params_where), EnvironmentParameter,
                        allowed, params_where)
    return _build(EnvironmentParameter, {"sampler_type": sampler_type, **kwargs}, params_where, allowed)


def _section(raw: Mapping, name: str, cls: type, keys: dict[str, str], file: str,
             unsupported: Mapping[str, tuple] = {}) -> Any:
    where = _Where(file, name)
    kwargs = _read_keys(_mapping(raw.get(name), where), cls, keys, where, unsupported)
    return _build(cls, kwargs, where, keys)


def parse_config(raw: Any, source: str = "<config>") -> RunConfig:
    """A YAML document (already parsed) -> RunConfig; ``source`` names it in errors."""
    top = _Where(source, None)
    if raw is None:
        raise top.error(None, "the file is empty; it needs at least a 'behaviors' section")
    raw = _mapping(raw, top)
    for key in raw:
        if key in _UNSUPPORTED["top"]:
            raise top.error(key, f"{_NOT_SUPPORTED} (an old ML-Agents format): use "
                                 "environment_parameters")
        if key not in _TOP_KEYS:
            raise top.error(key, f"unknown section. Accepted: {', '.join(_TOP_KEYS)}")

    default_raw = raw.get("default_settings")
    default_settings = None
    if default_raw is not None:
        default_settings = _parse_behavior(default_raw, _Where(source, "default_settings"))
        default_raw = _mapping(default_raw, _Where(source, "default_settings"))

    behaviors_where = _Where(source, "behaviors")
    behaviors = {}
    for name, behavior_raw in _mapping(raw.get("behaviors"), behaviors_where).items():
        where = behaviors_where.child(name)
        behavior_raw = _mapping(behavior_raw, where)
        if default_raw is not None:
            base = dict(default_raw)
            if behavior_raw.get("trainer_type", "ppo") != base.get("trainer_type", "ppo"):
                base.pop("hyperparameters", None)  # another algorithm's keys would not fit
            behavior_raw = _deep_merge(base, behavior_raw)
        behaviors[name] = _parse_behavior(behavior_raw, where)
    if not behaviors and default_settings is None:
        raise behaviors_where.error(None, "no behavior is configured: add a section "
                                          "behaviors.<BehaviorName> (or default_settings)")

    env_params_where = _Where(source, "environment_parameters")
    environment_parameters = {
        name: _parse_environment_parameter(value, env_params_where, name)
        for name, value in _mapping(raw.get("environment_parameters"), env_params_where).items()}

    unity_rl_where = _Where(source, "unity_rl")
    for key in _mapping(raw.get("unity_rl"), unity_rl_where):
        if key in _MOVED:
            raise unity_rl_where.error(key, f"belongs in env_settings (as in ML-Agents), not in unity_rl")

    debug = _coerce(raw.get("debug", False), bool, top, "debug")
    return RunConfig(
        behaviors=FrozenMap(behaviors),
        default_settings=default_settings,
        env_settings=_section(raw, "env_settings", EnvConfig, _ENV_KEYS, source),
        engine_settings=_section(raw, "engine_settings", EngineConfig, _ENGINE_KEYS, source),
        environment_parameters=FrozenMap(environment_parameters),
        checkpoint_settings=_section(raw, "checkpoint_settings", CheckpointConfig, _CHECKPOINT_KEYS,
                                     source, _UNSUPPORTED["checkpoint"]),
        torch_settings=_section(raw, "torch_settings", TorchConfig, _TORCH_KEYS, source),
        debug=debug,
        unity_rl=_section(raw, "unity_rl", UnityRLConfig, _UNITY_RL_KEYS, source),
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


# ==============================================================================================
# Behavior selection and command-line overrides
# ==============================================================================================

def select_behavior(cfg: RunConfig, behavior_name: str) -> BehaviorConfig:
    """The settings for ``behavior_name`` ('3DBall?team=0' matches a section '3DBall').

    Exact name first, then the name without its '?team=..' suffix, then default_settings.
    """
    for name in (behavior_name, behavior_name.split("?", 1)[0]):
        if name in cfg.behaviors:
            return cfg.behaviors[name]
    if cfg.default_settings is not None:
        return cfg.default_settings
    raise ConfigError(cfg.source or "<config>", "behaviors", behavior_name.split("?", 1)[0],
                      f"no settings for behavior '{behavior_name}'. Configured behaviors: "
                      f"{', '.join(sorted(cfg.behaviors)) or '(none)'}. Add a section "
                      f"behaviors.{behavior_name.split('?', 1)[0]} or default_settings.")


OVERRIDES: dict[str, tuple[str, str]] = {
    # command-line name (mlagents-learn's) -> (RunConfig attribute, field)
    "env": ("env_settings", "env_path"),
    "env_path": ("env_settings", "env_path"),
    **{name: ("env_settings", name) for name in _ENV_KEYS if name != "env_path"},
    **{name: ("engine_settings", name) for name in _ENGINE_KEYS},
    **{name: ("checkpoint_settings", name) for name in _CHECKPOINT_KEYS},
    "torch_device": ("torch_settings", "device"),
    "device": ("torch_settings", "device"),
    "debug": ("", "debug"),
    **{name: ("unity_rl", name) for name in _UNITY_RL_KEYS},
    "max_steps": ("behaviors", "max_steps"),
}
"""apply_overrides' keyword -> (section attribute of RunConfig, field); '' is RunConfig itself,
'behaviors' every behavior and default_settings."""


def apply_overrides(cfg: RunConfig, **cli_values: Any) -> RunConfig:
    """A copy of ``cfg`` with command-line values applied (they win over the YAML).

    Keywords are mlagents-learn's option names (``env``, ``run_id``, ``num_envs``,
    ``torch_device``...; see ``OVERRIDES``), plus ``max_steps`` (every behavior); a value of None
    means "not given".  Store-true flags must pass None, not False, when absent.  Bad values
    raise ConfigError naming the flag.
    """
    unknown = sorted(set(cli_values) - set(OVERRIDES))
    if unknown:
        raise TypeError(f"apply_overrides: unknown option(s) {unknown}; known: {sorted(OVERRIDES)}")
    changes: dict[str, dict[str, Any]] = {}
    flags: dict[tuple[str, str], str] = {}
    for name, value in cli_values.items():
        if value is None:
            continue
        section, field_name = OVERRIDES[name]
        flag = "--" + ("env" if name == "env_path" else name).replace("_", "-")
        owner = {"": RunConfig, "behaviors": BehaviorConfig}.get(section) or type(getattr(cfg, section))
        value = _coerce(value, typing.get_type_hints(owner)[field_name], _Where("command line", None), flag)
        changes.setdefault(section, {})[field_name] = value
        flags[(section, field_name)] = flag
    top_changes = changes.pop("", {})
    for section, values in changes.items():
        try:
            if section == "behaviors":
                top_changes["behaviors"] = FrozenMap(
                    {name: dataclasses.replace(b, **values) for name, b in cfg.behaviors.items()})
                if cfg.default_settings is not None:
                    top_changes["default_settings"] = dataclasses.replace(cfg.default_settings, **values)
            else:
                top_changes[section] = dataclasses.replace(getattr(cfg, section), **values)
        except ValueError as exc:
            match = _VALUE_ERROR.match(str(exc))
            field_name = match.group(1) if match else None
            flag = flags.get((section, field_name), f"{section}.{field_name}")
            problem = f"must be {match.group(2)}" if match else str(exc)
            raise ConfigError("command line", None, flag, problem) from None
    return dataclasses.replace(cfg, **top_changes)


# ==============================================================================================
# Writing the resolved configuration
# ==============================================================================================

def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _dump_behavior(b: BehaviorConfig) -> dict:
    hp = b.hyperparameters
    hp_keys = _hyperparameter_keys(b.trainer_type)
    return {
        "trainer_type": b.trainer_type,
        "hyperparameters": {key: _plain(getattr(hp, f)) for key, f in hp_keys.items()},
        "network_settings": {key: getattr(b.network_settings, f) for key, f in _NETWORK_KEYS.items()},
        "reward_signals": {"extrinsic": {"gamma": hp.gamma, "strength": b.reward_strength}},
        "max_steps": b.max_steps,
        "time_horizon": b.time_horizon,
        "summary_freq": b.summary_freq,
        "checkpoint_interval": b.checkpoint_interval,
        "keep_checkpoints": b.keep_checkpoints,
        "even_checkpoints": b.even_checkpoints,
    }


def _dump_environment_parameter(p: EnvironmentParameter) -> Any:
    if p.sampler_type == "constant" and p.seed == -1:
        return p.value
    return {"sampler_type": p.sampler_type,
            "sampler_parameters": {k: _plain(getattr(p, k)) for k in SAMPLER_PARAMETERS[p.sampler_type]}}


def _dump_section(obj: Any) -> dict:
    return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def dump_config(cfg: RunConfig) -> dict:
    """The resolved configuration as plain YAML-ready data, every key explicit.

    ``parse_config(dump_config(cfg)) == cfg``; write it next to a run's results so that the run
    can be repeated or resumed with exactly these settings.
    """
    return {
        "default_settings": None if cfg.default_settings is None else _dump_behavior(cfg.default_settings),
        "behaviors": {name: _dump_behavior(b) for name, b in cfg.behaviors.items()},
        "env_settings": _dump_section(cfg.env_settings),
        "engine_settings": _dump_section(cfg.engine_settings),
        "environment_parameters": {name: _dump_environment_parameter(p)
                                   for name, p in cfg.environment_parameters.items()} or None,
        "checkpoint_settings": _dump_section(cfg.checkpoint_settings),
        "torch_settings": _dump_section(cfg.torch_settings),
        "debug": cfg.debug,
        "unity_rl": _dump_section(cfg.unity_rl),
    }


def config_to_yaml(cfg: RunConfig) -> str:
    """dump_config as YAML text."""
    return yaml.safe_dump(dump_config(cfg), sort_keys=False, default_flow_style=False)


def write_config(cfg: RunConfig, path: str | Path) -> None:
    """Writes the resolved configuration as YAML (ML-Agents writes run_logs/configuration.yaml)."""
    Path(path).write_text(config_to_yaml(cfg), encoding="utf-8")
