"""A whole run's configuration: ``RunConfig`` and its run-level sections as frozen dataclasses
(one docstring line per field), checked when built: ``checkpoint_settings``
(``CheckpointConfig``), ``torch_settings`` (``TorchConfig``) and ``unity_rl`` (``UnityRLConfig``,
ours). The other sections live in their own modules: ``behaviors`` (``behavior_config``),
``environment_parameters`` (``environment_parameters``); ``env_settings`` and ``engine_settings``
are declared once, with every launch setting, as ``unity_rl.envs.settings.LaunchSettings``
(``RunConfig.launch``).

Building a ``RunConfig`` applies the ``unity_rl`` section's run-wide edits to every behavior
(``demo_pairing``, ``fix_quirks``), so that a behavior's config is the whole story.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Literal

from unity_rl.algorithms.registry import trainer_type
from unity_rl.config.behavior_config import (BehaviorConfig, known_quirk_fixes,
                                             with_demo_pairing, with_quirk_fixes)
from unity_rl.config.environment_parameters import initial_value
from unity_rl.config.field_checks import check_field, is_int
from unity_rl.config.frozen_map import FrozenMap
from unity_rl.envs.settings import LaunchSettings


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


def usable_cores() -> int:
    """Cores this process may run on (its affinity where the OS says, else the CPU count)."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return len(usable) if usable else (os.cpu_count() or 1)


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
    num_actors: int | None = None
    """Actor processes; the env_settings.num_envs builds are split over them. null: in sync mode
    on the local backend one per build, up to this machine's cores (each actor's inference then
    overlaps the other builds' steps), else 1 (``RunConfig.num_actors`` resolves it)."""
    segment_steps: int | None = None
    """Agent-steps an actor collects per segment (None: see resolve_segment_steps)."""
    max_policy_lag: int = 2
    """async: segments collected with weights more than this many versions old are dropped."""
    lag_correction: Literal["behaviour", "decoupled"] = "behaviour"
    """async PPO/POCA, rows acted with older weights: 'behaviour' centres the clipped ratio on the
    stored behaviour log-probs (plain PPO); 'decoupled' centres it on the learner's policy at the
    update's start and weights each term by π_prox/π_behav (Hilton et al. 2021; measured better
    on 3DBall, worse on GridWorld: docs/ppo.md). Sync runs have no lagged rows: the same update."""
    max_update_backlog: int | None = 20
    """async: when a learner owes more updates than this, the actors pause between rollouts.
    Replay-ratio trainers (SAC, DDPG) owe gradient updates (they train slower than
    steps_per_update asks) and hold until they have paid half, so the run keeps its configured
    ratio; PPO owes the full buffers waiting for it (0: the actors collect the next buffer
    during an update, then wait for it: policy lag 1, nothing dropped); null: they never pause
    (Ape-X: the achieved ratio falls instead, ``Runtime/Replay Ratio``)."""
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
    torch_threads: int | None = None
    """the learner's cores (actors always use 1 thread): torch intra-op threads, or with PPO's
    separate actor and critic the update's two halves side by side on half each
    (``algorithms/update_halves.py``); null: in sync mode with
    networks 256 units wide or wider this machine's cores up to 4 (actors and their builds wait
    while the learner updates), else 1 (async: they keep the other cores busy; narrow networks
    gain nothing)."""
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
        check_field(self.num_actors is None or (is_int(self.num_actors) and self.num_actors >= 1),
                    s, "num_actors", "null or an int >= 1", self.num_actors)
        check_field(self.segment_steps is None or (is_int(self.segment_steps) and self.segment_steps >= 1), s,
               "segment_steps", "null or an int >= 1", self.segment_steps)
        check_field(is_int(self.max_policy_lag) and self.max_policy_lag >= 0, s, "max_policy_lag",
               "an int >= 0", self.max_policy_lag)
        check_field(self.lag_correction in ("decoupled", "behaviour"), s, "lag_correction",
                    "'decoupled' or 'behaviour'", self.lag_correction)
        check_field(self.max_update_backlog is None or (is_int(self.max_update_backlog)
                    and self.max_update_backlog >= 0), s, "max_update_backlog",
                    "null or an int >= 0", self.max_update_backlog)
        check_field(self.backend in ("local", "ray"), s, "backend", "'local' or 'ray'", self.backend)
        check_field(self.ray_address is None or self.backend == "ray", s, "ray_address",
               "null unless backend is 'ray'", self.ray_address)
        check_field(isinstance(self.num_cpus_per_actor, (int, float)) and self.num_cpus_per_actor > 0,
               s, "num_cpus_per_actor", "a number > 0", self.num_cpus_per_actor)
        check_field(self.max_actor_restarts is None or (is_int(self.max_actor_restarts)
               and self.max_actor_restarts >= -1), s, "max_actor_restarts",
               "null or an int >= -1", self.max_actor_restarts)
        check_field(self.torch_threads is None or (is_int(self.torch_threads)
                    and self.torch_threads >= 1), s, "torch_threads", "null or an int >= 1",
                    self.torch_threads)
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

    def resolve_segment_steps(self, behavior: BehaviorConfig, num_actors: int) -> int:
        """segment_steps, or its trainer type's default over ``num_actors`` actors (PPO:
        buffer_size / num_actors, rounded up; DDPG: 256)."""
        if self.segment_steps is not None:
            return self.segment_steps
        spec = trainer_type(behavior.trainer_type)
        return spec.default_segment_steps(behavior.hyperparameters, num_actors,
                                          behavior.time_horizon)


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
    def num_actors(self) -> int:
        """``unity_rl.num_actors``, null resolved: in sync mode on the local backend one actor
        per build up to the cores this process may use, else 1."""
        rl = self.unity_rl
        if rl.num_actors is not None:
            return rl.num_actors
        if rl.mode == "sync" and rl.backend == "local":
            return max(1, min(int(self.launch.num_envs), usable_cores()))
        return 1

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
