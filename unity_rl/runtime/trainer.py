"""``train(cfg, run_dir, resume=...)``: the learner host (Sample Factory's runner role).

It builds the pieces and wires them in one place (``_wire``: mode x backend):

    builds --(AgentStream)--> actors (policy copy, TrajectoryCollector)
    actors --(backend: Segment tagged with policy version)--> runner (sync | async)
    runner --(list[Trajectory])--> learner.update()  (pure, no I/O)
    runner --(backend: PolicyWeights, version)--> actors

and owns the loop around ``runner.next_update()``: step budget, metrics after every update,
checkpoints every ``checkpoint_interval`` agent-steps and at the end, resume, the final policy.

Contract:
- step counts are agent-steps collected from the builds (all of them, including segments the
  async wiring drops as too stale);
- ``env_settings.num_envs`` builds in all, split as evenly as possible over ``num_actors``
  actors; build i of the run is worker i, on port ``base_port + i``;
- a checkpoint holds the learner (network, optimiser, normaliser, version, its RNG), the step
  and wall-time counters, the episode statistics, the seed and the global RNG states;
  ``resume=True`` continues from the latest one (step counts, wall time, schedules);
- Ctrl-C or SIGTERM stops cleanly: actors stopped (builds closed), final checkpoint, final
  policy; ``TrainResult.interrupted`` says so.  An actor failure raises ``ActorFailedError``
  naming the actor, after the same clean-up (its checkpoint lets the run be resumed);
- the run directory receives ``<Behavior>.onnx`` (Unity inference) and ``<Behavior>.pt``
  (weights, observation shapes and action spec for ``evaluate``), ML-Agents' layout.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import random
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch

from unity_rl.checkpoint import CheckpointError, CheckpointManager, atomic_write
from unity_rl.config import BehaviorConfig, RunConfig, select_behavior
from unity_rl.runtime.actor import ActorSpec, StreamSettings
from unity_rl.runtime.backend import ActorBackend, make_backend
from unity_rl.runtime.messages import ActorFailedError, ActorInfo
from unity_rl.runtime.policies import ppo_policy
from unity_rl.runtime.runners import make_runner

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 1
"""Version of the checkpoint layout written by ``_checkpoint_state``."""


class TrainResult(NamedTuple):
    """What a finished (or interrupted) run reports."""

    agent_steps: int
    """Agent-steps collected over the whole run (earlier sessions included)."""
    wall_seconds: float
    """Wall time of the whole run (earlier sessions included)."""
    mean_return: float
    """Mean return of the last 100 episodes (NaN if none ended)."""
    episodes: int
    """Episodes finished over the whole run."""
    policy_version: int
    """Learner updates so far (the version of the final weights)."""
    policy_path: Path | None
    """The final policy as ONNX for Unity (None if export failed)."""
    torch_policy_path: Path | None
    """The final policy weights for ``evaluate`` (torch file)."""
    checkpoint_path: Path | None
    """The last checkpoint written."""
    interrupted: bool
    """True when Ctrl-C / SIGTERM ended the run before max_steps."""


# ----------------------------------------------------------------------------------------------
# Configuration -> actor specs
# ----------------------------------------------------------------------------------------------

def training_behavior(cfg: RunConfig) -> tuple[str | None, BehaviorConfig]:
    """(behavior name to ask the builds for, its settings): one behavior per run."""
    names = list(cfg.behaviors)
    if len(names) == 1:
        return names[0], cfg.behaviors[names[0]]
    if not names and cfg.default_settings is not None:
        return None, cfg.default_settings  # the build's only behavior
    raise ValueError(f"{cfg.source or 'config'}: unity_rl trains one behavior per run; "
                     f"the config has sections for {sorted(names)}. Keep one.")


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


def policy_factory(behavior: BehaviorConfig):
    """The actors' picklable ``(obs_dim, action_spec, seed) -> policy`` for this algorithm."""
    if behavior.trainer_type == "ppo":
        return functools.partial(ppo_policy, network_cfg=behavior.network_settings)
    raise ValueError(f"trainer_type {behavior.trainer_type!r} is not wired into the trainer "
                     f"yet; use trainer_type: ppo")


def make_learner(behavior: BehaviorConfig, info: ActorInfo, device: str, num_threads: int,
                 seed: int):
    """The pure learner for this algorithm (``version``, ``weights()``, ``update()``, state)."""
    if behavior.trainer_type == "ppo":
        from unity_rl.algos.ppo import PPOLearner

        return PPOLearner(info.obs_dim, info.action_spec, behavior.hyperparameters,
                          behavior.network_settings, device=device, num_threads=num_threads,
                          seed=seed)
    raise ValueError(f"trainer_type {behavior.trainer_type!r} is not wired into the trainer "
                     f"yet; use trainer_type: ppo")


