"""``train(cfg, run_dir, resume=...)``: the learner host (Sample Factory's runner role).

It builds the pieces and wires them in one place (``wiring.wire``: mode x backend):

    builds --(AgentStream, every behavior)--> actors (a policy copy + collector per behavior)
    actors --(backend: Rollout = one Segment per behavior, tagged with versions)--> runner
    runner --(Segment)--> the behavior's LearnerHost (algorithm seam: PPO, DDPG, ...)
    runner --(backend: PolicyWeights, every behavior, one publication)--> actors

and owns the loop around ``runner.next_update()``: per-behavior step budgets, metrics,
checkpoints, resume, the final policies.

Size (about 470 lines): the run's setup, loop and outputs share the state of ``_Run``; what a
feature needs beyond a few lines lives in its own module (``curriculum.py``, ``selfplay.py``).

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
- ``env_settings.num_envs`` builds in all, split as evenly as possible over ``num_actors``
  actors; build i of the run is worker i, on port ``base_port + i``;
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

import logging
import random
import time
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import torch

from unity_rl.checkpoint import CheckpointError, CheckpointManager
from unity_rl.config import ConfigError, RunConfig
from unity_rl.runtime.algorithm import Algorithm, HostContext
from unity_rl.runtime.backend import ActorBackend
from unity_rl.training.behavior_run import BehaviorRun, output_names
from unity_rl.runtime.messages import ActorFailedError, ActorInfo, BehaviorInfo, Control
from unity_rl.interrupts import sigterm_raises
from unity_rl.runtime.process_state import load_rng_state, rng_state, seed_everything, shielded
from unity_rl.training.curriculum import Curricula
from unity_rl.training.ghost import team_of
from unity_rl.training.selfplay import SelfPlay, make_selfplay_runner, self_play_brains
from unity_rl.training.wiring import actor_specs, make_algorithms, wire

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 2
"""Version of the checkpoint layout written by ``_Run.save_checkpoint`` (2: one entry per
behavior under ``behaviors``)."""


class BehaviorResult(NamedTuple):
    """How one behavior of a run ended."""

    agent_steps: int
    """Its agent-steps over the whole run."""
    mean_return: float
    """Mean return of its last 100 episodes (NaN if none ended)."""
    episodes: int
    """Its episodes finished over the whole run."""
    policy_version: int
    """Its learner version (updates, or DDPG publications) of the final weights."""
    policy_path: Path | None
    """Its final policy as ONNX for Unity (None if export failed)."""
    torch_policy_path: Path | None
    """Its final policy weights for ``evaluate`` (torch file)."""


class TrainResult(NamedTuple):
    """What a finished (or interrupted) run reports. The per-behavior fields at the top level
    are those of the first behavior (by name): the only one in a one-behavior run."""

    agent_steps: int
    """Agent-steps collected over the whole run, all behaviors together."""
    wall_seconds: float
    """Wall time of the whole run (earlier sessions included)."""
    mean_return: float
    episodes: int
    policy_version: int
    policy_path: Path | None
    torch_policy_path: Path | None
    checkpoint_path: Path | None
    """The last checkpoint written."""
    interrupted: KeyboardInterrupt | None
    """The interrupt that ended the run before every max_steps (``interrupts.Terminated`` for
    SIGTERM), or None; truthy when interrupted."""
    behaviors: dict[str, BehaviorResult] = {}
    """Behavior (output name) -> its result."""


# ----------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------

def _same_behaviors(infos: list[ActorInfo]) -> dict[str, BehaviorInfo]:
    """The behaviors every actor reports (all actors must see the same builds)."""
    first = infos[0]
    for info in infos[1:]:
        if info.layout() != first.layout():
            raise RuntimeError(f"actor {info.actor_id} sees behaviors {info.layout()}, actor 0 "
                               f"sees {first.layout()}: all builds must be the same")
    return dict(first.behaviors)


class _Run:
    """State of one training session (built piecewise so that clean-up knows what exists)."""

    def __init__(self, cfg: RunConfig, run_dir: Path, checkpoints: CheckpointManager,
                 state: dict | None, seed: int, algorithms: dict[str, Algorithm],
                 default: Algorithm | None, initial: dict | None = None,
                 curricula: Curricula | None = None):
        self.cfg, self.run_dir = cfg, run_dir
        self.checkpoints = checkpoints
        self.resume_state = state
        self.initial = initial
        """A checkpoint whose learners start this run (initialize_from / inference)."""
        self.inference = cfg.checkpoint_settings.inference
        self.seed = seed
        self.algorithms, self.default = algorithms, default
        self.behaviors: dict[str, BehaviorRun] = {}
        self.curricula = curricula if curricula is not None else Curricula({}, seed)
        """Each environment parameter's lesson (a plain value: one lesson)."""
        self.selfplay: SelfPlay | None = None
        """The self-play brains (``training.selfplay``), or None."""
        self.ready = False
        """True once every behavior has its host and metrics (the run can be saved)."""
        self.last_checkpoint: Path | None = None
        self.saved_at: tuple[int, ...] | None = None

    @property
    def agent_steps(self) -> int:
        return sum(b.agent_steps for b in self.behaviors.values())

    def _algorithm_for(self, name: str) -> Algorithm:
        for section in (name, name.split("?", 1)[0]):
            if section in self.algorithms:
                return self.algorithms[section]
        if self.default is None:  # the actors refuse such a behavior first
            raise ConfigError(self.cfg.source or "<config>", "behaviors", name,
                              "no settings for this behavior")
        return self.default

    # -- setup ----------------------------------------------------------------------------------
    def setup(self, infos: list[ActorInfo], console: bool) -> None:
        reported = _same_behaviors(infos)
        rl, device = self.cfg.unity_rl, self.cfg.torch_settings.device
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        state = self.resume_state
        entries = state["behaviors"] if state is not None else {}
        initial = self.initial["behaviors"] if self.initial is not None else {}
        names = sorted(reported)
        brains = self_play_brains(names, self._algorithm_for, reported)
        teams = {name for brain in brains.values() for name in brain[2].values()}
        plain = [name for name in names if name not in teams]
        outs = {**output_names(plain), **{brain: brain for brain in brains}}
        hosts, settings = {}, {}
        for i, name in enumerate(names):
            if name in teams and name not in {b[0] for b in brains.values()}:
                continue  # a brain's other team: the brain's one host is made for its first
            algorithm = self._algorithm_for(name)
            seed = int(np.random.SeedSequence([self.seed, i]).generate_state(1)[0])
            ctx = HostContext(device, seed, rl.num_actors, rl.mode, rl.max_policy_lag)
            key = team_of(name)[0] if name in teams else name
            hosts[key] = (algorithm.make_host(reported[name], ctx), reported[name])
            settings[key] = algorithm.behavior_cfg
        if brains:
            self.selfplay = SelfPlay.build(
                {brain: (hosts[brain][0], settings[brain].self_play, names_)
                 for brain, (_, _, names_) in brains.items()}, self.seed)
            for brain, host in self.selfplay.brains.items():
                hosts[brain] = (host, hosts[brain][1])
        for name in [*plain, *sorted(brains)]:
            host, info = hosts[name]
            metrics_dir = self.run_dir / "inference" if self.inference else self.run_dir
            run = BehaviorRun(name, outs[name], settings[name], info, host, metrics_dir)
            self.behaviors[name] = run
            entry = entries.get(name)
            if entry is not None:
                run.restore(entry)
            elif name in initial:
                host.load_state_dict(initial[name]["learner"])
                host.restart_counters()  # weights kept; steps and schedules start afresh
            elif state is not None or self.initial is not None:
                logger.warning("the checkpoint has no entry for behavior %s: it starts afresh",
                               name)
            run.open_metrics(console, float(entry["wall_seconds"]) if entry else 0.0)
            if entry is not None:
                run.restore_metrics(entry)
        self._check_curriculum_behaviors()
        if self.selfplay is not None and state is not None and "self_play" in state:
            self.selfplay.load_state_dict(state["self_play"])
        if state is not None:
            load_rng_state(state["rng"])
        self.saved_at = self._steps() if state is not None else None
        self.ready = True
        logger.info("training %s", ", ".join(
            f"{b.out_name} ({b.settings.trainer_type}, {b.info.num_agents} agents at reset)"
            for b in self.behaviors.values()))

    def _check_curriculum_behaviors(self) -> None:
        """Every behavior a completion criterion names is trained in this run."""
        trained = {name.split("?", 1)[0] for name in self.behaviors}
        missing = sorted(self.curricula.behaviors - trained)
        if missing:
            raise ConfigError(self.cfg.source or "<config>", "environment_parameters", None,
                              f"a curriculum's completion_criteria name behavior(s) {missing}, "
                              f"which this run does not train (trained: {sorted(trained)})")

    # -- loop -----------------------------------------------------------------------------------
    def runner_hosts(self) -> dict:
        """Full behavior name -> what the runner drives: the behavior's host, or its self-play
        team's view."""
        hosts = {n: b.host for n, b in self.behaviors.items()
                 if self.selfplay is None or n not in self.selfplay.brains}
        if self.selfplay is not None:
            hosts.update(self.selfplay.views())
        return hosts

    def loop(self, runner, target_return: float | None) -> None:
        runner = make_selfplay_runner(runner, self.selfplay)
        runner.start()
        for name, behavior in self.behaviors.items():
            if behavior.done or self.inference:
                runner.finish(name)
        while not all(b.done for b in self.behaviors.values()):
            round_ = runner.next_update()
            checkpoint_due = False
            for behavior in self.behaviors.values():  # the lessons the round was collected in
                for parameter, number in self.curricula.lesson_numbers().items():
                    behavior.metrics.set_stat(f"Environment/Lesson Number/{parameter}", number)
            if self.selfplay is not None:
                for brain, elo in self.selfplay.elos().items():
                    self.behaviors[brain].metrics.set_stat("Self-play/ELO", elo)
            for name, part in round_.behaviors.items():
                behavior = self.behaviors[name]
                if behavior.done:
                    continue
                checkpoint_due |= behavior.record(part, log_always=self.inference)
                if behavior.done:
                    runner.finish(name)
                    logger.info("%s reached max_steps (%d agent-steps): it stops training",
                                behavior.out_name, behavior.agent_steps)
            if not self.inference:
                self._update_lessons(round_, runner.backend)
            if checkpoint_due and not self.inference:
                self.save_checkpoint()
            if target_return is not None and self._reached(target_return):
                logger.info("every behavior's mean return >= %.2f after %d agent-steps: stopping",
                            target_return, self.agent_steps)
                break

    def _update_lessons(self, round_, backend: ActorBackend) -> None:
        """Checks the lessons with the round's episodes (mlagents-learn's
        ``reset_env_if_ready``); a change goes to every actor's builds."""
        for name, part in round_.behaviors.items():
            self.curricula.record_episodes(name.split("?", 1)[0], part.episode_returns)
        progress = {b.name.split("?", 1)[0]: b.agent_steps / b.settings.max_steps
                    for b in self.behaviors.values()}
        result = self.curricula.update(progress)
        if result.changed:
            backend.control(Control(env_parameters=self.curricula.values(),
                                    reset_episodes=result.must_reset))

    def _reached(self, target_return: float) -> bool:
        return all(b.metrics.episodes >= 100 and b.metrics.mean_return >= target_return
                   for b in self.behaviors.values())

    def _steps(self) -> tuple[int, ...]:
        return tuple(b.agent_steps for b in self.behaviors.values())

    # -- outputs --------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        state = {
            "format": CHECKPOINT_FORMAT,
            "behaviors": {name: b.checkpoint_entry() for name, b in self.behaviors.items()},
            "agent_steps": self.agent_steps,
            "seed": self.seed,
            "rng": rng_state(),
            "curriculum": self.curricula.state_dict(),
        }
        if self.selfplay is not None:
            state["self_play"] = self.selfplay.state_dict()
        self.last_checkpoint = self.checkpoints.save(state, self.agent_steps)
        self.saved_at = self._steps()
        return self.last_checkpoint

    def save_final(self) -> dict[str, tuple[Path | None, Path]]:
        if self.inference:
            return {}
        if self.saved_at != self._steps():
            self.save_checkpoint()
        return {name: b.save_policy() for name, b in self.behaviors.items()}

    def close(self) -> float:
        """Closes the metrics writers; returns the run's wall seconds."""
        wall = max((b.metrics.elapsed() for b in self.behaviors.values()
                    if b.metrics is not None), default=0.0)
        for behavior in self.behaviors.values():
            behavior.close()
        return wall

    def result(self, wall_seconds: float, policies: dict,
               interrupted: KeyboardInterrupt | None) -> TrainResult:
        per = {}
        for name, b in self.behaviors.items():
            onnx_path, torch_path = policies.get(name, (None, None))
            per[b.out_name] = BehaviorResult(
                agent_steps=b.agent_steps, mean_return=b.metrics.mean_return,
                episodes=b.metrics.episodes, policy_version=int(b.host.version),
                policy_path=onnx_path, torch_policy_path=torch_path)
        first = per[min(per)]
        return TrainResult(
            agent_steps=self.agent_steps, wall_seconds=wall_seconds,
            mean_return=first.mean_return, episodes=first.episodes,
            policy_version=first.policy_version, policy_path=first.policy_path,
            torch_policy_path=first.torch_policy_path, checkpoint_path=self.last_checkpoint,
            interrupted=interrupted, behaviors=per)


