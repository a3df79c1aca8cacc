"""``train(cfg, run_dir, resume=...)``: the learner host (Sample Factory's runner role).

It builds the pieces and wires them in one place (``wiring.wire``: mode x backend):

    builds --(AgentStream, every behavior)--> actors (a policy copy + collector per behavior)
    actors --(backend: Rollout = one Segment per behavior, tagged with versions)--> runner
    runner --(Segment)--> the behavior's LearnerHost (algorithm seam: PPO, DDPG, ...)
    runner --(backend: PolicyWeights, every behavior, one publication)--> actors

and owns the loop around ``runner.next_update()``: per-behavior step budgets, metrics,
checkpoints, resume, the final policies.

This module starts and ends the run; the session's setup, loop and outputs are
``session.TrainingSession``, where a run starts from (seed, checkpoints, lessons) is
``resume``, what it returns ``results``; what a feature needs beyond a few lines lives in its
own module (``curriculum.py``, ``selfplay.py``).

Contract:
- every behavior the builds report is trained, with the settings of its section (or
  ``default_settings``); a behavior with neither is an error naming it. ``unity_rl.behavior``
  (``--behavior``) restricts the run to one behavior; the agents of the others then receive zero
  actions (said in the log);
- each behavior has its own learner, schedules, step count and ``max_steps``: it stops training
  at its ``max_steps`` and the run ends when every behavior is done (see ``behavior_run.py`` for
  its folder, progress rows and policy files);
- step counts are agent-steps collected from the builds (including segments the async wiring
  drops as too stale);
- ``env_settings.num_envs`` builds in all, split as evenly as possible over
  ``RunConfig.num_actors`` actors (null: one per build in sync mode on local processes, up to
  the cores); build i of the run is worker i, on port ``base_port + i``;
- one checkpoint file holds every behavior's entry (written atomically together, so a resumed
  run restarts all behaviors from one consistent moment), the seed and the RNG states; one is
  written when any behavior crosses its ``checkpoint_interval``; ``resume=True`` continues from
  the latest one;
- environment parameters: the builds start with each parameter's current lesson
  (``training.curriculum``: sampler seeds as mlagents-learn assigns them); after every round the
  lessons are checked with the round's episodes and progress, and a change sends every
  parameter's current value to every actor's builds (``backend.control``; they apply it between
  collections, a re-created actor starts with it) and, where a finished lesson has
  ``require_reset``, resets the builds; lesson numbers go to TensorBoard
  (``Environment/Lesson Number/<parameter>``) and into the checkpoint;
- self-play (``training.selfplay``): the teams of a section with ``self_play`` share one
  ``BehaviorRun`` named by the brain (the name before ``?team=``); the runner drives one view per
  team, the self-play runner merges them back, ``Self-play/ELO`` goes to the brain's metrics and
  the controller's state into the checkpoint (``self_play``);
- Ctrl-C or SIGTERM stops cleanly: actors stopped (builds closed), final checkpoint, final
  policies; ``TrainResult.interrupted`` says so. An actor failure raises ``ActorFailedError``
  naming the actor, after the same clean-up (its checkpoint lets the run be resumed).
"""
from __future__ import annotations

import functools
import logging
import time
from pathlib import Path
from typing import Sequence

from unity_rl.algorithms.update_halves import halves_side_by_side, set_learner_cores
from unity_rl.checkpoint import CheckpointManager
from unity_rl.config import ConfigError, RunConfig
from unity_rl.interrupts import sigterm_raises
from unity_rl.runtime.allocator import keep_freed_memory
from unity_rl.runtime.backend import ActorBackend
from unity_rl.runtime.messages import ActorFailedError
from unity_rl.runtime.process_state import import_in_background, seed_everything, shielded
from unity_rl.training.results import TrainResult
from unity_rl.training.resume import initial_state, load_state, resolve_seed, restore_curricula
from unity_rl.training.session import TrainingSession
from unity_rl.training.thread_trial import ThreadTrial
from unity_rl.training.wiring import actor_specs, learner_torch_threads, make_algorithms, wire

logger = logging.getLogger(__name__)