class _PPOTraining:
    """``trainer_type: ppo``: the factories above and the wirings of ``runners.py``."""

    def __init__(self, cfg: RunConfig, behavior: BehaviorConfig):
        self.cfg, self.behavior = cfg, behavior

    def policy_factory(self):
        return policy_factory(self.behavior)

    def make_learner(self, info: ActorInfo, device: str, num_threads: int, seed: int):
        return make_learner(self.behavior, info, device, num_threads, seed)

    def make_runner(self, backend: ActorBackend, learner):
        rl = self.cfg.unity_rl
        return make_runner(rl.mode, backend, learner,
                           buffer_steps=self.behavior.hyperparameters.buffer_size,
                           max_policy_lag=rl.max_policy_lag)

    def close(self) -> None:
        pass


def make_training(cfg: RunConfig, behavior: BehaviorConfig):
    """The one dispatch on trainer_type: what supplies the actors' policy factory, the learner
    and the runner, and frees their resources after the final checkpoint (``close``)."""
    if behavior.trainer_type == "ddpg":
        from unity_rl.runtime.offpolicy import DDPGTraining  # replay, Ape-X: docs/ddpg.md
        return DDPGTraining(cfg, behavior)
    return _PPOTraining(cfg, behavior)


def actor_specs(cfg: RunConfig, behavior_name: str | None, behavior: BehaviorConfig,
                log_dir: Path, seed: int, start_steps: int = 0,
                actor_env_args: Sequence[Sequence[str]] | None = None,
                factory=None) -> list[ActorSpec]:
    """One ``ActorSpec`` per actor of the run (pickles; backend-independent); ``factory``: the
    actors' policy factory (default: ``policy_factory(behavior)``)."""
    env, engine, rl = cfg.env_settings, cfg.engine_settings, cfg.unity_rl
    if env.env_path is None:
        raise ValueError("env_settings.env_path (--env) is required: the path of a Unity build")
    if actor_env_args is not None and len(actor_env_args) != rl.num_actors:
        raise ValueError(f"actor_env_args has {len(actor_env_args)} entries for "
                         f"{rl.num_actors} actors")
    factory = factory if factory is not None else policy_factory(behavior)
    segment_steps = rl.resolve_segment_steps(behavior)
    specs = []
    for k, (first_worker, count) in enumerate(split_builds(env.num_envs, rl.num_actors)):
        extra = tuple(actor_env_args[k]) if actor_env_args is not None else ()
        stream = StreamSettings(
            env_path=str(env.env_path), num_builds=count, base_port=env.base_port,
            worker_id_start=first_worker, no_graphics=engine.no_graphics,
            time_scale=float(engine.time_scale), env_args=tuple(env.env_args or ()) + extra,
            seed=seed + first_worker, timeout_wait=float(env.timeout_wait),
            behavior_name=behavior_name, log_dir=str(log_dir),
            max_lifetime_restarts=env.max_lifetime_restarts,
            restarts_rate_limit_n=env.restarts_rate_limit_n,
            restarts_rate_limit_period_s=float(env.restarts_rate_limit_period_s),
            env_parameters=tuple(cfg.environment_parameters.items()))
        policy_seed = int(np.random.SeedSequence([seed, k, start_steps]).generate_state(1)[0])
        specs.append(ActorSpec(
            actor_id=k, stream=stream, policy_factory=factory, segment_steps=segment_steps,
            time_horizon=behavior.time_horizon, wait_for_new_weights=(rl.mode == "sync"),
            seed=policy_seed, torch_threads=1))
    return specs


def _wire(cfg: RunConfig, specs: list[ActorSpec], training):
    """The one place where mode x backend are chosen: returns (backend, runner factory)."""
    rl = cfg.unity_rl
    options: dict[str, Any] = {}
    if rl.backend == "ray":
        options["address"] = rl.ray_address
    backend = make_backend(rl.backend, specs, **options)

    def runner_for(learner):
        return training.make_runner(backend, learner)  # mode: sync | async

    return backend, runner_for


# ----------------------------------------------------------------------------------------------
# Signals
# ----------------------------------------------------------------------------------------------