def _resolve_seed(cfg: RunConfig) -> int:
    seed = cfg.env_settings.seed
    return seed if seed >= 0 else random.SystemRandom().randrange(2**31)


def _initial_state(cfg: RunConfig, state: dict | None) -> dict | None:
    """The checkpoint whose learners start the run: initialize_from's latest, or (inference
    after --resume) the run's own."""
    ck = cfg.checkpoint_settings
    if ck.initialize_from is not None:
        source = CheckpointManager(Path(ck.results_dir) / ck.initialize_from)
        if source.latest() is None:
            raise CheckpointError(f"--initialize-from {ck.initialize_from}: no checkpoint in "
                                  f"'{source.run_dir}'")
        return _load_state(source)
    return state if ck.inference else None


def _curricula(cfg: RunConfig, seed: int, state: dict | None) -> Curricula:
    """The run's lessons: lesson 0 everywhere, or those of the checkpoint (``--resume``)."""
    curricula = Curricula(cfg.environment_parameters, seed)
    if state is not None and "curriculum" in state:
        try:
            curricula.load_state_dict(state["curriculum"])
        except ValueError as err:
            raise CheckpointError(str(err)) from None
    for name in curricula.lessons:
        if len(curricula.lessons[name]) > 1:
            logger.info("curriculum: %s", curricula.describe(name))
    return curricula