def train(cfg: RunConfig, run_dir: Path, *, resume: bool, console: bool = True,
          target_return: float | None = None,
          actor_env_args: Sequence[Sequence[str]] | None = None) -> TrainResult:
    """Trains every configured behavior; returns when each reached its max_steps (or every
    mean return reached ``target_return``) or on Ctrl-C/SIGTERM.

    run_dir: the run folder (created if missing). resume: continue from its latest checkpoint
    (``CheckpointError`` if there is none). console: live progress on stdout.
    target_return: stop once the mean return of every behavior's last 100 episodes reaches it.
    actor_env_args: extra build arguments per actor (e.g. slowing one actor's builds).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    algorithms, default = make_algorithms(cfg)
    keep = max(a.behavior_cfg.keep_checkpoints for a in [*algorithms.values(), default] if a)
    checkpoints = CheckpointManager(run_dir, keep)
    state = load_state(checkpoints) if resume else None
    initial = initial_state(cfg, state)
    if cfg.checkpoint_settings.inference:
        state = None  # run the weights with fresh counters; nothing of the run is overwritten
    seed = int(state["seed"]) if state else resolve_seed(cfg)
    seed_everything(seed)
    set_learner_cores(1, split=False)  # the host owns process-wide torch state: sized after setup
    keep_freed_memory()  # and the allocator's: buffers of camera rows reuse freed memory
    ck = cfg.checkpoint_settings  # lessons come back with --resume only (mlagents-learn's)
    curricula = restore_curricula(cfg, seed, initial if ck.inference and ck.resume else state)
    run = TrainingSession(cfg, run_dir, checkpoints, state, seed, algorithms, default, initial,
                          curricula)
    specs = actor_specs(cfg, algorithms, default, run_dir / "run_logs", seed,
                        int(state["agent_steps"]) if state else 0, actor_env_args,
                        env_parameters=curricula.values())
    backend, runner_for = wire(cfg, specs)
    interrupted: KeyboardInterrupt | None = None
    save_at_end = False  # normal end, Ctrl-C/SIGTERM, or an actor failure: the learners are sound
    policies: dict = {}
    wall_seconds = 0.0
    with sigterm_raises():
        try:
            try:
                t0 = time.perf_counter()
                imports = import_in_background()  # while the actors and builds start
                infos = backend.start()
                logger.info("%d actor(s) with %d build(s) ready in %.1f s", len(infos),
                            cfg.env_settings.num_envs, time.perf_counter() - t0)
                imports.join()
                run.setup(infos, console)
                parameters = run.largest_learner_parameters()
                threads = learner_torch_threads(cfg, parameters)
                use_cores = functools.partial(set_learner_cores, split=run.updates_split())
                use_cores(threads)
                trial = None
                if threads > 1 and cfg.unity_rl.torch_threads is None:
                    # the rule's pick, checked on this machine
                    trial = ThreadTrial((threads, 1), set_threads=use_cores)
                halves = ", the update's halves side by side" if halves_side_by_side() else ""
                logger.info("learner: %d core(s)%s%s (largest network: %.2fM parameters)",
                            threads, halves, " to try against 1" if trial else "",
                            parameters / 1e6)
                run.loop(runner_for(run.runner_hosts()), target_return,
                         on_round=trial.observe_round if trial else None)
                save_at_end = True
            except KeyboardInterrupt as stop:
                interrupted, save_at_end = stop, True
                logger.info("interrupted (%s): stopping actors and saving", stop or "Ctrl-C")
            except ActorFailedError as err:
                save_at_end = True
                _raise_config_error(cfg, err)
                raise
            finally:
                with shielded():
                    t0 = time.perf_counter()
                    _finish_backend(backend)
                    t1 = time.perf_counter()
                    if save_at_end and run.ready:
                        policies = run.save_final()
                        logger.info("actors stopped in %.1f s, final checkpoint and policies "
                                    "saved in %.1f s", t1 - t0, time.perf_counter() - t1)
        finally:
            for algorithm in [*algorithms.values(), default]:
                if algorithm is not None:  # after the final checkpoint (DDPG: shared replay)
                    algorithm.close()
            wall_seconds = run.close()
    if not run.ready:  # interrupted while the builds were starting: nothing trained
        raise interrupted if isinstance(interrupted, KeyboardInterrupt) else \
            KeyboardInterrupt("interrupted before training started")
    return run.result(wall_seconds, policies, interrupted)


def _raise_config_error(cfg: RunConfig, err: ActorFailedError) -> None:
    """An actor that found a behavior without settings is a configuration error, said as one."""
    if err.error is not None and err.error.exc_type.endswith(".BehaviorSettingsError"):
        raise ConfigError(cfg.source or "<config>", None, "behaviors", err.error.message) from None


def _finish_backend(backend: ActorBackend) -> None:
    try:
        backend.stop()
    except Exception as err:  # stopping must not hide the run's own outcome; say what failed
        logger.error("stopping the actors failed: %s", err)
