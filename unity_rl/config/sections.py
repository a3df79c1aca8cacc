"""The configuration's sections as frozen dataclasses (one docstring line per field), checked
when built: ``RunConfig`` and its parts, and ``FrozenMap`` (``ConfigError`` is
``unity_rl.errors``, re-exported). The sections
``env_settings`` and ``engine_settings`` are declared once, with every launch setting, as
``unity_rl.envs.settings.LaunchSettings`` (``RunConfig.launch``).

Size (about 540 lines): one frozen dataclass per YAML section, each with a docstring line per
field; the curriculum types (``Curriculum``, ``Lesson``, ``CompletionCriteria``) are the next to
move out should the file grow.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


from unity_rl.algorithms.imitation.config import BehavioralCloningConfig
from unity_rl.algorithms.network_config import NetworkConfig
from unity_rl.algorithms.reward_signals.config import EXTRINSIC_ONLY, RewardSignalConfig
from unity_rl.algorithms.reward_signals.registry import reward_signal_names
from unity_rl.algorithms.registry import trainer_type, trainer_type_names
from unity_rl.envs.settings import LaunchSettings
from unity_rl.errors import ConfigError  # noqa: F401 (re-exported: unity_rl.config.ConfigError)


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


def check_field(ok: bool, section: str, name: str, what: str, value: Any) -> None:
    """Raises the ValueError format that the loader maps back to a YAML key."""
    if not ok:
        raise ValueError(f"{section}.{name} must be {what}, got {value!r}")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ==============================================================================================
# Sections
# ==============================================================================================



@dataclass(frozen=True)
class SelfPlayConfig:
    """``behaviors.<name>.self_play`` (ML-Agents 1.1.0's ``SelfPlaySettings``, its code defaults;
    ``docs/self-play.md``)."""

    save_steps: int = 20_000
    """Learning-team agent-steps between two snapshots of the learning policy."""
    team_change: int | None = None
    """Learning-team agent-steps before the learning team changes (None: 5 x save_steps, as
    ML-Agents' code; its comment says "about 4x")."""
    swap_steps: int = 2_000
    """Opponent (ghost) agent-steps between two opponent swaps (ML-Agents' code default; its
    docs say 10000)."""
    window: int = 10
    """Snapshots kept (a circular list); opponents are drawn from it."""
    play_against_latest_model_ratio: float = 0.5
    """Probability that a swap picks the learning policy's latest weights instead of a uniformly
    drawn snapshot (ML-Agents only warns outside [0, 1]; so does unity_rl)."""
    initial_elo: float = 1200.0
    """ELO of the first policy (a resumed run takes the checkpoint's)."""

    def __post_init__(self) -> None:
        if self.team_change is None:
            object.__setattr__(self, "team_change", 5 * self.save_steps)
        for name in ("save_steps", "team_change", "swap_steps", "window"):
            value = getattr(self, name)
            check_field(is_int(value) and value >= 1, "self_play", name, "an int >= 1", value)
        for name in ("play_against_latest_model_ratio", "initial_elo"):
            value = getattr(self, name)
            check_field(isinstance(value, (int, float)) and not isinstance(value, bool)
                        and value == value and abs(value) != float("inf"), "self_play", name,
                        "a finite number", value)
        object.__setattr__(self, "play_against_latest_model_ratio",
                           float(self.play_against_latest_model_ratio))
        object.__setattr__(self, "initial_elo", float(self.initial_elo))


MEMORY_TRAINER_TYPES = ("ppo", "sac", "poca")
"""Trainer types that implement ``network_settings.memory`` (the others refuse it by name)."""


@dataclass(frozen=True)
class BehaviorConfig:
    """One ``behaviors.<name>`` section (ML-Agents' TrainerSettings)."""

    trainer_type: str = "ppo"
    """Learning algorithm: a name in ``unity_rl.algorithms.registry.TRAINER_TYPES``."""
    hyperparameters: Any = None
    """The trainer type's config dataclass (its ``SPEC.hyperparameters``; None: its defaults)."""
    network_settings: NetworkConfig = field(default_factory=NetworkConfig)
    """Network size and observation normalisation."""
    reward_signals: tuple[RewardSignalConfig, ...] = EXTRINSIC_ONLY
    """``reward_signals``: one entry per signal (name, gamma, strength, network_settings), in YAML
    order, which is the order of PPO's value heads (ML-Agents')."""
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
    threaded: bool = False
    """ML-Agents: update the policy while the environment steps. Accepted either way: unity_rl's
    actors always step the builds in processes of their own (unity_rl.mode says how they wait)."""
    behavioral_cloning: BehavioralCloningConfig | None = None
    """``behavioral_cloning``: clone a demonstration beside RL (None: off; trainer types whose
    spec has ``behavioral_cloning``: PPO, SAC, POCA)."""
    self_play: SelfPlayConfig | None = None
    """``self_play``: train against snapshots of itself (ML-Agents' GhostTrainer); None: off."""

    def __post_init__(self) -> None:
        names = trainer_type_names()
        check_field(self.trainer_type in names, "behavior", "trainer_type",
                    " or ".join(repr(n) for n in names), self.trainer_type)
        expected = trainer_type(self.trainer_type).hyperparameters
        if self.hyperparameters is None:
            object.__setattr__(self, "hyperparameters", expected())
        if not isinstance(self.hyperparameters, expected):
            raise ValueError(f"behavior.hyperparameters must be a {expected.__name__} for "
                             f"trainer_type {self.trainer_type!r}, got {type(self.hyperparameters).__name__}")
        for name in ("max_steps", "time_horizon", "summary_freq", "checkpoint_interval",
                     "keep_checkpoints"):
            value = getattr(self, name)
            check_field(is_int(value) and value >= 1, "behavior", name, "an int >= 1", value)
        names = [getattr(signal, "name", None) for signal in self.reward_signals]
        known = reward_signal_names()
        check_field(isinstance(self.reward_signals, tuple) and names and len(set(names)) == len(names)
                    and all(isinstance(signal, RewardSignalConfig) and signal.name in known
                            for signal in self.reward_signals),
                    "behavior", "reward_signals",
                    f"a non-empty tuple of RewardSignalConfig with distinct names among {known}", names)
        hp = self.hyperparameters
        if self.self_play is not None:
            check_field(isinstance(self.self_play, SelfPlayConfig), "behavior", "self_play",
                        "a SelfPlayConfig", self.self_play)
            check_field(trainer_type(self.trainer_type).self_play, "behavior", "self_play",
                        f"null for trainer_type {self.trainer_type!r} (self-play wraps "
                        f"mlagents-learn's trainer types: "
                        f"{[n for n in trainer_type_names() if trainer_type(n).self_play]})", "a mapping")
        memory = self.network_settings.memory
        if memory is not None:
            if self.trainer_type not in MEMORY_TRAINER_TYPES:
                raise ValueError(f"memory is not supported for trainer_type {self.trainer_type} yet")
            batch_size = getattr(hp, "minibatch_size", getattr(hp, "batch_size", None))
            check_field(batch_size is None or memory.sequence_length <= batch_size, "behavior",
                        "network_settings", f"memory.sequence_length <= batch_size ({batch_size})",
                        memory.sequence_length)
        if self.behavioral_cloning is not None:
            with_bc = [t for t in trainer_type_names() if trainer_type(t).behavioral_cloning]
            check_field(isinstance(self.behavioral_cloning, BehavioralCloningConfig)
                        and self.trainer_type in with_bc, "behavior", "behavioral_cloning",
                        f"null for trainer_type {self.trainer_type!r} (behavioral cloning: "
                        f"{', '.join(with_bc)})", self.behavioral_cloning)
        if self.even_checkpoints:
            object.__setattr__(self, "checkpoint_interval", max(1, self.max_steps // self.keep_checkpoints))
        # max_steps is a behavior-level key in the YAML; the learner's config carries a copy where
        # it has the field (PPO's schedules).
        if hasattr(hp, "max_steps") and hp.max_steps != self.max_steps:
            object.__setattr__(self, "hyperparameters", dataclasses.replace(hp, max_steps=self.max_steps))
        hp = self.hyperparameters
        if hasattr(hp, "gamma"):
            # A one-discount learner (DDPG): its own gamma, the extrinsic reward alone, unscaled.
            check_field(names == ["extrinsic"] and self.reward_signals[0].strength == 1.0, "behavior",
                        "reward_signals", f"extrinsic alone with strength 1.0 for trainer_type "
                        f"{self.trainer_type!r} (it has one discount and no reward scaling)", names)
            if self.reward_signals[0].gamma != hp.gamma:
                object.__setattr__(self, "reward_signals",
                                   (dataclasses.replace(self.reward_signals[0], gamma=hp.gamma),))

    def signal(self, name: str) -> RewardSignalConfig | None:
        """The reward signal called ``name``, or None."""
        return next((s for s in self.reward_signals if s.name == name), None)

    @property
    def reward_strength(self) -> float:
        """reward_signals.extrinsic.strength (1.0 without an extrinsic signal)."""
        extrinsic = self.signal("extrinsic")
        return 1.0 if extrinsic is None else extrinsic.strength

    @property
    def gamma(self) -> float:
        """The extrinsic reward's discount (reward_signals.extrinsic.gamma; else the first signal's)."""
        return (self.signal("extrinsic") or self.reward_signals[0]).gamma


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
    """One ``environment_parameters`` entry or lesson value: a constant or a sampler."""

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
        check_field(self.sampler_type in SAMPLER_PARAMETERS, s, "sampler_type",
               "one of " + ", ".join(SAMPLER_PARAMETERS), self.sampler_type)
        check_field(self.min_value <= self.max_value, s, "min_value", "<= max_value", self.min_value)
        check_field(self.st_dev >= 0, s, "st_dev", ">= 0", self.st_dev)
        check_field(len(self.intervals) >= 1 and all(len(i) == 2 and i[0] <= i[1] for i in self.intervals),
               s, "intervals", "a non-empty list of [min, max] pairs with min <= max", self.intervals)
        check_field(is_int(self.seed), s, "seed", "an int", self.seed)


MEASURES = ("reward", "progress")
"""``completion_criteria.measure`` values (ML-Agents' ``CompletionCriteriaSettings.MeasureType``)."""


@dataclass(frozen=True)
class CompletionCriteria:
    """A lesson's ``completion_criteria`` (ML-Agents' CompletionCriteriaSettings): when the
    parameter moves on to its next lesson (``unity_rl.training.curriculum`` applies it)."""

    behavior: str
    """The trained behavior (config section name) whose progress or returns are measured."""
    measure: Literal["reward", "progress"] = "reward"
    """'progress': agent-steps / max_steps of ``behavior``; 'reward': mean episode return."""
    min_lesson_length: int = 0
    """Episodes of ``behavior`` that must end in this lesson before it can end."""
    signal_smoothing: bool = True
    """measure reward: compare 0.25 * previous smoothed value + 0.75 * mean return."""
    threshold: float = 0.0
    """The lesson ends once the measure exceeds it (progress: in [0, 1])."""
    require_reset: bool = False
    """Reset every build (every agent's episode cut) when this lesson ends."""

    def __post_init__(self) -> None:
        s = "completion_criteria"
        check_field(isinstance(self.behavior, str) and bool(self.behavior), s, "behavior",
                    "a behavior name", self.behavior)
        check_field(self.measure in MEASURES, s, "measure", "'reward' or 'progress'", self.measure)
        check_field(is_int(self.min_lesson_length) and self.min_lesson_length >= 0, s,
                    "min_lesson_length", "an int >= 0", self.min_lesson_length)
        check_field(self.measure != "progress" or 0.0 <= self.threshold <= 1.0, s, "threshold",
                    "in [0, 1] when measure is progress (a fraction of max_steps)", self.threshold)


@dataclass(frozen=True)
class Lesson:
    """One lesson of a curriculum (ML-Agents' Lesson)."""

    name: str
    """The lesson's name (logged when it starts)."""
    value: EnvironmentParameter
    """The parameter's value during the lesson: a constant or a sampler."""
    completion_criteria: CompletionCriteria | None = None
    """When the lesson ends (None: only the last lesson, which never ends)."""


@dataclass(frozen=True)
class Curriculum:
    """An ``environment_parameters`` entry with ``curriculum``: its lessons, in order."""

    lessons: tuple[Lesson, ...]
    """The lessons; every one but the last has completion_criteria (the last one's are ignored)."""

    def __post_init__(self) -> None:
        check_field(len(self.lessons) >= 1, "curriculum", "curriculum", "a non-empty list of lessons",
                    self.lessons)
        for lesson in self.lessons[:-1]:
            check_field(lesson.completion_criteria is not None, "curriculum", "curriculum",
                        f"lessons that each have completion_criteria but the last "
                        f"(lesson {lesson.name!r} has none)", lesson.name)


def initial_value(parameter: "EnvironmentParameter | Curriculum") -> "EnvironmentParameter":
    """The value a parameter starts with: itself, or its curriculum's first lesson's value."""
    return parameter.lessons[0].value if isinstance(parameter, Curriculum) else parameter


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
        check_field(bool(self.run_id) and "/" not in self.run_id and "\\" not in self.run_id
               and self.run_id not in (".", ".."), s, "run_id",
               "a non-empty name without path separators", self.run_id)
        check_field(bool(self.results_dir), s, "results_dir", "a non-empty path", self.results_dir)
        check_field(not (self.resume and self.force), s, "force",
               "false when resume is true (resume continues a run, force overwrites it)", self.force)
        check_field(self.initialize_from is None or (bool(self.initialize_from) and not self.resume),
               s, "initialize_from", "a run id, and not together with resume",
               self.initialize_from)
        check_field(not self.inference or self.resume or self.initialize_from is not None, s,
               "inference", "used with resume or initialize_from (the weights to run)",
               self.inference)


_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps)$")


@dataclass(frozen=True)
class TorchConfig:
    """``torch_settings``."""

    device: str | None = None
    """Learner device: 'cpu', 'cuda', 'cuda:N' or 'mps' (None: cuda when available, else cpu)."""

    def __post_init__(self) -> None:
        check_field(self.device is None or bool(_DEVICE.match(self.device)), "torch_settings", "device",
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
    actor_niceness: int | None = None
    """Niceness (Linux ``nice``, 0-19) added to each actor process and so to its builds: null is
    10 in async mode (when cores are short the learner is served first and pays its updates as
    data arrive; actors still never wait for it) and 0 in sync mode (the two take turns)."""
    behavior: str | None = None
    """Train only this behavior (--behavior); the agents of the others get zero actions."""
    trajectory_cuts: Literal["time_horizon", "segment"] = "time_horizon"
    """'time_horizon': cut trajectories only at time_horizon or an episode end (ML-Agents);
    'segment': also at every segment end (each actor's share of a buffer)."""
    demo_pairing: Literal["mlagents", "aligned"] = "mlagents"
    """How behavioral cloning and GAIL pair a demo's observations with actions: 'mlagents' each
    with the previous action, as mlagents-learn 1.1.0 (Unity's recorder stores it so);
    'aligned' each with the action taken there (docs/imitation.md, "The pairing quirk")."""
    fix_quirks: tuple[str, ...] = ()
    """ML-Agents quirks to fix rather than copy (names: docs/from-mlagents-learn.md; e.g.
    sac_deterministic_squash); without an entry a trainer type does what ML-Agents does."""

    def __post_init__(self) -> None:
        s = "unity_rl"
        check_field(self.mode in ("sync", "async"), s, "mode", "'sync' or 'async'", self.mode)
        check_field(is_int(self.num_actors) and self.num_actors >= 1, s, "num_actors", "an int >= 1", self.num_actors)
        check_field(self.segment_steps is None or (is_int(self.segment_steps) and self.segment_steps >= 1), s,
               "segment_steps", "null or an int >= 1", self.segment_steps)
        check_field(is_int(self.max_policy_lag) and self.max_policy_lag >= 0, s, "max_policy_lag",
               "an int >= 0", self.max_policy_lag)
        check_field(self.backend in ("local", "ray"), s, "backend", "'local' or 'ray'", self.backend)
        check_field(self.ray_address is None or self.backend == "ray", s, "ray_address",
               "null unless backend is 'ray'", self.ray_address)
        check_field(isinstance(self.num_cpus_per_actor, (int, float)) and self.num_cpus_per_actor > 0,
               s, "num_cpus_per_actor", "a number > 0", self.num_cpus_per_actor)
        check_field(self.max_actor_restarts is None or (is_int(self.max_actor_restarts)
               and self.max_actor_restarts >= -1), s, "max_actor_restarts",
               "null or an int >= -1", self.max_actor_restarts)
        check_field(is_int(self.torch_threads) and self.torch_threads >= 1, s, "torch_threads",
               "an int >= 1", self.torch_threads)
        check_field(self.actor_niceness is None or (is_int(self.actor_niceness)
                    and 0 <= self.actor_niceness <= 19), s, "actor_niceness",
                    "null or an int from 0 to 19", self.actor_niceness)
        check_field(self.trajectory_cuts in ("time_horizon", "segment"), s, "trajectory_cuts",
               "'time_horizon' or 'segment'", self.trajectory_cuts)
        check_field(self.demo_pairing in ("mlagents", "aligned"), s, "demo_pairing",
                    "'mlagents' or 'aligned'", self.demo_pairing)
        known = known_quirk_fixes()
        check_field(isinstance(self.fix_quirks, tuple) and all(q in known for q in self.fix_quirks),
                    s, "fix_quirks", f"a list of names among {sorted(known)}", self.fix_quirks)

    def resolve_segment_steps(self, behavior: BehaviorConfig) -> int:
        """segment_steps, or its trainer type's default (PPO: buffer_size / num_actors, rounded
        up; DDPG: 256)."""
        if self.segment_steps is not None:
            return self.segment_steps
        spec = trainer_type(behavior.trainer_type)
        return spec.default_segment_steps(behavior.hyperparameters, self.num_actors,
                                          behavior.time_horizon)


def known_quirk_fixes() -> set[str]:
    """Every ``unity_rl.fix_quirks`` name a registered trainer type knows."""
    return {name for t in trainer_type_names() for name in trainer_type(t).quirk_fixes}


def with_quirk_fixes(behavior: BehaviorConfig, fixes: tuple[str, ...]) -> BehaviorConfig:
    """``behavior`` with its trainer type's fields for the named quirks set to the fix."""
    table = trainer_type(behavior.trainer_type).quirk_fixes
    changes = dict(table[q] for q in fixes if q in table)
    if not changes:
        return behavior
    return dataclasses.replace(behavior, hyperparameters=dataclasses.replace(
        behavior.hyperparameters, **changes))


def with_demo_pairing(behavior: BehaviorConfig, pairing: str) -> BehaviorConfig:
    """``behavior`` with ``unity_rl.demo_pairing`` copied into the reward signals that read a
    demonstration (GAIL; behavioral cloning reads it from the run's config)."""
    signals = tuple(dataclasses.replace(s, demo_pairing=pairing)
                    if hasattr(s, "demo_pairing") else s for s in behavior.reward_signals)
    return dataclasses.replace(behavior, reward_signals=signals)


@dataclass(frozen=True)
class RunConfig:
    """A whole run: the resolved form of one YAML file plus command-line overrides."""

    behaviors: FrozenMap = field(default_factory=FrozenMap)
    """Behavior name -> BehaviorConfig (default_settings already merged in)."""
    default_settings: BehaviorConfig | None = None
    """Settings for behaviors not listed in behaviors (None: such behaviors are an error)."""
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    """The YAML sections env_settings (build and its supervision) and engine_settings (sent to
    the builds), loaded into the one launch-settings object (``unity_rl/envs/settings.py``)."""
    environment_parameters: FrozenMap = field(default_factory=FrozenMap)
    """Parameter name -> EnvironmentParameter (a constant or a sampler) or Curriculum, sent
    through the environment parameters channel."""
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
        if self.unity_rl.demo_pairing != "mlagents":
            paired = {name: with_demo_pairing(b, self.unity_rl.demo_pairing)
                      for name, b in self.behaviors.items()}
            object.__setattr__(self, "behaviors", FrozenMap(paired))
            if self.default_settings is not None:
                object.__setattr__(self, "default_settings", with_demo_pairing(
                    self.default_settings, self.unity_rl.demo_pairing))
        if self.unity_rl.fix_quirks:
            fixed = {name: with_quirk_fixes(b, self.unity_rl.fix_quirks)
                     for name, b in self.behaviors.items()}
            object.__setattr__(self, "behaviors", FrozenMap(fixed))
            if self.default_settings is not None:
                object.__setattr__(self, "default_settings",
                                   with_quirk_fixes(self.default_settings, self.unity_rl.fix_quirks))

    @property
    def env_settings(self) -> LaunchSettings:
        """The ``env_settings`` section: read its keys here (``cfg.env_settings.num_envs``);
        they are fields of ``launch``."""
        return self.launch

    @property
    def engine_settings(self) -> LaunchSettings:
        """The ``engine_settings`` section: read its keys here; they are fields of ``launch``."""
        return self.launch

    def launch_settings(self, log_dir: str | None = None) -> LaunchSettings:
        """The ``LaunchSettings`` every build of this run starts with: ``launch`` with the
        builds' log folder and ``environment_parameters`` (a curriculum: its first lesson's
        value; training replaces them with the current lessons', ``training.curriculum``)."""
        if self.launch.env_path is None:
            raise ValueError("env_settings.env_path (--env) is required: the path of a Unity "
                             "build (connecting to the Unity Editor is not supported)")
        return dataclasses.replace(self.launch, log_dir=log_dir, env_parameters=tuple(
            (name, initial_value(p)) for name, p in self.environment_parameters.items()))