def _load_state(checkpoints: CheckpointManager) -> dict:
    state = checkpoints.load()
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{checkpoints.latest()}: not a unity_rl training checkpoint of "
                              f"format {CHECKPOINT_FORMAT} (format {state.get('format')!r}); "
                              f"start a new run (--force) or use the unity_rl version that "
                              f"wrote it")
    return state


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
    state = _load_state(checkpoints) if resume else None
    initial = _initial_state(cfg, state)
    if cfg.checkpoint_settings.inference:
        state = None  # run the weights with fresh counters; nothing of the run is overwritten
    seed = int(state["seed"]) if state else _resolve_seed(cfg)
    seed_everything(seed)
    torch.set_num_threads(cfg.unity_rl.torch_threads)  # the host owns process-wide torch state
    ck = cfg.checkpoint_settings  # lessons come back with --resume only (mlagents-learn's)
    curricula = _curricula(cfg, seed, initial if ck.inference and ck.resume else state)
    run = _Run(cfg, run_dir, checkpoints, state, seed, algorithms, default, initial, curricula)
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
                infos = backend.start()
                logger.info("%d actor(s) with %d build(s) ready in %.1f s", len(infos),
                            cfg.env_settings.num_envs, time.perf_counter() - t0)
                run.setup(infos, console)
                run.loop(runner_for(run.runner_hosts()), target_return)
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
