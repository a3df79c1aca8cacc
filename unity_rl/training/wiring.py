"""From a ``RunConfig`` to the run's pieces, and the one place where they are wired.

- ``training_sections`` / ``make_algorithms``: the config sections a run trains (after
  ``unity_rl.behavior``) and one ``Algorithm`` per section (``runtime/algorithm.py``);
- ``actor_specs``: one ``ActorSpec`` per actor: its builds (``env_settings.num_envs`` split as
  evenly as possible over ``RunConfig.num_actors``; build i of the run is worker i, on port
  ``base_port + i``), the run's ``LaunchSettings`` and every section's ``BehaviorPlan``;
- ``make_backend`` / ``wire``: mode x backend, chosen here and nowhere else (the backends import
  ``backend.py``; it imports neither of them).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from unity_rl.config import BehaviorConfig, ConfigError, RunConfig
from unity_rl.config.run_config import usable_cores
from unity_rl.envs.behavior import ALL_BEHAVIORS
from unity_rl.envs.types import short_name
from unity_rl.runtime.actor_spec import ActorSpec, StreamSettings
from unity_rl.algorithms.registry import trainer_type
from unity_rl.runtime.algorithm import Algorithm
from unity_rl.runtime.backend import ActorBackend
from unity_rl.runtime.local import LocalProcessBackend
from unity_rl.runtime.runners import make_runner

DEFAULT_SECTION = "default_settings"



def training_sections(cfg: RunConfig) -> tuple[dict[str, BehaviorConfig], BehaviorConfig | None]:
    """(config sections trained, default settings or None), after ``unity_rl.behavior``."""
    only = cfg.unity_rl.behavior
    if only is None:
        if not cfg.behaviors and cfg.default_settings is None:
            raise ConfigError(cfg.source or "<config>", None, "behaviors",
                              "no behavior settings: add behaviors.<Name> or default_settings")
        return dict(cfg.behaviors), cfg.default_settings
    for name in (only, short_name(only)):
        if name in cfg.behaviors:
            return {name: cfg.behaviors[name]}, None
    if cfg.default_settings is not None:
        return {only: cfg.default_settings}, None
    raise ConfigError(cfg.source or "<config>", "behaviors", short_name(only),
                      f"--behavior {only}: the config has no settings for it (sections: "
                      f"{sorted(cfg.behaviors) or 'none'}) and no default_settings")


def make_algorithms(cfg: RunConfig) -> tuple[dict[str, Algorithm], Algorithm | None]:
    """One ``Algorithm`` per trained config section (and one for default_settings)."""
    sections, default = training_sections(cfg)
    algorithms = {name: make_algorithm(cfg, name, settings) for name, settings in sections.items()}
    return algorithms, (make_algorithm(cfg, DEFAULT_SECTION, default) if default else None)


def split_builds(num_builds: int, num_actors: int) -> list[tuple[int, int]]:
    """(first worker id, builds) per actor: ``num_builds`` split as evenly as possible."""
    if num_actors > num_builds:
        raise ValueError(f"unity_rl.num_actors ({num_actors}) is larger than env_settings.num_envs "
                         f"({num_builds}): every actor needs at least one build")
    out, start = [], 0
    for k in range(num_actors):
        count = num_builds // num_actors + (1 if k < num_builds % num_actors else 0)
        out.append((start, count))
        start += count
    return out


def actor_specs(cfg: RunConfig, algorithms: dict[str, Algorithm], default: Algorithm | None,
                log_dir: Path, seed: int, start_steps: int = 0,
                actor_env_args: Sequence[Sequence[str]] | None = None,
                env_parameters: Mapping[str, Any] | None = None) -> list[ActorSpec]:
    """One ``ActorSpec`` per actor of the run (pickles; backend-independent).
    ``env_parameters``: the values the builds start with (default: the config's, a curriculum
    at its first lesson; the trainer passes the current lessons')."""
    env, rl = cfg.env_settings, cfg.unity_rl
    if env.env_path is None:
        raise ValueError("env_settings.env_path (--env) is required: the path of a Unity build")
    if actor_env_args is not None and len(actor_env_args) != cfg.num_actors:
        raise ValueError(f"actor_env_args has {len(actor_env_args)} entries for "
                         f"{cfg.num_actors} actors")
    launch = cfg.launch_settings(str(log_dir))
    if env_parameters is not None:
        launch = dataclasses.replace(launch, env_parameters=tuple(env_parameters.items()))
    plans = tuple((name, _plan(algorithm)) for name, algorithm in algorithms.items())
    default_plan = _plan(default) if default is not None else None
    behaviors = (rl.behavior,) if rl.behavior is not None else (ALL_BEHAVIORS,)
    specs = []
    for k, (first_worker, count) in enumerate(split_builds(env.num_envs, cfg.num_actors)):
        extra = tuple(actor_env_args[k]) if actor_env_args is not None else ()
        stream = StreamSettings(
            env_path=str(env.env_path), num_builds=count, worker_id_start=first_worker,
            seed=seed + first_worker, behaviors=behaviors,
            other_behaviors="zeros" if rl.behavior is not None else "error",
            launch=launch.replace_args(extra),
            restart_quota=launch.restart_limits)
        policy_seed = int(np.random.SeedSequence([seed, k, start_steps]).generate_state(1)[0])
        specs.append(ActorSpec(
            actor_id=k, stream=stream, plans=plans, default_plan=default_plan,
            wait_for_new_weights=(rl.mode == "sync"), seed=policy_seed, torch_threads=1,
            niceness=actor_niceness(rl),
            partial_interval_s=PARTIAL_INTERVAL_S if rl.mode == "sync" else None))
    return specs


def actor_niceness(rl) -> int:
    """``unity_rl.actor_niceness``, null resolved: 10 for async actors, 0 for sync ones."""
    if rl.actor_niceness is not None:
        return int(rl.actor_niceness)
    return ASYNC_ACTOR_NICENESS if rl.mode == "async" else 0


def learner_torch_threads(cfg: RunConfig, parameters: int = 0) -> int:
    """``unity_rl.torch_threads``, null resolved: 1 in async mode (actors and builds keep the
    other cores busy, and contended intra-op threads slow an update down); in sync mode, when a
    trained behavior's networks are ``WIDE_NETWORK_UNITS`` wide or wider, or its learner
    optimises ``LARGE_LEARNER_PARAMETERS`` or more (``parameters``: the largest learner's
    ``LearnerHost.parameter_count``), the cores this process may use up to
    ``SYNC_LEARNER_MAX_THREADS`` (actors and builds wait during an update, so the cores would
    idle), else 1 (smaller networks pay more for the threads than they gain). Where this gives
    more than 1 and the config left it null, the trainer checks it on the machine: a
    ``ThreadTrial`` (``training/thread_trial.py``) times the first updates at this count and at
    1 and keeps the faster. The count is the learner's cores: the trainer hands it to
    ``update_halves.set_learner_cores``, which runs PPO's update halves side by side on them."""
    rl = cfg.unity_rl
    if rl.torch_threads is not None:
        return int(rl.torch_threads)
    sections, default = training_sections(cfg)
    widths = [b.network_settings.hidden_units for b in [*sections.values(), default] if b]
    large = (max(widths, default=0) >= WIDE_NETWORK_UNITS
             or parameters >= LARGE_LEARNER_PARAMETERS)
    if rl.mode != "sync" or not large:
        return 1
    return max(1, min(usable_cores(), SYNC_LEARNER_MAX_THREADS))


WIDE_NETWORK_UNITS = 256
"""``hidden_units`` from which a sync learner takes several threads. One PPO update on 2 idle
cores, 2 threads against 1 (``benchmarks/learner_threads.py``, two runs, stop 31): 128 units
0.78-1.12x (3DBall sizes), 256 units 0.94-1.22x at batch 128 and 1.44-1.64x at 512, 512 units
1.06-1.59x at batch 128 and 2.3-3.1x at Worm's 2,024."""

LARGE_LEARNER_PARAMETERS = 2_000_000
"""Parameters from which a sync learner takes several threads whatever its width: Adam's step
and the big layers' passes then dominate even a minibatch of 32. Unity's GridWorld config on its
camera + goal stand-in (128 units, but hyper layers: 4.8M parameters), one update on 2 idle
cores: 1.61x with 2 threads (``benchmarks/goal_update.py --threads 2``, stop 33); on another
2-core machine 0.94-1.13x (stop 34), which is why the trainer times both (``ThreadTrial``)."""

SYNC_LEARNER_MAX_THREADS = 4
"""The most intra-op threads a sync learner takes by default (mlagents-learn caps at 4 too, and
at half the cores)."""

ASYNC_ACTOR_NICENESS = 10
"""Async actors' default niceness: CFS then gives a busy learner about 10x an actor's share."""

PARTIAL_INTERVAL_S = 1.0
"""Sync actors send the trajectories finished so far at most this often during a collection
(``ActorSpec.partial_interval_s``): the learner counts their agent-steps and episodes as
they come, so a summary window (TensorBoard, the console) closes when its agent-steps have
been played, as mlagents-learn's does, not when the whole buffer has arrived. What the hosts
accept, and in which order, does not change."""


def _plan(algorithm: Algorithm):
    """The section's plan; with ``self_play`` its lanes also collect group data: a game's end
    (ELO) needs the last step's group reward and whether the whole group is done."""
    plan = algorithm.plan()
    if getattr(algorithm.behavior_cfg, "self_play", None) is not None:
        plan = plan._replace(collect_groups=True)
    return plan


def make_backend(name: str, specs: Sequence[ActorSpec], **options) -> ActorBackend:
    """The backend called ``name`` ('local' or 'ray') over ``specs``."""
    if name == "local":
        return LocalProcessBackend(specs, **options)
    if name == "ray":  # optional dependency: imported only when asked for
        try:
            from unity_rl.runtime.ray_backend import RayBackend
        except ImportError as err:
            raise ValueError("backend 'ray' is not available in this installation "
                             f"({err}); use backend: local") from err
        return RayBackend(specs, **options)
    raise ValueError(f"unknown backend {name!r}: expected 'local' or 'ray'")


def wire(cfg: RunConfig, specs: list[ActorSpec]) -> tuple[ActorBackend, Any]:
    """The one place where mode x backend are chosen: returns (backend, runner factory)."""
    rl = cfg.unity_rl
    options: dict[str, Any] = {"max_restarts": rl.max_actor_restarts}
    if rl.backend == "ray":
        options.update(address=rl.ray_address, num_cpus_per_actor=rl.num_cpus_per_actor)
    backend = make_backend(rl.backend, specs, **options)

    def runner_for(hosts):
        return make_runner(rl.mode, backend, hosts)  # mode: sync | async

    return backend, runner_for


def make_algorithm(run_cfg: Any, section: str, behavior_cfg: Any) -> Algorithm:
    """The algorithm of one config section (``trainer_type`` is validated by the config)."""
    try:
        spec = trainer_type(behavior_cfg.trainer_type)
    except KeyError as err:
        raise ValueError(f"{section}: {err.args[0]}") from None
    return spec.make_algorithm(run_cfg, section, behavior_cfg)