def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt in the main thread (restored on exit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _shielded():
    """Ignores SIGINT/SIGTERM during the final clean-up (seconds), so it cannot be torn."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# ----------------------------------------------------------------------------------------------
# RNG state
# ----------------------------------------------------------------------------------------------

def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def _rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(),
            "torch": torch.get_rng_state()}


def _load_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


# ----------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------

class _Run:
    """State of one training session (built piecewise so that clean-up knows what exists)."""

    def __init__(self, cfg: RunConfig, run_dir: Path, behavior: BehaviorConfig,
                 checkpoints: CheckpointManager, state: dict | None, seed: int, training=None):
        self.cfg, self.run_dir, self.behavior = cfg, run_dir, behavior
        self.training = training if training is not None else make_training(cfg, behavior)
        self.checkpoints = checkpoints
        self.resume_state = state
        self.seed = seed
        self.info: ActorInfo | None = None
        self.learner = None
        self.metrics = None
        self.agent_steps = int(state["agent_steps"]) if state else 0
        self.next_checkpoint = self._following_checkpoint(self.agent_steps)
        self.last_checkpoint: Path | None = None
        self.last_saved_steps = self.agent_steps if state else -1

    def _following_checkpoint(self, steps: int) -> int:
        interval = self.behavior.checkpoint_interval
        return (steps // interval + 1) * interval

    # -- setup ----------------------------------------------------------------------------------
    def setup(self, infos: list[ActorInfo], console: bool) -> None:
        from unity_rl.metrics import MetricsWriter

        first = infos[0]
        for info in infos[1:]:
            if (info.behavior_name, info.obs_dim, tuple(info.action_spec)) != \
                    (first.behavior_name, first.obs_dim, tuple(first.action_spec)):
                raise RuntimeError(f"actor {info.actor_id} sees behavior {info.behavior_name} "
                                   f"{info.obs_dim} obs / {info.action_spec}, actor 0 sees "
                                   f"{first.behavior_name} {first.obs_dim} obs / "
                                   f"{first.action_spec}: all builds must be the same")
        if select_behavior(self.cfg, first.behavior_name) is not self.behavior:
            raise RuntimeError(f"the builds' behavior {first.behavior_name} has other settings "
                               f"than the one configured for training")
        self.info = first
        rl, device = self.cfg.unity_rl, self.cfg.torch_settings.device
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.learner = self.training.make_learner(first, device, rl.torch_threads, self.seed)
        state = self.resume_state
        if state is not None:
            self.learner.load_state_dict(state["learner"])
            _load_rng_state(state["rng"])
        self.metrics = MetricsWriter(
            self.run_dir, self.behavior.summary_freq, self.behavior.max_steps, console=console,
            start_step=self.agent_steps,
            start_wall=float(state["wall_seconds"]) if state else 0.0,
            behavior_name=first.behavior_name.split("?", 1)[0])
        if state is not None:
            self.metrics.load_state_dict(state["metrics"])

    # -- loop -----------------------------------------------------------------------------------
    def loop(self, runner, target_return: float | None) -> None:
        runner.start()
        max_steps = self.behavior.max_steps
        while self.agent_steps < max_steps:
            done = runner.next_update()
            self.agent_steps += done.collected_steps
            self.metrics.record_episodes(done.episode_returns, done.episode_lengths)
            self.metrics.log(self.agent_steps, done.metrics)
            if self.agent_steps >= self.next_checkpoint:
                self.save_checkpoint()
                self.next_checkpoint = self._following_checkpoint(self.agent_steps)
            if (target_return is not None and self.metrics.episodes >= 100
                    and self.metrics.mean_return >= target_return):
                logger.info("mean return %.2f >= %.2f after %d agent-steps: stopping",
                            self.metrics.mean_return, target_return, self.agent_steps)
                break

    # -- outputs --------------------------------------------------------------------------------
    def _policy_meta(self) -> dict:
        """What rebuilds the acting policy without the builds: shapes, action spec, network."""
        spec = self.info.action_spec
        return {"trainer_type": self.behavior.trainer_type,
                "behavior_name": self.info.behavior_name,
                "obs_dim": self.info.obs_dim,
                "obs_shapes": self.info.obs_shapes,
                "action_spec": (int(spec.continuous_size),
                                tuple(int(b) for b in spec.discrete_branches)),
                "network": asdict(self.behavior.network_settings)}

    def save_checkpoint(self) -> Path:
        state = {
            "format": CHECKPOINT_FORMAT,
            **self._policy_meta(),
            "learner": self.learner.state_dict(),
            "agent_steps": self.agent_steps,
            "wall_seconds": self.metrics.elapsed(),
            "metrics": self.metrics.state_dict(),
            "seed": self.seed,
            "rng": _rng_state(),
        }
        self.last_checkpoint = self.checkpoints.save(state, self.agent_steps)
        self.last_saved_steps = self.agent_steps
        return self.last_checkpoint

    def save_policy(self) -> tuple[Path | None, Path]:
        """Writes <Behavior>.pt (always) and <Behavior>.onnx (when export works)."""
        name = self.info.behavior_name.split("?", 1)[0]
        torch_path = self.run_dir / f"{name}.pt"
        payload = {**self._policy_meta(), "weights": self.learner.weights(),
                   "agent_steps": self.agent_steps}
        atomic_write(torch_path, lambda f: torch.save(payload, f))
        try:
            from unity_rl.export import export_onnx

            onnx_path = export_onnx(self.learner.export_module(), list(self.info.obs_shapes),
                                    self.info.action_spec, self.run_dir / f"{name}.onnx")
        except Exception as err:  # the weights are safe in the .pt; say why ONNX is missing
            logger.warning("ONNX export of the final policy failed: %s", err)
            onnx_path = None
        return onnx_path, torch_path


def _resolve_seed(cfg: RunConfig) -> int:
    seed = cfg.env_settings.seed
    return seed if seed >= 0 else random.SystemRandom().randrange(2**31)


def train(cfg: RunConfig, run_dir: Path, *, resume: bool, console: bool = True,
          target_return: float | None = None,
          actor_env_args: Sequence[Sequence[str]] | None = None) -> TrainResult:
    """Trains the configured behavior; returns when max_steps (or ``target_return``) is reached
    or on Ctrl-C/SIGTERM.

    run_dir: the run folder (created if missing). resume: continue from its latest checkpoint
    (``CheckpointError`` if there is none). console: live progress on stdout.
    target_return: stop once the mean return of the last 100 episodes reaches it (benchmarks).
    actor_env_args: extra build arguments per actor (e.g. slowing one actor's builds).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    behavior_name, behavior = training_behavior(cfg)
    checkpoints = CheckpointManager(run_dir, behavior.keep_checkpoints)
    state = None
    if resume:
        state = checkpoints.load()
        if state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{checkpoints.latest()}: not a unity_rl training checkpoint "
                                  f"(format {state.get('format')!r})")
    seed = int(state["seed"]) if state else _resolve_seed(cfg)
    _seed_everything(seed)
    training = make_training(cfg, behavior)
    run = _Run(cfg, run_dir, behavior, checkpoints, state, seed, training)
    specs = actor_specs(cfg, behavior_name, behavior, run_dir / "run_logs", seed,
                        run.agent_steps, actor_env_args, factory=training.policy_factory())
    backend, runner_for = _wire(cfg, specs, training)
    interrupted = False
    save_at_end = False  # normal end, Ctrl-C/SIGTERM, or an actor failure: the learner is sound
    policy_path = torch_policy_path = None
    with _sigterm_as_interrupt():
        try:
            try:
                t0 = time.perf_counter()
                infos = backend.start()
                logger.info("%d actor(s) with %d build(s) ready in %.1f s", len(infos),
                            cfg.env_settings.num_envs, time.perf_counter() - t0)
                run.setup(infos, console)
                run.loop(runner_for(run.learner), target_return)
                save_at_end = True
            except KeyboardInterrupt:
                interrupted = save_at_end = True
                logger.info("interrupted: stopping actors and saving")
            except ActorFailedError:
                save_at_end = True
                raise
            finally:
                with _shielded():
                    t0 = time.perf_counter()
                    _finish_backend(backend)
                    t1 = time.perf_counter()
                    if save_at_end and run.learner is not None and run.metrics is not None:
                        if run.last_saved_steps != run.agent_steps:
                            run.save_checkpoint()
                        policy_path, torch_policy_path = run.save_policy()
                    logger.info("actors stopped in %.1f s, final checkpoint and policy saved in "
                                "%.1f s", t1 - t0, time.perf_counter() - t1)
        finally:
            training.close()  # after the final checkpoint (DDPG: frees shared replay memory)
            if run.metrics is not None:
                wall_seconds = run.metrics.elapsed()
                run.metrics.close()
    if run.learner is None:  # interrupted while the builds were starting: nothing trained
        raise KeyboardInterrupt("interrupted before training started")
    return TrainResult(
        agent_steps=run.agent_steps, wall_seconds=wall_seconds,
        mean_return=run.metrics.mean_return, episodes=run.metrics.episodes,
        policy_version=int(run.learner.version), policy_path=policy_path,
        torch_policy_path=torch_policy_path, checkpoint_path=run.last_checkpoint,
        interrupted=interrupted)


def _finish_backend(backend: ActorBackend) -> None:
    try:
        backend.stop()
    except Exception as err:  # stopping must not hide the run's own outcome; say what failed
        logger.error("stopping the actors failed: %s", err)
